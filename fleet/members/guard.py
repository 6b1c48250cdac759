"""Per-member isolation of calls: a bulkhead and a circuit breaker, one of each per member.

A member that answers slowly or not at all must cost its callers little and cost the callers of
other members nothing. Two guards, as resilience libraries define them (Nygard's *Release It!*,
resilience4j's ``Bulkhead`` and ``CircuitBreaker``), sit in front of every request-response call
a :class:`fleet.members.Member` makes (watches and health probes are the syncer's own channels
and stay outside them):

:class:`Bulkhead`
    At most ``max_concurrent`` calls to the member at once in this process; a call that finds
    them all busy waits at most ``max_wait`` seconds for a slot, then fails at once
    (:class:`BulkheadFull`) rather than queueing behind a member that is not answering.

:class:`CircuitBreaker`
    ``closed``: calls go through; ``failure_threshold`` transient failures in a row (timeouts,
    refused connections, 429/5xx: never a refusal, which is an answer) *open* it. ``open``:
    calls fail at once (:class:`CircuitOpen`) for ``reset_timeout`` seconds. Then ``half-open``:
    up to ``half_open_calls`` trial calls go through (the others still fail at once); a trial
    that succeeds closes it, one that fails opens it again for another ``reset_timeout``.
    A breaker remembers whether the failures that opened it were timeouts (``timed_out``): a
    member that answers too slowly is *degraded* (:mod:`fleet.dispatch.degraded`), one that
    refuses connections is down, and callers treat the two differently.

pybreaker (the well-kept Python breaker) was considered: its ``call`` holds the breaker's lock
for the whole guarded call, so calls through one breaker run one at a time, and its half-open
state lets every waiting call through; neither fits a bulkhead of concurrent calls. This one is
small, typed and thread-safe, and never holds its lock across a call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from fleet.members.errors import MemberUnavailable

__all__ = [
    "Bulkhead",
    "BulkheadFull",
    "CircuitBreaker",
    "CircuitOpen",
    "State",
    "Transition",
]


class State(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


class CircuitOpen(MemberUnavailable):
    """The member's breaker is open: the call was not made. ``timed_out`` says whether the
    failures that opened it were timeouts (the member is slow) or not (it is down or failing)."""

    def __init__(
        self, member: str, operation: str, *, timed_out: bool, retry_in: float, last: str = ""
    ) -> None:
        why = "its calls kept timing out" if timed_out else "its calls kept failing"
        # What others read is what the member last did (the log line says the call was not made).
        said = last or f"not called: {why}"
        super().__init__(
            member,
            operation,
            f"circuit open: {why}; not called for {retry_in:.1f}s more; last failure: {last or '-'}",
            summary=said,
            timed_out=timed_out,
        )
        self.retry_in = retry_in


class BulkheadFull(MemberUnavailable):
    """Every call slot of the member was busy for longer than the bulkhead lets a call wait."""

    def __init__(self, member: str, operation: str, limit: int) -> None:
        super().__init__(
            member,
            operation,
            f"bulkhead full: {limit} calls already in progress",
            summary=f"not called: {limit} calls to it already in progress",
        )


class Bulkhead:
    """At most ``max_concurrent`` calls at once; a call waits at most ``max_wait`` for a slot."""

    def __init__(self, member: str, max_concurrent: int, max_wait: float) -> None:
        if max_concurrent < 1:
            raise ValueError("max_concurrent: must be at least 1")
        self.member = member
        self.max_concurrent = max_concurrent
        self.max_wait = max_wait
        self._slots = threading.BoundedSemaphore(max_concurrent)
        self._lock = threading.Lock()
        self._busy = 0

    @property
    def busy(self) -> int:
        with self._lock:
            return self._busy

    def acquire(self, operation: str) -> None:
        """Take a slot, or raise :class:`BulkheadFull` after ``max_wait`` seconds."""
        if not self._slots.acquire(timeout=self.max_wait):
            raise BulkheadFull(self.member, operation, self.max_concurrent)
        with self._lock:
            self._busy += 1

    def release(self) -> None:
        with self._lock:
            self._busy -= 1
        self._slots.release()


@dataclass(frozen=True)
class Transition:
    """A change of a breaker's state, handed to its listener (outside the breaker's lock)."""

    member: str
    before: State
    after: State
    timed_out: bool
    failures: int
    #: Opened by :meth:`CircuitBreaker.trip` on what another process found, not by its own calls.
    tripped: bool = False


Listener = Callable[[Transition], None]

_CLOCK: Final = time.monotonic


class CircuitBreaker:
    """A member's breaker: :meth:`before_call` before each call, then :meth:`on_success` or
    :meth:`on_failure` (transient failures only) after it. Thread-safe; the lock is never held
    while the call runs, so calls go on concurrently (the bulkhead bounds how many)."""

    def __init__(
        self,
        member: str,
        *,
        failure_threshold: int,
        reset_timeout: float,
        half_open_calls: int = 1,
        listener: Listener | None = None,
        clock: Callable[[], float] = _CLOCK,
    ) -> None:
        if failure_threshold < 1 or half_open_calls < 1 or reset_timeout <= 0:
            raise ValueError("failure_threshold, half_open_calls >= 1 and reset_timeout > 0 are required")
        self.member = member
        self.failure_threshold = failure_threshold
        self.reset_timeout = reset_timeout
        self.half_open_calls = half_open_calls
        self.listener = listener
        self._clock = clock
        self._lock = threading.Lock()
        self._state = State.CLOSED
        self._failures = 0
        self._timeouts = 0
        self._opened_at = 0.0
        self._timed_out = False
        self._trials = 0
        self._last = ""

    @property
    def state(self) -> State:
        with self._lock:
            return self._state_now()

    @property
    def timed_out(self) -> bool:
        """Whether the failures that last opened the breaker were timeouts."""
        with self._lock:
            return self._timed_out

    def _state_now(self) -> State:
        if self._state is State.OPEN and self._clock() - self._opened_at >= self.reset_timeout:
            return State.HALF_OPEN
        return self._state

    def before_call(self, operation: str) -> None:
        """Let the call go through, or raise :class:`CircuitOpen`."""
        transition = None
        with self._lock:
            state = self._state_now()
            if state is State.OPEN:
                raise CircuitOpen(
                    self.member,
                    operation,
                    timed_out=self._timed_out,
                    retry_in=self.reset_timeout - (self._clock() - self._opened_at),
                    last=self._last,
                )
            if state is State.HALF_OPEN:
                if self._state is State.OPEN:  # the reset timeout just passed: trials begin
                    transition = self._move(State.HALF_OPEN)
                    self._trials = 0
                if self._trials >= self.half_open_calls:
                    raise CircuitOpen(
                        self.member, operation, timed_out=self._timed_out, retry_in=0.0, last=self._last
                    )
                self._trials += 1
        self._tell(transition)

    def on_success(self) -> None:
        transition = None
        with self._lock:
            self._failures = self._timeouts = 0
            if self._state is not State.CLOSED:
                transition = self._move(State.CLOSED)
                self._timed_out = False
        self._tell(transition)

    def on_failure(self, *, timed_out: bool, summary: str = "") -> None:
        """A transient failure (``timed_out``: the member did not answer in time); ``summary``,
        what went wrong without any address, is what calls refused while open say."""
        transition = None
        with self._lock:
            self._failures += 1
            self._last = summary or self._last
            self._timeouts = self._timeouts + 1 if timed_out else 0
            state = self._state_now()
            if state is State.HALF_OPEN or (
                state is State.CLOSED and self._failures >= self.failure_threshold
            ):
                self._timed_out = timed_out or self._timeouts >= self.failure_threshold
                self._opened_at = self._clock()
                transition = self._move(State.OPEN)
        self._tell(transition)

    def trip(self, *, timed_out: bool) -> None:
        """Open the breaker now (another process found the member degraded)."""
        transition = None
        with self._lock:
            if self._state_now() is State.OPEN:
                return
            self._timed_out = timed_out
            self._opened_at = self._clock()
            transition = self._move(State.OPEN, force=True, tripped=True)
        self._tell(transition)

    def _move(self, after: State, *, force: bool = False, tripped: bool = False) -> Transition | None:
        before = self._state
        self._state = after
        if before is after and not force:
            return None
        return Transition(self.member, before, after, self._timed_out, self._failures, tripped)

    def _tell(self, transition: Transition | None) -> None:
        if transition is not None and self.listener is not None:
            self.listener(transition)
