"""What each rejection code means and what its caller does next: written once, here.

:data:`REJECTION_DOCS` maps every :class:`~._rejection_codes.RejectionCode` to its
:class:`RejectionDoc`; :func:`rejection_table` renders docs/authority.md's table from it
(``missionweave authority rejections``; ``tests/protocol/test_vocabulary.py`` checks that
the committed table is the generated one and that no code is undocumented).

The text below is the source: a code at the start of a line, its meaning on the indented lines
after it, and the caller's next step after ``→``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from ._rejection_codes import RejectionCode


class RejectionDoc(NamedTuple):
    """One code's documentation.

    Attributes:
        meaning: what was refused and why, with the ``detail`` keys a caller may read.
        next_step: what the caller does next (``nothing`` when retrying cannot help).
    """

    meaning: str
    next_step: str


_TEXT = """
already_charged
    the forwarded child usage named by `source` was charged to this Mission before
    → nothing: the charge stands; do not resend it under a new command id
already_decided
    the reviewed result already has a MissionOwner's decision (`detail.decision`,
    `detail.approver`)
    → read the decision from the log; a new decision needs a new result
already_declined
    this agent declined the offer earlier
    → nothing: wait for another offer
already_member
    the agent is already an active member of the Group
    → use `member.update` to change its roles
approval_required
    the WorkItem needs a MissionOwner's approval first (`approval.grant_execution` before
    `work.start`, `approval.grant_result` before acceptance)
    → ask the MissionOwner; retry after the approval Event
archived_dependency
    `authorize_work`: a new WorkItem or edge depends on an archived WorkItem (its details left
    the Mission's state past its size budget; `detail` none)
    → depend on a WorkItem that is not finished, or pass what it made as input
artifact_not_published
    a submitted Artifact, or one a deliverable's output or an Evidence's `subject` names by its
    hash, was not published in this WorkItem (nor promoted) (detail: `artifact`; `output` or
    `criterion` when a deliverable or an Evidence names it)
    → publish it with `artifact.publish` under the lease, then resubmit
artifact_not_submitted
    an Evidence cites (`artifacts`) an Artifact that is not among the submission's
    `artifacts` (detail: `artifact`, `criterion`)
    → add it to `artifacts` (published in this WorkItem) or cite only submitted Artifacts
artifact_without_evidence
    a submitted Artifact is referenced by no Evidence
    → cite every Artifact from Evidence and resubmit
artifacts_not_served
    this Authority serves no artifact store
    → configure `--artifact-store` on the Authority, or use the store directly
authority_unreachable
    the Worker could not deliver the Command (transport failure); written by the Worker, never by
    the Authority
    → retry with the same command id; past the lease's grace the lease is lost
bad_signature
    the Command's (or request's) signature does not verify under the actor's key
    → sign with the key the Group knows for the actor; do not retry unchanged
body_timeout
    the HTTP body did not arrive within the server's timeout (408)
    → resend the request
body_too_large
    the HTTP body is over the server's byte limit (413; `detail.max_bytes`)
    → send a smaller batch; large content travels as an Artifact
budget_exceeded
    the usage would pass (or has passed) a budget of the WorkItem or a Mission above it
    → stop the work; a coordinator may revise the contract's budget
candidate_set_not_allowed
    a candidate set was offered for a WorkItem that is not urgent
    → offer to one candidate at a time
checkpoint_required
    `work.checkpoint` (or a block) carries no durable checkpoint
    → include a non-empty `checkpoint` object
child_not_completed
    the child Mission has not completed as this WorkItem's child
    → wait for the child's `mission.completed`
child_not_failed
    the child Mission has not failed (`detail.state`)
    → wait for the child's `mission.failed` or `mission.cancelled`
clock_skew
    the Command's `issued_at_ms` is more than 10 minutes ahead of the Authority's clock or more
    than 366 days behind it (`detail.issued_at_ms`, `detail.authority_ms`); a repeated Command
    id is answered by its id first, whatever its time (MW-11.3-c)
    → set the actor's clock right (NTP) and sign the Command again with its current time
