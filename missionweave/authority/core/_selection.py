"""A ``work.offer``'s selection basis is complete and true (MW-10.3-f).

Every candidate's basis must state each fact the spec lists — the required capability matches,
authorization eligibility, an availability estimate, the expected cost, capability-specific
reliability Evidence and the policy rules applied (:data:`REQUIRED_FIELDS`, none left to a
default) — and no claim may contradict what the Authority knows: the matches serve every
capability the contract requires (and, when the candidate published an Agent Card, each is on
it), reliability is given for each required capability, the candidate is eligible (an active
worker of the Group, checked by the offer before this), and at least one policy rule is named.
What the Authority checked is recorded beside the basis in ``work.offered``
(:data:`AUTHORITY_CHECKS`).
"""

from __future__ import annotations

from typing import Any

from ...protocol import AgentCard, RejectionCode, SelectionBasis, capability_matches
from ._command_scope import Ctx, Reject
from ._items import parse

#: The facts of MW-10.3-f, each of which a basis must state explicitly.
REQUIRED_FIELDS = (
    "capability_matches",
    "authorization_eligible",
    "availability_estimate_ms",
    "expected_cost_minor_units",
    "reliability",
    "policy_rules",
)
#: What the Authority checks of each basis, recorded in ``work.offered``.
AUTHORITY_CHECKS = (
    "fields-complete",
    "capabilities-serve-contract",
    "capabilities-on-card",
    "reliability-per-capability",
    "active-worker",
)


def checked_basis(ctx: Ctx, candidate: str, raw: Any, required: list[str]) -> dict[str, Any]:
    """The candidate's basis, as recorded, once complete and true (see the module).

    Args:
        candidate: the agent offered the work (already checked an active worker).
        raw: the basis as the Coordinator sent it.
        required: the contract's required capabilities (``id@semver``).

    Raises:
        Reject: ``invalid_body`` (not a :class:`SelectionBasis`: a wrong type, an extra field
            such as prose); ``selection_basis_incomplete`` (a field of
            :data:`REQUIRED_FIELDS` absent or ``null``, or no policy rule);
            ``selection_basis_untrue`` (a claim the Authority knows false). Implements MW-10.3-f.
    """
    if not isinstance(raw, dict):
        raise Reject(
            RejectionCode.INVALID_BODY, "a selection basis is an object", field="selection_basis"
        )
    extra = sorted(set(raw) - set(SelectionBasis.model_fields))
    if extra:  # free-form rationale (private chain-of-thought) has no field
        raise Reject(
            RejectionCode.INVALID_BODY,
            "the selection basis has fields of no MW-10.3-f fact",
            field="selection_basis",
            extra=extra,
        )
    missing = [f for f in REQUIRED_FIELDS if raw.get(f) is None]
    if not missing:
        basis = parse(SelectionBasis, raw, "selection_basis")
    if missing or not basis.policy_rules:
        raise Reject(
            RejectionCode.SELECTION_BASIS_INCOMPLETE,
            "the selection basis must state every fact of MW-10.3-f",
            candidate=candidate,
            missing=missing or ["policy_rules"],
        )
    untrue: list[str] = []
    if not basis.authorization_eligible:
        untrue.append("authorization_eligible")
    served = capability_matches(basis.capability_matches, required)
    if served is None or len(basis.capability_matches) != len(required):
        untrue.append("capability_matches")
    row = ctx.one("agents.card_by_agent_id", candidate)
    if row is not None and row["card"]:
        card = AgentCard.model_validate_json(row["card"])
        if not set(basis.capability_matches) <= set(card.capabilities):
            untrue.append("capability_matches")
    # '<capability>:ok|fail' per required capability, keyed with any version or none
    given = {
        f"{k.rsplit(':', 1)[0].split('@')[0]}:{k.rsplit(':', 1)[-1]}" for k in basis.reliability
    }
    if not {f"{c.split('@')[0]}:{k}" for c in required for k in ("ok", "fail")} <= given:
        untrue.append("reliability")
    if untrue:
        raise Reject(
            RejectionCode.SELECTION_BASIS_UNTRUE,
            "the selection basis contradicts what the Authority knows",
            candidate=candidate,
            fields=sorted(set(untrue)),
        )
    return basis.model_dump(mode="json")
