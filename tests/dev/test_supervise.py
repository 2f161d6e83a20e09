"""The embedded stack notices when its Temporal dev server dies (issue 13): ``dev up`` starts it
again on the same port and state, and says so; when it cannot, the stack gives up naming it
instead of saying "up" over a dead server."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest

from missionweave.dev import EmbeddedStack, StackError, connect_client
from tests.support.cli_processes import STARTUP_S, Process, children, dev_up, processes_mentioning
from tests.support.waits import WAIT_S


async def _answers(target: str) -> bool:
    client = await connect_client(target, tracing=False)
    info = await client.workflow_service.get_system_info(GetSystemInfoRequest())
    return bool(info.server_version)


def _kill_temporal_until(stack: Process, times: int) -> None:
    """Kill ``dev up``'s Temporal child; wait until it is back ``times`` times in all."""
    (child,) = children(stack.proc.pid, "start-dev")
    os.kill(child, signal.SIGKILL)
    end = time.monotonic() + STARTUP_S
    while stack.stderr().count("is back on") < times:
        assert stack.proc.poll() is None, stack.stderr()
        assert time.monotonic() < end, stack.stderr()
        time.sleep(0.2)


def test_dev_up_starts_its_killed_temporal_server_again(
    tmp_path: Path, processes: list[Process]
) -> None:
    up = dev_up(tmp_path, processes)
    stack, target = up.process, up.temporal
    (child,) = children(stack.proc.pid, "start-dev")
    _kill_temporal_until(stack, 1)  # its stderr says it died and is back
    log = stack.stderr()
    assert f"the Temporal dev server ({target}) exited with code -9; starting it again" in log
    (again,) = children(stack.proc.pid, "start-dev")
    assert again != child
    assert asyncio.run(_answers(target))  # same port, answering
    assert stack.interrupt() == 0
    assert processes_mentioning(str(tmp_path)) == []


@pytest.mark.asyncio
async def test_the_stack_gives_up_naming_temporal_when_it_dies_too_often(tmp_path: Path) -> None:
    async with EmbeddedStack(tmp_path, temporal_port=0, authority_port=0, headless=True) as stack:
        watch = asyncio.create_task(stack.supervise(restarts=0))
        await asyncio.sleep(0)
        proc = stack.temporal._proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGKILL)
        with pytest.raises(StackError, match=r"the Temporal dev server \(.*\) exited with code -9"):
            await asyncio.wait_for(watch, WAIT_S)
        assert not stack.temporal.running


def test_dev_up_exits_1_naming_temporal_at_its_fourth_death_in_a_minute(
    tmp_path: Path, processes: list[Process]
) -> None:
    up = dev_up(tmp_path, processes)
    stack, target = up.process, up.temporal
    for n in (1, 2, 3):
        _kill_temporal_until(stack, n)
    (child,) = children(stack.proc.pid, "start-dev")
    os.kill(child, signal.SIGKILL)
    assert stack.proc.wait(timeout=60) == 1
    last = stack.stderr().strip().splitlines()[-1]
    assert last == (
        f"error: the Temporal dev server ({target}) exited with code -9, 4 times in "
        f"60 s; see {tmp_path / 'data' / 'temporal-server.log'}"
    )
    assert processes_mentioning(str(tmp_path)) == []