command_too_large
    one Command is over the size bound (`detail.max_bytes`)
    → move large content into an Artifact and send its hash
confusable_id
    a new identifier looks like one registered first (UTS #39 skeleton): a Group or agent id
    like any of the Authority's (never named), a Mission id like one of its Group's, a WorkItem
    id like one of its Mission's (`detail.confusable_with`)
    → choose a visibly different identifier
context_chain
    a Context Package version does not link the latest stored version
    → rebuild the package on the latest version and publish again
context_signature
    the Context Package is not signed by its generator, an active Group member
    → sign with an active member's key
contract_ambiguous
    the contract still has essential ambiguities
    → resolve them (`work.propose` a revision) before accepting
contract_name_taken
    `authorize_work`: a contract name is the Mission's name of another contract
    → give this contract another name
cross_mission_content
    the artifact belongs to another Mission and is not a promoted Organization artifact; on
    `artifact.publish`, another Mission already published the same bytes (a content hash names
    one Mission's content until promoted) (detail: `artifact_hash`)
    → use artifacts of this Mission, or promote the artifact first; content produced the same
    way in several Missions can name its Mission (as the demo's reports do) or be promoted once
CURSOR_TOO_OLD
    the stream's `after_sequence` is below the online window (410; carries a signed `snapshot`)
    → restore the snapshot and resume from its `seq`
cycle
    the change would create a dependency cycle (`detail.cycle`)
    → remove an edge of the cycle
deliverable_missing
    a deliverable of the contract has neither a non-empty output of its name (a non-blank
    string, a non-empty object or list) nor a submitted Artifact whose manifest has its schema
    id (or media type) (detail: `deliverable`)
    → publish the deliverable (or put it in `outputs` under its name) and resubmit
dependencies_unmet
    the WorkItem's dependencies do not satisfy its dependency strategy
    → wait for the dependencies' Events, then retry
duplicate_id
    a WorkItem (or node) with that id already exists
    → choose another id, or read the existing WorkItem
empty_chain
    a Context Package chain has no version
    → publish at least one version
evidence_missing
    an acceptance criterion has no Evidence
    → add Evidence for every criterion and resubmit
evidence_required
    the Command needs Evidence and carries none
    → include Evidence
extension_not_applicable
    the bounded-offline binding was put on a Command that cannot be buffered
    → send the Command online, without the binding
group_exists
    a Group with that id exists
    → choose another Group id, or join the existing one
hash_mismatch
    the uploaded bytes do not hash to the granted Artifact
    → upload exactly the bytes of the hash
headers_too_large
    the request's headers are over the bound (431)
    → send fewer or shorter headers
http_error
    an HTTP error with no more specific code (`detail` has the status)
    → check the URL and method
idempotency_conflict
    the command id was used before with a different body
    → use a new command id for a different request
input_too_large
    a WorkItem's inline input is over what a Mission carries (`detail.work_item_id`,
    `detail.bytes`, `detail.max_bytes`)
    → store the input as an Artifact and give `{"$input_artifact": <hash>}`
insufficient_storage
    the Authority's free disk space is below its reserve (507; `detail.path`, `detail.free_bytes`,
    `detail.reserve_bytes`): new content and new work are refused, lease renewals and the
    Commands that end work still commit
    → retry later with the same command id; the operator frees space
internal_error
    the Authority failed to answer (500); nothing was written
    → retry later with the same command id
invalid_body
    the Command's body is missing a field or has a wrong value (`detail.field`)
    → fix the named field; do not retry unchanged
invalid_command
    the Command envelope is malformed (422), or names no Group where one is needed
    → fix the envelope; do not retry unchanged
invalid_context_package
    `package` is not a valid signed Context Package
    → send a package built and signed by `sign_context_package`
invalid_event_range
    a Context Package source range lies outside the Group's log
    → name a range within `1..head`
invalid_expiry
    the offer's expiry is in the past or beyond the Authority's bound
    → offer with an expiry within the bound
invalid_frame
    a stream frame is not valid JSON or not a known frame
    → send frames as docs/authority.md describes
invalid_grant
    an artifact URL carries no valid read or write grant
    → ask the Authority for a fresh grant
invalid_id
    a WorkItem id is empty or not an identifier
    → give a valid identifier
invalid_json
    (`detail.problem` of an invalid request) the body is not JSON, has a key twice, or a non-finite
    number
    → send strict JSON
invalid_manifest
    `manifest` is not a valid signed Artifact manifest
    → send a manifest built and signed by `sign_manifest`
invalid_parent
    the parent WorkItem is not blocked by `mission.create_child` for this Mission
    → create the child from the blocked parent WorkItem
invalid_request
    a read or artifact request is malformed (422; e.g. not a SHA-256 hash)
    → fix the request
invalid_state
    the WorkItem's state does not allow the Command (`detail.state`)
    → read the WorkItem's state; the Command is not needed now
invalid_token
    not a capability token this Authority issued
    → use the token the lease was granted
key_mismatch
    the public key given is not the key the Authority knows for the agent
    → sign with, or publish, the agent's registered key
lease_closed
    the lease ended before the buffered progress arrived
    → drop the buffered progress; the work belongs to the lease's successor
lease_ended
    the capability token's lease is no longer active
    → stop using the token
lease_expired
    the lease has expired (`detail.expires_at_ms`)
    → stop the work; wait to be offered the WorkItem again
lease_required
    writing an Artifact needs the writer's live execution lease
    → start (or renew) the lease first
log_forked
    the store's log lacks or differs from Events this Authority signed or served (a failover
    to a standby without them) (503); the Authority serves nothing from it; `detail.forks`
    → nothing: an operator restores the lost Events (docs/authority.md, "PostgreSQL restart
    or failover"); a subscriber stops with `LogForkedError`
manifest_signature
    the manifest's signature does not verify under the actor's key
    → sign the manifest with the actor's key
method_not_allowed
    the HTTP method is not allowed on this route (405)
    → use the method docs/authority.md names
mission_closed
    the Mission is not running (`detail.state`)
    → nothing: the Mission is over
mission_exists
    a Mission with that id exists in the Group
    → read the existing Mission, or choose another id
mission_inputs_too_large
    the unfinished WorkItems' inline inputs would pass what a Mission carries (`detail.bytes`,
    `detail.carried_bytes`, `detail.max_bytes`)
    → pass inputs by reference (`{"$input_artifact": <hash>}`)
