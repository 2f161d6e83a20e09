"""Which bound stops the next automatic retry of a failed WorkItem (MW-11.4-d, MW-11.4-f).

Pure: the caller passes the clock. The Authority calls it when it records ``work.failed`` and
writes the answer into that Event (``retryable: false`` and ``retry_exhausted``), so the log
says why a WorkItem will not be retried, next to the failure's Evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._contract import ResourceUsage, RetryPolicy, WorkContract

#: The bounds, in the order they are checked.
RETRY_BOUNDS = ("max_attempts", "max_total_wait_ms", "deadline", "cost_cap", "budget")


@dataclass(frozen=True, slots=True)
class RetryBound:
    """The bound an automatic retry would cross.

    Attributes:
        bound: one of :data:`RETRY_BOUNDS`.
        limit: the contract's limit (attempts; milliseconds; epoch milliseconds for
            ``deadline``; minor units for ``cost_cap``; for ``budget`` the limit of the first
            spent dimension).
        value: what the retry would reach: attempts made; total backoff wait including the
            next one; when the next attempt could start at the earliest; money spent; usage in
            ``dimension``.
        dimension: for ``budget``, the spent dimension (``money``, ``tokens``, …).
    """

    bound: str
    limit: int
    value: int
    dimension: str | None = None

    def wire(self) -> dict[str, object]:
        """The ``retry_exhausted`` object of a ``work.failed`` Event body."""
        out: dict[str, object] = {"bound": self.bound, "limit": self.limit, "value": self.value}
        if self.dimension is not None:
            out["dimension"] = self.dimension
        return out


def total_backoff_ms(policy: RetryPolicy, retries: int) -> int:
    """The sum of the waits before retries ``1..retries``, in milliseconds."""
    total, k = 0, 1
    while k <= retries:
        wait = policy.backoff_ms(k)
        if wait >= policy.max_backoff_ms or policy.backoff_multiplier == 1:
            return total + wait * (retries - k + 1)  # every further wait is the same
        total += wait
        k += 1
    return total


def _spent(usage: ResourceUsage, contract: WorkContract) -> tuple[str, int, int] | None:
    """The first budget dimension with nothing left: ``(dimension, limit, used)``."""
    budget = contract.budget
    if budget.money is not None and usage.money_minor_units >= budget.money.amount_minor_units:
        return "money", budget.money.amount_minor_units, usage.money_minor_units
    for dim in ("tokens", "tool_calls", "compute_ms", "wall_clock_ms", "side_effects"):
        limit = getattr(budget, dim)
        if limit is not None and getattr(usage, dim) >= limit:
            return dim, limit, getattr(usage, dim)
    return None


def exhausted_retry_bound(
    contract: WorkContract, attempts: int, usage: ResourceUsage, now_ms: int
) -> RetryBound | None:
    """The bound that forbids another automatic attempt after ``attempts`` failed ones, or
    ``None`` when a retry is still allowed (MW-11.4-d).

    Checked in this order:

    - ``max_attempts``: ``attempts >= retry.max_attempts``;
    - ``max_total_wait_ms``: the backoff waits of every retry so far plus the next one
      (:func:`total_backoff_ms`) exceed it;
    - ``deadline``: the next attempt could not start before ``deadline_ms`` (``now_ms`` plus the
      next backoff is at or past it);
    - ``cost_cap``: the money spent over all attempts (``usage.money_minor_units``, in the
      budget's currency) has reached ``retry.cost_cap``;
    - ``budget``: a dimension of the contract's budget has nothing left.

    Args:
        contract: the WorkItem's contract.
        attempts: failed executions so far, this one included.
        usage: what the WorkItem has consumed over all its attempts.
        now_ms: the current time, epoch milliseconds.
    """
    policy = contract.retry
    if attempts >= policy.max_attempts:
        return RetryBound("max_attempts", policy.max_attempts, attempts)
    waited = total_backoff_ms(policy, attempts)
    if policy.max_total_wait_ms is not None and waited > policy.max_total_wait_ms:
        return RetryBound("max_total_wait_ms", policy.max_total_wait_ms, waited)
    earliest = now_ms + policy.backoff_ms(attempts)
    if contract.deadline_ms is not None and earliest >= contract.deadline_ms:
        return RetryBound("deadline", contract.deadline_ms, earliest)
    cap = policy.cost_cap
    if cap is not None and usage.money_minor_units >= cap.amount_minor_units:
        return RetryBound("cost_cap", cap.amount_minor_units, usage.money_minor_units)
    spent = _spent(usage, contract)
    if spent is not None:
        return RetryBound("budget", spent[1], spent[2], spent[0])
    return None


__all__ = ["RETRY_BOUNDS", "RetryBound", "exhausted_retry_bound", "total_backoff_ms"]
