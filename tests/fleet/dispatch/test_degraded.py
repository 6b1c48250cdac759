"""The degraded mark (a member whose calls keep timing out), as every role reads it in Redis."""

from __future__ import annotations

import time

import redis

from fleet.dispatch import degraded
from fleet.dispatch.degraded import Marks, adopt
from fleet.members.guard import CircuitBreaker, State, Transition
from fleet.state.dispatch_keys import DEFAULT_DISPATCH_KEYS as KEYS


def test_a_mark_keeps_its_since_while_renewed_and_is_cleared_by_a_success(fake_redis: redis.Redis) -> None:
    first = degraded.mark(fake_redis, KEYS, "m1", reason="3 calls in a row timed out", failures=3, hold=0.2)
    assert degraded.active(fake_redis, KEYS) == {"m1"}
    time.sleep(0.3)
    assert degraded.active(fake_redis, KEYS) == frozenset()  # lapsed: the dispatcher may try it again
    assert degraded.read(fake_redis, KEYS)["m1"].since == first  # but it is still degraded since then
    again = degraded.mark(fake_redis, KEYS, "m1", reason="trial timed out", failures=1, hold=5.0)
    assert again == first
    mark = degraded.read(fake_redis, KEYS)["m1"]
    assert mark.holds(time.time()) and mark.reason == "trial timed out"
    assert degraded.clear(fake_redis, KEYS, "m1")
    assert degraded.read(fake_redis, KEYS) == {}


def test_breakers_mark_on_timeouts_clear_on_closing_and_a_trip_marks_nothing(fake_redis: redis.Redis) -> None:
    marks = Marks(fake_redis, KEYS)
    marks.on_transition(Transition("m1", State.CLOSED, State.OPEN, timed_out=False, failures=3))
    assert marks.get("m1", fresh=True) is None  # refused connections: down, not degraded
    marks.on_transition(Transition("m1", State.CLOSED, State.OPEN, timed_out=True, failures=3, tripped=True))
    assert marks.get("m1", fresh=True) is None  # opened on what another process found: no renewal
    marks.on_transition(Transition("m1", State.CLOSED, State.OPEN, timed_out=True, failures=3))
    assert marks.get("m1", fresh=True) is not None
    marks.on_transition(Transition("m1", State.HALF_OPEN, State.CLOSED, timed_out=True, failures=0))
    assert marks.get("m1", fresh=True) is None


def test_a_process_opens_its_breaker_of_a_member_marked_elsewhere(fake_redis: redis.Redis) -> None:
    degraded.mark(fake_redis, KEYS, "m1", reason="timeouts", failures=3)
    seen: list[Transition] = []
    breakers = {
        name: CircuitBreaker(name, failure_threshold=3, reset_timeout=5.0, listener=seen.append)
        for name in ("m1", "m2")
    }
    adopt(Marks(fake_redis, KEYS).current(), breakers)
    assert breakers["m1"].state is State.OPEN and breakers["m1"].timed_out
    assert breakers["m2"].state is State.CLOSED
    assert [t.tripped for t in seen] == [True]
