"""One call against a member: timed, retried with backoff on transient failures, typed on failure.

Every request in this package goes through :class:`Caller`, so the retry rule, the metrics and
the log lines are the same for a create, a list and a probe. Retries use tenacity: exponential
backoff with jitter, never shorter than the server's ``Retry-After`` (capped at ``backoff_max``).
A permanent answer is never retried.

A POST whose answer was lost may have been applied: retrying it can then meet ``409
AlreadyExists`` for the caller's own object. That surfaces as :class:`~fleet.members.errors.Conflict`
and the caller (the propagation worker) adopts the copy by the labels that name the fleet job.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from kubernetes.client.exceptions import ApiException
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from fleet.members.errors import MemberError, classify, is_transient, retry_after
from fleet.members.metrics import REQUEST_ERRORS, REQUEST_RETRIES, REQUEST_SECONDS, REQUESTS
from fleet.members.settings import MemberSettings

__all__ = ["Caller", "describe"]

T = TypeVar("T")

log = logging.getLogger("fleet.members")


def describe(exc: BaseException) -> str:
    """A short, secret-free description of a failure for a log line."""
    if isinstance(exc, ApiException):
        return f"http {exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {exc}"[:200]


def _code(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return str(exc.status)
    return "network"


class Caller:
    """Runs member requests for one member with its settings' retry policy."""

    def __init__(self, member: str, settings: MemberSettings) -> None:
        self.member = member
        self.settings = settings
        self._expo = wait_exponential_jitter(
            multiplier=settings.backoff_initial, max=settings.backoff_max, jitter=settings.backoff_initial
        )

    def _wait(self, state: RetryCallState) -> float:
        delay: float = self._expo(state)
        exc = state.outcome.exception() if state.outcome is not None else None
        hinted = retry_after(exc) if exc is not None else None
        if hinted is not None:
            delay = max(delay, min(hinted, self.settings.backoff_max))
        return delay

    def _before_sleep(self, operation: str) -> Callable[[RetryCallState], None]:
        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            wait = state.next_action.sleep if state.next_action is not None else 0.0
            REQUEST_RETRIES.labels(self.member, operation).inc()
            log.info(
                "member=%s operation=%s event=retry attempt=%d wait=%.3f error=%r",
                self.member,
                operation,
                state.attempt_number,
                wait,
                describe(exc) if exc is not None else "",
            )

        return before_sleep

    def _timed(self, operation: str, fn: Callable[[], T]) -> Callable[[], T]:
        histogram = REQUEST_SECONDS.labels(self.member, operation)

        def attempt() -> T:
            start = time.perf_counter()
            try:
                return fn()
            except BaseException as exc:
                REQUEST_ERRORS.labels(self.member, operation, _code(exc)).inc()
                raise
            finally:
                histogram.observe(time.perf_counter() - start)

        return attempt

    def __call__(self, operation: str, fn: Callable[[], T], *, retry: bool = True) -> T:
        """``fn()`` with retries; raises a :class:`MemberError` subclass when it fails for good."""
        retrying = Retrying(
            stop=stop_after_attempt(self.settings.attempts if retry else 1),
            wait=self._wait,
            retry=retry_if_exception(is_transient),
            before_sleep=self._before_sleep(operation),
            reraise=True,
        )
        try:
            result = retrying(self._timed(operation, fn))
        except MemberError:
            REQUESTS.labels(self.member, operation, "error").inc()
            raise
        except Exception as exc:
            error = classify(self.member, operation, exc)
            REQUESTS.labels(self.member, operation, type(error).__name__).inc()
            level = logging.WARNING if is_transient(exc) else logging.DEBUG
            log.log(
                level,
                "member=%s operation=%s event=failed error=%r",
                self.member,
                operation,
                describe(exc),
            )
            raise error from exc
        REQUESTS.labels(self.member, operation, "ok").inc()
        return result
