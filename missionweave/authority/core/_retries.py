"""Whether a ``work.failed`` leaves room for an automatic retry (MW-11.4-d, MW-11.4-f).

The Authority decides it when it records the failure, from the contract, the attempts, the
WorkItem's usage over all attempts and its own clock (:func:`~missionweave.protocol.
exhausted_retry_bound`), and writes it into the Event next to the failure's Evidence: the
Coordinator retries only a ``retryable`` failure.
"""

from __future__ import annotations

from typing import Any

from ...protocol import ResourceUsage, exhausted_retry_bound
from ._command_scope import Ctx
from ._items import contract_of
from ._store import Row


def retry_fields(ctx: Ctx, item: Row, usage: ResourceUsage | None) -> dict[str, Any]:
    """``{"retryable": …}`` for the ``work.failed`` body, with ``retry_exhausted`` (``bound``,
    ``limit``, ``value``, and ``dimension`` for ``budget``) when a retry bound is reached.

    Args:
        ctx: the ``work.fail`` handler's context (its body's ``retryable``, default true, and
            the Authority's clock).
        item: the WorkItem row before the failure is recorded.
        usage: the WorkItem's usage after this Command's charge; ``None``: the row's.
    """
    if not bool(ctx.body.get("retryable", True)):
        return {"retryable": False}
    used = usage if usage is not None else ResourceUsage.model_validate_json(item["usage"])
    bound = exhausted_retry_bound(contract_of(item), item["attempts"] + 1, used, ctx.now_ms)
    if bound is None:
        return {"retryable": True}
    return {"retryable": False, "retry_exhausted": bound.wire()}
