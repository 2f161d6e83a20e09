"""Who may read: the FastAPI dependencies that admit a signed read (RFC 9421,
:mod:`missionweave.authority.wire` ``_readsig``) of the Authority's HTTP front.

:func:`reader` verifies a request's signature (``None`` when it has none); :func:`member`
admits an active member of the path's Group or an operator; :func:`large_reader` does so for a
large read after the read gate (:mod:`._read_gate`) has room, and :func:`take_slot` takes one of
its slots, which the route gives back. Every route that admits a signed read of a member or an
operator does so with :func:`admit` (its nonce remembered, its connection authenticated). A
refusal raises ``ReadRefused`` (401, 403) or :class:`~._errors.TooManyReads` (429), answered
by :mod:`._errors`.
"""

from __future__ import annotations

import asyncio
import re

from fastapi import Depends, Request
from starlette.requests import HTTPConnection

from ...protocol import RejectionCode
from ..wire import ReadRefused, SignedRead, UnknownGroupError
from ._connections import mark_authenticated
from ._errors import TooManyReads
from ._front import Front, get_front

#: The key a read's ``Signature-Input`` names (checked later, when the signature is).
_KEYID = re.compile(r'keyid="([^"]{1,200})"')


async def reader(request: Request, front: Front = Depends(get_front)) -> SignedRead | None:
    """The verified signed read, ``None`` when the request is not signed (not yet
    remembered: see :meth:`Front.remember`).

    Raises:
        ReadRefused: 401 when a signature is there but does not verify.
    """
    scope = request.scope
    query = scope.get("query_string", b"")
    # raw_path as sent (percent-encoded); some ASGI servers leave the query on it
    raw_path = (scope.get("raw_path") or scope["path"].encode()).split(b"?", 1)[0]
    url = "http://authority" + raw_path.decode("latin-1")
    if query:
        url += "?" + query.decode("latin-1")
    return front.reads.verify(request.method, url, request.headers.items())


def signed(read: SignedRead | None) -> SignedRead:
    """``read`` itself; raises ``ReadRefused`` 401 ``unauthenticated`` when it is ``None``."""
    if read is None:
        raise ReadRefused(
            401, RejectionCode.UNAUTHENTICATED, "reads need a signed request (RFC 9421)"
        )
    return read


def admit(request: HTTPConnection, front: Front, read: SignedRead) -> None:
    """``read``, whose signer is known to be an active member or an operator, is admitted: its
    nonce is remembered (:meth:`Front.remember`) and its connection is authenticated (it
    leaves the unauthenticated budget and its deadline, issue 37 item 5:
    :func:`~._connections.mark_authenticated`). A stranger's valid signature (of its own key)
    is never admitted."""
    front.remember(read)
    mark_authenticated(request.scope)


def _may_read(front: Front, group_id: str, key: str) -> bool:
    try:
        return front.authority.may_read(group_id, key)
    except UnknownGroupError:
        return False


async def member(
    group_id: str,
    request: Request,
    read: SignedRead | None = Depends(reader),
    front: Front = Depends(get_front),
) -> str:
    """Only an active member of ``group_id`` (or an operator) reads it; its nonce is
    remembered once that holds. Anyone else gets 403 ``not_a_member`` whether or not the
    Group exists; only an operator is told 404 ``unknown_group``.

    Returns:
        The reader's key.
    """
    admitted = signed(read)
    key = admitted.key
    if key in front.operators:
        await asyncio.to_thread(front.authority.head, group_id)  # unknown_group for them too
    elif not await asyncio.to_thread(_may_read, front, group_id, key):
        # one answer whether or not the Group exists: a stranger cannot enumerate Groups
        raise ReadRefused(
            403,
            RejectionCode.NOT_A_MEMBER,
            f"key {key} is no active member's key in group {group_id!r}: only members "
            "read a Group (an owner adds one with `missionweave group add`)",
            group_id=group_id,
            key=key,
        )
    admit(request, front, admitted)
    return key


async def room(request: Request, front: Front = Depends(get_front)) -> None:
    """A large read is shed while the Authority is under pressure (429 ``read_shed``:
    Commands first, :mod:`._read_lane`), and one the gate would refuse anyway is refused, both
    before its signature is checked (by the key it names): a flood of retries costs no
    Ed25519 or Store work."""
    shed = front.lane.pressure()
    if shed is not None:
        raise TooManyReads(shed, RejectionCode.READ_SHED)
    named = _KEYID.search(request.headers.get("signature-input", ""))
    refused = front.gate.full(named.group(1) if named else "")
    if refused is not None:
        raise TooManyReads(refused)


async def large_reader(_room: None = Depends(room), key: str = Depends(member)) -> str:
    """A member's large read (a page of Events, a snapshot): refused by the gate's bound
    (:func:`room`) before its signature is checked, then admitted as :func:`member`. It holds
    no slot yet: the route takes one with :func:`take_slot` once its own parameters are valid
    (a dependency's slot would be lost when they are not).

    Returns:
        The reader's key.
    """
    return key


def take_slot(front: Front, key: str) -> None:
    """Take one of the gate's slots for ``key``'s large read; the route gives it back with
    ``front.gate.leave(key)`` once its answer is over.

    Raises:
        TooManyReads: this key's or the server's large reads in flight are at their bound.
    """
    refused = front.gate.enter(key)
    if refused is not None:
        raise TooManyReads(refused)


__all__ = ["admit", "large_reader", "member", "reader", "room", "signed", "take_slot"]
