"""A job whose member copy is gone runs again, and no ghost holds its quota (issue 29, req. 3).

Real processes (redis-server, the simulated members over HTTP, ``fleet dispatcher``, ``fleet
worker``, ``fleet syncer``). Each way a copy disappears that Fleet saw no delete event for, and
the one it did see:

* the member is rebuilt empty (``fleet sim fault M wipe``) while the syncer watches it;
* the copy is deleted at the member while no syncer runs;
* the copy is deleted at the member while the syncer watches (its DELETED event).

Every time the job's attempt ends with ``CopyLost`` (an Event saying what was missing where), its
quota is released once and taken once again, it runs again (attempt 2, on the same member: the
member is not excluded for it, and it is the only one where it fits), and the next job of a
one-job leaf is not kept waiting behind a ghost.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from fleet.jobs import attempt_of, cluster_of, condition, current_state, exclusions_of, failures_of
from fleet.state import events_for
from queues import load
from tests.fleet.dispatch.conftest import MODULE_POOL, RunningFleet
from tests.fleet.placement.factory import job
from tests.support.kinds import FLEET_ASCENDJOB
from tests.support.sim import CARD_POOL

pytestmark = pytest.mark.integration

MEMBER = "member-1"
NPU = "huawei.com/Ascend910"
GROUP, VERSION, PLURAL = "mindxdl.gitee.com", "v1", "ascendjobs"
#: One job at a time in team-a (the seed tree's shape: a leaf of max-jobs 1).
ONE_SLOT = """
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    max: {huawei.com/Ascend910: 64, kube-queue/max-jobs: 10}
    min: {huawei.com/Ascend910: 64}
    children:
    - name: team-a
      max: {huawei.com/Ascend910: 32, kube-queue/max-jobs: 1}
      min: {huawei.com/Ascend910: 32}
      namespaces: [team-a]
"""
#: The syncer checks each member often: a test waits seconds, not the default's ten.
QUICK_AUDIT = ("--audit-every", "1", "--probe-interval", "0.3")


def long_job(name: str) -> dict[str, Any]:
    obj = job(name, workers=0, npus=8, exclusive=False)
    obj["metadata"]["namespace"] = "team-a"
    obj["metadata"]["annotations"] = {"sim.fleet.io/duration-seconds": "600"}
    return obj


def _job(fleet: RunningFleet, name: str) -> dict[str, Any]:
    return fleet.objects.get(FLEET_ASCENDJOB, "team-a", name)


def _running(fleet: RunningFleet, name: str, attempt: int) -> bool:
    obj = _job(fleet, name)
    return current_state(obj) == "Running" and attempt_of(obj) == attempt


def _start(fleet_factory: Callable[..., RunningFleet]) -> RunningFleet:
    fleet = fleet_factory(
        members={MEMBER: MODULE_POOL, "member-2": CARD_POOL}, workers=1, tree=None, syncer_args=QUICK_AUDIT
    )
    fleet.ledger.apply(load(ONE_SLOT)[0])
    fleet.submit(long_job("first"))
    fleet.submit(long_job("second"))
    fleet.wait_for("the first job to run", lambda: _running(fleet, "first", 1), 30)
    return fleet


def _assert_ran_again_after_copy_lost(fleet: RunningFleet) -> None:
    fleet.wait_for("the first job to run again", lambda: _running(fleet, "first", 2), 40)
    obj = _job(fleet, "first")
    lost = [e for e in events_for(fleet.objects, obj) if e["reason"] == "CopyLost"]
    assert len(lost) == 1, [e["reason"] for e in events_for(fleet.objects, obj)]
    assert MEMBER in lost[0]["message"] and "attempt 1" in lost[0]["message"]
    assert cluster_of(obj) == MEMBER, "the member is not excluded for a lost copy"
    assert exclusions_of(obj) == {} and failures_of(obj) == 0, "a lost copy is not a failure of the job"
    # The quota: the first job once, never the ghost of its first attempt beside it.
    assert fleet.ledger.usages(["team-a"])["team-a"].get(NPU) == 8
    assert current_state(_job(fleet, "second")) == "Queued", "max-jobs 1: the second still waits"
    running = condition(obj, "Running")
    assert running is not None and running["status"] == "True"
    assert [c["type"] for c in obj["status"]["conditions"]].count("Running") == 1


def test_a_member_rebuilt_empty_loses_the_copy_and_the_job_runs_again(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = _start(fleet_factory)
    fleet.sim.fault(MEMBER, "wipe")
    _assert_ran_again_after_copy_lost(fleet)


def test_a_copy_deleted_while_no_syncer_watched_is_found_missing_when_one_starts(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = _start(fleet_factory)
    assert fleet.procs.terminate("syncer") == 0
    member = client.CustomObjectsApi(fleet.sim.api_client(MEMBER))
    member.delete_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, "first")
    time.sleep(1.0)
    assert _running(fleet, "first", 1), "no syncer runs: nobody has looked yet"
    fleet.procs.restart("syncer")
    _assert_ran_again_after_copy_lost(fleet)


def test_a_copy_deleted_at_the_member_while_watched_is_lost_not_failed(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = _start(fleet_factory)
    member = client.CustomObjectsApi(fleet.sim.api_client(MEMBER))
    member.delete_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, "first")
    _assert_ran_again_after_copy_lost(fleet)


def test_a_job_gone_while_its_copy_runs_keeps_its_quota_until_the_copy_is_purged(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    """A fleet job removed without Fleet's finalizer (stored by a client before Fleet refused
    that, or by hand in Redis): its copy is an orphan, purged; its quota stays counted until the
    copy is gone, so the next job of a one-job leaf never runs beside it."""
    fleet = fleet_factory(
        members={MEMBER: MODULE_POOL, "member-2": CARD_POOL},
        workers=1,
        tree=None,
        syncer_args=QUICK_AUDIT,
        dispatcher_args=("--reconcile-every", "2"),
    )
    fleet.ledger.apply(load(ONE_SLOT)[0])
    first = fleet.submit(long_job("first"))
    fleet.submit(long_job("second"))
    fleet.wait_for("the first job to run", lambda: _running(fleet, "first", 1), 30)
    uid = str(first["metadata"]["uid"])

    def drop_finalizer(obj: dict[str, Any]) -> dict[str, Any]:
        obj["metadata"]["finalizers"] = []
        return obj

    fleet.objects.mutate(FLEET_ASCENDJOB, "team-a", "first", drop_finalizer, subresource=None)
    fleet.objects.delete(FLEET_ASCENDJOB, "team-a", "first")
    deadline = time.monotonic() + 40
    while True:
        copy_there = fleet.member_copies().get(uid) is not None
        second = current_state(_job(fleet, "second"))
        assert not (copy_there and second in ("Admitted", "Dispatched", "Running")), (
            "the next job was admitted while the orphan still ran"
        )
        assert (fleet.ledger.usages(["team-a"])["team-a"].get("kube-queue/max-jobs") or 0) <= 1
        if not copy_there and second == "Running":
            break
        assert time.monotonic() < deadline, f"the orphan was never purged\n{fleet.procs.logs()}"
        time.sleep(0.2)