mission_unfinished
    `mission.complete` while a WorkItem is neither verified nor cancelled
    → finish or cancel every WorkItem first
mixed_script_id
    a new identifier mixes scripts (UTS #39)
    → use one script per identifier
no_session
    the agent has no open session
    → `session.open`, then retry with the new session epoch
not_a_candidate
    the offer is not addressed to this agent
    → nothing: wait for an offer to you
not_a_member
    the actor (or reader) is not an active member of the Group
    → ask a Group owner for `member.add`
not_a_worker
    a candidate is not a worker of the Group
    → offer only to the Group's workers
not_awaiting_approval
    `approve`: the WorkItem's review does not wait for a MissionOwner's decision
    → see the WorkItem's `review_stage` in `missionweave mission status`
not_blocked
    `unblock`: the WorkItem is not blocked
    → nothing: see its state in `missionweave mission status`
not_found
    no such HTTP route (404)
    → check the URL
not_open
    the WorkItem is not open, so no edge may go into it (`detail.state`)
    → add dependencies only to open WorkItems
not_owner
    the lease or WorkItem belongs to another agent
    → stop: this agent does not own the work
offer_closed
    the offer was accepted, declined or withdrawn (`detail.state`)
    → nothing: wait for another offer
offer_expired
    the offer has expired
    → nothing: wait for another offer
operation_not_in_scope
    the capability token does not allow the operation
    → ask for a token whose scope includes it
operator_required
    the Command needs the Authority's operator key (e.g. `group.create` when enabled)
    → send it signed by the operator key
outside_grace_window
    the buffered progress falls outside the lease and its offline grace
    → drop it; the lease's grace has passed
outside_work_item
    the offline binding, the body and the lease name different WorkItems, Groups, leases or agents
    → rebuild the buffered Command from its lease
owner_active
    the WorkItem has an active owner (`detail.owner`, `detail.ownership_epoch`)
    → wait for the owner's lease to end, or revoke it
owner_changed
    the WorkItem changed owner or ownership epoch since the lease was granted
    → drop the buffered Command
payload_too_large
    an Artifact upload is over the Authority's bound (413; `detail.max_bytes`); nothing was
    stored
    → split the content, or ask the operator for a larger `--max-upload-mib`
rate_limited
    the actor's Command rate or byte budget in this Group (per Mission for a coordinator) is
    spent (429, `Retry-After`; `detail.retry_after_ms`, `detail.limit`); nothing was written
    → retry the same Command after `detail.retry_after_ms`
read_shed
    the Authority is under pressure (its Commands are queued past `detail.max_wait_ms`, or
    its reads are queued past `detail.max_backlog`) and sheds reads first, so that
    Commands, lease renewals first, are served (429, `Retry-After`)
    → retry the read after `detail.retry_after_s`; keep sending Commands
revision_required
    a material contract change does not increment the revision
    → propose it as revision `current + 1`
role_not_allowed
    the actor's roles do not allow this Command (`detail.roles`)
    → send it as an actor with the needed role
scope_not_narrower
    a token rotation asked for a scope that is not within the current one
    → ask only for a subset of the current scope
selection_basis_incomplete
    the selection basis does not state every fact MW-10.3-f needs
    → state every fact for every candidate
selection_basis_required
    an offer carries no selection basis for a candidate (MW-10.3-f)
    → include the basis of each candidate
selection_basis_untrue
    the selection basis contradicts what the Authority knows
    → recompute it from the Authority's agents read
self_approval
    the WorkItem's owner may not approve its own result
    → another MissionOwner decides
self_loop
    a WorkItem would depend on itself
    → remove the edge
stale_card
    the Agent Card's version is not above the published one
    → publish with a higher `version`
stale_lease
    the lease is no longer the WorkItem's active lease
    → stop the work; read the WorkItem's current lease
stale_membership_epoch
    the Command's membership epoch is not the current one (`detail.current`)
    → re-read membership and resend with the current epoch
stale_ownership_epoch
    the Command's ownership epoch is not the current one
    → stop: the WorkItem moved on to another ownership
stale_review
    `approve`: the Approval names another review record than the one awaiting a decision
    → approve the current review digest (`missionweave mission status`)
stale_revision
    the Command names an old contract revision
    → re-read the contract and act on the current revision
stale_session_epoch
    the session epoch is not the agent's current one (`detail.current`)
    → resend with the current session, or open one
start_deadline_missed
    the WorkItem's start deadline has passed
    → nothing: the coordinator re-offers it
store_unavailable
    the Authority's database does not answer, or broke during the transaction (503,
    `Retry-After`); nothing was written, or a commit's outcome is unknown
    → retry after `Retry-After` with the same command id: a committed one is answered by it
