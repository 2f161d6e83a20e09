"""Artifacts published from handlers, end to end on the REAL Temporal dev server with real agent
runtimes and a real Authority, which alone holds the filesystem artifact store:
``WorkContext.publish`` stores the bytes outside the log (through the Authority's write grant),
signs the manifest and registers ``artifact.published`` under the lease (MW-13.1-a/b,
MW-11.3-c); a dependent WorkItem fetches its dependency's Artifact (verified read, MW-13.1-d)
and derives one from it, and ``missionweave artifacts lineage`` shows the provenance across the
two WorkItems (MW-13.1-c), read from the Group's log with a member's signed reads."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from missionweave.artifacts import ArtifactIntegrityError, ManifestIndex
from missionweave.authority import verify_log
from missionweave.protocol import Event, verify_manifest
from missionweave.protocol.temporal_contract import MissionResult
from missionweave.worker import HandlerRegistry, Submission, WorkContext
from tests.support.artifact_servers import S3Endpoint, corrupt
from tests.support.mission_harness import (
    MW,
    MissionStack,
    contract,
    mission_stack,
    stop_process,
    work_items,
)
from tests.support.waits import WAIT_S, until

#: Content no Event may carry (MW-13.1-a).
SECRET = b"row-1,confidential-payload-7f3a\nrow-2,more\n"


async def cli(*args: str) -> tuple[int, str, str]:
    """Run ``missionweave ARGS`` as a user does: (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        MW, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), WAIT_S)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def log(ms: MissionStack) -> list[Event]:
    auth = ms.stack.authority
    verify_log(auth.store, ms.group, auth.public_key)
    return list(auth.all_events(ms.group))


async def result(ms: MissionStack, mission_id: str, items: list[dict[str, Any]]) -> MissionResult:
    handle = await ms.start(ms.spec(mission_id, items))
    return await asyncio.wait_for(handle.result(), WAIT_S)


