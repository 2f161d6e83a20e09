"""Async HTTP client of the Authority server (``missionweave.authority.http``).

Error tree::

    AuthorityError                        (missionweave.authority)
    ├── UnknownGroupError
    ├── CursorTooOldError
    └── AuthorityClientError              root of client-side failures
        ├── AuthorityUnavailable          connection refused, timeout, 502/503/504, a
        │                                 connection closed under each of 3 tries (names the URL)
        ├── AuthorityRequestError         an error answer: .status, .code, .reason, .detail
        │   ├── RemoteUnknownGroupError   404 unknown_group (also an UnknownGroupError)
        │   └── RemoteCursorTooOldError   410 CURSOR_TOO_OLD (also a CursorTooOldError, with
        │                                 the signed snapshot reference)
        ├── SnapshotVerificationError     a snapshot's hash or Authority signature does not verify
        └── SubscriberError               the Subscriber cannot go on
            ├── SubscriptionRefused       ERROR unauthorized / unknown_group on SUBSCRIBE
            └── EventVerificationError    a validly signed Event breaks the chain (a fork)
                └── LogForkedError        the log no longer holds the Event at the cursor

So code written against :class:`Authority` (``except CursorTooOldError``) works unchanged
against the client, and ``except AuthorityRequestError`` catches every error answer.

A rejected Command is not an error: :meth:`AuthorityClient.submit` returns its
:class:`SubmitResult` with the structured rejection, as :meth:`Authority.submit` does.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from ...protocol import Actor, Command, Event, RejectionCode, SigningKey
from ..wire import (
    VERIFY_PATH,
    AgentInfo,
    ArtifactGrant,
    AuthorityError,
    CursorTooOldError,
    Operation,
    PresenceInfo,
    SignedReads,
    SubmitResult,
    TokenCheck,
    UnknownGroupError,
    artifact_path,
    inject_trace_headers,
    now_ms,
    presence_frame,
    upload_path,
    verify_snapshot,
)
from ._stale import resend_on_closed_connection

#: Commands per ``POST /v1/commands/batch`` (the server's limit).
BATCH_LIMIT = 1000


class AuthorityClientError(AuthorityError):
    """Root of client-side errors."""


class AuthorityUnavailable(AuthorityClientError):
    """The Authority could not be reached or did not answer in time; retrying may help.

    Commands are idempotent by ``command_id``, so resubmitting the same Command is safe.
    """


class AuthorityRequestError(AuthorityClientError):
    """The Authority answered with an error body.

    Attributes:
        status: the HTTP status.
        code: the stable error code (``invalid_command``, ``not_found``, …).
        reason: one human sentence.
        detail: machine-readable facts.
    """

    def __init__(self, status: int, code: str, reason: str, detail: dict[str, Any]) -> None:
        super().__init__(f"{status} {code}: {reason}")
        self.status, self.code, self.reason, self.detail = status, code, reason, detail


class RemoteUnknownGroupError(UnknownGroupError, AuthorityRequestError):
    """404 ``unknown_group``: no such Group on the server."""

    def __init__(self, group_id: str, reason: str, detail: dict[str, Any]) -> None:
        # UnknownGroupError.__init__ would chain into AuthorityRequestError's signature.
        AuthorityRequestError.__init__(self, 404, RejectionCode.UNKNOWN_GROUP, reason, detail)
        self.group_id = group_id


class RemoteCursorTooOldError(CursorTooOldError, AuthorityRequestError):
    """410 ``CURSOR_TOO_OLD``: restore ``snapshot`` and resume from its ``seq`` (MW-16-e)."""

    def __init__(self, reason: str, detail: dict[str, Any], snapshot: dict[str, Any]) -> None:
        AuthorityRequestError.__init__(self, 410, CursorTooOldError.code, reason, detail)
        self.group_id = str(detail.get("group_id", ""))
        self.after_sequence = int(detail.get("after_sequence", 0))
        self.first_online_seq = int(detail.get("first_online_seq", 0))
        self.snapshot = snapshot


class SnapshotVerificationError(AuthorityClientError):
    """A snapshot's hash does not match its body, its signature does not verify under the
    Authority's key, or it is not the snapshot that was asked for (MW-16-e)."""


class SubscriberError(AuthorityClientError):
    """The Subscriber stopped on a condition that reconnecting cannot fix."""