token_expired
    the capability token or its lease has expired
    → renew the lease; use the token issued with it
token_superseded
    the capability token was rotated or narrowed
    → use the holder's newer token
too_deep
    (`detail.problem` of an invalid request) JSON nested deeper than the bound
    → flatten the body
too_many_candidates
    the candidate set is over its bound
    → offer to fewer candidates
too_many_groups
    `session.open` of an agent in more Groups than the Authority opens in one Command
    (`detail.groups`, `detail.max_groups`)
    → split the agent into agents with fewer Groups each, or ask the operator for a larger
    `--max-session-groups`
too_many_reads
    large reads in flight are at their bound (429, `Retry-After`)
    → retry after `detail.retry_after_s`
too_many_requests
    too many signed reads in the replay window (429)
    → slow down and retry
transition_not_allowed
    the WorkItem's state does not allow the action (state table, MW-10.2)
    → read the WorkItem's state; act as the table allows
unauthenticated
    a read carries no (or an invalid) RFC 9421 signature (401)
    → sign the read
unauthorized
    a stream frame or read is not signed by an active member
    → sign with an active member's key
unknown_action
    the action is not a WorkItem action of the state table
    → use a Command type of the table
unknown_actor
    the actor is not a known agent
    → register the agent (`member.add` by a Group owner)
