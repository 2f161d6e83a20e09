"""Each member's Command budget in a Group: a token bucket of Commands and one of bytes
(issue 37, item 5; docs/authority.md "A member's Command flood").

The bucket of an actor is keyed by ``(group_id, actor, mission_id)``: ``mission_id`` is
``None`` for a member, and the Mission a Command concerns for a ``coordinator`` (its one key
serves every Mission of the Group, so it is metered per Mission, with
:data:`COORDINATOR_FACTOR` times a member's budget). ``session.open`` (no Group) is metered
under the Group ``""``. An operator's ``group.create`` and the Commands that keep or end work
(:mod:`._upkeep`) are not metered.

A Command costs one token of the Command bucket and its canonical size of the byte bucket. It
is admitted when the Command bucket holds a token and the byte bucket holds its size (or is
full: a Command larger than the byte burst still passes a full bucket, which then owes the
rest), else refused ``rate_limited`` with ``retry_after_ms``, taking nothing. Buckets live in
the process's memory: each replica meters on its own (a member spread over ``n`` replicas gets
up to ``n`` times its budget), and a restart refills them.

The :class:`Meter` is transactional like the write it guards: what a transaction took is given
back when it rolls back (:meth:`Meter.rollback`), so a transaction retried after a conflict
charges each Command once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

#: A coordinator's budget per Mission is this many times a member's.
COORDINATOR_FACTOR = 10
#: Most buckets kept; past it, buckets that have refilled (and so mean nothing) are dropped.
MAX_BUCKETS = 100_000


@dataclass(frozen=True, slots=True)
class CommandLimits:
    """One member's Command budget in a Group.

    Attributes:
        commands_per_s: Commands added to the bucket per second.
        burst: the most Commands the bucket holds (sent at once after a quiet time).
        bytes_per_s: bytes of canonical Command added per second.
        bytes_burst: the most bytes the bucket holds.

    Raises:
        ValueError: a rate not positive, or a burst below 1.
    """

    commands_per_s: float = 20.0
    burst: int = 200
    bytes_per_s: int = 512 * 1024
    bytes_burst: int = 8 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.commands_per_s <= 0 or self.bytes_per_s <= 0:
            raise ValueError("Command limits need positive rates")
        if self.burst < 1 or self.bytes_burst < 1:
            raise ValueError("Command limits need bursts of at least 1")

    def scaled(self, factor: int) -> CommandLimits:
        """These limits with every rate and burst multiplied by ``factor``."""
        return replace(
            self,
            commands_per_s=self.commands_per_s * factor,
            burst=self.burst * factor,
            bytes_per_s=self.bytes_per_s * factor,
            bytes_burst=self.bytes_burst * factor,
        )

    @classmethod
    def from_wire(cls, value: Mapping[str, Any]) -> CommandLimits:
        """Limits from a JSON object with some of the attribute names (the rest default).

        Raises:
            ValueError: an unknown name, a value of the wrong type or out of range.
        """
        unknown = set(value) - {"commands_per_s", "burst", "bytes_per_s", "bytes_burst"}
        if unknown:
            raise ValueError(f"unknown Command limit(s): {', '.join(sorted(unknown))}")
        for name, v in value.items():
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise ValueError(f"{name} must be a number")
            if name != "commands_per_s" and not isinstance(v, int):
                raise ValueError(f"{name} must be an integer")
        return cls(**value)


#: A bucket's key: ``(group_id, actor, mission_id)``.
BucketKey = tuple[str, str, str | None]


@dataclass(slots=True)
class _Bucket:
    commands: float
    bytes: float
    at: float  # the clock's seconds when last filled


class Meter:
    """The token buckets of one Authority process.

    Args:
        default: every Group's member limits; ``None``: Commands are not metered.
        groups: limits of particular Groups, over ``default``.
        clock: monotonic seconds (tests pass a controllable one).
    """

    def __init__(
        self,
        default: CommandLimits | None,
        groups: Mapping[str, CommandLimits] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.default = default
        self.groups = dict(groups or {})
        self.clock = clock
        self._buckets: dict[BucketKey, _Bucket] = {}
        self._undo: dict[BucketKey, _Bucket | None] = {}

    def limits(self, group_id: str, *, coordinator: bool = False) -> CommandLimits | None:
        """The limits of a member of ``group_id`` (of a coordinator per Mission, with
        ``coordinator``); ``None``: not metered."""
        found = self.groups.get(group_id, self.default)
        if found is None or not coordinator:
            return found
        return found.scaled(COORDINATOR_FACTOR)

    def begin(self) -> None:
        """Start a transaction: what :meth:`charge` takes from now on can be given back."""
        self._undo.clear()

    def rollback(self) -> None:
        """Give back what :meth:`charge` took since :meth:`begin`."""
        for key, before in self._undo.items():
            if before is None:
                self._buckets.pop(key, None)
            else:
                self._buckets[key] = before
        self._undo.clear()

    def charge(self, key: BucketKey, limits: CommandLimits, size: int) -> dict[str, Any] | None:
        """Take one Command of ``size`` bytes from ``key``'s buckets.

        Returns:
            ``None`` when taken; else the refusal's detail, nothing taken:
            ``{"retry_after_ms", "limit": "commands"|"bytes", "commands_per_s", "burst",
            "bytes_per_s", "bytes_burst", "bytes"}``.
        """
        now = self.clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= MAX_BUCKETS:
                self._prune(now)
            bucket = _Bucket(float(limits.burst), float(limits.bytes_burst), now)
        elapsed = max(0.0, now - bucket.at)  # a monotonic clock; never negative in practice
        commands = min(float(limits.burst), bucket.commands + elapsed * limits.commands_per_s)
        held = min(float(limits.bytes_burst), bucket.bytes + elapsed * limits.bytes_per_s)
        need = min(size, limits.bytes_burst)
        wait_commands = max(0.0, (1 - commands) / limits.commands_per_s)
        wait_bytes = max(0.0, (need - held) / limits.bytes_per_s)
        if wait_commands > 0 or wait_bytes > 0:
            return {
                "retry_after_ms": max(1, int(max(wait_commands, wait_bytes) * 1000) + 1),
                "limit": "commands" if wait_commands >= wait_bytes else "bytes",
                "commands_per_s": limits.commands_per_s,
                "burst": limits.burst,
                "bytes_per_s": limits.bytes_per_s,
                "bytes_burst": limits.bytes_burst,
                "bytes": size,
            }
        if key not in self._undo:  # buckets are replaced, never changed: keep the old one
            self._undo[key] = self._buckets.get(key)
        self._buckets[key] = _Bucket(commands - 1, held - size, now)
        return None

    def _prune(self, now: float) -> None:
        """Drop the buckets that would be full again by now (they equal a new one); if that
        frees nothing, the oldest half."""
        full = [
            k for k, b in self._buckets.items() if k not in self._undo and self._refilled(k, b, now)
        ]
        if not full:
            by_age = sorted(self._buckets, key=lambda k: self._buckets[k].at)
            full = [k for k in by_age[: len(by_age) // 2] if k not in self._undo]
        for k in full:
            del self._buckets[k]

    def _refilled(self, key: BucketKey, bucket: _Bucket, now: float) -> bool:
        limits = self.limits(key[0], coordinator=key[2] is not None)
        if limits is None:
            return True
        elapsed = now - bucket.at
        return (
            bucket.commands + elapsed * limits.commands_per_s >= limits.burst
            and bucket.bytes + elapsed * limits.bytes_per_s >= limits.bytes_burst
        )


__all__ = ["COORDINATOR_FACTOR", "MAX_BUCKETS", "BucketKey", "CommandLimits", "Meter"]
