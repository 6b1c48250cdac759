"""The running system end to end: real Redis, simulated members over HTTP, real RQ workers.

Each test starts the three roles as processes (``tests/fleet/dispatch/conftest.py``), submits
jobs the way the fleet API does, and checks what a platform team relies on: every job finishes,
no quota is ever exceeded (sampled throughout), no job runs in two members, and usage is back
to zero at the end.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest

from queues import Ledger
from tests.fleet.dispatch.conftest import InvariantMonitor, RunningFleet, mixed_job

pytestmark = pytest.mark.integration

LIMITS = {
    "root": {"huawei.com/Ascend910": 56, "kube-queue/max-jobs": 40},
    "team-a": {"huawei.com/Ascend910": 40, "kube-queue/max-jobs": 24},
    "team-b": {"huawei.com/Ascend910": 32, "kube-queue/max-jobs": 24},
}


def _all_finished(fleet: RunningFleet, count: int) -> Callable[[], bool]:
    def check() -> bool:
        states = fleet.states()
        return len(states) == count and all(s == "Succeeded" for s in states.values())

    return check


def _assert_drained(ledger: Ledger) -> None:
    assert ledger.records() == {}, "admitted jobs left in the ledger"
    assert ledger.pending.records() == {}, "pending jobs left in the ledger"
    for node, used in ledger.usages(list(LIMITS)).items():
        assert all(v == 0 for v in used.values()), f"{node} still uses {used}"
    assert ledger.rebuild() == []


def _no_duplicates(fleet: RunningFleet) -> None:
    doubled = {uid: members for uid, members in fleet.member_copies().items() if len(members) > 1}
    if doubled:
        fleet.violations.append(f"jobs with copies in two members: {doubled}")


def test_a_thousand_mixed_jobs_through_three_members(fleet_factory: Callable[..., RunningFleet]) -> None:
    fleet = fleet_factory(workers=2)
    count = 1000
    with InvariantMonitor(fleet, LIMITS) as monitor:
        for i in range(count):
            fleet.submit(mixed_job(i, "team-a" if i % 3 else "team-b", duration=0.2))
        fleet.wait_for("1000 jobs to succeed", _all_finished(fleet, count), timeout=400)
    assert monitor.samples > 10
    assert fleet.violations == []
    _assert_drained(fleet.ledger)


@pytest.mark.parametrize("seed", [1, 2])
def test_kill_dispatcher_and_workers_at_random_moments(
    fleet_factory: Callable[..., RunningFleet], seed: int
) -> None:
    rng = random.Random(seed)
    fleet = fleet_factory(workers=2)
    count = 200
    with InvariantMonitor(fleet, LIMITS):
        for i in range(count):
            fleet.submit(mixed_job(i, "team-a" if i % 2 else "team-b", duration=0.3))
        for _ in range(4):
            time.sleep(rng.uniform(0.5, 2.0))
            fleet.procs.restart(rng.choice(["dispatcher", "worker-1", "worker-2"]))
            _no_duplicates(fleet)
        fleet.wait_for(f"{count} jobs to succeed", _all_finished(fleet, count), timeout=300)
    assert fleet.violations == []
    _assert_drained(fleet.ledger)


def test_redis_restarted_from_its_aof_mid_run(fleet_factory: Callable[..., RunningFleet]) -> None:
    fleet = fleet_factory(workers=2)
    count = 200
    with InvariantMonitor(fleet, LIMITS):
        for i in range(count):
            fleet.submit(mixed_job(i, "team-a" if i % 2 else "team-b", duration=0.3))
        time.sleep(2.0)
        fleet.redis_server.restart()
        fleet.wait_for(f"{count} jobs to succeed", _all_finished(fleet, count), timeout=300)
    assert fleet.violations == []
    _assert_drained(fleet.ledger)
