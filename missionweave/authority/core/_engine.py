"""The Group Authority: validate signed Commands and append signed, hash-chained Events.

One :class:`Authority` owns one :class:`~._store.Store` (SQLite or PostgreSQL). Every Command
runs inside a savepoint of a write transaction, with its checks in this order: actor signature →
membership and session epochs → lease id and ownership epoch (fencing) → the state table →
contract and budget rules. Then every resulting Event is sequenced, hashed, signed and written —
or, on a rejection, the savepoint is rolled back and nothing is written.
:meth:`Authority.submit_many` commits a whole batch with one fsync (group commit), which is the
main throughput lever.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from ...metrics import series, start_counters, unwatch, watch
from ...protocol import (
    GENESIS_HASH,
    Command,
    Event,
    Rejection,
    RejectionCode,
    Role,
    SigningKey,
    canonical_bytes,
    new_id,
    sha256_hex,
    verify_command,
)
from ...telemetry import tracer
from ..wire import AuthorityError, SubmitResult, now_ms
from . import (  # noqa: F401
    _budgets,
    _handlers_admin,
    _handlers_children,
    _handlers_context,
    _handlers_dag,
    _handlers_lease,
    _handlers_results,
    _handlers_schedule,
    _handlers_tokens,
    _handlers_work,
    _signature_process,
)
from ._agents import AgentReads
from ._bounds import within_bounds
from ._command_scope import Ctx, Reject, dumps
from ._dispatch import handler_for
from ._forks import HeadWatch
from ._lease_clock import LeaseClock, refuse_skewed
from ._metrics import live_leases, record_transaction
from ._outages import (
    StallWatch,
    start_judging,
    store_committed,
    store_failed,
    store_unavailable,
)
from ._rates import CommandLimits, Meter
from ._readiness import Readiness, Unready, disk_probe, store_probe
from ._reads import LogReader
from ._registry import HANDLERS
from ._reserve import DEFAULT_RESERVE_BYTES, DiskReserve, Shortfall
from ._store import Store, StoreUnavailableError, open_store
from ._tokens import public_token

#: Largest Artifact upload accepted by default, bytes.
DEFAULT_MAX_UPLOAD_BYTES = 256 * 1024 * 1024
#: Most Groups one ``session.open`` opens by default (one Event in each, all in its reply).
DEFAULT_MAX_SESSION_GROUPS = 1_000


@dataclass(frozen=True, slots=True)
class AuthorityConfig:
    """Authority settings.

    Attributes:
        max_candidates: the bound on a candidate-set offer (MW-10.3-c).
        max_offer_ms: the longest offer expiry accepted, in milliseconds.
        online_window: Events kept online per Group before older ones move to the archive
            (``None``: never archive).
        max_batch: Commands per group-commit transaction.
        parallel_verify_min: batches of at least this many Commands have their signatures
            verified in a separate process while the writer applies them (0 disables it).
        operator_keys: the operators' Ed25519 public keys (base64url). Only an operator may
            create a Group (``group.create``) or make admin reads (every Group, every agent);
            none by default, so a new Authority takes no Group until one is configured.
        command_limits: every Group's per-member Command budget (:mod:`._rates`); ``None``
            (the default of an embedded Authority; ``authority serve`` sets one): unmetered.
        group_command_limits: the budgets of particular Groups, over ``command_limits``.
        disk_reserve_bytes: free space kept on the SQLite database's directory (and, by the
            HTTP front, the artifact store's): below it new content and new work are refused
            ``insufficient_storage`` (:mod:`._reserve`); 0 disables it.
        max_upload_bytes: the largest Artifact the HTTP front accepts (``payload_too_large``).
        max_session_groups: the most Groups one ``session.open`` opens (``too_many_groups``
            past it): its Events and its reply grow with them.
    """

    max_candidates: int = 8
    max_offer_ms: int = 7 * 24 * 3_600_000
    online_window: int | None = None
    max_batch: int = 256
    parallel_verify_min: int = 8
    operator_keys: frozenset[str] = frozenset()
    command_limits: CommandLimits | None = None
    group_command_limits: Mapping[str, CommandLimits] = field(default_factory=dict)
    disk_reserve_bytes: int = DEFAULT_RESERVE_BYTES
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    max_session_groups: int = DEFAULT_MAX_SESSION_GROUPS


@dataclass(slots=True)
class _Tx:
    """What one write transaction keeps in memory until its commit: the remembered Command ids
    of its batch (``(group, actor, id)`` → ``(signature, status, refs)``), and the Event and
    Command rows it will insert in one statement each."""

    priors: dict[tuple[str, str, str], Any] = field(default_factory=dict)
    event_rows: list[tuple[str, int, str, str, str | None, str]] = field(default_factory=list)
    command_rows: list[tuple[str, str, str, str, str, str]] = field(default_factory=list)
    events: dict[tuple[str, int], Event] = field(default_factory=dict)
    #: rows of the cacheable reads (:data:`._context.CACHED_READS`) since the last write
    reads: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    #: WorkItem facts the fold keeps (:mod:`._fold`), as the transaction's writes left them
    facts: dict[tuple[str, str], Any] = field(default_factory=dict)
    #: the disk reserve's shortfall when the transaction began (``None``: enough space)
    short: Shortfall | None = None


@dataclass(slots=True)
class _Head:
    seq: int
    hash: str
    dirty: bool = field(default=False)


class Authority(LogReader, AgentReads):
    """A Group Authority over one database.

    Args:
        db: path of the SQLite file (created if missing), ``":memory:"``, or a
            ``postgresql://`` URL (several Authorities may share one PostgreSQL database).
        key: the Authority's signing key.
        config: settings; defaults are sensible for one machine.
        clock: epoch-milliseconds clock of lease time: a :class:`LeaseClock` by default (the
            wall clock made safe against steps, the database's over PostgreSQL; MW-11.5-c);
            tests pass a controllable one, which is then lease time as it is.

    Raises:
        AuthorityError: the database was created with another Authority key.
        sqlite3.Error: the file cannot be opened as a database.

    Thread safety: one lock serializes use of the connection; several :class:`Authority`
    objects on the same database (other threads, processes or machines) serialize through
    SQLite's write lock or PostgreSQL's per-Group advisory locks.
    """

    def __init__(
        self,
        db: str | Path,
        key: SigningKey,
        config: AuthorityConfig | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.key = key
        self.config = config or AuthorityConfig()
        self.clock: Callable[[], int] = clock if clock is not None else LeaseClock()
        self.store: Store = open_store(db)
        self.db_path = str(db) if self.store.backend == "sqlite" else self.store.location
        self._lock = threading.Lock()
        self._keys: dict[tuple[str | None, str], str] = {}
        self._trusted: list[Command] = []
        self._members: dict[tuple[str, str], Any] = {}
        self._tx = _Tx()
        #: Set by a serving Authority (``credit_on_start``): its own stalls are credited to live
        #: leases at the start of each write transaction (MW-11.5-c).
        self.stall_watch: StallWatch | None = None
        #: Each member's Command budget (per replica, in memory).
        self.meter = Meter(self.config.command_limits, self.config.group_command_limits)
        #: The free space kept on the database's directory (SQLite; with PostgreSQL the HTTP
        #: front watches the artifact store's only).
        self.disk_reserve = DiskReserve(self.config.disk_reserve_bytes)
        if self.store.backend == "sqlite" and str(db) != ":memory:":
            self.disk_reserve.watch(Path(db).resolve())
        #: What this process signed or served, per Group: checked on a reconnect (a failover
        #: must not lose it).
        self.heads = HeadWatch()
        self.store.watch_reconnects(lambda: self.heads.check(self.store))
        #: The readiness probes (:meth:`readiness`); other parts add theirs.
        self.probes = Readiness()
        self.probes.add(store_probe(self.store, self.heads))
        self.probes.add(disk_probe(self.disk_reserve))
        self._pin_key()
        watch(series.AUTHORITY_LEASES_LIVE, self, live_leases)
        start_counters(series.AUTHORITY)

    def _pin_key(self) -> None:
        """Record the Authority's public key in the database; refuse a different key later."""
        with self._write():
            self.store.run("meta.pin_key", self.key.public_key)
            row = self.store.one("meta.authority_key")
        assert row is not None
        if row[0] != self.key.public_key:
            self.store.close()
            raise AuthorityError(
                f"{self.db_path} was written by another Authority key ({row[0][:12]}…); "
                "use that key or a new database"
            )

    @property
    def public_key(self) -> str:
        """The Authority's base64url Ed25519 public key."""
        return self.key.public_key

    def readiness(self) -> list[Unready]:
        """Why the Authority cannot serve now (empty: ready): the store does not answer, its
        log is forked, the disk is below its reserve, or what another part's probe says
        (:attr:`probes`). Never takes the Authority's lock: a stalled writer cannot hold it."""
        return self.probes.reasons()

    def close(self) -> None:
        """Close the store's connection."""
        unwatch(series.AUTHORITY_LEASES_LIVE, self)
        with self._lock:
            self.store.close()

    # ----------------------------------------------------------------------------- writes

    def submit(self, command: Command) -> SubmitResult:
        """Validate and apply one Command (its own transaction).

        Returns:
            The verdict; a rejection is data, never an exception.
        """
        return self.submit_many([command])[0]

    def submit_many(
        self,
        commands: Sequence[Command],
        *,
        trace_contexts: Sequence[otel_context.Context | None] | None = None,
    ) -> list[SubmitResult]:
        """Validate and apply Commands in order, in one transaction with one fsync.

        Each Command is atomic on its own (a savepoint): a rejected one writes nothing and does
        not disturb the others. Results are in input order. Traced as one
        ``authority.transaction`` span with an ``authority.append`` span per Command (no-op
        spans unless tracing is configured).

        Args:
            commands: the signed Commands.
            trace_contexts: per Command, the OpenTelemetry context it arrived in (its HTTP
                request's), so that its ``authority.append`` span joins its sender's trace
                when the :class:`BatchWriter` merged several requests into this transaction;
                the current context by default.

        Raises:
            ValueError: ``trace_contexts`` does not have one entry per Command.
            sqlite3.Error: the database failed; the whole batch is rolled back.
        """
        if trace_contexts is not None and len(trace_contexts) != len(commands):
            raise ValueError("trace_contexts must have one entry per command")
        parents: list[otel_context.Context | None] = (
            list(trace_contexts) if trace_contexts else [None] * len(commands)
        )
        with tracer().start_as_current_span(
            "authority.transaction",
            context=parents[0] if parents else None,
            links=_links(parents) if trace_contexts else None,
            attributes={"missionweave.batch.size": len(commands)},
        ) as span:
            began = time.perf_counter()
            results = self._submit_many(commands, parents)
            record_transaction(commands, results, time.perf_counter() - began)
            if span.is_recording():
                span.set_attribute(
                    "missionweave.batch.accepted", sum(r.status == "accepted" for r in results)
                )
        return results

    def _submit_many(
        self, commands: Sequence[Command], parents: list[otel_context.Context | None]
    ) -> list[SubmitResult]:
        with self._lock:
            keys = [self._key_of(cmd) for cmd in commands]
        pending = None
        n = self.config.parallel_verify_min
        if n and len(commands) >= n:
            pending = _signature_process.submit(
                [(c.model_dump_json(), k) for c, k in zip(commands, keys, strict=True) if k]
            )
        with self._lock:
            trusted = keys if pending else None
            results = self._retrying(lambda: self._transaction(commands, trusted, pending, parents))
            if results is None:  # a signature the writer relied on did not verify: redo inline
                trace.get_current_span().set_attribute("missionweave.transaction.redo", True)
                results = self._retrying(lambda: self._transaction(commands, None, None, parents))
                assert results is not None
        if self.config.online_window is not None:
            touched = {e.group_id for r in results for e in r.events if not r.duplicate}
            for gid in touched:
                self.maybe_archive(gid)
        return results

    def _retrying(
        self, transaction: Callable[[], list[SubmitResult] | None]
    ) -> list[SubmitResult] | None:
        """``transaction`` (a :meth:`_transaction` call), run again (up to 8 times) when the
        database aborted it on a transient conflict with another replica (a deadlock between two
        batches' locks)."""
        for attempt in range(8):
            began = self.clock()  # a failing store failed from here: a wait for it counts
            try:
                results = transaction()
            except Exception as exc:
                store_failed(self, exc, began)  # the store's own failure is credited (MW-11.5-c)
                if attempt == 7 or not self.store.retryable(exc):
                    if store_unavailable(exc) and not isinstance(exc, StoreUnavailableError):
                        # SQLite's full disk or I/O error: an outage like a lost database
                        # (503, retried by the caller), not a bug (500, given up on)
                        raise StoreUnavailableError(f"the store could not commit: {exc}") from exc
                    raise
                continue
            if results is not None:
                store_committed(self)
            return results
        raise AssertionError("unreachable")

    def _transaction(
        self,
        commands: Sequence[Command],
        keys: list[str | None] | None,
        pending: Future[list[bool]] | None,
        parents: list[otel_context.Context | None],
    ) -> list[SubmitResult] | None:
        """Apply ``commands`` in one transaction; ``None`` if it had to be rolled back because a
        signature taken on trust from ``pending`` (the verifier process) failed."""
        self._trusted = []
        self._members.clear()  # other processes may have changed memberships meanwhile
        tx = self._tx = _Tx(short=self.disk_reserve.shortfall())
        self.meter.begin()
        self.store.begin()
        try:
            start_judging(self)  # lease time, and the credits before any lease is judged
            # Appends of one Group are serialized across processes (PostgreSQL replicas).
            self.store.lock_groups(c.group_id or "" for c in commands)
            # every remembered id of the batch in one statement (after the locks: a replica
            # that took the same id first has committed it)
            tx.priors = self.store.command_priors(
                list({(c.group_id or "", c.actor, c.command_id) for c in commands})
            )
            heads: dict[str, _Head] = {}
            # A Command sent in the transaction's own context gets its span under the
            # transaction's; one merged in from another request, under that request's.
            results = [
                self._traced_apply(
                    cmd,
                    heads,
                    keys[i] if keys else None,
                    None if parents[i] is parents[0] else parents[i],
                )
                for i, cmd in enumerate(commands)
            ]
            if pending is not None and self._trusted:
                try:
                    verdicts = pending.result()
                except Exception:  # the verifier process died: redo with inline verification
                    self.store.rollback()
                    self.meter.rollback()
                    return None
                assert keys is not None
                verdict_of = {}
                j = 0
                for i, k in enumerate(keys):
                    if k:
                        verdict_of[i] = verdicts[j]
                        j += 1
                index = {id(c): i for i, c in enumerate(commands)}
                if not all(verdict_of[index[id(c)]] for c in self._trusted):
                    self.store.rollback()
                    self.meter.rollback()
                    return None
            # the batch's rows in one multi-row statement each
            self.store.insert_events(tx.event_rows)
            self.store.insert_commands(tx.command_rows)
            for gid, head in heads.items():
                if head.dirty:
                    self.store.run("groups.set_head", head.seq, head.hash, gid)
            self.store.notify(gid for gid, head in heads.items() if head.dirty)
            self.store.commit()
        except BaseException:
            self.store.rollback()
            self.meter.rollback()
            raise
        for gid, head in heads.items():
            if head.dirty:
                self.heads.note(gid, head.seq, head.hash)
        return results

    def _key_of(self, cmd: Command) -> str | None:
        spec = HANDLERS.get(cmd.type)
        if spec is None:
            return None
        if spec.auth == "self":
            key = cmd.body.get("public_key")
            return key if isinstance(key, str) else None
        cache_key = (cmd.group_id if spec.auth == "member" else None, cmd.actor)
        key = self._keys.get(cache_key)
        if key is None:
            if spec.auth == "member":
                row = self.store.one("members.key", *cache_key)
            else:
                row = self.store.one("agents.public_key_by_agent_id", cmd.actor)
            if row is None:
                return None
            key = self._keys[cache_key] = str(row[0])  # an agent's key never changes
        return key

    def _traced_apply(
        self,
        cmd: Command,
        heads: dict[str, _Head],
        verified_key: str | None,
        parent: otel_context.Context | None,
    ) -> SubmitResult:
        """:meth:`_apply` in an ``authority.append`` span: a child of the current span (the
        transaction), or of ``parent`` with a link to the transaction."""
        links = None
        if parent is not None:
            tx = trace.get_current_span().get_span_context()
            links = [trace.Link(tx)] if tx.is_valid else None
        span = tracer().start_span("authority.append", context=parent, links=links)
        try:
            result = self._apply(cmd, heads, verified_key)
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(trace.StatusCode.ERROR, type(exc).__name__)
            span.end()
            raise
        if span.is_recording():
            span.set_attributes(_append_attributes(cmd, result))
        span.end()
        return result

    def _apply(
        self, cmd: Command, heads: dict[str, _Head], verified_key: str | None = None
    ) -> SubmitResult:
        saved = {g: (h.seq, h.hash, h.dirty) for g, h in heads.items()}
        tx = self._tx
        # A savepoint only once the handler writes: most Commands are checked on reads alone,
        # and the engine's own rows (Events, the Command) are written with the whole batch.
        opened = False

        def savepoint() -> None:
            nonlocal opened
            if not opened:
                self.store.savepoint()
                opened = True

        try:
            # The signature first: a Command id is the actor's, scoped to its Group, so nobody
            # but the actor can use (or use up) one of its ids.
            member = self._verify_actor(cmd, verified_key)
            key = (cmd.group_id or "", cmd.actor, cmd.command_id)
            prior = tx.priors.get(key)
            if prior is not None:
                return self._repeated(cmd, prior)
            # new content and new work within the disk reserve and the actor's budget
            roles = None if member is None else _roles(member[1])
            within_bounds(self.store, self.meter, self._tx.short, cmd, roles)
            ctx = self._admit(cmd, member, savepoint, heads)
            refuse_skewed(cmd, ctx.now_ms)  # after the id: a late retry is answered by it
            handler_for(cmd)(ctx)  # the bounded-offline binding reconciles (MW-11.5-f)
            if cmd.type.startswith(_MEMBERSHIP_PREFIXES):
                self._members.clear()
            events = self._append(ctx, heads)
            # kept so that a repeated command id gets the same answer, reply included (a
            # retried work.start must get its lease back)
            result_extra: dict[str, Any] = {"reply": ctx.reply} if ctx.reply else {}
            if ctx.rejection:
                result_extra["rejection"] = ctx.rejection.model_dump()
            refs = dumps(
                {"events": [[e.group_id, e.seq] for e in events], "result": dumps(result_extra)}
            )
            if opened:
                self.store.release()
            tx.command_rows.append((*key, cmd.signature, ctx.status, refs))
            tx.priors[key] = (cmd.signature, ctx.status, refs)
            tx.event_rows.extend(ctx.rows)
            tx.events.update({(e.group_id, e.seq): e for e in events})
        except Reject as r:
            self._tx.facts.clear()  # folded from the undone Events
            if opened:
                self.store.rollback_to()
                self._tx.reads.clear()  # rows read after the undone writes are stale
            # the in-memory heads must match what the savepoint rollback left in the DB
            heads.clear()
            heads.update({g: _Head(*v) for g, v in saved.items()})
            return SubmitResult(command_id=cmd.command_id, status="rejected", rejection=r.rejection)
        except BaseException:
            self._tx.facts.clear()
            if opened:
                self.store.rollback_to()
                self._tx.reads.clear()
            heads.clear()
            heads.update({g: _Head(*v) for g, v in saved.items()})
            raise
        return SubmitResult(
            command_id=cmd.command_id,
            status=ctx.status,
            events=events,
            rejection=ctx.rejection,
            reply=ctx.reply,
        )

    def _repeated(self, cmd: Command, prior: Any) -> SubmitResult:
        """The answer to a Command id its actor used before in this Group: the original
        verdict, or ``idempotency_conflict`` when the body differs (MW-16-f)."""
        # Ed25519 signatures are deterministic and this one verified: the same Command signed
        # again has the same signature, and any other body under the same id has another.
        if prior[0] != cmd.signature:
            return _rejected(
                cmd,
                RejectionCode.IDEMPOTENCY_CONFLICT,
                "this command id was used before with a different body",
                command_id=cmd.command_id,
            )
        refs = json.loads(prior[2])
        data = json.loads(refs.get("result", "null") or "null") or {}
        reply = dict(data.get("reply", {}))
        token = reply.get("capability_token")
        if isinstance(token, dict):
            # The signed Command is in the log, so anyone who reads it can send it again: a
            # repeat must not hand out the bearer secret. The holder renews (a new Command,
            # which only it can sign) to get a token it can use.
            reply["capability_token"] = public_token(token)
        # Events of this batch are not in the database before its commit
        events = [self._tx.events.get((g, s)) or self._load_event(g, s) for g, s in refs["events"]]
        return SubmitResult(
            command_id=cmd.command_id,
            status=prior[1],
            events=events,
            rejection=Rejection(**data["rejection"]) if data.get("rejection") else None,
            reply=reply,
            duplicate=True,
        )

    def _verify_actor(self, cmd: Command, trusted_key: str | None) -> Any:
        """Check that ``cmd`` is signed by its actor; the actor's membership row (key, roles,
        membership epoch, active, session epoch) for member Commands, else ``None``.

        Raises:
            Reject: ``unknown_command``, ``unknown_actor``, ``not_a_member`` (also for a
                Group that does not exist), ``invalid_command`` or ``bad_signature``.
        """

        def require_signed_by(key: object) -> None:
            """Raise ``bad_signature`` unless ``key`` (a public key) signed ``cmd``."""
            if key == trusted_key and isinstance(key, str):
                self._trusted.append(cmd)  # the verifier process checks it before COMMIT
                return
            if not isinstance(key, str) or not verify_command(cmd, key):
                raise Reject(RejectionCode.BAD_SIGNATURE, "the command's signature does not verify")

        def require_signed_by_actor(row: Any, unknown: RejectionCode, reason: str) -> None:
            """Raise ``unknown`` (naming the actor) when ``row``, the actor's key row (its
            public key first), is ``None``; then as :func:`require_signed_by`."""
            if row is None:
                raise Reject(unknown, reason, actor=cmd.actor)
            require_signed_by(row[0])

        spec = HANDLERS.get(cmd.type)
        if spec is None:
            raise Reject(
                RejectionCode.UNKNOWN_COMMAND, f"no such command type {cmd.type!r}", type=cmd.type
            )
        if spec.auth == "self":
            key = cmd.body.get("public_key")
            require_signed_by(key)
            # before the Command id is looked at: a stranger's self-signed Command must not
            # learn (or touch) the ids of the actor it names
            if key not in self.config.operator_keys:
                raise Reject(
                    RejectionCode.OPERATOR_REQUIRED,
                    f"{cmd.type} needs an operator key (authority serve --operator-key)",
                    group_id=cmd.group_id,
                )
            return None
        if spec.auth == "agent":
            require_signed_by_actor(
                self.store.one("agents.public_key_by_agent_id", cmd.actor),
                RejectionCode.UNKNOWN_ACTOR,
                f"agent {cmd.actor!r} is not known",
            )
            return None
        if not cmd.group_id:
            raise Reject(RejectionCode.INVALID_COMMAND, "this command needs a group_id")
        # Within one transaction a member's row changes only through the Commands that
        # clear this cache (see _apply), so repeated actors skip the lookup.
        row = self._members.get((cmd.group_id, cmd.actor))
        if row is None:
            row = self.store.one("members.actor_row", cmd.group_id, cmd.actor)
            if row is not None:
                self._members[(cmd.group_id, cmd.actor)] = row
        # an inactive member is no member; the same answer whether or not the Group exists:
        # a stranger cannot enumerate Groups (an unsigned Command may name any)
        require_signed_by_actor(
            row if row is not None and row[3] else None,
            RejectionCode.NOT_A_MEMBER,
            f"{cmd.actor!r} is not a member of the group",
        )
        return row

    def _admit(
        self,
        cmd: Command,
        member: Any,
        savepoint: Callable[[], None],
        heads: dict[str, _Head],
    ) -> Ctx:
        """The handler's context once the epochs hold: for a member Command, its Membership
        and Session Epochs must be current (and a session open where the type needs one).

        Raises:
            Reject: ``stale_membership_epoch``, ``stale_session_epoch`` or ``no_session``.
        """
        roles: frozenset[Role] = frozenset()
        if member is not None:
            _current_epoch("membership", cmd.membership_epoch, member[2])
            _current_epoch("session", cmd.session_epoch, member[4])
            if HANDLERS[cmd.type].needs_session and member[4] == 0:
                raise Reject(RejectionCode.NO_SESSION, "open a session before taking work")
            roles = _roles(member[1])

        def head_seq(group_id: str) -> int:
            head = heads.get(group_id)
            if head is not None:
                return head.seq
            row = self.store.one("groups.head", group_id)
            return int(row[0]) if row is not None else 0

        return Ctx(
            self.store,
            self.clock(),
            cmd,
            roles,
            self.config,
            self.key,
            before_write=savepoint,
            head_seq=head_seq,
            cache=self._tx.reads,
            facts=self._tx.facts,
        )

    def _append(self, ctx: Ctx, heads: dict[str, _Head]) -> list[Event]:
        events: list[Event] = []
        cmd_value = ctx.command.model_dump(mode="json")
        cmd_json = ""
        first = True
        rows = ctx.rows
        for d in ctx.drafts:
            head = heads.get(d.group_id)
            if head is None:
                if d.group_id != ctx.command.group_id:  # locked with the batch otherwise
                    self.store.lock_groups([d.group_id])
                row = self.store.one("groups.head", d.group_id)
                if row is None:
                    raise Reject(
                        RejectionCode.UNKNOWN_GROUP, f"no group {d.group_id!r}", group_id=d.group_id
                    )
                head = heads[d.group_id] = _Head(row[0], row[1])
            # Built as a plain dict and hashed once: this is the writer's hot path.
            value: dict[str, Any] = {
                "group_id": d.group_id,
                "seq": head.seq + 1,
                "event_id": new_id("evt"),
                "type": d.type,
                "command_id": ctx.command.command_id,
                "actor": ctx.command.actor,
                "work_item_id": d.work_item_id,
                "recorded_at_ms": ctx.now_ms,
                "body": d.body,
                "command_signature": ctx.command.signature if first else None,
                "prev_hash": head.hash,
            }
            canonical = canonical_bytes(value)
            h = sha256_hex(canonical)
            sig = self.key.sign(bytes.fromhex(h))
            value["hash"], value["signature"] = h, sig
            value["command"] = cmd_value if first else None
            # The stored JSON is the hashed canonical text plus the three unhashed fields
            # (hex, base64url and the Command's JSON need no escaping): no second encoding.
            if first:
                cmd_json = cmd_json or ctx.command.model_dump_json()
            data = (
                f'{canonical[:-1].decode()},"hash":"{h}","signature":"{sig}",'
                f'"command":{cmd_json if first else "null"}}}'
            )
            first = False
            rows.append((d.group_id, value["seq"], value["event_id"], d.type, d.work_item_id, data))
            ev = Event.model_construct(**value)
            head.seq, head.hash, head.dirty = ev.seq, ev.hash, True
            events.append(ev)
        return events


_MEMBERSHIP_PREFIXES = ("group.", "member.", "session.", "agent.")


@functools.lru_cache(maxsize=1024)
def _roles(text: str) -> frozenset[Role]:
    return frozenset(Role(r) for r in json.loads(text))


#: The code refusing a stale epoch, by the epoch's kind.
_STALE_EPOCH = {
    "membership": RejectionCode.STALE_MEMBERSHIP_EPOCH,
    "session": RejectionCode.STALE_SESSION_EPOCH,
}


def _current_epoch(kind: str, given: int, current: int) -> None:
    """Refuse a Command whose ``kind`` epoch (``membership``, ``session``) is not the current
    one: ``stale_<kind>_epoch`` with ``<kind>_epoch`` and ``current``."""
    if given != current:
        raise Reject(
            _STALE_EPOCH[kind],
            f"{kind} epoch {given} is not the current {current}",
            **{f"{kind}_epoch": given},
            current=current,
        )


def _links(parents: list[otel_context.Context | None]) -> list[trace.Link]:
    """Links to the spans of the requests merged into a transaction after its first one."""
    links: list[trace.Link] = []
    seen = {id(parents[0])} if parents else set()
    for ctx in parents:
        if ctx is None or id(ctx) in seen:
            continue
        seen.add(id(ctx))
        span_context = trace.get_current_span(ctx).get_span_context()
        if span_context.is_valid:
            links.append(trace.Link(span_context))
    return links


def _append_attributes(cmd: Command, result: SubmitResult) -> dict[str, str | int | bool]:
    """The ``authority.append`` span's attributes (docs/observability.md)."""
    attrs: dict[str, str | int | bool] = {
        "missionweave.command.type": cmd.type,
        "missionweave.command.id": cmd.command_id,
        "missionweave.command.status": result.status,
        "missionweave.actor": cmd.actor,
    }
    if cmd.group_id:
        attrs["missionweave.group_id"] = cmd.group_id
    if result.duplicate:
        attrs["missionweave.command.duplicate"] = True
    if result.rejection is not None:
        attrs["missionweave.rejection.code"] = result.rejection.code
    if result.events:
        if result.events[0].work_item_id:
            attrs["missionweave.work_item_id"] = result.events[0].work_item_id
        attrs["missionweave.event.seq_first"] = result.events[0].seq
        attrs["missionweave.event.seq_last"] = result.events[-1].seq
    return attrs


def _rejected(cmd: Command, code: RejectionCode, reason: str, **detail: Any) -> SubmitResult:
    return SubmitResult(
        command_id=cmd.command_id,
        status="rejected",
        rejection=Rejection(code=code, reason=reason, detail=detail),
    )


__all__ = ["GENESIS_HASH", "Authority", "AuthorityConfig", "SubmitResult", "now_ms"]
