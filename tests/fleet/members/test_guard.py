"""The per-member bulkhead and circuit breaker (closed / open / half-open, as resilience4j and
pybreaker define them), and how a member's calls go through them."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from fleet.members import Member, MemberUnavailable
from fleet.members.guard import Bulkhead, BulkheadFull, CircuitBreaker, CircuitOpen, State, Transition
from fleet.members.retry import Caller
from fleet.members.settings import MemberSettings, SettingsError
from tests.fleet.members.conftest import FAST, MemberServer, member_for, state_of


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _breaker(clock: Clock, seen: list[Transition]) -> CircuitBreaker:
    return CircuitBreaker("m1", failure_threshold=3, reset_timeout=5.0, listener=seen.append, clock=clock)


def test_consecutive_failures_open_the_breaker_and_a_success_in_between_resets_the_count() -> None:
    clock, seen = Clock(), list[Transition]()
    breaker = _breaker(clock, seen)
    for _ in range(2):
        breaker.before_call("get_job")
        breaker.on_failure(timed_out=True)
    breaker.before_call("get_job")
    breaker.on_success()  # the count starts again
    for _ in range(2):
        breaker.before_call("get_job")
        breaker.on_failure(timed_out=False)
    assert state_of(breaker) is State.CLOSED and seen == []
    breaker.before_call("get_job")
    breaker.on_failure(timed_out=False, summary="connection refused")
    assert state_of(breaker) is State.OPEN
    assert [(t.before, t.after, t.timed_out) for t in seen] == [(State.CLOSED, State.OPEN, False)]
    with pytest.raises(CircuitOpen) as caught:
        breaker.before_call("create_job")
    assert isinstance(caught.value, MemberUnavailable) and not caught.value.timed_out
    assert caught.value.retry_in == pytest.approx(5.0)
    assert caught.value.summary.startswith("connection refused")  # what it last saw, no address


def test_timeouts_open_it_as_degraded_then_one_trial_at_a_time_after_the_reset_timeout() -> None:
    clock, seen = Clock(), list[Transition]()
    breaker = _breaker(clock, seen)
    for _ in range(3):
        breaker.before_call("create_job")
        breaker.on_failure(timed_out=True)
    assert state_of(breaker) is State.OPEN and breaker.timed_out
    with pytest.raises(CircuitOpen) as caught:
        breaker.before_call("create_job")
    assert caught.value.timed_out
    clock.now += 5.0
    assert state_of(breaker) is State.HALF_OPEN
    breaker.before_call("create_job")  # the trial
    with pytest.raises(CircuitOpen):
        breaker.before_call("create_job")  # only one trial at a time
    breaker.on_failure(timed_out=True)  # the trial failed: open again, for another reset timeout
    assert state_of(breaker) is State.OPEN
    clock.now += 4.9
    with pytest.raises(CircuitOpen):
        breaker.before_call("create_job")
    clock.now += 0.1
    breaker.before_call("create_job")
    breaker.on_success()
    assert state_of(breaker) is State.CLOSED
    assert [(t.before, t.after) for t in seen] == [
        (State.CLOSED, State.OPEN),
        (State.OPEN, State.HALF_OPEN),
        (State.HALF_OPEN, State.OPEN),
        (State.OPEN, State.HALF_OPEN),
        (State.HALF_OPEN, State.CLOSED),
    ]


def test_a_trip_opens_it_without_a_call_and_says_so() -> None:
    clock, seen = Clock(), list[Transition]()
    breaker = _breaker(clock, seen)
    breaker.trip(timed_out=True)
    assert state_of(breaker) is State.OPEN and seen[-1].tripped and seen[-1].timed_out
    breaker.trip(timed_out=True)  # already open: nothing new
    assert len(seen) == 1


def test_the_bulkhead_bounds_concurrent_calls_and_how_long_one_waits_for_a_slot() -> None:
    bulkhead = Bulkhead("m1", max_concurrent=2, max_wait=0.05)
    bulkhead.acquire("a")
    bulkhead.acquire("b")
    assert bulkhead.busy == 2
    started = time.monotonic()
    with pytest.raises(BulkheadFull):
        bulkhead.acquire("c")
    assert time.monotonic() - started < 1.0
    bulkhead.release()
    bulkhead.acquire("c")
    bulkhead.release()
    bulkhead.release()
    assert bulkhead.busy == 0


def test_isolation_settings_are_checked() -> None:
    with pytest.raises(SettingsError, match="max_concurrent_calls"):
        MemberSettings(max_concurrent_calls=0)
    with pytest.raises(SettingsError, match="breaker_failures"):
        MemberSettings(breaker_failures=2.5)  # type: ignore[arg-type]


def test_a_timed_out_call_is_not_retried_past_the_budget_and_then_fails_fast(
    member_server: MemberServer, tmp_path: Path
) -> None:
    """A member answering later than the request timeout costs one attempt per call (not
    ``attempts`` of them), and once the breaker opens on timeouts, nothing at all."""
    settings = replace(FAST, request_timeout=0.3, call_budget=0.5, breaker_failures=2, breaker_reset=30.0)
    member: Member = member_for(member_server, tmp_path, settings)
    member_server.faults.delay(1.0, path="/api/v1/nodes")
    for _ in range(2):
        started = time.monotonic()
        with pytest.raises(MemberUnavailable) as caught:
            member.list_nodes()
        assert caught.value.timed_out
        assert time.monotonic() - started < 0.9  # one attempt of 0.3 s, not three
    assert state_of(member.breaker) is State.OPEN and member.breaker.timed_out
    started = time.monotonic()
    with pytest.raises(CircuitOpen):
        member.list_nodes()
    assert time.monotonic() - started < 0.1
    assert member.probe().healthy  # probes are not guarded


def test_calls_to_one_member_run_concurrently_through_its_breaker(
    member_server: MemberServer, tmp_path: Path
) -> None:
    """The breaker never holds its lock across a call (pybreaker's does): four slow calls at
    once take the time of one."""
    member = member_for(member_server, tmp_path, FAST)
    member_server.faults.delay(0.5, path="/api/v1/nodes")
    started = time.monotonic()
    threads = [threading.Thread(target=member.list_nodes) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert time.monotonic() - started < 1.5


def test_caller_guards_only_calls_that_retry() -> None:
    caller = Caller("m1", replace(FAST, breaker_failures=1))
    caller.breaker.trip(timed_out=False)
    assert caller("probe", lambda: 1, retry=False) == 1  # not guarded
    with pytest.raises(CircuitOpen):
        caller("get_job", lambda: 1)


@pytest.mark.parametrize("error", [RecursionError("maximum recursion depth exceeded"), TypeError("a set")])
def test_a_request_that_cannot_be_built_is_the_callers_error_not_the_members(error: Exception) -> None:
    """A body the client cannot serialise fails the same way on every try and on every member:
    it is raised as it is (the worker fails the job's copy), never ``MemberUnavailable`` (which
    would send it again for ever), and it opens no breaker."""
    caller = Caller("m1", replace(FAST, breaker_failures=1))
    calls = 0

    def build() -> int:
        nonlocal calls
        calls += 1
        raise error

    with pytest.raises(type(error)):
        caller("create_job", build)
    assert calls == 1, "not retried"
    assert caller.breaker.state is State.CLOSED
    assert caller("get_job", lambda: 2) == 2