class SubscriptionRefused(SubscriberError):
    """The server refused a SUBSCRIBE (``unauthorized`` or ``unknown_group``).

    Attributes:
        code: the ERROR frame's code.
        detail: its detail (``group`` among others).
    """

    def __init__(self, code: str, reason: str, detail: dict[str, Any]) -> None:
        super().__init__(f"{code}: {reason}")
        self.code, self.reason, self.detail = code, reason, detail


class EventVerificationError(SubscriberError):
    """An Event that verifies on its own does not link to the previous one (MW-16-a).

    Attributes:
        group_id: the Group.
        seq: the Event's sequence.
        reason: ``broken link`` or ``conflicting event``.
    """

    def __init__(self, group_id: str, seq: int, reason: str) -> None:
        super().__init__(f"group {group_id!r}: event {seq}: {reason}")
        self.group_id, self.seq, self.reason = group_id, seq, reason


class LogForkedError(EventVerificationError):
    """The alarm of a forked log: the Authority's log no longer holds the Event this subscriber
    already processed at its cursor — another validly signed Event links there, or the log is
    now shorter than the cursor (a failover to a standby that lacked Events the Authority had
    signed and delivered), or the Authority itself found its store forked (``log_forked``).
    The Subscriber stops: nothing after the fork is delivered, and the operator must reconcile
    (docs/authority.md, "PostgreSQL restart or failover"). Implements MW-16-a for a fork.

    Attributes:
        group_id: the Group.
        seq: the sequence where the logs part (the subscriber's cursor).
        held_hash: the hash this subscriber holds at ``seq`` (``None``: not known).
        found_hash: what the Authority's log has there (``None``: nothing, it is shorter).
        head_seq: the Authority's head when it was seen (``None``: not known).
    """

    def __init__(
        self,
        group_id: str,
        seq: int,
        held_hash: str | None,
        found_hash: str | None,
        *,
        head_seq: int | None = None,
        reason: str | None = None,
    ) -> None:
        found = "nothing (the log is shorter)" if found_hash is None else found_hash[:16]
        held = "?" if held_hash is None else held_hash[:16]
        super().__init__(
            group_id,
            seq,
            reason or f"log forked: this subscriber holds {held} at {seq}, the Authority {found}",
        )
        self.held_hash, self.found_hash, self.head_seq = held_hash, found_hash, head_seq


