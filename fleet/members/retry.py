"""One call against a member: timed, retried with backoff on transient failures, typed on failure.

Every request in this package goes through :class:`Caller`, so the retry rule, the metrics and
the log lines are the same for a create, a list and a probe. Retries use tenacity: exponential
backoff with jitter, never shorter than the server's ``Retry-After`` (capped at ``backoff_max``).
A permanent answer is never retried.

A guarded call (every request-response call: watches and probes are not) also goes through the
member's :class:`~fleet.members.guard.Bulkhead` and :class:`~fleet.members.guard.CircuitBreaker`,
attempt by attempt (as resilience4j nests them: the retry outside, the breaker inside, so an
open breaker's refusal is never retried), and within the member's ``call_budget``: a retry is not
started once the budget is spent, and a timed-out attempt is retried only when a whole
``request_timeout`` still fits in it (a member answering in 11 s against a 10 s timeout costs one
attempt, not four).

A POST whose answer was lost may have been applied: retrying it can then meet ``409
AlreadyExists`` for the caller's own object. That surfaces as :class:`~fleet.members.errors.Conflict`
and the caller (the propagation worker) adopts the copy by the labels that name the fleet job.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import NoReturn, TypeVar

from kubernetes.client.exceptions import ApiException
from tenacity import RetryCallState, Retrying, retry_if_exception, wait_exponential_jitter

from fleet.members.errors import (
    MemberError,
    MemberUnavailable,
    classify,
    is_timeout,
    is_transient,
    retry_after,
)
from fleet.members.guard import Bulkhead, CircuitBreaker, CircuitOpen, Listener
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

    def __init__(self, member: str, settings: MemberSettings, *, listener: Listener | None = None) -> None:
        self.member = member
        self.settings = settings
        self.bulkhead = Bulkhead(member, settings.max_concurrent_calls, settings.bulkhead_wait)
        self.breaker = CircuitBreaker(
            member,
            failure_threshold=settings.breaker_failures,
            reset_timeout=settings.breaker_reset,
            listener=listener,
        )
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

    def _stop(self, attempts: int) -> Callable[[RetryCallState], bool]:
        budget = self.settings.call_budget
        timeout = self.settings.request_timeout

        def stop(state: RetryCallState) -> bool:
            if state.attempt_number >= attempts:
                return True
            elapsed = state.seconds_since_start or 0.0
            next_start = elapsed + (state.upcoming_sleep or 0.0)
            if next_start >= budget:
                return True
            exc = state.outcome.exception() if state.outcome is not None else None
            return exc is not None and is_timeout(exc) and next_start + timeout > budget

        return stop

    def _timed(
        self, operation: str, fn: Callable[[], T], guarded: bool, failures: list[BaseException]
    ) -> Callable[[], T]:
        histogram = REQUEST_SECONDS.labels(self.member, operation)

        def attempt() -> T:
            if guarded:
                self.bulkhead.acquire(operation)
                try:
                    self.breaker.before_call(operation)
                except BaseException:
                    self.bulkhead.release()
                    raise
            start = time.perf_counter()
            try:
                result = fn()
            except BaseException as exc:
                REQUEST_ERRORS.labels(self.member, operation, _code(exc)).inc()
                failures.append(exc)
                if guarded:
                    if is_transient(exc):
                        said = classify(self.member, operation, exc)
                        summary = said.summary if isinstance(said, MemberUnavailable) else ""
                        self.breaker.on_failure(timed_out=is_timeout(exc), summary=summary)
                    else:  # an answer (a refusal, a 404): the member is there
                        self.breaker.on_success()
                raise
            else:
                if guarded:
                    self.breaker.on_success()
                return result
            finally:
                histogram.observe(time.perf_counter() - start)
                if guarded:
                    self.bulkhead.release()

        return attempt

    def _failed(self, operation: str, exc: BaseException) -> NoReturn:
        error = classify(self.member, operation, exc)
        REQUESTS.labels(self.member, operation, type(error).__name__).inc()
        level = logging.WARNING if is_transient(exc) else logging.DEBUG
        log.log(level, "member=%s operation=%s event=failed error=%r", self.member, operation, describe(exc))
        raise error from exc

    def __call__(self, operation: str, fn: Callable[[], T], *, retry: bool = True) -> T:
        """``fn()`` with retries, guarded; raises a :class:`MemberError` subclass when it fails
        for good (:class:`~fleet.members.guard.CircuitOpen` or
        :class:`~fleet.members.guard.BulkheadFull` when it was not made). ``retry=False`` makes one
        unguarded attempt (watches and probes: their callers pace themselves)."""
        retrying = Retrying(
            stop=self._stop(self.settings.attempts if retry else 1),
            wait=self._wait,
            retry=retry_if_exception(is_transient),
            before_sleep=self._before_sleep(operation),
            reraise=True,
        )
        failures: list[BaseException] = []
        replay: BaseException | None = None
        try:
            result = retrying(self._timed(operation, fn, guarded=retry, failures=failures))
        except CircuitOpen:
            if not failures:
                REQUESTS.labels(self.member, operation, "error").inc()
                raise
            # This very call's failures opened the breaker before its last retry: what the
            # member did is the answer, not the breaker's refusal of the retry (raised outside
            # this block, so that the failure keeps its own cause).
            replay = failures[-1]
        except MemberError:
            REQUESTS.labels(self.member, operation, "error").inc()
            raise
        except (RecursionError, TypeError):
            # The request could not be built (the client's serialisation of a body nested past
            # Python's recursion limit, or holding what JSON cannot say): the caller's, not the
            # member's, so not MemberUnavailable, which would send the same body again for ever.
            REQUESTS.labels(self.member, operation, "error").inc()
            raise
        except Exception as exc:
            self._failed(operation, exc)
        if replay is not None:
            self._failed(operation, replay)
        REQUESTS.labels(self.member, operation, "ok").inc()
        return result
