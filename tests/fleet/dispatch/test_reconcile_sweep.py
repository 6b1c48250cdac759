"""The reconcile walked a slice per round: a deep queue does not hold the first cycle back, no
round reads more than a slice, and every rule of the whole reconcile still holds while jobs are
submitted, admitted and dispatched between slices (a dispatcher in-process on fakeredis and a
real Redis)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import redis

from fleet.dispatch.context import Context
from fleet.dispatch.dispatcher import Dispatcher, DispatcherSettings
from fleet.dispatch.sweep import Sweep
from fleet.jobs import current_state, submit
from fleet.jobs.phases import Phase
from fleet.jobs.store import walk_jobs
from fleet.jobs.submit import job_key
from fleet.kinds import FLEET_JOB_KINDS
from fleet.placement import MemberCapacity, Placer
from fleet.state import Objects
from queues import JobState, Ledger
from tests.fleet.dispatch.conftest import t9k_job
from tests.fleet.dispatch.test_reconcile import admitted, one
from tests.fleet.placement.factory import node
from tests.support.job_states import dispatch
from tests.support.kinds import FLEET_ASCENDJOB

SLICE = 40


@pytest.fixture
def dispatcher(redis_client: redis.Redis) -> Iterator[Dispatcher]:
    """A leader over one member of two 8-NPU nodes (sixteen one-NPU jobs run at once), its lease
    long enough to outlast a test's setup on a loaded machine (no renewer runs)."""
    ctx = Context(redis_client)
    placer = Placer(ctx.reservations)
    placer.add_member(MemberCapacity.from_lists("member-1", [node("n0", 8), node("n1", 8)], [], {}))
    d = Dispatcher(
        ctx, placer, holder="test", settings=DispatcherSettings(reconcile_slice=SLICE, lease_ttl=120)
    )
    assert d.lease.acquire()
    yield d
    d.lease.release()


def held(ledger: Ledger, keys: Sequence[str]) -> dict[str, JobState]:
    return dict(zip(keys, ledger.states(list(keys)), strict=True))


def test_a_slice_never_holds_more_than_its_size_and_every_entry_comes_once() -> None:
    """HSCAN's COUNT is a hint: a step may return more. What is beyond the slice waits for the
    next one; the sources are walked in order, each to its end."""
    data = {"a": list(range(103)), "b": [], "c": list(range(1000, 1007))}

    def steps(items: list[int], width: int) -> Any:
        def step(cursor: int, count: int) -> tuple[int, list[int]]:
            chunk = items[cursor : cursor + width]  # ignores count, as HSCAN may
            end = cursor + width >= len(items)
            return (0 if end else cursor + width), chunk

        return step

    sweep = Sweep([(name, steps(items, 25)) for name, items in data.items()], size=10)
    slices: list[tuple[str, list[int]]] = []
    while not sweep.done:
        slices.append(sweep.take())
    assert all(len(found) <= 10 for _, found in slices)
    assert [n for n, found in slices if found] == ["a"] * 11 + ["c"]
    for name, items in data.items():
        assert [x for n, found in slices if n == name for x in found] == items
    assert sweep.taken == 110
    with pytest.raises(LookupError):
        sweep.take()


