"""Signed frames from Group members: who sent it, and may they?

Two frames are signed by an agent rather than carried in a Command: the WebSocket ``SUBSCRIBE``
(``_stream``) and the ``PUT /v1/groups/{g}/presence`` report (``_presence``). Both carry
``agent``, ``group``, ``issuedAtMs`` and ``signature`` — the agent's Ed25519 signature
(base64url) over the RFC 8785 canonical bytes of the frame without ``signature`` — and both are
checked here, the same way: an active member's key, and ``issuedAtMs`` within
:data:`MAX_SKEW_MS` of the Authority's clock.
"""

from __future__ import annotations

from typing import Any

from ...protocol import CanonicalizationError, RejectionCode, canonical_bytes, verify
from ..core import Authority, freshness_clock
from ..wire import MAX_SKEW_MS, FrameError, UnknownGroupError, is_int


def check_member_frame(
    authority: Authority, frame: dict[str, Any], group: str, agent: str, kind: str = "frame"
) -> int:
    """Check that ``frame`` is signed by ``agent``, an active member of ``group``, and issued
    near the Authority's clock. Blocking (SQLite reads): call it in a worker thread.

    Args:
        authority: the Authority whose membership and clock decide.
        frame: the whole frame as received, with ``signature`` (str) and ``issuedAtMs`` (int,
            epoch milliseconds) already checked for type by the caller.
        group: the Group the frame is about.
        agent: the agent that claims to have signed it.
        kind: what the frame is, for messages (``"SUBSCRIBE"``, ``"presence report"``).

    Returns:
        The Group's head sequence, read in the same check.

    Raises:
        FrameError: ``invalid_frame`` when the frame cannot be canonicalized (a float);
            ``unauthorized`` when there is no such Group, the agent is not an active member or
            the signature does not verify (one answer for all three, given before anything
            about the Group: a stranger learns nothing, not even that the Group exists), or
            ``issuedAtMs`` is more than :data:`MAX_SKEW_MS` away.
    """
    try:
        signed = canonical_bytes({k: v for k, v in frame.items() if k != "signature"})
    except CanonicalizationError as exc:
        raise FrameError(RejectionCode.INVALID_FRAME, str(exc), group=group) from None
    # The signature first, then anything about the Group: one answer for "no such Group",
    # "not a member" and "bad signature", so a stranger learns neither which nor that the
    # Group exists.
    key = authority.member_key(group, agent)
    if key is None or not verify(key, str(frame["signature"]), signed):
        raise FrameError(
            RejectionCode.UNAUTHORIZED,
            f"the {kind} is not signed by an active member of the group",
            group=group,
            agent=agent,
        )
    try:
        head_seq, _ = authority.head(group)
    except UnknownGroupError:  # removed between the two reads: still no member of it
        raise FrameError(
            RejectionCode.UNAUTHORIZED, f"the {kind} is not signed by an active member of the group"
        ) from None
    now = freshness_clock(authority.clock)()
    issued = int(frame["issuedAtMs"])
    if abs(issued - now) > MAX_SKEW_MS:
        raise FrameError(
            RejectionCode.UNAUTHORIZED,
            f"issuedAtMs is more than {MAX_SKEW_MS} ms from the Authority's clock",
            group=group,
            issued_at_ms=issued,
            server_time_ms=now,
        )
    return head_seq


__all__ = ["MAX_SKEW_MS", "FrameError", "check_member_frame", "is_int"]