class AuthorityClient:
    """Async client of one Authority server.

    Args:
        base_url: e.g. ``"http://127.0.0.1:8787"``.
        transport: an httpx transport, e.g. ``httpx.ASGITransport(app=create_app(a))`` to run
            in-process; the network by default.
        timeout: seconds per request.
        authority_public_key: pin the Authority's key for snapshot verification; without it
            the key is read once from ``GET /v1/authority``.
        signing_key: the reader's key: every ``GET`` is signed with it (RFC 9421 HTTP Message
            Signatures, see ``docs/authority.md``, "Security model"). The Authority answers
            reads only for Groups in which this key is an active member's (or an operator's);
            without it only :meth:`submit`, :meth:`submit_many`, :meth:`put_presence` (signed
            themselves) and :meth:`public_key` work, and a read raises
            :class:`AuthorityRequestError` 401 ``unauthenticated``.
        verify: TLS verification for an ``https://`` URL: ``True`` (the system's CAs), a CA
            bundle path, or an :class:`ssl.SSLContext`.
        clock: epoch milliseconds for the signed reads' ``created`` (within 5 minutes of the
            Authority's clock); the wall clock by default.

    Use as ``async with AuthorityClient(url, signing_key=actor.key) as c: ...`` or call
    :meth:`aclose`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 10.0,
        authority_public_key: str | None = None,
        signing_key: SigningKey | None = None,
        verify: ssl.SSLContext | str | bool = True,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.signing_key = signing_key
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            transport=transport,
            timeout=timeout,
            verify=verify,
            auth=SignedReads(signing_key, clock) if signing_key is not None else None,
            event_hooks={"request": [inject_trace_headers]},  # W3C traceparent of the caller
        )
        self._public_key = authority_public_key
        self._transfers: httpx.AsyncClient | None = None

    @property
    def transfers(self) -> httpx.AsyncClient:
        """The connection pool for grant URLs — an Artifact's bytes to or from the Authority's
        blob route or an S3 presigned URL — kept open between transfers: no signature, no
        cookies, no trace hook (a grant URL is its own credential and nothing else is sent);
        60 s per transfer step; TLS verified against the system's CAs (``SSL_CERT_FILE``).
        Opened on first use, closed by :meth:`aclose`."""
        if self._transfers is None:
            self._transfers = httpx.AsyncClient(timeout=60.0)
        return self._transfers

    async def __aenter__(self) -> AuthorityClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pools."""
        await self._http.aclose()
        if self._transfers is not None:
            await self._transfers.aclose()

    async def _request(
        self, method: str, path: str, *, ok: tuple[int, ...] = (200,), **kw: Any
    ) -> httpx.Response:
        try:
            # a kept-alive connection the server closed under the request: sent again on a
            # fresh one (every request here is safe to repeat; see _stale.py)
            resp = await resend_on_closed_connection(lambda: self._http.request(method, path, **kw))
        except httpx.TransportError as exc:
            hint = (
                " (a private CA? point SSL_CERT_FILE at its certificate, or pass verify=)"
                if "CERTIFICATE_VERIFY_FAILED" in str(exc)
                else ""
            )
            raise AuthorityUnavailable(
                f"{method} {self.base_url}{path}: {type(exc).__name__}: {exc}{hint}"
            ) from exc
        if resp.status_code in ok:
            return resp
        if resp.status_code in (502, 503, 504):
            raise AuthorityUnavailable(f"{method} {self.base_url}{path}: HTTP {resp.status_code}")
        try:
            body = resp.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        code = str(body.get("code", RejectionCode.HTTP_ERROR))
        reason = str(body.get("reason", resp.reason_phrase))
        detail = body.get("detail") if isinstance(body.get("detail"), dict) else {}
        assert isinstance(detail, dict)
        if resp.status_code == 404 and code == RejectionCode.UNKNOWN_GROUP:
            raise RemoteUnknownGroupError(str(detail.get("group_id", "")), reason, detail)
        if resp.status_code == 410 and code == CursorTooOldError.code:
            raise RemoteCursorTooOldError(reason, detail, dict(body.get("snapshot") or {}))
        raise AuthorityRequestError(resp.status_code, code, reason, detail)

    async def submit(self, command: Command) -> SubmitResult:
        """Submit one signed Command.

        Returns:
            The verdict: ``accepted``, ``recorded`` or ``rejected`` (with its structured
            rejection); a repeat of a known ``command_id`` returns the original Events.

        Raises:
            AuthorityUnavailable: unreachable or timed out (resubmitting is safe).
            AuthorityRequestError: the Command is malformed (422) or the server failed.
        """
        resp = await self._request(
            "POST", "/v1/commands", ok=(200, 409, 429, 507), json=command.model_dump(mode="json")
        )
        return SubmitResult.model_validate(resp.json())

    async def submit_many(self, commands: Sequence[Command]) -> list[SubmitResult]:
        """Submit Commands in order (in requests of at most 1000).

        Returns:
            One verdict per Command, in order.

        Raises:
            AuthorityUnavailable: unreachable or timed out (resubmitting is safe).
            AuthorityRequestError: a Command is malformed or the server failed.
        """
        results: list[SubmitResult] = []
        for i in range(0, len(commands), BATCH_LIMIT):
            chunk = [c.model_dump(mode="json") for c in commands[i : i + BATCH_LIMIT]]
            resp = await self._request("POST", "/v1/commands/batch", json=chunk)
            results.extend(SubmitResult.model_validate(r) for r in resp.json())
        return results

    async def events(
        self, group_id: str, after_sequence: int = 0, limit: int = 1000
    ) -> list[Event]:
        """Events of ``group_id`` with ``seq > after_sequence``, in order, at most ``limit``.

        The Events are parsed, not verified; :class:`Subscriber` verifies the chain.

        Raises:
            UnknownGroupError: no such Group.
            CursorTooOldError: ``after_sequence`` is below the online window; its ``snapshot``
                is the signed reference to restore from (MW-16-e).
            AuthorityUnavailable: unreachable or timed out.
        """
        out: list[Event] = []
        after = after_sequence
        while len(out) < limit:  # the server cuts pages by size too: read on to the limit
            resp = await self._request(
                "GET",
                f"/v1/groups/{group_id}/events",
                params={"after_sequence": after, "limit": limit - len(out)},
            )
            body = resp.json()
            page = [Event.model_validate(e) for e in body["events"]]
            out += page
            if not page or page[-1].seq >= int(body.get("head_seq", 0)):
                break
            after = page[-1].seq
        return out

    async def head(self, group_id: str) -> tuple[int, str]:
        """The Group's last ``(seq, hash)``, like :meth:`Authority.head`.

        Raises:
            UnknownGroupError: no such Group.
        """
        body = (await self._request("GET", f"/v1/groups/{group_id}/head")).json()
        return int(body["seq"]), str(body["hash"])

    async def public_key(self) -> str:
        """The Authority's base64url public key (pinned, or read once from the server)."""
        if self._public_key is None:
            self._public_key = str((await self.info())["public_key"])
        return self._public_key

    async def snapshot(
        self, group_id: str, seq: int, *, authority_public_key: str | None = None
    ) -> dict[str, Any]:
        """The whole signed snapshot of ``group_id`` at ``seq``, verified (MW-16-e).

        Args:
            group_id: the Group.
            seq: the snapshot's sequence (from a CURSOR_TOO_OLD reference).
            authority_public_key: the key to verify with; the client's pinned or fetched key
                by default.

        Returns:
            The snapshot: ``group_id``, ``seq``, ``head_hash``, ``taken_at_ms``, ``state``,
            ``hash``, ``signature``.

        Raises:
            SnapshotVerificationError: hash, signature, Group or sequence do not match.
            AuthorityRequestError: no such snapshot (404 ``unknown_snapshot``).
        """
        key = authority_public_key or await self.public_key()
        snap = (await self._request("GET", f"/v1/groups/{group_id}/snapshots/{seq}")).json()
        if not isinstance(snap, dict) or not verify_snapshot(snap, key):
            raise SnapshotVerificationError(
                f"snapshot of group {group_id!r} at {seq}: hash or signature does not verify"
            )
        if snap.get("group_id") != group_id or snap.get("seq") != seq:
            raise SnapshotVerificationError(
                f"asked for group {group_id!r} at {seq}, got {snap.get('group_id')!r} at "
                f"{snap.get('seq')}"
            )
        return snap

    async def lease(self, lease_id: str) -> dict[str, Any] | None:
        """The lease row with ``valid`` (active and unexpired on the Authority's clock), or
        ``None`` when unknown. Check it before an external side effect (docs/design.md §5)."""
        resp = await self._request("GET", f"/v1/leases/{lease_id}", ok=(200, 404))
        if resp.status_code == 404:
            if resp.json().get("code") != RejectionCode.UNKNOWN_LEASE:
                raise AuthorityRequestError(404, RejectionCode.NOT_FOUND, "no lease route", {})
            return None
        row: dict[str, Any] = resp.json()
        return row

    async def artifact_grant(
        self,
        group_id: str,
        content_hash: str,
        operation: Operation = "read",
        *,
        mission_id: str | None = None,
        lease_id: str | None = None,
    ) -> ArtifactGrant:
        """Ask for one operation on one Artifact of ``group_id`` (a signed read; MW-13.3-d).

        Args:
            group_id: the Group whose Artifact it is (the reader must be an active member).
            content_hash: SHA-256 hex.
            operation: ``read`` or ``write``.
            mission_id: the Mission whose context a read is for (a person's read: one it may
                read); the Artifact must be readable there (its own, promoted, or an input).
            lease_id: the reader's or writer's lease in the Group: an agent's read is for its
                lease's Mission; a write needs a live execution lease. A member's read names
                a lease or a Mission; only an operator's names neither.

        Returns:
            The grant: a URL good for that one object for a few minutes.

        Raises:
            AuthorityRequestError: refused — 403 ``not_a_member``, ``lease_required``,
                ``not_owner``, ``stale_lease``, ``unknown_lease``; 404 ``unknown_artifact``
                (nothing readable by this reader here: one answer whether it is unknown,
                another Mission's or another Group's), ``unknown_mission``,
                ``artifacts_not_served``; 422 a malformed hash.
            UnknownGroupError: no such Group.
            AuthorityUnavailable: unreachable or timed out.
        """
        params: dict[str, str] = {"operation": operation}
        if mission_id is not None:
            params["mission_id"] = mission_id
        if lease_id is not None:
            params["lease_id"] = lease_id
        resp = await self._request("GET", artifact_path(group_id, content_hash), params=params)
        return ArtifactGrant.model_validate(resp.json())

    async def artifact_uploaded(self, group_id: str, content_hash: str, lease_id: str) -> int:
        """Confirm the upload of a write grant with ``confirm`` (S3): the Authority checks the
        staged bytes and records them as this lease's upload, the proof of possession
        ``artifact.publish`` asks for (MW-13.3-d). Safe to repeat.

        Returns:
            The content's size in bytes.

        Raises:
            AuthorityRequestError: 404 ``unknown_artifact`` (nothing staged under the lease),
                422 ``hash_mismatch`` (nothing kept), 403 as for a write grant.
            AuthorityUnavailable: unreachable or timed out.
        """
        resp = await self._request(
            "POST", upload_path(group_id, content_hash), params={"lease_id": lease_id}
        )
        return int(resp.json()["size"])

    async def verify_token(self, token: dict[str, Any], operation: str | None = None) -> TokenCheck:
        """Ask the Authority whether a capability token lets its bearer do ``operation`` now
        (MW-11.3-d): what a tool gateway calls before acting on a token an agent handed it.

        Args:
            token: the whole token, bearer ``signature`` included (``ctx.capability_token``).
            operation: the tool or operation about to be done; ``None`` checks the token only.

        Returns:
            The :class:`TokenCheck` (``valid``, or the ``code`` why not). Needs no signing key.

        Raises:
            AuthorityUnavailable: unreachable or timed out.
            AuthorityRequestError: 422 ``invalid_request``, ``token`` is not shaped like one.
        """
        body: dict[str, Any] = {"token": token}
        if operation is not None:
            body["operation"] = operation
        resp = await self._request("POST", VERIFY_PATH, json=body)
        return TokenCheck.model_validate(resp.json())

    async def agents(self, group_id: str) -> list[AgentInfo]:
        """The Group's active members with roles, epochs, latest Agent Card and per-capability
        reliability (``work.result_accepted`` / ``work.failed`` counts of the online log), by
        agent id. What ``select_candidates`` ranks from (MW-10.3-f).

        Raises:
            UnknownGroupError: no such Group.
            AuthorityUnavailable: unreachable or timed out.
        """
        body = (await self._request("GET", f"/v1/groups/{group_id}/agents")).json()
        return [AgentInfo.model_validate(a) for a in body["agents"]]

    async def put_presence(
        self,
        actor: Actor,
        group_id: str,
        free_slots: int,
        queue_depth: int,
        *,
        issued_at_ms: int | None = None,
    ) -> bool:
        """Report ``actor``'s capacity in ``group_id`` (ephemeral; not in the log).

        Args:
            actor: the reporting agent, an active member of the Group; signs the report.
            group_id: the Group.
            free_slots: free execution slots now, >= 0.
            queue_depth: WorkItems waiting in the agent's queue for this Group, >= 0.
            issued_at_ms: the report's time, epoch milliseconds; wall clock by default. Must be
                within 5 minutes of the Authority's clock (pass that clock in tests with a
                virtual one).

        Returns:
            Whether it was stored (``False``: a report issued at the same time or later was
            already there).

        Raises:
            AuthorityRequestError: 403 ``unauthorized`` (no such Group, not an active member,
                bad signature — one answer, so a stranger cannot enumerate Groups — or clock
                skew) or 422 ``invalid_frame`` (a count out of range).
            AuthorityUnavailable: unreachable or timed out.
        """
        issued = now_ms() if issued_at_ms is None else issued_at_ms
        frame = presence_frame(actor, group_id, free_slots, queue_depth, issued)
        resp = await self._request("PUT", f"/v1/groups/{group_id}/presence", json=frame)
        return bool(resp.json()["stored"])

    async def presence(self, group_id: str) -> dict[str, PresenceInfo]:
        """Fresh presence reports of ``group_id`` by agent id (stale ones, older than the
        server's TTL — 30 s by default — are left out).

        Raises:
            UnknownGroupError: no such Group.
            AuthorityUnavailable: unreachable or timed out.
        """
        body = (await self._request("GET", f"/v1/groups/{group_id}/presence")).json()
        return {str(a): PresenceInfo.model_validate(p) for a, p in body.items()}

    async def info(self) -> dict[str, Any]:
        """``{"public_key": str}``; with a ``signing_key`` also ``"operator": bool`` and
        ``"groups": [str]``, the Groups that key may read (every Group for an operator)."""
        body: dict[str, Any] = (await self._request("GET", "/v1/authority")).json()
        return body


__all__ = [
    "AuthorityClient",
    "AuthorityClientError",
    "AuthorityRequestError",
    "AuthorityUnavailable",
    "EventVerificationError",
    "LogForkedError",
    "RemoteCursorTooOldError",
    "RemoteUnknownGroupError",
    "SnapshotVerificationError",
    "SubscriberError",
    "SubscriptionRefused",
]
