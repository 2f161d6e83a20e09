"""The Group's agents as a scheduler sees them: membership, Agent Card, session, reliability.

Mixed into :class:`~missionweave.authority.Authority` (read side). Serves
``GET /v1/groups/{g}/agents``, which the coordinator's ``select_candidates`` activity ranks from
(docs/design.md §4 step 3, MW-10.3-f). Metadata only (MW-13.3-e): no WorkItem content.
"""

from __future__ import annotations

import json
import threading

from ...protocol import AgentCard, EventType
from ..wire import AgentInfo, Reliability
from ._reads import require_group
from ._store import Store

#: The outcome Events reliability is counted from; both bodies name ``owner`` and
#: ``capabilities`` (the WorkItem's required capabilities).
_OUTCOMES = {EventType.WORK_RESULT_ACCEPTED: "ok", EventType.WORK_FAILED: "fail"}


class AgentReads:
    """The agents read of the Authority (see the module docstring)."""

    store: Store
    _lock: threading.Lock

    def agents(self, group_id: str) -> list[AgentInfo]:
        """The active members of ``group_id``, ordered by agent id.

        Reliability reads every ``work.result_accepted`` and ``work.failed`` Event of the online
        log: linear in the online window, which the Authority's ``online_window`` bounds.

        Raises:
            UnknownGroupError: no such Group.
        """
        with self._lock:
            require_group(self.store, group_id)
            members = self.store.all("members.active_with_agents", group_id)
            outcomes = self.store.all("events.outcomes", group_id)
        counts: dict[str, dict[str, Reliability]] = {}
        for kind, owner, caps in outcomes:
            if not isinstance(owner, str) or not caps:
                continue  # an item failed or accepted without an owner says nothing of anyone
            per_cap = counts.setdefault(owner, {})
            for cap in json.loads(caps):
                r = per_cap.setdefault(str(cap), Reliability())
                if _OUTCOMES[kind] == "ok":
                    r.ok += 1
                else:
                    r.fail += 1
        return [
            AgentInfo(
                agent_id=agent_id,
                public_key=key,
                roles=list(json.loads(roles)),
                membership_epoch=int(m_epoch),
                card=AgentCard.model_validate_json(card) if card else None,
                session_epoch=int(s_epoch),
                reliability=dict(sorted(counts.get(agent_id, {}).items())),
            )
            for agent_id, key, roles, m_epoch, card, s_epoch in members
        ]


__all__ = ["AgentInfo", "AgentReads", "Reliability"]
