"""Handlers that keep a WorkItem running until the runtime stops (imported by name, as
``missionweave worker --handlers tests.support.hold_handlers`` does): two capabilities, so that two
agents each hold one WorkItem of the same Mission, and one whose handler never pauses."""

from __future__ import annotations

import asyncio

from missionweave.worker import Pause, WorkContext, handler


async def _hold(ctx: WorkContext) -> Pause:
    """Work until asked to pause (the runtime asks when it stops), then pause."""
    await ctx.report("holding")
    while True:
        if ctx.should_pause():
            return ctx.pause({"held": True})
        await asyncio.sleep(0.1)


@handler("test.hold", version="1.0")
async def hold(ctx: WorkContext, input: dict[str, object]) -> Pause:
    return await _hold(ctx)


@handler("test.wait", version="1.0")
async def wait(ctx: WorkContext, input: dict[str, object]) -> Pause:
    return await _hold(ctx)


@handler("test.ignore", version="1.0")
async def ignore(ctx: WorkContext, input: dict[str, object]) -> Pause:
    """Works on and on, never looking at ``should_pause()`` (it can still be cancelled)."""
    await ctx.report("ignoring should_pause")
    await asyncio.Event().wait()  # nothing sets it
    raise AssertionError("unreachable")
