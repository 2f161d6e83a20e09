"""The ``missionweave worker`` options that shape its scheduler: ``--group-quota``,
``--resource``, ``--approval-risk`` and ``--risk-budget`` (docs/agents.md, "Risk gates and
resource fit")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import typer

from ..protocol import RiskClass
from ._common import CliError

#: Risk classes, lowest first (the worker package is imported only when the command runs).
RISK_ORDER = tuple(r.value for r in RiskClass)


def _per_group(flag: str, unit: str, bound: str, default: str) -> Any:
    """A repeatable ``GROUP=N`` option: ``bound`` per Group, given once per Group (of the
    worker's ``--group``s: :func:`scheduler_options` checks both)."""
    return typer.Option(
        [], flag, metavar=f"GROUP={unit}",
        help=f"{bound} (repeatable, once per Group; default: {default}).",
    )  # fmt: skip


GROUP_QUOTA = _per_group(
    "--group-quota", "SLOTS", "The most slots a Group's WorkItems hold at once", "every slot"
)
RESOURCE = typer.Option(
    [], "--resource", metavar="NAME=N",
    help="A resource capacity of this agent (repeatable), e.g. gpu=2: a WorkItem starts only "
    "where its contract's resource_constraints fit what is free; Groups share several "
    "resources by DRF.",
)  # fmt: skip
APPROVAL_RISK = typer.Option(
    None, "--approval-risk", metavar="CLASS",
    help="WorkItems of this risk class or above (low, medium, high, critical) wait for their "
    "execution approval before they start.",
)  # fmt: skip
RISK_BUDGET = _per_group(
    "--risk-budget", "UNITS",
    "The most risk units (low 0, medium 1, high 2, critical 4) a Group's running WorkItems "
    "hold at once", "no limit",
)  # fmt: skip


def _pairs(flag: str, values: list[str], *, low: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        name, sep, raw = v.partition("=")
        if not sep or not name or not raw.strip().isdigit() or int(raw) < low:
            raise CliError(f"{flag} {v!r}: expected NAME=N with an integer N >= {low}")
        if name in out:
            raise CliError(f"{flag} {v!r}: {name} is given twice")
        out[name] = int(raw)
    return out


def scheduler_options(
    resources: list[str],
    approval_risk: str | None,
    risk_budgets: list[str],
    groups: list[str],
    quotas: Sequence[str] = (),
) -> dict[str, Any]:
    """The ``AgentRuntime`` keyword arguments ``resources``, ``risk_gate`` and
    ``group_quotas`` from the options.

    Raises:
        CliError: a malformed pair, a capacity or quota < 1, a budget < 0, an unknown risk
            class, or a risk budget or quota for a Group the worker does not work in.
    """
    from ..worker import RiskGate

    if approval_risk is not None and approval_risk not in RISK_ORDER:
        raise CliError(f"--approval-risk {approval_risk!r}: one of {', '.join(RISK_ORDER)}")
    budgets = _pairs("--risk-budget", risk_budgets, low=0)
    per_group = _pairs("--group-quota", list(quotas), low=1)
    for flag, pairs in (("--risk-budget", budgets), ("--group-quota", per_group)):
        for g in pairs:
            if g not in groups:
                raise CliError(f"{flag} {g}: {g} is not a --group of this worker")
    gate = RiskGate(approval_from=approval_risk, budgets=budgets)
    return {
        "resources": _pairs("--resource", resources, low=1) or None,
        "risk_gate": gate if approval_risk or budgets else None,
        "group_quotas": per_group or None,
    }


__all__ = ["APPROVAL_RISK", "GROUP_QUOTA", "RESOURCE", "RISK_BUDGET", "scheduler_options"]
