"""``WS /v1/stream``: a Group's Events as they are appended (SUBSCRIBE / EVENT / ACK / ERROR;
the session is :class:`~._stream.StreamSession`).

The stream's requirements (MW-16-a, c, d, e) are kept by the session; ``create_app``'s
docstring names them (the conformance table's code column).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, WebSocket

from ...metrics import series, unwatch, watch
from ._connections import connection_of
from ._front import Front, get_front
from ._metrics import subscriptions
from ._stream import StreamSession

router = APIRouter()


@router.websocket("/v1/stream")
async def stream(ws: WebSocket, front: Front = Depends(get_front)) -> None:
    await ws.accept()
    session = StreamSession(ws, front, connection_of(ws.scope))
    watch(series.AUTHORITY_SUBSCRIBERS, session, subscriptions)
    try:
        await session.run()
    finally:
        unwatch(series.AUTHORITY_SUBSCRIBERS, session)


__all__ = ["router"]