def registry(seen: dict[str, Any]) -> HandlerRegistry:
    """``demo.step`` publishes raw CSV; ``demo.derive`` fetches its dependency's Artifact and
    publishes a JSON summary derived from it (``sources``)."""
    reg = HandlerRegistry()

    @reg.handler("demo.step", version="1.0")
    async def step(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        ref = await ctx.publish(
            SECRET, "text/csv", classification="confidential", tool_versions={"exporter": "2.1"}
        )
        seen["lease"] = ctx.lease.lease_id
        seen["ref"] = ref
        done = ctx.evidence("done", method="test", artifacts=[ref.hash])
        return Submission(outputs={"result": {"rows": 2}}, evidence=[done])

    @reg.handler("demo.derive", version="1.0")
    async def derive(ctx: WorkContext, input: dict[str, Any]) -> Submission:
        (raw,) = ctx.dependency_artifacts["a"]
        data = await ctx.fetch(raw)
        rows = len(data.decode().splitlines())
        ref = await ctx.publish(
            json.dumps({"rows": rows}).encode(),
            "application/json",
            schema_id="summary@1",
            sources=[raw],
        )
        seen["derived"] = ref.hash
        done = ctx.evidence("done", method="count rows", artifacts=[ref.hash])
        return Submission(outputs={"result": {"rows": rows}}, evidence=[done])

    return reg


async def test_publish_from_handler_stores_signs_and_registers__MW_13_1_a__MW_13_1_b__MW_11_3_c(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}
    async with mission_stack(dev_env, tmp_path) as ms:
        ada = await ms.agent("ada", registry(seen))
        res = await result(ms, "publish", work_items({"a": []}))
        assert res.status == "completed"
        (a,) = res.items
        h = hashlib.sha256(SECRET).hexdigest()
        # the published hash joined the submission by itself, and the review verified it
        assert a.artifacts == [h] and seen["ref"].hash == h and seen["ref"].size == len(SECRET)
        integrity = next(st for st in a.review if st["step"] == "integrity")
        assert integrity["passed"]
        assert [(e["criterion"], e["result"]) for e in integrity["evidence"]] == [
            ("artifact_integrity", "pass")
        ]
        # stored outside the log, content-addressed in the Group's namespace (MW-13.1-a,
        # MW-13.3-d), by way of the Authority's write grant: the agent holds no store
        group_store = ms.artifacts.for_group(ms.group)
        assert group_store.get(h) == SECRET and not ms.artifacts.exists(h)
        events = log(ms)
        assert not any(b"confidential-payload" in e.model_dump_json().encode() for e in events)
        # signed manifest with every MW-13.1-b field (MW-13.1-b), indexed by the review from
        # the Group's log
        (signed,) = ManifestIndex(group_store).get(h)
        assert verify_manifest(signed, ada.actor.public_key)
        m = signed.manifest
        assert (m.producer, m.agent_card_version, m.mission_id, m.group_id, m.work_item_id) == (
            "ada",
            2,
            "publish",
            ms.group,
            "a",
        )
        assert (m.media_type, m.classification.value, m.size_bytes) == (
            "text/csv",
            "confidential",
            len(SECRET),
        )
        assert m.tool_versions == {"exporter": "2.1"}
        assert m.capability_versions == {"demo.step": "1.0"}
        # the retrieval URI: where a member asks the Authority for it
        assert m.uri == f"{ms.stack.url}/v1/groups/{ms.group}/artifacts/{h}" and m.sources == []
        # registered with the Authority under the current lease (MW-11.3-c)
        (pub,) = [e for e in events if e.type == "artifact.published"]
        (started,) = [e for e in events if e.type == "work.started"]
        assert pub.actor == "ada" and pub.work_item_id == "a"
        assert pub.body["lease_id"] == seen["lease"] == started.body["lease"]["lease_id"]
        assert pub.body["manifest_id"] == signed.manifest_id
        assert pub.command is not None and pub.command["body"]["ownership_epoch"] == 1
        submitted = next(e for e in events if e.type == "work.submitted")
        assert pub.seq < submitted.seq and submitted.body["artifacts"] == [h]

        # a later read of corrupted content is refused (MW-13.1-d)
        corrupt(group_store, h, b"tampered")
        with pytest.raises(ArtifactIntegrityError):
            group_store.get(h)


async def test_lineage_across_two_work_items__MW_13_1_c(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """``b`` depends on ``a``: it receives ``a``'s Artifact hash, fetches it verified, and
    publishes a summary whose manifest names it as source; ``missionweave artifacts lineage``
    prints that provenance as a tree and as Mermaid."""
    seen: dict[str, Any] = {}
    schemas = {"summary@1": {"type": "object", "required": ["rows"]}}
    async with mission_stack(dev_env, tmp_path, schemas=schemas) as ms:
        await ms.agent("ada", registry(seen), capabilities=("demo.step@1.0", "demo.derive@1.0"))
        res = await result(
            ms,
            "lineage",
            [
                {"work_item_id": "a", "contract": contract().wire()},
                {
                    "work_item_id": "b",
                    "dependencies": ["a"],
                    "contract": contract(
                        ["demo.derive@1.0"],
                        deliverables=[{"name": "summary", "schema_id": "summary@1"}],
                    ).wire(),
                },
            ],
        )
        assert res.status == "completed"
        raw, derived = hashlib.sha256(SECRET).hexdigest(), seen["derived"]
        b = next(i for i in res.items if i.work_item_id == "b")
        assert b.artifacts == [derived] and b.outputs["result"] == {"rows": 2}
        schema = next(
            e for st in b.review for e in st["evidence"] if e["criterion"] == "schema:summary"
        )
        assert schema["result"] == "pass" and schema["artifacts"] == [derived]
        (signed,) = ManifestIndex(ms.artifacts.for_group(ms.group)).get(derived)
        assert signed.manifest.sources == [raw] and signed.manifest.work_item_id == "b"

        # a member's signed reads of the Group's log (the coordinator's key here)
        reader = (
            *("--group", ms.group, "--authority-url", ms.stack.url),
            *("--key", str(ms.stack.key_file("coordinator"))),
        )
        code, out, err = await cli("artifacts", "lineage", derived, *reader)
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0].startswith(f"{derived}  application/json ")
        assert "by ada [mission lineage, item b, internal]" in lines[0]
        assert lines[1].startswith(f"└── {raw}  text/csv ")
        assert "[mission lineage, item a, confidential]" in lines[1]
        code, out, err = await cli("artifacts", "lineage", derived, *reader, "--mermaid")
        assert code == 0, err
        assert f"a{raw[:16]} --> a{derived[:16]}" in out


async def test_cli_artifact_options_and_approve_bad_input() -> None:
    """The processes that hold the artifact store — ``authority serve`` and ``coordinator`` —
    take its options; a ``worker`` holds none (MW-13.3-d: it reaches Artifacts through the
    Authority's grants); ``approve --reject`` without a reason is one line and exit code 2."""
    for command in (("authority", "serve"), ("coordinator",), ("worker",)):
        code, out, _ = await cli(*command, "--help")
        assert code == 0
        for option in ("--artifacts", "--s3-endpoint", "--s3-bucket", "--s3-secure"):
            assert (option in out) == (command != ("worker",)), (command, option)
    code, _, err = await cli("approve", "--mission", "m", "--key", "nokey.pem", "--reject")
    assert code == 2 and err.strip() == "error: --reject needs --reason"


def _environ_and_argv(pid: int) -> tuple[list[bytes], list[bytes]]:
    """A running process's environment (``NAME=value``) and arguments, as the kernel has them."""
    proc = Path("/proc") / str(pid)
    return (proc / "environ").read_bytes().split(b"\0"), (proc / "cmdline").read_bytes().split(
        b"\0"
    )


async def test_agent_process_holds_no_store_credential_with_s3__MW_13_3_d(
    dev_env: WorkflowEnvironment, tmp_path: Path, s3_server: S3Endpoint
) -> None:
    """The Authority serves an S3 bucket (moto); an agent run as ``missionweave worker``
    publishes an Artifact and, in a dependent WorkItem, fetches it and derives another — with
    no S3 option, no credential in its environment, nothing but its own key: every object
    comes and goes through the Authority's presigned URLs, into the Group's namespace."""
    from tests.support.artifact_handlers import CONTENT

    bucket = s3_server.store()
    async with mission_stack(dev_env, tmp_path, artifact_store=bucket) as ms:
        await ms.process_member("ada", ["art.publish@1.0", "art.derive@1.0"])
        proc = await ms.agent_process("ada", "tests.support.artifact_handlers")
        items = [
            {"work_item_id": "a", "contract": contract(["art.publish@1.0"]).wire()},
            {
                "work_item_id": "b",
                "dependencies": ["a"],
                "contract": contract(["art.derive@1.0"]).wire(),
            },
        ]
        try:
            presence = ms.stack.client.presence
            present = await until("ada's Presence", lambda: presence(ms.group), timeout_s=60)
            assert "ada" in present
            handle = await ms.start(ms.spec("s3", items))
            try:
                res = await asyncio.wait_for(handle.result(), 90)  # a bound, not a speed claim
            except TimeoutError:
                log_tail = (tmp_path / "ada.log").read_text(errors="replace")[-4000:]
                raise AssertionError(f"the Mission did not end; ada's log:\n{log_tail}") from None
            environ, argv = _environ_and_argv(proc.pid)
        finally:
            await stop_process(proc)
        assert res.status == "completed", (tmp_path / "ada.log").read_text()
        names = {v.split(b"=", 1)[0] for v in environ}
        secret = (b"KEY", b"SECRET", b"TOKEN", b"PASSWORD", b"USER")  # not AWS_CA_BUNDLE
        store = (b"MISSIONWEAVE_S3", b"AWS_", b"MINIO")
        assert not {n for n in names if n.startswith(store) and any(w in n for w in secret)}
        assert not [w for w in argv if w.startswith((b"--s3", b"--artifacts"))]
        raw = hashlib.sha256(CONTENT).hexdigest()
        b = next(i for i in res.items if i.work_item_id == "b")
        assert b.outputs["result"] == {"rows": 2}
        group = bucket.for_group(ms.group)
        assert group.get(raw) == CONTENT and group.exists(b.artifacts[0])
        assert not bucket.exists(raw)  # nothing outside the Group's namespace