unknown_artifact
    no such Artifact was published on this Authority
    → publish it first; check the hash
unknown_child
    the WorkItem is not blocked by `mission.create_child` for that child Mission
    → name the child of this WorkItem
unknown_command
    no such Command type
    → use a type of `CommandType`
unknown_group
    no such Group
    → check the Group id, or create the Group
unknown_id
    an edge or dependency names an unknown WorkItem
    → add the WorkItem first
unknown_lease
    no such lease in this Group
    → check the lease id
unknown_mission
    no such Mission in the Group
    → check the Mission id, or `mission.create` it
unknown_offer
    no such offer for this WorkItem
    → check the offer id
unknown_snapshot
    no snapshot of the Group at that sequence
    → ask for the snapshot a CURSOR_TOO_OLD named
unknown_source
    no forwarded usage with that hash for this Group (or its Mission is elsewhere)
    → name a `mission.usage_forwarded` Event of the child
unknown_work_item
    no such WorkItem in the Group or Mission
    → check the WorkItem id
unnormalized_id
    a new Group, agent, Mission or WorkItem id is not in Unicode NFKC (fullwidth letters,
    ligatures…; `detail.field`): ids are refused, never normalized, as they sit in signed bytes
    → spell the id in its NFKC form
unsupported_extension
    the Command needs a critical extension this Authority does not know
    → send it without the extension, or to an Authority that knows it
update_error
    the Worker's `authorize_work`: Temporal refused the update call (`detail.status`,
    `detail.workflow_id`)
    → check the Mission's workflow id and the Temporal connection
update_rejected
    the Worker's `authorize_work`: the Mission refused the update without a code
    → read the reason; fix the request
workflow_unreachable
    the Worker's `authorize_work`: the Mission's workflow did not answer within the retries
    (`detail.workflow_id`, `detail.update_id`)
    → retry later with the same update id: the update is idempotent
wrong_command_type
    `approve`: the Command is not `approval.grant_result` or `approval.deny_result`
    → send a MissionOwner's Approval Command
wrong_group
    `approve`: the Command is for another Group than the Mission's
    → sign it for the Mission's Group
"""


def _parse(text: str) -> dict[RejectionCode, RejectionDoc]:
    docs: dict[RejectionCode, RejectionDoc] = {}
    code: RejectionCode | None = None
    parts: list[list[str]] = []

    def close() -> None:
        if code is not None:
            if code in docs or len(parts) != 2:
                raise ValueError(f"rejection code {code!r}: one meaning and one next step")
            docs[code] = RejectionDoc(*(" ".join(p) for p in parts))

    for line in text.strip().splitlines():
        if not line.startswith(" "):
            close()
            code, parts = RejectionCode(line), [[]]
        elif line.lstrip().startswith("→ "):
            parts.append([line.lstrip()[2:]])
        else:
            parts[-1].append(line.strip())
    close()
    return docs


#: Every rejection code's meaning and the caller's next step.
REJECTION_DOCS: Mapping[RejectionCode, RejectionDoc] = MappingProxyType(_parse(_TEXT))


def rejection_table() -> str:
    """docs/authority.md's table of rejection codes: a Markdown table, one row per code in
    alphabetical order, columns code, meaning, next step (ends with a newline)."""
    rows = ["| code | meaning | the caller's next step |", "|---|---|---|"]
    for code in sorted(REJECTION_DOCS, key=str.lower):
        doc = REJECTION_DOCS[code]
        rows.append(f"| `{code.value}` | {doc.meaning} | {doc.next_step} |")
    return "\n".join(rows) + "\n"


__all__ = ["REJECTION_DOCS", "RejectionDoc", "rejection_table"]
