"""The capacity feeder against a running ``fleet sim``: watches keep summaries and holds current."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from prometheus_client import REGISTRY

from fleet.ascend import NPU_RESOURCE
from fleet.members import load_members
from fleet.placement import MemoryReservations, Placer, job_pod_key
from fleet.placement.feeder import CapacityFeeder
from fleet.workloads import ascendjob
from tests.fleet.placement.factory import sample_job
from tests.support.kinds import JOBS
from tests.support.sim import CARD_POOL, RunningSim, running_sim, small_topology

pytestmark = pytest.mark.integration

MODULE_POOL = {
    **CARD_POOL,
    "prefix": "module",
    "labels": {**CARD_POOL["labels"], "accelerator-type": "module-910b-8"},
    "allocatable": {**CARD_POOL["allocatable"], NPU_RESOURCE: "8"},
}


@pytest.fixture
def two_members() -> Iterator[RunningSim]:
    topology = small_topology({"cards": CARD_POOL, "modules": MODULE_POOL}, jobDurationSeconds=600)
    with running_sim(topology) as sim:
        yield sim


def _eventually(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def _pod_events(kind: str) -> float:
    labels = {"member": "cards", "resource": "pods", "type": kind}
    return REGISTRY.get_sample_value("fleet_placement_capacity_events_total", labels) or 0.0


def test_a_placed_job_is_held_until_its_member_pods_are_bound(two_members: RunningSim) -> None:
    members = load_members(two_members.kubeconfig)
    store = MemoryReservations()
    placer = Placer(store)
    feeder = CapacityFeeder(placer, members)
    feeder.start()
    try:
        assert feeder.wait_synced(15.0)
        _eventually(lambda: placer.member("cards").free_total(NPU_RESOURCE) == 8)
        with feeder.lock:
            assert placer.member("modules").free_total(NPU_RESOURCE) == 32
            assert placer.member("cards").class_count == 1  # four identical nodes, one class
            demand = ascendjob.demand(sample_job())
            decision = placer.place(demand, reservation_id=job_pod_key("uid-1", 0), job="default/sample")
        assert decision is not None and decision.member == "cards"
        added_before = _pod_events("ADDED")
        woken: list[int] = []
        feeder.on_change = lambda: woken.append(1)  # the dispatcher's wake, in production
        # Held: the two pods' NPUs are gone from the fit before anything exists in the member.
        assert placer.member("cards").free_total(NPU_RESOURCE) == 4
        copy = ascendjob.member_copy(sample_job(), "uid-1", 0)
        members["cards"].create_job(JOBS, "default", copy)
        # The simulated operator creates the pods, its scheduler binds them, the watch delivers
        # them: the hold ends and the real usage takes its place.
        _eventually(lambda: not store.reservations("cards", time.time()))
        with feeder.lock:
            assert placer.member("cards").bound_pods(job_pod_key("uid-1", 0)) == 2
            assert placer.member("cards").free_total(NPU_RESOURCE) == 4
            assert placer.member("cards").held("card-0") == {}
        assert _pod_events("ADDED") == added_before + 2  # the two pods, each counted once
        assert woken, "the pods' capacity changed but the feeder woke no one"
    finally:
        feeder.stop()
        for member in members.values():
            member.close()
