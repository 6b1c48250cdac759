"""An idle dispatcher waits for something to move instead of polling: a job queued to an idle
fleet is admitted at once, a member whose capacity changes wakes it, and while nothing moves it
reads the ledger a few times a second, not fifty (issue 30: cost that is paid busy or idle).

The dispatcher runs its real loop in a thread, on fakeredis and on a real redis-server, with an
``idle_cap`` far longer than the waits asserted, so that only a wake can explain them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from fleet.dispatch.context import Context
from fleet.dispatch.dispatcher import Dispatcher, DispatcherSettings
from fleet.jobs import submit
from fleet.placement import MemberCapacity, Placer
from queues import JobState, Ledger
from tests.fleet.dispatch.test_reconcile import one
from tests.fleet.placement.factory import job, node

#: Longer than any wait below: a round that starts sooner was woken.
CAP = 6.0


class Running:
    def __init__(self, dispatcher: Dispatcher, stop: threading.Event) -> None:
        self.dispatcher = dispatcher
        self.stop = stop


@pytest.fixture
def running(redis_client: redis.Redis) -> Iterator[Running]:
    """A leader over one member of one 8-NPU node, its loop running in a thread and idle."""
    ctx = Context(redis_client)
    placer = Placer(ctx.reservations)
    placer.add_member(MemberCapacity.from_lists("member-1", [node("n0", 8)], [], {}))
    dispatcher = Dispatcher(ctx, placer, holder="test", settings=DispatcherSettings(idle_cap=CAP))
    stop = threading.Event()
    thread = threading.Thread(target=dispatcher.run, args=(stop,), daemon=True)
    thread.start()
    _until(lambda: dispatcher.lease.held, 10.0)
    time.sleep(0.5)  # its first rounds found nothing: it waits
    yield Running(dispatcher, stop)
    stop.set()
    thread.join(10.0)
    assert not thread.is_alive(), "the dispatcher did not stop"


def _until(check: Callable[[], bool], timeout: float) -> float:
    """Seconds until ``check`` holds (fails after ``timeout``)."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise AssertionError("not reached in time")
        time.sleep(0.01)
    return time.monotonic() - started


def eight(name: str) -> dict[str, Any]:
    """A one-pod job of a whole 8-NPU node."""
    obj = job(name, workers=0, npus=8, exclusive=False)
    obj["metadata"]["namespace"] = "default"
    return obj


def _state(ledger: Ledger, key: str) -> JobState:
    [state] = ledger.states([key])
    return state


def test_a_job_queued_to_an_idle_fleet_is_admitted_at_once(running: Running) -> None:
    ctx = running.dispatcher.ctx
    for i in range(3):  # each while the loop waits: each wakes it
        time.sleep(0.3)
        key = f"default/{submit(ctx.objects, ctx.ledger, one(f'idle-{i}'))['metadata']['name']}"

        def admitted(key: str = key) -> bool:
            return _state(ctx.ledger, key) is JobState.ADMITTED

        took = _until(admitted, CAP)
        assert took < 2.0, f"admitted {took:.2f}s after it was queued (the idle cap is {CAP}s)"


def test_a_capacity_change_wakes_the_idle_loop(running: Running) -> None:
    """The member's one node is taken; a second job waits for capacity; a node appears in the
    member (the capacity feeder calls ``wake``): the job is admitted at once, though the ledger
    did not move."""
    dispatcher, ctx = running.dispatcher, running.dispatcher.ctx
    submit(ctx.objects, ctx.ledger, eight("first"))
    _until(lambda: _state(ctx.ledger, "default/first") is JobState.ADMITTED, CAP)
    submit(ctx.objects, ctx.ledger, eight("second"))
    time.sleep(1.0)  # its rounds find no room: the loop waits
    assert _state(ctx.ledger, "default/second") is JobState.PENDING
    with dispatcher.leading.lock:
        dispatcher.placer.member("member-1").upsert_node(node("n1", 8))
    dispatcher.wake()
    took = _until(lambda: _state(ctx.ledger, "default/second") is JobState.ADMITTED, CAP)
    assert took < 2.0, f"admitted {took:.2f}s after the node came (the idle cap is {CAP}s)"


def test_an_idle_dispatcher_reads_the_ledger_a_few_times_a_second(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, an idle loop read the ledger's epoch (and every member's holds) every 20 ms."""
    reads = [0]
    epoch = Ledger.epoch

    def counted(self: Ledger) -> Any:
        reads[0] += 1
        return epoch(self)

    monkeypatch.setattr(Ledger, "epoch", counted)
    time.sleep(2.0)
    assert reads[0] <= 4, f"{reads[0]} reads of the epoch in 2 s of idling"
    running.dispatcher.wake()  # and a wake is a round
    _until(lambda: reads[0] > 0, 2.0)
