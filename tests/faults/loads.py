"""The fault suite's loads (issue 37): a process of its own that a trial starts at its moment
and that stops by itself after ``--seconds``, printing one JSON line of what it got.

``python -m tests.faults.loads KIND --url URL --group G --seconds S [...]``:

* ``read-storm`` — ``--readers`` tasks each reading the Group's first page (``GET
  /v1/groups/G/events?after_sequence=0``, signed by ``--key``) back to back, and ``--subs``
  WebSocket subscriptions from sequence 0 held open (each re-subscribes when the server ends
  it); a ``429`` is counted and waited out for its ``Retry-After``;
* ``conn-flood`` — ``--sockets`` WebSocket upgrades of ``/v1/stream`` that never send a frame
  (no signature at all), 200 handshakes at a time, each reopened 0.5 s after the server closes
  it; this process raises its open-file soft limit to fit (``RLIMIT_NOFILE``);
* ``member-flood`` — ``--senders`` tasks of one member (``--key``, ``--agent``) sending
  ``work.propose`` of ``--mission`` back to back (a capability nobody has, so nothing is ever
  offered), one in ten carrying a 200 KB objective; ``Retry-After`` is ignored: a flood.

Every loop is bounded by ``--seconds`` and targets the loopback address it is given. Once the
load is under way (:func:`_ready`: each reader, subscription or sender answered once, all
sockets tried once, or 5 s) the file ``--ready`` is written, so that a trial starts its
Mission under the load.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import websockets

from missionweave.authority.client import AuthorityClient
from missionweave.authority.http._connections import raise_open_files
from missionweave.authority.wire._readsig import SignedReads
from missionweave.protocol import Actor, SigningKey, canonical_bytes

#: A capability no agent of the suite has: a flooder's proposals are never offered.
NOBODY = "fault.nobody@1.0"
#: Bytes of the large proposals' objective (one in ten proposals).
LARGE = 200_000


#: Seconds after which a load counts as under way whatever it got.
RAMP_S = 5.0


def _ready(a: argparse.Namespace, out: Counter[str], began: float, enough: int) -> None:
    """Write ``a.ready`` once ``out`` holds ``enough`` answers or :data:`RAMP_S` passed."""
    if a.ready.exists():
        return
    if sum(v for k, v in out.items() if k != "open-file limit") >= enough or (
        time.monotonic() - began > RAMP_S
    ):
        a.ready.write_text("under way\n")


async def _ramp(a: argparse.Namespace, out: Counter[str], until: float, enough: int) -> None:
    """Watch ``out`` until the load is under way (:func:`_ready`) or ``until``."""
    began = time.monotonic()
    while not a.ready.exists() and time.monotonic() < until:
        _ready(a, out, began, enough)
        await asyncio.sleep(0.1)


def _retry_after(resp: httpx.Response) -> float:
    try:
        return min(5.0, float(resp.headers.get("retry-after", "1")))
    except ValueError:
        return 1.0


async def _reader(http: httpx.AsyncClient, group: str, until: float, out: Counter[str]) -> None:
    while time.monotonic() < until:
        try:
            r = await http.get(f"/v1/groups/{group}/events", params={"after_sequence": 0})
        except httpx.HTTPError as exc:
            out[f"read {type(exc).__name__}"] += 1
            await asyncio.sleep(0.2)
            continue
        out[f"read {r.status_code}"] += 1
        if r.status_code == 429:
            await asyncio.sleep(_retry_after(r))


def _subscribe_frame(actor: Actor, group: str) -> str:
    frame: dict[str, Any] = {
        "type": "SUBSCRIBE",
        "group": group,
        "afterSequence": 0,
        "agent": actor.agent_id,
        "issuedAtMs": time.time_ns() // 1_000_000,
        "nonce": uuid.uuid4().hex,
    }
    frame["signature"] = actor.key.sign(canonical_bytes(frame))
    return json.dumps(frame)


async def _subscriber(ws_url: str, actor: Actor, group: str, until: float, out: Counter[str]):  # type: ignore[no-untyped-def]
    while time.monotonic() < until:
        try:
            async with websockets.connect(ws_url, max_size=None, open_timeout=10) as ws:
                await ws.send(_subscribe_frame(actor, group))
                out["subscribed"] += 1
                while (left := until - time.monotonic()) > 0:
                    frame = json.loads(await asyncio.wait_for(ws.recv(), left))
                    out[f"frame {frame.get('type')}"] += 1
                    if frame.get("type") == "ERROR":
                        out[f"error {frame.get('code')}"] += 1
                        break
        except (TimeoutError, OSError, websockets.WebSocketException) as exc:
            out[f"subscription {type(exc).__name__}"] += 1
        await asyncio.sleep(0.5)


async def read_storm(a: argparse.Namespace, until: float) -> Counter[str]:
    """``a.readers`` page readers and ``a.subs`` subscriptions from sequence 0."""
    out: Counter[str] = Counter()
    actor = Actor(a.agent, SigningKey.from_file(a.key))
    ws_url = a.url.replace("http://", "ws://") + "/v1/stream"
    limits = httpx.Limits(max_connections=a.readers)
    async with httpx.AsyncClient(
        base_url=a.url, auth=SignedReads(actor.key), timeout=30, limits=limits
    ) as http:
        await asyncio.gather(
            *(_reader(http, a.group, until, out) for _ in range(a.readers)),
            *(_subscriber(ws_url, actor, a.group, until, out) for _ in range(a.subs)),
            _ramp(a, out, until, a.readers + a.subs),
        )
    return out


async def _upgrade(port: int, out: Counter[str]) -> asyncio.StreamReader | None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            f"GET /v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
        out[f"upgrade {type(exc).__name__}"] += 1
        return None
    out["upgraded" if head.startswith(b"HTTP/1.1 101") else "refused"] += 1
    return reader


async def _hold(port: int, until: float, out: Counter[str], held: list[int]) -> None:
    while time.monotonic() < until:
        reader = await _upgrade(port, out)
        if reader is not None:
            held[0] += 1
            try:
                while (left := until - time.monotonic()) > 0:
                    if not await asyncio.wait_for(reader.read(4096), left):
                        break  # EOF: the server closed it
                if time.monotonic() < until:
                    out["closed by the server"] += 1
            except (TimeoutError, OSError):
                pass
            finally:
                held[0] -= 1
                if reader._transport is not None:  # type: ignore[attr-defined]
                    reader._transport.close()  # type: ignore[attr-defined]
        await asyncio.sleep(0.5)


async def conn_flood(a: argparse.Namespace, until: float) -> Counter[str]:
    """``a.sockets`` unsigned upgrades held (the most held at once is reported)."""
    out: Counter[str] = Counter()
    out["open-file limit"] = raise_open_files(a.sockets + 256)
    port = int(a.url.rsplit(":", 1)[1])
    held = [0]
    tasks = []
    for _ in range(0, a.sockets, 200):
        tasks += [asyncio.create_task(_hold(port, until, out, held)) for _i in range(200)]
        await asyncio.sleep(0.2)
    a.ready.write_text("under way\n")  # every socket tried once
    while time.monotonic() < until:
        out["most held"] = max(out["most held"], held[0])
        await asyncio.sleep(0.5)
    await asyncio.gather(*tasks)
    return out


async def _sender(
    http: httpx.AsyncClient, actor: Actor, a: argparse.Namespace, until: float, out: Counter[str]
) -> None:
    n = 0
    while time.monotonic() < until:
        n += 1
        objective = "flood" if n % 10 else "x" * LARGE
        contract = {
            "objective": objective,
            "deliverables": [{"name": "result"}],
            "acceptance_criteria": [
                {"id": "done", "description": "done", "evidence_required": "none"}
            ],
            "required_capabilities": [NOBODY],
            "timeouts": {"start_deadline_ms": 60_000, "lease_ms": 2_000, "heartbeat_ms": 500},
        }
        body = {
            "work_item_id": f"flood-{uuid.uuid4().hex[:12]}",
            "mission_id": a.mission,
            "contract": contract,
        }
        cmd = actor.command("work.propose", a.group, body)
        try:
            r = await http.post("/v1/commands", json=cmd.model_dump(mode="json"))
        except httpx.HTTPError as exc:
            out[f"command {type(exc).__name__}"] += 1
            await asyncio.sleep(0.1)
            continue
        try:
            got = r.json()
        except ValueError:
            got = {}
        code = (got.get("rejection") or {}).get("code") or got.get("status") or "?"
        out[f"command {r.status_code} {code}"] += 1


async def member_flood(a: argparse.Namespace, until: float) -> Counter[str]:
    """``a.senders`` concurrent senders of one member's ``work.propose``."""
    out: Counter[str] = Counter()
    actor = Actor(a.agent, SigningKey.from_file(a.key))
    async with AuthorityClient(a.url, signing_key=actor.key) as client:  # its Membership Epoch
        for info in await client.agents(a.group):
            if info.agent_id == actor.agent_id:
                actor.membership_epochs[a.group] = info.membership_epoch
    async with httpx.AsyncClient(base_url=a.url, timeout=30) as http:
        await asyncio.gather(
            *(_sender(http, actor, a, until, out) for _ in range(a.senders)),
            _ramp(a, out, until, 50),
        )
    return out


LOADS = {"read-storm": read_storm, "conn-flood": conn_flood, "member-flood": member_flood}


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m tests.faults.loads", description=__doc__)
    p.add_argument("kind", choices=sorted(LOADS))
    p.add_argument("--url", required=True, help="The Authority, http://127.0.0.1:PORT.")
    p.add_argument("--group", required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--key", type=Path, help="The member's key (read-storm, member-flood).")
    p.add_argument("--agent", default="visitor", help="The member's agent id.")
    p.add_argument("--mission", default="", help="The Mission a flood proposes into.")
    p.add_argument("--readers", type=int, default=300)
    p.add_argument("--subs", type=int, default=100)
    p.add_argument("--sockets", type=int, default=4_200)
    p.add_argument("--senders", type=int, default=4)
    p.add_argument("--out", type=Path, required=True, help="Where the JSON summary goes.")
    p.add_argument("--ready", type=Path, required=True, help="Written once under way.")
    a = p.parse_args()
    began = time.monotonic()
    got = asyncio.run(LOADS[a.kind](a, began + a.seconds))
    summary = {"kind": a.kind, "seconds": round(time.monotonic() - began, 1), **got}
    a.out.write_text(json.dumps(summary, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
