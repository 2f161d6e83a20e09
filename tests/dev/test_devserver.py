"""``missionweave.dev.TemporalDevServer``: the real ``temporal server start-dev`` on free ports."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import WorkflowExecutionStatus
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from missionweave.dev import (
    GROUP_ID,
    MISSION_ID,
    SEARCH_ATTRIBUTES,
    DevServerError,
    TemporalDevServer,
    search_attribute_args,
)
from tests.support.cli_processes import listening_port


def test_search_attribute_args() -> None:
    assert search_attribute_args() == [
        "--search-attribute",
        "MissionId=Keyword",
        "--search-attribute",
        "GroupId=Keyword",
        "--search-attribute",
        "MissionStatus=Keyword",
        "--search-attribute",
        "OpenWorkItems=Int",
    ]
    assert [k.name for k in SEARCH_ATTRIBUTES] == [
        "MissionId",
        "GroupId",
        "MissionStatus",
        "OpenWorkItems",
    ]


def test_command_line(tmp_path: Path) -> None:
    server = TemporalDevServer(
        tmp_path,
        port=7300,
        ui=False,
        dynamic_config={
            "limit.historyCount.suggestContinueAsNew": 20,
            "matching.enableFairness": True,
        },
    )
    cmd = server.command()
    assert cmd[1:3] == ["server", "start-dev"]
    assert cmd[cmd.index("--db-filename") + 1] == str(tmp_path / "temporal.db")
    assert cmd[cmd.index("--port") + 1] == "7300"
    assert "--headless" in cmd and "--ui-port" not in cmd
    assert cmd[cmd.index("--log-level") + 1] == "warn"
    assert cmd[cmd.index("--namespace") + 1] == "default"
    values = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--dynamic-config-value"]
    assert values == ["limit.historyCount.suggestContinueAsNew=20", "matching.enableFairness=true"]
    assert server.ui_url is None and server.target == "127.0.0.1:7300"


async def test_start_register_search_attributes_persist_and_stop(tmp_path: Path) -> None:
    server = TemporalDevServer(tmp_path, port=0, ui_port=0)
    async with server:
        assert server.running and server.port != 0 and server.ui_port != 0
        client = await server.connect()
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=server.namespace)
        )
        keyword = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
        ours = {k.name: listed.custom_attributes.get(k.name) for k in SEARCH_ATTRIBUTES}
        assert ours == {
            "MissionId": keyword,
            "GroupId": keyword,
            "MissionStatus": keyword,
            "OpenWorkItems": IndexedValueType.INDEXED_VALUE_TYPE_INT,
        }
        # No worker polls this queue: the workflow just waits, persisted in temporal.db.
        handle = await client.start_workflow(
            "Mission",
            id="mission-persisted",
            task_queue="nobody-polls",
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(MISSION_ID, "persisted"), SearchAttributePair(GROUP_ID, "g1")]
            ),
        )
        assert server.ui_url is not None
        async with httpx.AsyncClient() as http:
            assert (await http.get(server.ui_url)).status_code == 200
    assert not server.running
    assert server.db_path.exists() and server.log_path.exists()

    async with TemporalDevServer(tmp_path, port=0, ui=False) as again:
        client = await again.connect()
        desc = await client.get_workflow_handle(handle.id).describe()
        assert desc.status == WorkflowExecutionStatus.RUNNING
        assert desc.typed_search_attributes.get(MISSION_ID) == "persisted"
        await client.get_workflow_handle(handle.id).terminate("test over")
    await again.stop()  # a second stop is harmless


async def test_port_in_use_fails_with_the_log_tail(tmp_path: Path) -> None:
    with listening_port() as port:
        server = TemporalDevServer(
            tmp_path, port=port, ui=False, startup_timeout=timedelta(seconds=20)
        )
        with pytest.raises(DevServerError) as err:
            await server.start()
    assert "temporal-server.log" in str(err.value)
    assert str(port) in str(err.value)
    assert not server.running


async def test_missing_binary_is_a_clear_error(tmp_path: Path) -> None:
    server = TemporalDevServer(tmp_path, binary=tmp_path / "no-temporal-here")
    with pytest.raises(DevServerError, match="does not exist"):
        await server.start()


def test_public_surface() -> None:
    import missionweave.dev as dev

    assert set(dev.__all__) == {
        # the Temporal dev server and its search attributes
        *("GROUP_ID", "MISSION_ID", "MISSION_STATUS", "OPEN_WORK_ITEMS", "SEARCH_ATTRIBUTES"),
        *("DevServerError", "TemporalDevServer", "connect_client", "find_temporal_cli"),
        *("free_port", "search_attribute_args", "temporal_answers", "workflow_ui_url"),
        # the whole stack of one machine, and the steps every stack builder takes
        *(
            "DEFAULT_GROUP",
            "EmbeddedStack",
            "StackError",
            "StackFiles",
            "StackPorts",
            "AuthorityServer",
        ),
        *("load_or_create_key", "wait_until", "authority_answers"),
        # Group set-up
        *("OWNER_ROLES", "GroupSetupError", "MemberChange", "ensure_group", "ensure_member"),
        "enroll",
    }
    assert all(hasattr(dev, n) for n in dev.__all__)


_OWNER = """
import asyncio, sys
from missionweave.dev import TemporalDevServer

async def main() -> None:
    server = TemporalDevServer(sys.argv[1], port=0, ui=False)
    await server.start()
    print(server._proc.pid, flush=True)  # the server's pid, for the test
    await asyncio.sleep(3600)

asyncio.run(main())
"""


@pytest.mark.skipif(sys.platform != "linux", reason="parent-death signal is Linux-only")
def test_the_server_has_its_own_process_group_and_dies_with_its_owner(tmp_path: Path) -> None:
    """Ctrl-C in a terminal goes to the foreground process group: the server is not in it (its
    owner stops it last, after what depends on it). Killed hard, the owner takes the server
    with it: nothing is left running."""
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None
        server_pid = int(owner.stdout.readline())
        assert os.getpgid(server_pid) == server_pid != os.getpgid(owner.pid)
    finally:
        owner.kill()
        owner.wait(30)
    for _ in range(300):  # a bounded wait for the exit, not a timing assertion
        try:
            os.kill(server_pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(server_pid, 9)
        raise AssertionError("the Temporal dev server outlived its owner")


async def test_a_port_it_chose_and_another_program_took_meanwhile_is_chosen_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``port=0``: the port found free is taken by another program before the server binds it
    (seen under load): the server starts on a port chosen again, not fails."""
    import missionweave.dev._devserver as devserver

    with listening_port() as taken:
        ports = iter([taken, devserver.free_port()])
        monkeypatch.setattr(devserver, "free_port", lambda host="127.0.0.1": next(ports))
        async with TemporalDevServer(tmp_path, port=0, ui=False) as server:
            assert server.port != taken
            await server.connect()
    assert "address already in use" in server.log_path.read_text(encoding="utf-8")
