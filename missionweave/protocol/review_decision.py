"""The review's decision as a Command (MW-13.2-b step 4), one pure function shared by the Mission
workflow and the coordinator's ``review_submissions`` activity, so that either may issue it.

``decision_command(work_item_id, steps, passed, now_ms)`` appends nothing: give it every step
so far (the ``verdict`` step from :func:`verdict_step`, and the ``approval`` step when there was
one); it returns ``work.accept_result`` with every step's Evidence when ``passed``, else
``work.fail`` (retryable) whose first Evidence sums up the failed steps.
"""

from __future__ import annotations

from typing import Any

from ._vocabulary import CommandType
from .temporal_contract import ReviewStep


def verdict_step(steps: list[ReviewStep]) -> ReviewStep:
    """Step 4: the combined verdict of ``steps`` (passed when every step passed)."""
    failed = [st.step for st in steps if not st.passed]
    return ReviewStep(
        step="verdict",
        passed=not failed,
        detail="failed: " + ", ".join(failed) if failed else "every step passed",
    )


def decision_command(
    work_item_id: str, steps: list[ReviewStep], passed: bool, now_ms: int
) -> tuple[str, dict[str, Any]]:
    """The Command type and body deciding a reviewed WorkItem.

    Args:
        work_item_id: the reviewed WorkItem.
        steps: every review step so far.
        passed: the decision: the verdict (step 4), or the MissionOwner's (step 5).
        now_ms: the decision time, epoch milliseconds (the summary Evidence's timestamp).

    Returns:
        ``("work.accept_result", body)`` or ``("work.fail", body)``.
    """
    evidence = [e.model_dump(mode="json") for st in steps for e in st.evidence]
    if passed:
        return CommandType.WORK_ACCEPT_RESULT, {"work_item_id": work_item_id, "evidence": evidence}
    failed = [st for st in steps if not st.passed and st.step != "verdict"]
    summary = {
        "subject": work_item_id,
        "criterion": "review",
        "method": "coordinator review",
        "result": "fail",
        "producer": "coordinator",
        "timestamp_ms": now_ms,
        "summary": "; ".join(f"{st.step}: {st.detail}" for st in failed)[:2000],
    }
    return CommandType.WORK_FAIL, {
        "work_item_id": work_item_id,
        "retryable": True,
        "evidence": [summary, *evidence],
    }


__all__ = ["decision_command", "verdict_step"]
