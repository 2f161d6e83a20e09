"""``WS /v1/stream``: a Group's Events as they are appended (SUBSCRIBE / EVENT / ACK / ERROR;
the session is :class:`~._stream.StreamSession`).

Implements MW-16-a (at-least-once EVENT stream, Events carry their ids), MW-16-c (ACK records
cursors, never deletes history), MW-16-d (SUBSCRIBE.afterSequence replay) and MW-16-e
(CURSOR_TOO_OLD with a signed snapshot reference), in :mod:`._stream`.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, WebSocket

from ...metrics import series, unwatch, watch
from ._front import Front, get_front
from ._metrics import subscriptions
from ._stream import StreamSession

router = APIRouter()


@router.websocket("/v1/stream")
async def stream(ws: WebSocket, front: Front = Depends(get_front)) -> None:
    await ws.accept()
    session = StreamSession(
        ws,
        front.authority,
        front.notifier,
        front.poll_interval_s,
        front.reads,
        front.max_replay_events,
        front.ws_idle_timeout_s,
    )
    watch(series.AUTHORITY_SUBSCRIBERS, session, subscriptions)
    try:
        await session.run()
    finally:
        unwatch(series.AUTHORITY_SUBSCRIBERS, session)


__all__ = ["router"]
