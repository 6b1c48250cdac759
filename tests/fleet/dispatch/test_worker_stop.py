"""A ``fleet worker`` stopped by SIGTERM while its member is still answering: a propagation task
returns as soon as it has handed its creates to the member's lane, so the worker's own stop
waits for them. The copies are made and the jobs marked Dispatched before it exits, cleanly,
with no other worker and no syncer to make up for it."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from fleet.dispatch.handback import inflight_entry
from fleet.jobs import current_state
from fleet.jobs.phases import Phase
from fleet.state.dispatch_keys import DEFAULT_DISPATCH_KEYS
from tests.fleet.dispatch.conftest import MODULE_POOL, RunningFleet
from tests.fleet.placement.factory import job
from tests.support.kinds import FLEET_ASCENDJOB

pytestmark = pytest.mark.integration

MEMBER = "member-1"
NS = "team-a"
#: Long enough that SIGTERM reaches the worker while every create is still in the lane.
LATENCY_MS = 2500


def test_a_stopping_worker_finishes_and_marks_the_creates_its_lanes_hold(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(members={MEMBER: MODULE_POOL}, workers=1, syncer=False, tree=None)
    fleet.sim.fault(MEMBER, "slow", ms=LATENCY_MS, probes=False)
    names = [f"s{i}" for i in range(3)]
    for name in names:
        obj = job(name, workers=0, npus=1, exclusive=False)
        obj["metadata"]["namespace"] = NS
        fleet.submit(obj)

    def states() -> list[str | None]:
        return [current_state(fleet.objects.get(FLEET_ASCENDJOB, NS, n)) for n in names]

    def claimed() -> bool:
        """Every create in flight under the worker's claim (a deadline seconds away), not only
        under the dispatcher's (``inflight_timeout``, 30 s)."""
        scores = [float(s or 0) for s in fleet.client.zmscore(DEFAULT_DISPATCH_KEYS.inflight, entries())]
        return all(0 < score < time.time() + 10 for score in scores)

    def entries() -> list[str]:
        uids = [fleet.objects.get(FLEET_ASCENDJOB, NS, n)["metadata"]["uid"] for n in names]
        return [inflight_entry(f"{NS}/{n}", uid, 1) for n, uid in zip(names, uids, strict=True)]

    fleet.wait_for("the jobs admitted", lambda: all(s == Phase.ADMITTED for s in states()), 30)
    fleet.wait_for("the worker to take the creates", claimed, 10)
    assert states() == [Phase.ADMITTED] * len(names)  # the member has not answered yet
    stopping = time.monotonic()
    assert fleet.procs.terminate("worker-1", timeout=30) == 0, fleet.procs.logs()
    assert time.monotonic() - stopping >= LATENCY_MS / 1000 / 2, "the worker did not wait for its lanes"
    assert states() == [Phase.DISPATCHED] * len(names), fleet.procs.logs()
    uids = {str(fleet.objects.get(FLEET_ASCENDJOB, NS, n)["metadata"]["uid"]) for n in names}
    copies = fleet.member_copies()
    assert {uid: copies.get(uid) for uid in uids} == {uid: [MEMBER] for uid in uids}
    assert fleet.client.zcard(DEFAULT_DISPATCH_KEYS.inflight) == 0
