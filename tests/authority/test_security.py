"""Who may read and write the Authority, over a real loopback server (docs/authority.md,
"Security model"). Each test is one attack, and asserts the refusal, that nothing was written
(the log's length) and that the log still verifies."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import socket
import ssl
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from websockets.asyncio.client import connect

from missionweave.authority import SubmitResult, verify_log
from missionweave.authority.client import (
    AuthorityClient,
    AuthorityRequestError,
    AuthorityUnavailable,
)
from missionweave.authority.wire._readsig import sign_read
from missionweave.protocol import Actor, Command, sign_command
from tests.support.serving import LiveServer, signed_http, signed_subscribe
from tests.support.world import World, make_world

READS = (
    "/v1/groups/{g}/events",
    "/v1/groups/{g}/head",
    "/v1/groups/{g}/agents",
    "/v1/groups/{g}/presence",
    "/v1/groups/{g}/snapshots/{snap}",
)


def _started(world: World, wid: str) -> SubmitResult:
    """Authorize ``wid``, offer it to worker-0, which accepts and starts it: the verdict."""
    world.authorize(wid)
    offer = world.offer(wid, world.workers[0])
    assert world.accept(world.workers[0], wid, offer).accepted
    item = world.item(wid)
    body = {"work_item_id": wid, "ownership_epoch": item["ownership_epoch"]}
    started = world.ok(world.workers[0], "work.start", body)
    world.leases[wid] = started.reply["lease"]
    return started


def _untouched(world: World, before: int) -> None:
    """Nothing was appended since ``before`` events, and the chain verifies."""
    assert len(world.authority.all_events(world.group)) == before
    report = verify_log(world.authority.store, world.group, world.authority.public_key)
    assert report.events == before


async def test_reads_need_a_members_signature__MW_13_3_b(live: LiveServer, world: World) -> None:
    snap = world.authority.snapshot(world.group)["seq"]
    world.authorize("a")
    offer = world.offer("a", world.workers[0])
    assert world.accept(world.workers[0], "a", offer).accepted
    lease_id = world.start(world.workers[0], "a")["lease_id"]
    before = len(world.authority.all_events(world.group))
    stranger = Actor.generate("stranger")
    async with (
        httpx.AsyncClient(base_url=live.url) as anon,
        signed_http(live.url, stranger) as strange,
        signed_http(live.url, world.workers[1]) as member,
    ):
        for path in (*READS, "/v1/leases/" + lease_id):
            url = path.format(g=world.group, snap=snap)
            r = await anon.get(url)
            assert r.status_code == 401 and r.json()["code"] == "unauthenticated", url
            assert "Accept-Signature" in r.headers
            r = await strange.get(url)
            assert r.status_code == 403 and r.json()["code"] == "not_a_member", url
            assert (await member.get(url)).status_code == 200, url
        # the Authority's public key is public; the Groups are not
        assert (await anon.get("/v1/authority")).json() == {
            "public_key": world.authority.public_key
        }
        assert (await strange.get("/v1/authority")).json()["groups"] == []
        body = (await member.get("/v1/authority")).json()
        assert body["groups"] == [world.group] and body["operator"] is False
    # a removed member reads no more
    world.ok(world.coordinator, "member.remove", {"agent_id": world.workers[1].agent_id})
    before += 1
    async with signed_http(live.url, world.workers[1]) as former:
        r = await former.get(f"/v1/groups/{world.group}/events")
        assert r.status_code == 403
    _untouched(world, before)


async def test_signed_reads_refuse_replays_stale_and_retargeted_signatures(
    live: LiveServer, world: World
) -> None:
    before = len(world.authority.all_events(world.group))
    reader = world.workers[0]
    url = f"{live.url}/v1/groups/{world.group}/events?after_sequence=0&limit=5"
    headers = sign_read("GET", url, reader.key)
    async with httpx.AsyncClient() as http:
        assert (await http.get(url, headers=headers)).status_code == 200
        again = await http.get(url, headers=headers)  # the same signature, replayed
        assert again.status_code == 401 and "replay" in again.json()["reason"]
        other = url.replace("limit=5", "limit=6")  # a signature for another request
        r = await http.get(other, headers=sign_read("GET", url, reader.key))
        assert r.status_code == 401
        for skew_s in (-3600, 3600):  # created an hour ago, or an hour ahead
            off = sign_read("GET", url, reader.key, created_s=int(time.time()) + skew_s)
            r = await http.get(url, headers=off)
            assert r.status_code == 401 and "created" in r.json()["reason"]
        bad = dict(sign_read("GET", url, reader.key))
        bad["Signature"] = "mw=:" + "A" * 86 + "==:"
        assert (await http.get(url, headers=bad)).status_code == 401
    # the client signs every read, and an unsigned client learns only the public key
    async with AuthorityClient(live.url) as anon:
        with pytest.raises(AuthorityRequestError) as err:
            await anon.events(world.group)
        assert err.value.status == 401
        assert await anon.public_key() == world.authority.public_key
    _untouched(world, before)


async def test_command_ids_are_the_actors_own_in_its_group(live: LiveServer, world: World) -> None:
    """Finding 2: a stranger cannot use up a Coordinator's predictable Command ids."""
    stranger = Actor.generate("mallory")
    poisoned = [f"mission-victim-1/c{i}" for i in range(1, 6)]
    async with AuthorityClient(live.url) as anon:
        for i, cid in enumerate(poisoned):  # throwaway Groups with the victim's ids
            cmd = stranger.command(
                "group.create", f"junk-{i}", {"public_key": stranger.public_key}, command_id=cid
            )
            r = await anon.submit(cmd)
            assert r.rejection is not None and r.rejection.code == "operator_required"
        # an operator-made Group where mallory owns the id space of its own actor
        world.ok(
            world.coordinator,
            "member.add",
            {
                "agent_id": stranger.agent_id,
                "public_key": stranger.public_key,
                "roles": ["mission_owner"],
            },
        )
        stranger.membership_epochs[world.group] = 1

        def create_mission(actor: Actor, mission_id: str, title: str) -> Command:
            """``mission.create`` under the first poisoned id."""
            body = {"mission_id": mission_id, "title": title}
            return actor.command("mission.create", world.group, body, command_id=poisoned[0])

        assert (await anon.submit(create_mission(stranger, "mallory-m", "x"))).accepted
        # the victim's own Commands under the same ids are its own, and are accepted
        coord = world.coordinator
        assert (await anon.submit(create_mission(coord, "victim-1", "victim"))).accepted
        world.mission = "victim-1"
        for i, cid in enumerate(poisoned[1:]):
            body = world.authorization(f"v{i}")  # in Mission victim-1
            r = await anon.submit(
                coord.command("work.authorize", world.group, body, command_id=cid)
            )
            assert r.accepted, r.rejection
    assert world.authority.work_item(world.group, "v3") is not None


