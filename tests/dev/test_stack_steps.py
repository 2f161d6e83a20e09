"""The steps every stack builder takes (``missionweave.dev``: ``dev up``, the test suite's
Authority stack, the fault suite's cluster): key files, the data directory's layout, waiting
until a part answers, the in-process Authority server, and enrolling a member."""

from __future__ import annotations

import stat
from pathlib import Path

import httpx
import pytest

from missionweave.dev import (
    AuthorityServer,
    StackError,
    StackFiles,
    authority_answers,
    enroll,
    free_port,
    load_or_create_key,
    wait_until,
)
from missionweave.protocol import Actor, AgentCard
from tests.support.temporal_env import authority_stack
from tests.support.world import World


def test_a_key_file_is_created_once_then_loaded(tmp_path: Path) -> None:
    path = StackFiles(tmp_path / "data").key("ada")
    created = load_or_create_key(path)
    assert path == tmp_path / "data" / "keys" / "ada.pem"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_key(path).public_key == created.public_key


def test_a_key_file_that_holds_no_key_is_a_stack_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "authority.key"
    path.write_text("not a key\n")
    with pytest.raises(StackError, match=r"authority\.key"):
        load_or_create_key(path)


def test_a_new_key_is_never_written_through_a_link_or_into_a_directory(tmp_path: Path) -> None:
    target, link = tmp_path / "elsewhere.pem", tmp_path / "keys" / "ada.pem"
    link.parent.mkdir()
    link.symlink_to(target)  # dangling: exists() is False, yet writing it would create target
    with pytest.raises(StackError, match=r"ada\.pem: not a key file"):
        load_or_create_key(link)
    assert not target.exists()
    (tmp_path / "dir.pem").mkdir()
    with pytest.raises(StackError, match=r"dir\.pem: Is a directory"):
        load_or_create_key(tmp_path / "dir.pem")


async def test_wait_until_returns_the_first_truthy_answer_errors_counting_as_no() -> None:
    answers = iter([RuntimeError("refused"), 0, "up"])

    async def probe() -> object:
        got = next(answers)
        if isinstance(got, Exception):
            raise got
        return got

    assert await wait_until(probe, "answer", 5, interval_s=0) == "up"


async def test_wait_until_ends_at_once_when_the_part_is_gone_and_names_the_last_error() -> None:
    async def refused() -> bool:
        raise ConnectionRefusedError("refused")

    with pytest.raises(StackError, match="exited with code 3"):
        await wait_until(refused, "answer", 60, gone=lambda: "it exited with code 3")
    with pytest.raises(TimeoutError, match="ConnectionRefusedError: refused"):
        await wait_until(refused, "answer", 0.05, interval_s=0.01)


async def test_the_authority_server_serves_again_on_its_port_and_refuses_a_taken_one(
    world: World,
) -> None:
    server = AuthorityServer(world.authority, poll_interval_s=0.05)
    await server.start()
    try:
        port = server.port
        assert await authority_answers(server.url)
        taken = AuthorityServer(world.authority, port=port)
        with pytest.raises(StackError, match=f"cannot listen on 127.0.0.1:{port}"):
            await taken.start()
        await server.stop()
        with pytest.raises(httpx.TransportError):
            await authority_answers(server.url)
        await server.start()
        assert server.port == port and await authority_answers(server.url)
    finally:
        await server.stop()


async def test_nobody_answers_on_a_free_port() -> None:
    with pytest.raises(TimeoutError, match="no answer from the Authority"):
        url = f"http://127.0.0.1:{free_port()}"
        await wait_until(lambda: authority_answers(url), "answer from the Authority", 0.2)


async def test_enroll_sets_the_members_epoch_and_runs_again_changing_nothing(
    tmp_path: Path,
) -> None:
    async with authority_stack(tmp_path) as stack:
        ada = Actor.generate("ada")
        args = (stack.client, stack.coordinator, stack.group, ada)
        assert await enroll(*args) == "added"
        epoch = ada.membership_epochs[stack.group]
        assert await enroll(*args) == "present"
        assert ada.membership_epochs[stack.group] == epoch
        assert await enroll(*args, ("worker", "reviewer")) == "updated"
        (info,) = [a for a in await stack.client.agents(stack.group) if a.agent_id == "ada"]
        assert ada.membership_epochs[stack.group] == info.membership_epoch
        # the epoch set is the one the Authority checks: ada signs in the Group
        card = AgentCard(agent_id="ada", public_key=ada.public_key, capabilities=["x.y@1.0"])
        published = await stack.submit(ada, "agent.publish_card", {"card": card.model_dump()})
        assert published.accepted, published.rejection
