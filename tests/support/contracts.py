"""The suite's one WorkContract builder.

:func:`contract` builds a valid contract from a preset of :data:`PRESETS`: ``verify`` (two
criteria, what the Authority tests' :class:`~tests.support.world.World` offers) or ``step`` (one
deterministic criterion ``done``, what the Mission tests run;
``tests.support.mission_harness.contract``
is this builder with that preset).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from missionweave.protocol import WorkContract

#: The contracts tests build on: ``verify`` (two criteria, the Authority tests') and ``step``
#: (one deterministic criterion ``done``, the Mission tests').
PRESETS: dict[str, dict[str, Any]] = {
    "verify": {
        "objective": "check the files of one distribution",
        "deliverables": [{"name": "report", "media_type": "application/json"}],
        "acceptance_criteria": [
            {"id": "hashes", "description": "every file matches", "evidence_required": "compare"},
            {"id": "schema", "description": "report is valid", "evidence_required": "schema"},
        ],
        "required_capabilities": ["dist.verify@1.0"],
        "budget": {"tool_calls": 100, "wall_clock_ms": 600_000},
        "timeouts": {"start_deadline_ms": 60_000, "lease_ms": 30_000, "heartbeat_ms": 5_000,
                     "blocked_lease_ms": 120_000},
    },
    "step": {
        "objective": "do one step",
        "deliverables": [{"name": "result"}],
        "acceptance_criteria": [{"id": "done", "description": "the step is done",
                                 "evidence_required": "a passing check"}],
        "required_capabilities": ["demo.step@1.0"],
        "timeouts": {"start_deadline_ms": 30_000, "lease_ms": 10_000, "heartbeat_ms": 1_000},
        "retry": {"max_attempts": 3, "initial_backoff_ms": 200},
    },
}  # fmt: skip


def contract(
    caps: Sequence[str] | None = None, *, preset: str = "verify", **over: Any
) -> WorkContract:
    """A valid contract from :data:`PRESETS` (``preset``); ``caps`` sets its required
    capabilities, keyword arguments override fields (``timeouts={...}``, ``revision=2`` …).

    Raises:
        pydantic.ValidationError: the overrides make it invalid.
    """
    base = {**PRESETS[preset], **over}
    if caps is not None:
        base["required_capabilities"] = list(caps)
    return WorkContract.model_validate(base)