async def test_a_tampered_repeat_is_refused_and_a_reused_id_conflicts(
    live: LiveServer, world: World
) -> None:
    """Finding 7: the same id with the old signature over a changed body is no duplicate."""
    cmd = world.coordinator.command(
        "mission.create", world.group, {"mission_id": "m-t", "title": "t"}
    )
    async with AuthorityClient(live.url) as client:
        assert (await client.submit(cmd)).accepted
        before = len(world.authority.all_events(world.group))
        tampered = cmd.model_copy(update={"body": {"mission_id": "m-t2", "title": "t"}})
        r = await client.submit(tampered)
        assert r.status == "rejected" and r.rejection and r.rejection.code == "bad_signature"
        resigned = sign_command(tampered, world.coordinator.key)
        r = await client.submit(resigned)
        assert r.rejection is not None and r.rejection.code == "idempotency_conflict"
        again = await client.submit(cmd)
        assert again.accepted and again.duplicate
    _untouched(world, before)


async def test_bearer_signature_of_capability_tokens_never_enters_the_log__MW_11_3_d(
    live: LiveServer, world: World
) -> None:
    """Finding 3: the log keeps the token's facts and hash; the holder alone gets the signature."""
    started = _started(world, "a")
    world.leases["a"] = started.reply["lease"]
    renewed = world.ok(world.workers[0], "lease.renew", world.leased("a"))
    for r in (started, renewed):
        token = r.reply["capability_token"]
        assert token["signature"]
        logged = r.events[0].body["capability_token"]
        assert "signature" not in logged and logged["hash"] == token["hash"]
        # the workflow's payload of the verdict carries the whole token to the lease holder
        summary = r.verdict().events[0].body["capability_token"]
        assert summary["signature"] == token["signature"]
    async with signed_http(live.url, world.workers[1]) as member:
        text = (await member.get(f"/v1/groups/{world.group}/events?limit=10000")).text
    assert started.reply["capability_token"]["signature"] not in text
    assert renewed.reply["capability_token"]["signature"] not in text


