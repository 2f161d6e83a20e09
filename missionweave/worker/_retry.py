"""The agent runtime's one retry loop: try again after a doubling wait, within a bound.

Every call the runtime repeats — the same signed Commands while the Authority is unreachable
(an offer's answer, a final report), a publish lost between its fence and its registration, the
``authorize_work`` update while Temporal is busy — goes through :func:`retrying`, built on
``tenacity``. What differs between them is data: which failures are worth another try, the
first wait and its cap, and the bound (a deadline, a number of attempts, or neither when the
call bounds itself, as a lease confirmation does at the grace deadline).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, wait_exponential

from ..authority.client import AuthorityUnavailable

T = TypeVar("T")

#: The first wait, seconds, before a call the Authority did not answer is tried again.
FIRST_WAIT_S = 0.2


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long to wait between tries: ``first_s`` after the first failure, doubling after each
    further one, never longer than ``cap_s`` (seconds; ``cap_s == first_s``: a steady pace).
    """

    first_s: float = FIRST_WAIT_S
    cap_s: float = FIRST_WAIT_S


def authority_away(exc: BaseException) -> bool:
    """Whether ``exc`` says the Authority could not be reached (worth another try of the same
    signed Command: the Authority answers a repeated Command as it answered the first)."""
    return isinstance(exc, AuthorityUnavailable)


async def retrying(
    call: Callable[[], Awaitable[T]],
    *,
    when: Callable[[BaseException], bool],
    backoff: Backoff,
    seconds_left: Callable[[], float] | None = None,
    max_attempts: int | None = None,
    before_wait: Callable[[BaseException, float], None] | None = None,
) -> T:
    """Await ``call()`` until it returns, trying again after each failure ``when`` accepts.

    Args:
        call: one try (a fresh awaitable each time).
        when: whether a failure is worth another try; any other failure is raised at once.
        backoff: the waits between tries.
        seconds_left: the time left before a deadline, seconds: no further try is made when the
            next wait would reach it (``None``: no deadline).
        max_attempts: tries in all (``None``: no bound).
        before_wait: called with the failure and the coming wait (seconds) before each wait —
            to log, or to heartbeat while waiting.

    Returns:
        What the first successful try returned.

    Raises:
        BaseException: the last failure, unchanged, when ``when`` refuses it, the attempts are
            spent or the deadline would be reached; the caller says what giving up means.
    """

    def give_up(state: RetryCallState) -> bool:
        if max_attempts is not None and state.attempt_number >= max_attempts:
            return True
        return seconds_left is not None and seconds_left() <= state.upcoming_sleep

    def announce(state: RetryCallState) -> None:
        failure = state.outcome.exception() if state.outcome is not None else None
        if before_wait is not None and failure is not None:
            before_wait(failure, state.upcoming_sleep)

    retryer: AsyncRetrying = AsyncRetrying(
        retry=retry_if_exception(when),
        wait=wait_exponential(multiplier=backoff.first_s, exp_base=2, max=backoff.cap_s),
        stop=give_up,
        before_sleep=announce,
        reraise=True,
    )

    async def once() -> T:  # a coroutine function, as tenacity tells awaitables apart
        return await call()

    return await retryer(once)


__all__ = ["FIRST_WAIT_S", "Backoff", "authority_away", "retrying"]