def test_the_first_cycle_places_while_a_reconcile_over_many_jobs_has_read_one_slice(
    dispatcher: Dispatcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """300 stored jobs the ledger lost (the API died between storing and queueing each) and one
    it holds: the first round places, having queued no more than a slice of the lost ones; the
    rounds after queue the rest a slice at a time; jobs submitted while the ledger is walked keep
    their place; and at the end every job is queued or placed, the ledger agreeing with them."""
    ctx = dispatcher.ctx
    keys = [f"default/j{i:03}" for i in range(301)]
    for key in keys:
        submit(ctx.objects, ctx.ledger, one(key.split("/")[1]))
    for key in keys[1:]:
        ctx.ledger.release(key)  # lost by the ledger, still stored: accepted

    assert dispatcher.step() > 0  # the first cycle: placed before the walk ended
    first = held(ctx.ledger, keys)
    restored = [k for k in keys[1:] if first[k] is not JobState.ABSENT]
    assert 0 < len(restored) <= SLICE
    assert first[keys[0]] is JobState.ADMITTED

    arrivals: list[str] = []
    scan = Ledger.scan

    def scan_after_arrivals(self: Ledger, *args: Any, **kwargs: Any) -> Any:
        """Jobs arrive once the stored jobs are walked, before the ledger's entries are: they
        are in no slice of objects, and must not be taken for entries whose job is gone."""
        if not arrivals:
            for i in range(25):
                arrivals.append(
                    f"default/{submit(ctx.objects, ctx.ledger, one(f'late-{i}'))['metadata']['name']}"
                )
        return scan(self, *args, **kwargs)

    monkeypatch.setattr(Ledger, "scan", scan_after_arrivals)
    rounds = 1
    while dispatcher.reconciler.walk is not None:
        dispatcher.step()
        rounds += 1
        known = held(ctx.ledger, keys)
        assert sum(s is not JobState.ABSENT for s in known.values()) <= 1 + SLICE * rounds
    assert rounds >= 300 // SLICE
    assert arrivals
    final = held(ctx.ledger, keys + arrivals)
    assert all(state is not JobState.ABSENT for state in final.values()), final
    assert ctx.ledger.rebuild() == []


def test_an_admitted_job_dispatched_while_its_slice_is_read_is_not_sent_again(
    dispatcher: Dispatcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its worker marks it Dispatched, then clears its in-flight mark, between the slice's read of
    the object (Admitted) and of the marks (none): it is read again, found Dispatched, not sent."""
    ctx = dispatcher.ctx
    submit(ctx.objects, ctx.ledger, one("racing"))
    admitted(ctx, "racing", "member-1")
    marks = ctx.client.zmscore

    def dispatched_meanwhile(key: Any, members: Any) -> Any:
        def mark(obj: dict[str, Any]) -> dict[str, Any] | None:
            if current_state(obj) == Phase.DISPATCHED:
                return None  # the reconcile reads other sorted sets too (its copy records)
            return dispatch(obj, "created in member-1")

        ctx.objects.mutate(FLEET_ASCENDJOB, "default", "racing", mark)
        return marks(key, members)

    monkeypatch.setattr(ctx.client, "zmscore", dispatched_meanwhile)
    dispatcher.reconcile()
    assert ctx.queue.get_jobs() == []
    assert current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", "racing")) == Phase.DISPATCHED


def test_objects_scan_walks_every_stored_object_of_a_kind(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    ledger = Ledger(redis_client)
    names = {f"s{i}" for i in range(130)}
    for name in names:
        submit(objects, ledger, one(name))
    seen: set[str] = set()
    cursor, steps = 0, 0
    while True:
        cursor, found = objects.scan(FLEET_ASCENDJOB, cursor, 20)
        seen.update(obj["metadata"]["name"] for obj in found)
        assert all(obj["metadata"]["resourceVersion"] for obj in found)
        steps += 1
        if not cursor:
            break
    assert seen == names and steps > 1


def test_walk_jobs_yields_every_stored_job_of_every_kind(redis_client: redis.Redis) -> None:
    """The syncer's resync and cluster failover walk the jobs a slice at a time, not as one list."""
    objects = Objects(redis_client)
    ledger = Ledger(redis_client)
    for i in range(45):
        submit(objects, ledger, one(f"w{i}"))
    for i in range(3):
        submit(objects, ledger, t9k_job(f"t{i}", npus=1))
    stored = [job_key(obj) for rt in FLEET_JOB_KINDS for obj in objects.list(rt)[0]]
    walked = [job_key(obj) for obj in walk_jobs(objects, count=10)]
    assert len(stored) == 48 and sorted(set(walked)) == sorted(stored)