@pytest.mark.parametrize(
    "bad",
    [
        "coord\u200b",
        "\u202ecoord",
        "co\x00ord",
        "   ",
        " coord",
        "cafe\u0301",
        "w1\u3164",
        "w1\u034f",
    ],
)
async def test_ids_follow_one_rule_everywhere_they_enter(
    live: LiveServer, world: World, bad: str
) -> None:
    """Finding 4: invisible, control, bidi, padded or non-NFC ids are refused as actor, Group
    and agent ids; nobody but an operator registers the first agent of a Group."""
    before = len(world.authority.all_events(world.group))
    intruder = Actor.generate("intruder")
    with pytest.raises(ValueError):  # the client refuses to build such a Command at all
        Actor.generate(bad).command("group.create", "g-new", {})
    raw = intruder.command("group.create", "g-new", {"public_key": intruder.public_key})
    async with httpx.AsyncClient(base_url=live.url) as http:
        for field, value in (("actor", bad), ("group_id", bad), ("command_id", bad)):
            body = {**raw.model_dump(mode="json"), field: value}
            r = await http.post("/v1/commands", json=body)
            assert r.status_code == 422 and r.json()["code"] == "invalid_command", (field, r.text)
    async with AuthorityClient(live.url) as client:
        r = await client.submit(
            world.coordinator.command(
                "member.add",
                world.group,
                {"agent_id": bad, "public_key": intruder.public_key, "roles": ["worker"]},
            )
        )
        assert r.rejection is not None and r.rejection.code == "invalid_body"
        r = await client.submit(
            world.coordinator.command(
                "mission.create", world.group, {"mission_id": "m-bad", "title": f"title {bad}\x00"}
            )
        )
        assert r.rejection is not None and r.rejection.code == "invalid_body"
    _untouched(world, before)


async def test_agent_ids_cannot_be_squatted(live: LiveServer, world: World) -> None:
    """Finding 4: a stranger's self-signed group.create no longer registers an agent id."""
    squatter = Actor.generate("ada")
    async with AuthorityClient(live.url) as client:
        r = await client.submit(
            squatter.command("group.create", "g-squat", {"public_key": squatter.public_key})
        )
        assert r.rejection is not None and r.rejection.code == "operator_required"
        ada = Actor.generate("ada")
        r = await client.submit(
            world.coordinator.command(
                "member.add",
                world.group,
                {"agent_id": "ada", "public_key": ada.public_key, "roles": ["worker"]},
            )
        )
        assert r.accepted, r.rejection


