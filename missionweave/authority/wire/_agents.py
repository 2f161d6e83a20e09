"""The Group's agents as the Authority's API shows them: membership, Agent Card, session,
reliability (``GET /v1/groups/{g}/agents``; metadata only, MW-13.3-e)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ...protocol import AgentCard


class Reliability(BaseModel):
    """Outcomes of one agent's WorkItems that needed one capability.

    Attributes:
        ok: ``work.result_accepted`` Events with the agent as owner.
        fail: ``work.failed`` Events with the agent as owner.
    """

    model_config = ConfigDict(extra="forbid")
    ok: int = Field(default=0, ge=0)
    fail: int = Field(default=0, ge=0)


class AgentInfo(BaseModel):
    """One active member of a Group.

    Attributes:
        agent_id: the agent.
        public_key: its Ed25519 public key as the Group records it (base64url).
        roles: its roles in the Group.
        membership_epoch: its current Membership Epoch in the Group.
        card: its latest published Agent Card, or ``None`` when it never published one.
        session_epoch: its current Session Epoch (0: no session opened yet).
        reliability: per capability id (``id@semver``), outcomes counted from the Group's online
            log (archived Events are not counted).
    """

    model_config = ConfigDict(extra="forbid")
    agent_id: str
    public_key: str = ""
    roles: list[str]
    membership_epoch: int = Field(ge=0)
    card: AgentCard | None = None
    session_epoch: int = Field(ge=0)
    reliability: dict[str, Reliability] = Field(default_factory=dict)
