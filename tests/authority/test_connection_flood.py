"""Bounds no stranger can exhaust (issue 37 item 5, the connections): over a real uvicorn
server on loopback, a stranger's thousands of unsigned WebSocket upgrades that never subscribe
do not crowd out a member — ``/healthz``, a signed read, a Command and a SUBSCRIBE are all
served while they are held — unauthenticated connections have a budget of their own (one more
evicts the oldest), and a connection that does not authenticate within its deadline is closed.
Only a verified signature of a member or an operator authenticates an HTTP connection: a
stranger keeping connections busy with unsigned requests is closed at the deadline all the
same, and a member's request in flight then is not cut. No timing is asserted
(bench/socket_flood.py measures ``/healthz`` under the flood, ``--keep-busy`` this one).

Before: one uvicorn ``limit_concurrency`` (4096) counted every socket, so 4,200 held upgrades
made every request of every member answer 503 — the first test fails so on that server.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from missionweave.authority import now_ms
from missionweave.authority.http import ConnectionLimits
from missionweave.authority.http._connections import ConnectionBudget, raise_open_files
from missionweave.protocol import Actor, Command
from tests.support.raw_http import RawHTTP
from tests.support.serving import LiveServer, mission_cmd, signed_http, signed_subscribe
from tests.support.waits import WAIT_S, until
from tests.support.world import World

#: The issue's figure: unsigned upgrades a stranger held on main (b92c09b), all 503 meanwhile.
FLOOD = 4200
#: Open files this process keeps beyond the flood's sockets (two per socket: both ends here).
SPARE_FILES = 512


def _room_for(sockets: int) -> int:
    """Raise this process's soft open-file limit so that ``sockets`` loopback connections
    (both ends in this process) fit, as far as the hard limit allows; how many fit."""
    soft = raise_open_files(2 * sockets + SPARE_FILES)
    return min(sockets, (soft - SPARE_FILES) // 2)


async def _upgrade(server: LiveServer) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A stranger's WebSocket upgrade of ``/v1/stream``, written raw and never followed by a
    frame; its ``101`` read."""
    reader, writer = await asyncio.open_connection(server.host, server.port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        (
            f"GET /v1/stream HTTP/1.1\r\nHost: {server.host}:{server.port}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101"), head[:80]
    return reader, writer


async def _closed_by_server(reader: asyncio.StreamReader) -> bool:
    """Whether the server has closed this raw connection (EOF, or a reset)."""
    try:
        while await asyncio.wait_for(reader.read(4096), WAIT_S):
            pass  # a WebSocket close frame, then EOF
    except ConnectionError:
        return True
    except TimeoutError:
        return False
    return True


async def _members_are_served(server: LiveServer, world: World) -> None:
    """``/healthz``, a member's signed page read, a Command and a member's SUBSCRIBE."""
    async with signed_http(server.url, world.workers[1], timeout=WAIT_S) as http:
        assert (await http.get("/healthz")).status_code == 200
        page = await http.get(f"/v1/groups/{world.group}/events")
        assert page.status_code == 200 and page.json()["events"]
        cmd = mission_cmd(world, "during-the-flood")
        answer = await http.post("/v1/commands", json=cmd.model_dump(mode="json"))
        assert answer.status_code == 200 and answer.json()["status"] == "accepted"
    async with connect(server.ws_url, open_timeout=WAIT_S) as ws:
        await ws.send(json.dumps(signed_subscribe(world.workers[1], world.group, 0, now_ms())))
        first = json.loads(await asyncio.wait_for(ws.recv(), WAIT_S))
        assert first["type"] == "EVENT" and first["event"]["seq"] == 1


async def test_members_are_served_while_a_stranger_holds_4200_sockets(world: World) -> None:
    """The issue's flood, every socket really held: a budget above it (so none is evicted) and
    a deadline past the test. This process raises its own open-file soft limit to hold both
    ends of every socket (2 × 4,200 + 512); where the hard limit forbids, it holds as many as
    fit (printed)."""
    n = _room_for(FLOOD)
    if n < FLOOD:
        print(f"the hard open-file limit holds {n} sockets here, not {FLOOD}")
    limits = ConnectionLimits(
        auth_timeout_s=WAIT_S * 10, max_unauthenticated=n + 100, max_connections=n + 200
    )
    server = LiveServer(world.authority, poll_interval_s=0.05, connection_limits=limits)
    await server.start()
    held: list[asyncio.StreamWriter] = []
    try:
        budget: ConnectionBudget = server.app.state.connection_budget
        for start in range(0, n, 200):  # 200 handshakes at a time: the loop stays responsive
            batch = await asyncio.gather(
                *(_upgrade(server) for _ in range(start, min(n, start + 200)))
            )
            held += [w for _, w in batch]
        assert budget.unauthenticated == n  # all held, none authenticated
        await _members_are_served(server, world)
        assert budget.unauthenticated == n  # still held while the members were served
    finally:
        for w in held:
            w.close()
        await server.stop()


async def test_one_connection_past_the_budget_evicts_the_oldest_unauthenticated(
    world: World,
) -> None:
    limits = ConnectionLimits(auth_timeout_s=WAIT_S * 10, max_unauthenticated=20)
    server = LiveServer(world.authority, poll_interval_s=0.05, connection_limits=limits)
    await server.start()
    strangers: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        budget: ConnectionBudget = server.app.state.connection_budget
        for _ in range(60):  # one at a time: each evicts the oldest once 20 are held
            strangers.append(await _upgrade(server))
        assert budget.unauthenticated == 20
        closed = await asyncio.gather(*(_closed_by_server(r) for r, _ in strangers[:40]))
        assert all(closed)  # the 40 oldest were evicted
        await _members_are_served(server, world)  # each newcomer evicted a stranger
        assert budget.unauthenticated <= 20
    finally:
        for _, w in strangers:
            w.close()
        await server.stop()


async def test_a_connection_that_never_authenticates_is_closed_at_its_deadline(
    world: World,
) -> None:
    limits = ConnectionLimits(auth_timeout_s=0.5)
    server = LiveServer(world.authority, poll_interval_s=0.05, connection_limits=limits)
    await server.start()
    try:
        budget: ConnectionBudget = server.app.state.connection_budget
        # a member's socket, authenticated by its SUBSCRIBE, outlives the deadline
        async with connect(server.ws_url, open_timeout=WAIT_S) as member:
            await member.send(
                json.dumps(signed_subscribe(world.workers[1], world.group, 0, now_ms()))
            )
            assert json.loads(await asyncio.wait_for(member.recv(), WAIT_S))["type"] == "EVENT"
            # a stranger's WebSocket is closed politely (1008), naming why
            async with connect(server.ws_url, open_timeout=WAIT_S) as ws:
                try:
                    await asyncio.wait_for(ws.recv(), WAIT_S)
                except ConnectionClosed as exc:
                    assert exc.rcvd is not None and exc.rcvd.code == 1008
                    assert "unauthenticated" in exc.rcvd.reason
                else:
                    raise AssertionError("the unauthenticated socket got a frame, not a close")
            # a TCP connection that sends nothing, and one whose request head never ends
            silent = await asyncio.open_connection(server.host, server.port)
            slow = await asyncio.open_connection(server.host, server.port)
            slow[1].write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            await slow[1].drain()
            assert await _closed_by_server(silent[0]) and await _closed_by_server(slow[0])
            for _, w in (silent, slow):
                w.close()
            await until("no unauthenticated connection left", lambda: budget.unauthenticated == 0)
            # the member's subscription still delivers
            world.ok(world.coordinator, "mission.create", {"mission_id": "later", "title": "x"})
            head, _ = world.authority.head(world.group)
            while (frame := json.loads(await asyncio.wait_for(member.recv(), WAIT_S)))["event"][
                "seq"
            ] < head:
                assert frame["type"] == "EVENT"
    finally:
        await server.stop()


async def test_an_upgrade_after_a_signed_read_is_unauthenticated_again(world: World) -> None:
    """Issue 37 item 5: an upgraded socket is judged by the stream alone. Its connection is
    authenticated by a member's signed read, then upgrades to ``/v1/stream``: the socket is
    unauthenticated again (only an accepted SUBSCRIBE proves a member on the stream), so the
    next stranger evicts it. Before, the upgrade kept the HTTP request's standing (then any
    request head's: a stranger's unsigned ``GET /healthz`` bought it) and held its place until
    the stream's idle bound (measured: 40 such sockets of a 40-connection server refused every
    member ~40 s)."""
    limits = ConnectionLimits(auth_timeout_s=WAIT_S * 10, max_unauthenticated=1)
    server = LiveServer(world.authority, poll_interval_s=0.05, connection_limits=limits)
    await server.start()
    writers: list[asyncio.StreamWriter] = []
    try:
        budget: ConnectionBudget = server.app.state.connection_budget
        raw = await RawHTTP.open(server.host, server.port)
        writers.append(raw.writer)
        status, _ = await raw.read(f"/v1/groups/{world.group}/events?limit=1", world.workers[1].key)
        assert status == 200
        assert budget.unauthenticated == 0  # a member's signed read: authenticated as HTTP
        key = base64.b64encode(os.urandom(16)).decode()
        await raw.send(
            "GET",
            "/v1/stream",
            headers={
                "Upgrade": "websocket",
                "Connection": "Upgrade",
                "Sec-WebSocket-Key": key,
                "Sec-WebSocket-Version": "13",
            },
        )
        assert (await raw.reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 101")
        assert budget.unauthenticated == 1  # the stream decides now
        _, newcomer = await _upgrade(server)  # one more stranger evicts it
        writers.append(newcomer)
        assert await _closed_by_server(raw.reader)
        await _members_are_served(server, world)
    finally:
        for w in writers:
            w.close()
        await server.stop()


class _Budgeted:
    """A live server with connection ``limits`` and the raw connections a test opened to it
    (:meth:`connect`); :func:`_budgeted` closes them and stops the server."""

    def __init__(self, server: LiveServer) -> None:
        self.server = server
        self.budget: ConnectionBudget = server.app.state.connection_budget
        self.opened: list[RawHTTP] = []

    async def connect(self) -> RawHTTP:
        """A new raw HTTP connection to the server."""
        self.opened.append(await RawHTTP.open(self.server.host, self.server.port))
        return self.opened[-1]


@asynccontextmanager
async def _budgeted(world: World, limits: ConnectionLimits) -> AsyncIterator[_Budgeted]:
    server = LiveServer(world.authority, poll_interval_s=0.05, connection_limits=limits)
    await server.start()
    served = _Budgeted(server)
    try:
        yield served
    finally:
        for raw in served.opened:
            raw.close()
        await server.stop()


def _strangers_command(world: World) -> Command:
    """A Command signed validly by a key of no member (refused ``not_a_member``)."""
    return Actor.generate("stranger").command(
        "mission.create", world.group, {"mission_id": "x", "title": "x"}
    )


async def _keep_busy(raw: RawHTTP, answers: list[int]) -> None:
    """A stranger's connection kept busy: an unsigned ``GET /healthz`` every 0.2 s (each
    answer's status appended to ``answers``) until the server closes it."""
    try:
        while True:
            answers.append((await raw.ask("GET", "/healthz"))[0])
            await asyncio.sleep(0.2)
    except (ConnectionError, asyncio.IncompleteReadError):
        return


async def test_a_stranger_busy_with_unsigned_requests_is_closed_at_the_deadline(
    world: World,
) -> None:
    """Issue 37 item 5, the attack: a stranger holds every connection the server allows
    (``max_connections`` = the unauthenticated budget = 20), each kept busy with an unsigned
    ``GET /healthz`` — served, but no proof of a member. A member's signed read, a Command and
    a SUBSCRIBE are served while it holds them (each new connection evicts a stranger's), and
    every stranger's connection is closed at its deadline though it never fell idle. Before,
    the first request head authenticated a connection: the 20 were never closed, and the
    member's connections were refused (``over_limit``)."""
    n = 20
    limits = ConnectionLimits(auth_timeout_s=2.0, max_unauthenticated=n, max_connections=n)
    async with _budgeted(world, limits) as served:
        answers: list[list[int]] = [[] for _ in range(n)]
        strangers = [await served.connect() for _ in range(n)]
        busy = [
            asyncio.create_task(_keep_busy(r, a)) for r, a in zip(strangers, answers, strict=True)
        ]
        await until("every stranger is served", lambda: all(answers))
        budget = served.budget
        assert budget.unauthenticated == n and budget.connections == n  # all at the budget
        await _members_are_served(served.server, world)
        await asyncio.wait_for(asyncio.gather(*busy), WAIT_S)  # each ends when closed
        assert all(a and set(a) == {200} for a in answers)  # served until closed
        await until("no unauthenticated connection left", lambda: budget.unauthenticated == 0)


async def test_only_a_verified_signature_of_a_member_authenticates_a_connection(
    world: World,
) -> None:
    """A connection on which a member's signed read, or a member's Command, verified is not
    closed at the deadline; one that carried only an unsigned request, a bad signature, a
    stranger's valid signature (its own key) or a stranger's signed Command is."""
    async with _budgeted(world, ConnectionLimits(auth_timeout_s=0.5)) as served:
        page = f"/v1/groups/{world.group}/events?limit=1"
        member = world.workers[1]
        signed_read, signed_cmd = await served.connect(), await served.connect()
        assert (await signed_read.read(page, member.key))[0] == 200
        await signed_cmd.command(mission_cmd(world, "authenticates"))
        assert (await signed_cmd.answer())[0] == 200
        refused = [await served.connect() for _ in range(4)]
        assert (await refused[0].ask("GET", "/healthz"))[0] == 200
        assert (await refused[1].read(page, member.key, bad=True))[0] == 401
        assert (await refused[2].read(page, Actor.generate("stranger").key))[0] == 403
        await refused[3].command(_strangers_command(world))
        assert (await refused[3].answer())[0] == 409  # not_a_member
        closed = await asyncio.gather(*(r.closed_by_server() for r in refused))
        assert all(closed)
        # their deadlines passed (the refused ones were opened after them): both still answer
        for raw in (signed_read, signed_cmd):
            assert (await raw.ask("GET", "/healthz"))[0] == 200
        assert served.budget.unauthenticated == 0


async def test_a_request_in_flight_at_the_deadline_is_answered(world: World) -> None:
    """A request whose body is still arriving at its connection's deadline is not cut: a
    member's Command completes and authenticates its connection (which then stays), a
    stranger's is answered and its connection closed right after. Before, at the deadline the
    transport was closed whatever was in flight."""
    limits = ConnectionLimits(auth_timeout_s=0.5, in_flight_grace_s=WAIT_S)
    async with _budgeted(world, limits) as served:
        member, stranger = await served.connect(), await served.connect()
        await member.command(mission_cmd(world, "in-flight"), sent=10)
        await stranger.command(_strangers_command(world), sent=10)
        witness = await served.connect()  # opened after both
        assert await witness.closed_by_server()  # so their deadlines have passed too
        await member.finish()
        status, body = await member.answer()
        assert status == 200 and json.loads(body)["status"] == "accepted"
        await stranger.finish()
        assert (await stranger.answer())[0] == 409
        assert await stranger.closed_by_server()
        assert (await member.ask("GET", "/healthz"))[0] == 200  # authenticated: kept


async def test_a_body_that_never_ends_is_closed_after_the_in_flight_grace(world: World) -> None:
    limits = ConnectionLimits(auth_timeout_s=0.5, in_flight_grace_s=0.5)
    async with _budgeted(world, limits) as served:
        slow = await served.connect()
        await slow.command(mission_cmd(world, "never-ends"), sent=10)
        assert await slow.closed_by_server()