async def test_bodies_json_depth_and_integers_are_bounded(live: LiveServer, world: World) -> None:
    """Findings 5 and 6: each bound is a structured 4xx that writes nothing."""
    before = len(world.authority.all_events(world.group))
    headers = {"content-type": "application/json"}
    async with signed_http(live.url, world.workers[0], timeout=30) as http:
        r = await http.post("/v1/commands", content=b"[" * 2_000_000, headers=headers)
        assert r.status_code == 413 and r.json()["code"] == "body_too_large"
        for depth in (65, 300, 998, 5000):
            r = await http.post(
                "/v1/commands", content=b"[" * depth + b"]" * depth, headers=headers
            )
            assert r.status_code == 422 and r.json()["detail"]["problem"] == "too_deep", depth
        cmd = world.coordinator.command(
            "mission.create", world.group, {"mission_id": "m-dup", "title": "t"}
        )
        text = json.dumps(cmd.model_dump(mode="json"))
        dup = text.replace('"actor":', '"actor": "x", "actor":', 1)
        r = await http.post("/v1/commands", content=dup.encode(), headers=headers)
        assert r.status_code == 422 and "twice" in r.json()["reason"]
        nan = text.replace('"title": "t"', '"title": NaN')
        r = await http.post("/v1/commands", content=nan.encode(), headers=headers)
        assert r.status_code == 422
        truthy = {**cmd.model_dump(mode="json"), "membership_epoch": True}
        r = await http.post("/v1/commands", json=truthy)
        assert r.status_code == 422  # a boolean is not an integer
        # a member's signed Command with a 1.5 MB field is refused whole, in a batch too
        pad = {"mission_id": "m-big", "title": "t", "pad": "x" * 1_500_000}
        big = world.coordinator.command("mission.create", world.group, pad)
        r = await http.post("/v1/commands", json=big.model_dump(mode="json"))
        assert r.status_code == 413 and r.json()["code"] == "body_too_large"
        r = await http.post("/v1/commands/batch", json=[big.model_dump(mode="json")])
        assert r.status_code == 413 and r.json()["code"] == "command_too_large"
        for path in (
            f"/v1/groups/{world.group}/events?after_sequence={2**63}",
            f"/v1/groups/{world.group}/events?after_sequence={2**64}",
            f"/v1/groups/{world.group}/snapshots/{2**64}",
            f"/v1/groups/{world.group}/events?limit=true",
        ):
            r = await http.get(path)
            assert r.status_code == 422 and r.json()["code"] == "invalid_request", path
    _untouched(world, before)


async def test_a_deeply_nested_frame_gets_an_error_and_the_socket_stays(
    live: LiveServer, world: World
) -> None:
    """Finding 6: a WebSocket frame nested 100k deep is an ERROR frame, not a dropped socket."""
    worker = world.workers[0]
    async with connect(live.ws_url) as ws:
        await ws.send("[" * 50_000 + "]" * 50_000)
        err: dict[str, Any] = json.loads(await ws.recv())
        assert err["type"] == "ERROR" and err["code"] == "invalid_frame"
        await ws.send("{" + '"a":{' * 100 + "}" * 101)
        assert json.loads(await ws.recv())["code"] == "invalid_frame"
        await ws.send(json.dumps(signed_subscribe(worker, world.group, 0, world.clock.now)))
        first = json.loads(await ws.recv())
        assert first["type"] == "EVENT" and first["event"]["seq"] == 1


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


