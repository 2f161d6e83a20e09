"""A tool gateway on loopback checks the capability tokens agents hand it with the Authority's
``POST /v1/capability-tokens/verify`` (MW-11.3-d): both are real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest_asyncio
import uvicorn
from fastapi import Body, FastAPI
from fastapi.responses import JSONResponse

from missionweave.authority.client import AuthorityClient
from tests.support.serving import LiveServer, _Server
from tests.support.world import World

TOOLS = ["search", "fetch"]


def gateway_app(authority_url: str) -> FastAPI:
    """A tool gateway: ``POST /tools/{operation}`` with ``{"token": …}`` runs the tool only
    when the Authority says the token allows that operation now; 403 with its code otherwise.
    It holds no key: the token is the credential."""
    app = FastAPI()
    app.state.done = []

    @app.post("/tools/{operation}")
    async def call(operation: str, body: dict[str, Any] = Body(...)) -> JSONResponse:
        async with AuthorityClient(authority_url) as authority:
            check = await authority.verify_token(body["token"], operation)
        if not check.valid:
            return JSONResponse({"code": check.code, "reason": check.reason}, status_code=403)
        app.state.done.append((operation, check.lease_id))
        return JSONResponse({"done": operation, "lease_id": check.lease_id})

    return app


@pytest_asyncio.fixture
async def gateway(live: LiveServer) -> AsyncIterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = _Server(uvicorn.Config(gateway_app(live.url), log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


async def _lease(w: World) -> dict[str, Any]:
    await asyncio.to_thread(w.authorize, "a", allowed_tools=TOOLS)
    offer = await asyncio.to_thread(w.offer, "a", w.workers[0])
    assert (await asyncio.to_thread(w.accept, w.workers[0], "a", offer)).accepted
    r = await asyncio.to_thread(
        w.ok, w.workers[0], "work.start", {"work_item_id": "a", "ownership_epoch": 1}
    )
    w.leases["a"] = r.reply["lease"]
    token: dict[str, Any] = r.reply["capability_token"]
    return token


async def _send(w: World, live: LiveServer, type: str, **body: Any) -> dict[str, Any]:
    """Submit a Command over the Authority's HTTP API, as the agent does."""
    cmd = w.workers[0].command(type, w.group, w.leased("a", **body), issued_at_ms=w.clock.now)
    async with AuthorityClient(live.url) as client:
        r = await client.submit(cmd)
    assert r.accepted, r.rejection
    return r.reply


async def test_mw_11_3_d_tool_gateway_honours_rotation_narrowing_and_lease_end(
    world: World,
    live: LiveServer,
    gateway: str,
) -> None:
    first = await _lease(world)
    async with httpx.AsyncClient(base_url=gateway) as tools:

        async def call(op: str, token: dict[str, Any]) -> tuple[int, dict[str, Any]]:
            resp = await tools.post(f"/tools/{op}", json={"token": token})
            return resp.status_code, resp.json()

        assert await call("search", first) == (
            200,
            {"done": "search", "lease_id": world.leases["a"]["lease_id"]},
        )
        rotated = (await _send(world, live, "capability_token.rotate"))["capability_token"]
        assert (await call("search", rotated))[0] == 200  # the rotated token works
        assert await call("search", first) == (
            403,
            {
                "code": "token_superseded",
                "reason": "the token was rotated or narrowed; its holder has a new one",
            },
        )
        narrow = (await _send(world, live, "capability_token.rotate", scope=["search"]))[
            "capability_token"
        ]
        assert (await call("search", narrow))[0] == 200
        status, body = await call("fetch", narrow)  # outside the narrowed scope
        assert (status, body["code"]) == (403, "operation_not_in_scope")
        assert (await call("fetch", rotated))[1]["code"] == "token_superseded"
        await _send(world, live, "work.submit", **world.report("a", world.workers[0]))
        status, body = await call("search", narrow)  # the lease ended with the submission
        assert (status, body["code"]) == (403, "lease_ended")


async def test_mw_11_3_d_verify_endpoint_refuses_bad_input_with_a_structured_422(
    world: World,
    live: LiveServer,
) -> None:
    token = await _lease(world)
    public = {k: v for k, v in token.items() if k != "signature"}
    async with httpx.AsyncClient(base_url=live.url) as http:
        bad: list[dict[str, Any]] = [
            {},
            {"token": public},
            {"token": token, "operation": ""},
            {"token": {**token, "expires_at_ms": "soon"}},
            {"token": token, "x": 1},
        ]
        for body in bad:
            resp = await http.post("/v1/capability-tokens/verify", json=body)
            assert resp.status_code == 422, body
            assert resp.json()["code"] == "invalid_request" and resp.json()["detail"]["errors"]
        ok = await http.post("/v1/capability-tokens/verify", json={"token": token})
        assert ok.status_code == 200 and ok.json()["valid"] is True
        assert ok.json()["scope"] == sorted(TOOLS)


async def test_mw_11_3_d_a_handler_narrows_its_token_before_handing_it_to_a_tool(
    world: World,
    live: LiveServer,
    gateway: str,
) -> None:
    """``ctx.rotate_capability_token(scope)`` in a real activity: ``ctx.capability_token`` is
    the narrowed token at once, the gateway honours it, and a widening is a ValueError."""
    from missionweave.protocol.temporal_contract import OutcomeKind
    from missionweave.worker import Submission, WorkContext
    from tests.support.executor_harness import VerifyInput, grant, run

    worker = world.workers[0]
    work = grant(world, "a", worker, allowed_tools=TOOLS)
    seen: list[Any] = []

    async def handler(ctx: WorkContext, inp: VerifyInput) -> Submission:
        before = ctx.capability_token
        narrow = await ctx.rotate_capability_token(["search"])
        assert ctx.capability_token == narrow and narrow["token_id"] != before["token_id"]
        try:
            await ctx.rotate_capability_token(["search", "fetch"])
        except ValueError as exc:
            seen.append(str(exc).split(":")[0])
        async with httpx.AsyncClient(base_url=gateway) as tools:
            for op, token in (("search", narrow), ("fetch", narrow), ("search", before)):
                resp = await tools.post(f"/tools/{op}", json={"token": token})
                seen.append((op, resp.status_code, resp.json().get("code")))
        return Submission(
            outputs={"report": {"tools": len(seen)}},  # the contract's deliverable, inline
            evidence=[
                ctx.evidence("hashes", method="sha256 compare"),
                ctx.evidence("schema", method="json-schema"),
            ],
        )

    async with AuthorityClient(live.url, signing_key=worker.key) as client:
        out = await run(client, worker, work, handler)
    assert out.kind is OutcomeKind.SUBMITTED, out
    assert seen == [
        "scope_not_narrower",
        ("search", 200, None),
        ("fetch", 403, "operation_not_in_scope"),
        ("search", 403, "token_superseded"),
    ]
