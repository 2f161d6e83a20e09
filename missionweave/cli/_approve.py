"""``missionweave approve``: a MissionOwner approves (or rejects) a reviewed WorkItem result.

The last step of the review (MW-13.2-b step 5). The command reads the Mission's ``status``
query to find the WorkItem awaiting approval and the digest of its review record, signs
``approval.grant_result`` (``--reject``: ``approval.deny_result``) with the owner's key, and
sends it as the ``approve`` Update to ``mission-<M>``; the workflow forwards it to the
Authority, which checks the signature and the ``mission_owner`` role. A refusal leaves the
WorkItem waiting and exits 1 with one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..protocol import CommandType, RejectionCode
from . import _options as opt
from ._common import CliError, connect_temporal, load_key, run_client_command

if TYPE_CHECKING:
    from ..protocol import SigningKey
    from ..protocol.temporal_contract import MissionStatus, WorkItemStatus


def approve_command(
    mission: str = typer.Option(..., "--mission", help="The Mission id (workflow mission-<id>)."),
    item: str | None = typer.Option(
        None, "--item", help="The WorkItem; may be left out when only one awaits approval."
    ),
    key: Path = typer.Option(..., "--key", help="The MissionOwner's Ed25519 key (PEM)."),
    agent_id: str | None = typer.Option(
        None, "--agent-id", help="The MissionOwner's agent id. Default: the key file's name."
    ),
    reject: bool = typer.Option(False, "--reject", help="Reject the result instead."),
    reason: str = typer.Option("", "--reason", help="Why (required with --reject)."),
    authority_url: str = opt.AUTHORITY_URL,
    temporal_address: str = opt.TEMPORAL_ADDRESS,
    namespace: str = opt.NAMESPACE,
) -> None:
    """Approve a reviewed WorkItem result as a MissionOwner (or --reject it with --reason).

    Exit status 0: the Authority recorded the decision.
    Exit status 1: the Authority refused it (wrong key, not a mission_owner, …); it still waits.
    Exit status 2: bad input or an unreachable service.
    """
    if reject and not reason.strip():
        raise CliError("--reject needs --reason")
    if len(reason) > 2000:
        raise CliError("--reason is at most 2,000 characters")
    signing_key = load_key(key)
    # a short-lived Temporal client process: ends without interpreter teardown (see _mission)
    run_client_command(
        _approve(
            mission,
            item,
            signing_key,
            agent_id or key.stem,
            reject,
            reason,
            authority_url,
            temporal_address,
            namespace,
        )
    )


def _waiting(status: MissionStatus, item: str | None) -> WorkItemStatus:
    waiting = [i for i in status.items if i.review_stage == "approval"]
    if item is not None:
        found = next((i for i in status.items if i.work_item_id == item), None)
        if found is None:
            raise CliError(f"Mission {status.mission_id} has no WorkItem {item!r}")
        if found.review_stage != "approval":
            raise CliError(
                f"WorkItem {item} does not await approval (state {found.state.value}"
                + (f", review stage {found.review_stage}" if found.review_stage else "")
                + ")"
            )
        return found
    if not waiting:
        raise CliError(f"no WorkItem of Mission {status.mission_id} awaits approval")
    if len(waiting) > 1:
        names = ", ".join(i.work_item_id for i in waiting)
        raise CliError(f"several WorkItems await approval ({names}): name one with --item")
    return waiting[0]


async def _approve(
    mission: str,
    item: str | None,
    key: SigningKey,
    agent_id: str,
    reject: bool,
    reason: str,
    authority_url: str,
    temporal_address: str,
    namespace: str,
) -> None:
    from temporalio.client import WorkflowUpdateFailedError
    from temporalio.service import RPCError

    from ..authority.client import AuthorityClient, AuthorityClientError, AuthorityRequestError
    from ..protocol import Actor
    from ..protocol.temporal_contract import ApprovalInput
    from ..protocol.temporal_contract import mission_workflow_id as workflow_id
    from ..workflows import MissionWorkflow

    client = await connect_temporal(temporal_address, namespace)
    handle = client.get_workflow_handle(workflow_id(mission))
    try:
        status = await handle.query(MissionWorkflow.status)
    except RPCError as exc:
        raise CliError(f"cannot read Mission {mission}: {exc.message}") from None
    target = _waiting(status, item)
    assert target.review_digest is not None
    actor = Actor(agent_id, key)
    try:
        async with AuthorityClient(authority_url, timeout=10.0, signing_key=key) as authority:
            members = {a.agent_id: a for a in await authority.agents(status.group_id)}
    except AuthorityRequestError as exc:
        if exc.code != RejectionCode.NOT_A_MEMBER:
            raise CliError(f"the Authority at {authority_url} refused to answer: {exc}") from None
        members = {}  # this key reads nothing there: the Authority will refuse the Command too
    except AuthorityClientError as exc:
        raise CliError(f"cannot reach the Authority at {authority_url}: {exc}") from None
    if agent_id in members:  # else the Authority refuses it as not a member: let it say so
        actor.membership_epochs[status.group_id] = members[agent_id].membership_epoch
        actor.session_epoch = members[agent_id].session_epoch
    body = {"work_item_id": target.work_item_id, "review_digest": target.review_digest}
    if reason:
        body["reason"] = reason
    cmd = actor.command(
        CommandType.APPROVAL_DENY_RESULT if reject else CommandType.APPROVAL_GRANT_RESULT,
        status.group_id,
        body,
    )
    for st in target.review:
        typer.echo(
            f"  {st.get('step')}: {'pass' if st.get('passed') else 'FAIL'} "
            f"— {str(st.get('detail', ''))[:120]}",
            err=True,
        )
    try:
        verdict = await handle.execute_update(
            MissionWorkflow.approve, ApprovalInput(command=cmd), id=cmd.command_id
        )
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        raise CliError(
            f"refused by the Mission: {getattr(cause, 'type', None) or 'error'}: "
            f"{getattr(cause, 'message', None) or cause}"
        ) from None
    except RPCError as exc:
        raise CliError(f"cannot update Mission {mission}: {exc.message}") from None
    if not verdict.accepted:
        rej = verdict.rejection
        why = f"{rej.code}: {rej.reason}" if rej else verdict.status
        raise CliError(
            f"the Authority refused the approval: {why} "
            f"(WorkItem {target.work_item_id} still awaits approval)",
            exit_code=1,
        )
    seq = verdict.events[0].seq if verdict.events else "?"
    decided = "rejected" if reject else "approved"
    typer.echo(
        f"{decided} {target.work_item_id} of Mission {mission} "
        f"(review {target.review_digest[:16]}, event seq {seq})"
    )


__all__ = ["approve_command"]