async def test_authority_serve_over_tls(tmp_path: Path) -> None:
    """``authority serve --tls-cert/--tls-key``: HTTPS, and signed reads work over it."""
    cert, key = _self_signed(tmp_path)
    operator = Actor.generate("operator")
    operator_pem = tmp_path / "operator.pem"
    operator.key.to_file(operator_pem)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cli = Path(sys.executable).with_name("missionweave")
    proc = await asyncio.create_subprocess_exec(
        str(cli),
        "authority",
        "serve",
        "--db",
        str(tmp_path / "a.db"),
        "--port",
        str(port),
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
        "--operator-key",
        str(operator_pem),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    trust = ssl.create_default_context(cafile=str(cert))
    url = f"https://127.0.0.1:{port}"
    try:
        async with AuthorityClient(url, signing_key=operator.key, verify=trust) as client:
            for _ in range(300):
                assert proc.returncode is None, "authority serve exited"
                try:
                    await client.info()
                    break
                except AuthorityUnavailable:
                    await asyncio.sleep(0.1)
            r = await client.submit(
                operator.command("group.create", "tls", {"public_key": operator.public_key})
            )
            assert r.accepted, r.rejection
            assert [e.type for e in await client.events("tls")][:1] == ["group.created"]
        async with httpx.AsyncClient() as plain:  # no plain HTTP on that port
            with pytest.raises(httpx.TransportError):
                await plain.get(f"http://127.0.0.1:{port}/healthz")
    finally:
        proc.terminate()
        await proc.wait()


# ------------------------------------------------------ found by an attack (2026-12-01)


async def test_a_replayed_start_never_hands_out_the_bearer_secret__MW_11_3_d(
    live: LiveServer, world: World
) -> None:
    """The signed ``work.start`` is in the log: another member sending it again gets the
    original verdict, but not the capability token's signature."""
    started = _started(world, "a")
    secret = started.reply["capability_token"]["signature"]
    async with signed_http(live.url, world.workers[1]) as thief:
        events = (await thief.get(f"/v1/groups/{world.group}/events?limit=10000")).json()
        logged = next(e for e in events["events"] if e["type"] == "work.started")
        r = await thief.post("/v1/commands", json=logged["command"])
    body = r.json()
    assert r.status_code == 200 and body["duplicate"] is True
    assert body["reply"]["lease"]["lease_id"] == started.reply["lease"]["lease_id"]
    assert "signature" not in body["reply"]["capability_token"]
    assert secret not in r.text


async def test_json_is_utf8_and_numbers_are_finite(live: LiveServer, world: World) -> None:
    """A UTF-16 body could hide its depth from a byte count; ``1e400`` parses to infinity."""
    before = len(world.authority.all_events(world.group))
    deep = '{"a":"\u0122","x":' + "[" * 300 + "]" * 300 + ',"b":"\u0122"}'
    cmd = world.workers[0].command("session.open", None, {})
    text = json.dumps(cmd.model_dump(mode="json"))
    async with httpx.AsyncClient(base_url=live.url) as http:
        for body in (deep.encode("utf-16-le"), deep.encode("utf-32"), text.encode("utf-16")):
            r = await http.post(
                "/v1/commands", content=body, headers={"content-type": "application/json"}
            )
            assert r.status_code == 422 and r.json()["detail"]["problem"] == "invalid_json"
        huge = text.replace('"body": {}', '"body": {"x": 1e400}')
        r = await http.post(
            "/v1/commands", content=huge.encode(), headers={"content-type": "application/json"}
        )
        assert r.status_code == 422 and "finite" in r.json()["reason"]
    async with connect(live.ws_url) as ws:
        await ws.send(("[" * 200 + "]" * 200).encode("utf-16-le"))
        assert json.loads(await ws.recv())["code"] == "invalid_frame"
    _untouched(world, before)


async def test_a_long_batch_is_refused_before_its_elements_are_validated(
    live: LiveServer, world: World
) -> None:
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        r = await http.post(
            "/v1/commands/batch",
            content=b"[" + b"{}," * 200_000 + b"{}]",
            headers={"content-type": "application/json"},
        )
    body = r.json()
    assert r.status_code == 422 and body["code"] == "invalid_command"
    assert [e["type"] for e in body["detail"]["errors"]] == ["too_long"]


async def test_strangers_take_no_room_in_the_replay_memory(live: LiveServer, world: World) -> None:
    """Only an allowed reader's nonce is remembered: a stranger cannot fill the memory and
    lock the members out; a member's replay is still refused."""
    stranger = Actor.generate("flood")
    url = f"{live.url}/v1/authority"
    async with httpx.AsyncClient() as http:
        strange = sign_read("GET", url, stranger.key)
        for _ in range(2):  # not remembered: nothing to replay, it learns nothing
            r = await http.get(url, headers=strange)
            assert r.status_code == 200 and r.json()["groups"] == []
        mine = sign_read("GET", url, world.workers[0].key)
        assert (await http.get(url, headers=mine)).status_code == 200
        assert (await http.get(url, headers=mine)).status_code == 401


def test_the_replay_memory_is_bounded_per_key() -> None:
    from missionweave.authority.wire._readsig import ReadRefused, ReadVerifier

    now = 1_800_000_000_000
    reads = ReadVerifier(lambda: now, max_nonces=10, max_nonces_per_key=3)
    for i in range(3):
        reads.remember("greedy", f"nonce-{i:012d}", now)
    with pytest.raises(ReadRefused) as err:
        reads.remember("greedy", "nonce-000000000009", now)
    assert err.value.status == 429
    reads.remember("other", "nonce-000000000000", now)  # other keys still read
    with pytest.raises(ReadRefused) as err:
        reads.remember("other", "nonce-000000000000", now)
    assert err.value.status == 401


async def test_a_removed_member_stops_receiving_at_its_removal(
    live: LiveServer, world: World
) -> None:
    worker = world.workers[1]
    head, _ = world.authority.head(world.group)
    async with connect(live.ws_url) as ws:
        await ws.send(json.dumps(signed_subscribe(worker, world.group, head, world.clock.now)))
        await ws.send(json.dumps({"type": "BARRIER"}))  # frames are handled in order
        assert json.loads(await ws.recv())["code"] == "invalid_frame"  # so it is subscribed
        world.ok(world.coordinator, "member.remove", {"agent_id": worker.agent_id})
        removal = json.loads(await ws.recv())
        assert removal["event"]["type"] == "member.removed"
        err = json.loads(await ws.recv())
        assert err["type"] == "ERROR" and err["code"] == "unauthorized"
        world.ok(world.coordinator, "mission.create", {"mission_id": "secret", "title": "x"})
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(ws.recv(), 0.5)


async def test_a_captured_subscribe_cannot_be_replayed(live: LiveServer, world: World) -> None:
    frame = json.dumps(signed_subscribe(world.workers[0], world.group, 0, world.clock.now))
    async with connect(live.ws_url) as first:
        await first.send(frame)
        assert json.loads(await first.recv())["type"] == "EVENT"
    async with connect(live.ws_url) as second:
        await second.send(frame)
        err = json.loads(await second.recv())
        assert (
            err["type"] == "ERROR" and err["code"] == "unauthorized" and "replay" in err["reason"]
        )


async def test_leases_and_command_ids_cannot_be_probed(live: LiveServer, world: World) -> None:
    world.authorize("a")
    offer = world.offer("a", world.workers[0])
    assert world.accept(world.workers[0], "a", offer).accepted
    lease_id = world.start(world.workers[0], "a")["lease_id"]
    stranger = Actor.generate("probe")
    async with httpx.AsyncClient(base_url=live.url) as anon, signed_http(live.url, stranger) as s:
        assert (await anon.get("/v1/leases/nope")).status_code == 401
        assert (await s.get("/v1/leases/nope")).status_code == 403
        assert (await s.get(f"/v1/leases/{lease_id}")).status_code == 403
    # a self-signed Command naming the coordinator and one of its ids learns nothing
    used = world.authority.query("SELECT command_id FROM commands WHERE actor='coordinator'")
    probe = Actor(world.coordinator.agent_id, stranger.key).command(
        "group.create",
        world.group,
        {"public_key": stranger.public_key},
        command_id=used[0]["command_id"],
    )
    async with AuthorityClient(live.url) as client:
        r = await client.submit(probe)
    assert r.rejection is not None and r.rejection.code == "operator_required"


async def test_a_slow_body_is_cut_off(
    live: LiveServer, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    from missionweave.authority.http import _limits

    monkeypatch.setattr(_limits, "BODY_TIMEOUT_S", 0.5)

    async def trickle() -> Any:
        yield b'{"command_id":'
        await asyncio.sleep(5)
        yield b'"x"}'

    async with httpx.AsyncClient(base_url=live.url, timeout=10) as http:
        r = await http.post(
            "/v1/commands", content=trickle(), headers={"content-type": "application/json"}
        )
    assert r.status_code == 408 and r.json()["code"] == "body_timeout"


def test_the_replay_memory_forgets_by_expiry_and_spares_operators() -> None:
    """A nonce dated far ahead holds back nobody's expiry; members of other Groups together
    cannot lock an operator out (second attack round, 2026-12-01)."""
    from missionweave.authority.wire._readsig import MAX_SKEW_MS, ReadRefused, ReadVerifier

    clock = [1_800_000_000_000]
    reads = ReadVerifier(lambda: clock[0], max_nonces=3, max_nonces_per_key=2)
    reads.remember("k", "ahead-0000000000", clock[0] + MAX_SKEW_MS)  # kept for two windows
    reads.remember("k", "now-000000000000", clock[0])
    clock[0] += MAX_SKEW_MS + 2  # the second expired; the first not yet
    reads.remember("k", "later-0000000000", clock[0])
    reads.remember("m", "fills-0000000000", clock[0])  # three non-operator nonces: full
    with pytest.raises(ReadRefused) as err:
        reads.remember("n", "other-0000000000", clock[0])
    assert err.value.status == 429
    reads.remember("op", "operator-00000000", clock[0], operator=True)


async def test_a_large_log_is_read_in_pages_bounded_by_size(live: LiveServer, world: World) -> None:
    """Events near the Command size bound are read a few at a time (no read costs the server
    more than MAX_PAGE_BYTES); the client reads on until it has what it asked for."""
    from missionweave.authority.http._limits import MAX_PAGE_BYTES

    world.authorize("a")
    offer = world.offer("a", world.workers[0])
    assert world.accept(world.workers[0], "a", offer).accepted
    world.start(world.workers[0], "a")
    first = world.authority.head(world.group)[0]
    for i in range(4):  # each Event holds the checkpoint twice: in its body and its Command
        world.ok(
            world.workers[0],
            "progress.report",
            world.leased("a", report={"phase": "padding"}, checkpoint={"pad": f"{i}" * 900_000}),
        )
    head = world.authority.head(world.group)[0]
    async with signed_http(live.url, world.workers[1], timeout=30) as http:
        r = await http.get(
            f"/v1/groups/{world.group}/events", params={"after_sequence": first, "limit": 100}
        )
    page = r.json()
    assert 1 <= len(page["events"]) < head - first and page["head_seq"] == head
    assert len(r.content) <= MAX_PAGE_BYTES + 4 * 1024 * 1024  # one Event may pass the bound
    async with AuthorityClient(live.url, signing_key=world.workers[1].key) as client:
        events = await client.events(world.group, first, 100)
    assert [e.seq for e in events] == list(range(first + 1, head + 1))


async def test_a_strangers_lease_reads_all_look_alike(live: LiveServer, world: World) -> None:
    world.authorize("a")
    offer = world.offer("a", world.workers[0])
    assert world.accept(world.workers[0], "a", offer).accepted
    lease_id = world.start(world.workers[0], "a")["lease_id"]
    async with signed_http(live.url, Actor.generate("probe")) as s:
        there, missing = await s.get(f"/v1/leases/{lease_id}"), await s.get("/v1/leases/nope")
    assert there.status_code == missing.status_code == 403
    assert there.json() == missing.json()


@pytest.mark.parametrize(
    ("agent_id", "code"),
    [
        ("\u0430lice", "mixed_script_id"),  # a Cyrillic а among Latin letters
        ("worker-l", "confusable_id"),  # looks like worker-1 (l / 1)
        ("w\u043erker-0", "mixed_script_id"),  # Cyrillic о
        ("\u0430\u043b\u0438\u0441\u0430", None),  # алиса: wholly Cyrillic
        ("\u30a8\u30fc\u30b8\u30a7\u30f3\u30c8\u592a\u90ce", None),  # Japanese: Katakana + Han
        ("carol-2", None),
    ],
)
def test_one_identity_per_look__MW_11_3_b(tmp_path: Path, agent_id: str, code: str | None) -> None:
    """UTS #39 on member ids: mixed-script ids and ids confusable with an existing member's are
    refused (and write nothing); a wholly non-Latin id is a name like any other."""
    w = make_world(tmp_path / "a.db")
    other = Actor.generate(agent_id)
    body = {"agent_id": agent_id, "public_key": other.public_key, "roles": ["worker"]}
    w.judged(code, w.coordinator, "member.add", body)
    if code is None:
        other.membership_epochs[w.group] = 1
        opened = w.authority.submit(
            other.command("session.open", None, {}, issued_at_ms=w.clock.now)
        )
        assert opened.accepted, opened.rejection


def test_a_group_id_confusable_with_an_existing_one_is_refused__MW_11_3_b(
    tmp_path: Path,
) -> None:
    w = make_world(tmp_path / "a.db")  # Group g1
    coord = w.coordinator
    for gid, code in (("gl", "confusable_id"), ("g2", None), ("\u0261\u0031", "confusable_id")):
        body = {"public_key": coord.public_key, "roles": ["owner"]}
        r = w.authority.submit(coord.command("group.create", gid, body, issued_at_ms=w.clock.now))
        assert (r.rejection.code if r.rejection else None) == code, (gid, r.rejection)
