"""The agents of a Group and their presence::

    GET /v1/groups/{group_id}/agents     → {agents: [AgentInfo]} (cards, epochs, reliability)
    PUT /v1/groups/{group_id}/presence   a signed presence report → {stored} (200, 403, 422)
    GET /v1/groups/{group_id}/presence   → {agent_id: {free_slots, queue_depth, age_ms}}

The reads are signed reads of a member (:mod:`._read_access`); a presence report is a frame
signed by the member agent itself (:func:`~._frames.check_member_frame`), kept in memory on
the app's :class:`~missionweave.authority.wire.PresenceBoard`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Body, Depends
from fastapi.responses import JSONResponse

from ...protocol import RejectionCode
from ..wire import FrameError, check_presence_shape
from ._errors import READ_ERRORS, documented, error_response
from ._frames import check_member_frame
from ._front import Front, get_front
from ._read_access import member

router = APIRouter()


def _frame_error(err: FrameError) -> JSONResponse:
    statuses: dict[str, int] = {RejectionCode.UNKNOWN_GROUP: 404, RejectionCode.UNAUTHORIZED: 403}
    status = statuses.get(err.code, 422)
    return error_response(status, err.code, err.reason, **err.detail)


@router.get("/v1/groups/{group_id}/agents", responses=documented(*READ_ERRORS, 404))
async def get_agents(
    group_id: str, _: str = Depends(member), front: Front = Depends(get_front)
) -> JSONResponse:
    agents = await asyncio.to_thread(front.authority.agents, group_id)
    return JSONResponse({"agents": [a.model_dump(mode="json") for a in agents]})


@router.put("/v1/groups/{group_id}/presence", responses=documented(403, 404))
async def put_presence(
    group_id: str, frame: dict[str, Any] = Body(...), front: Front = Depends(get_front)
) -> JSONResponse:
    try:
        check_presence_shape(frame, group_id)
        await asyncio.to_thread(
            check_member_frame, front.authority, frame, group_id, frame["agent"], "presence report"
        )
    except FrameError as err:
        return _frame_error(err)
    stored = front.presence.put(
        group_id,
        frame["agent"],
        frame["free_slots"],
        frame["queue_depth"],
        frame["issuedAtMs"],
    )
    return JSONResponse({"stored": stored})


@router.get("/v1/groups/{group_id}/presence", responses=documented(*READ_ERRORS, 404))
async def get_presence(
    group_id: str, _: str = Depends(member), front: Front = Depends(get_front)
) -> JSONResponse:
    fresh = front.presence.fresh(group_id)
    return JSONResponse({a: p.model_dump(mode="json") for a, p in fresh.items()})


__all__ = ["router"]
