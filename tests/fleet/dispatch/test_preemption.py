"""Preemption through the running roles (real redis-server, simulated members over HTTP): a job of
higher priority evicts a lower one of its leaf, a leaf below its min reclaims what a sibling
borrowed; each victim's copy is gone from its member before the preemptor is admitted, it goes
back to its queue with reason Preempted and an Event naming its preemptor, and finishes later."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from fleet.jobs import current_state
from fleet.kinds import PRIORITY_CLASS
from fleet.state import events_for
from tests.fleet.dispatch.conftest import MODULE_POOL, RunningFleet
from tests.fleet.placement.factory import job
from tests.support.kinds import FLEET_ASCENDJOB

pytestmark = pytest.mark.integration

NPU = "huawei.com/Ascend910"

TREE = """
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    max: {huawei.com/Ascend910: 16}
    min: {huawei.com/Ascend910: 16}
    children:
    - name: team-a
      max: {huawei.com/Ascend910: 16}
      min: {huawei.com/Ascend910: 8}
      namespaces: [team-a]
    - name: team-b
      max: {huawei.com/Ascend910: 16}
      min: {huawei.com/Ascend910: 8}
      namespaces: [team-b]
"""

POOL = {**MODULE_POOL, "count": 4}  # 32 NPUs: the quota (16), not capacity, decides


def npu_job(
    name: str, namespace: str, npus: int, seconds: float, priority_class: str | None = None
) -> dict[str, Any]:
    obj = job(name, workers=0, npus=npus, exclusive=False, selector={"host-arch": "huawei-arm"})
    obj["metadata"]["namespace"] = namespace
    obj["metadata"]["annotations"] = {"sim.fleet.io/duration-seconds": str(seconds)}
    if priority_class:
        obj["spec"]["runPolicy"]["schedulingPolicy"]["priorityClass"] = priority_class
    return obj


def state(fleet: RunningFleet, namespace: str, name: str) -> str | None:
    obj = fleet.objects.try_get(FLEET_ASCENDJOB, namespace, name)
    return None if obj is None else current_state(obj)


def running(fleet: RunningFleet, namespace: str, name: str) -> Callable[[], bool]:
    return lambda: state(fleet, namespace, name) == "Running"


def conditions(fleet: RunningFleet, namespace: str, name: str) -> list[tuple[str, str]]:
    obj = fleet.objects.get(FLEET_ASCENDJOB, namespace, name)
    return [(c["type"], c.get("reason", "")) for c in obj["status"]["conditions"]]


def watch_copies(fleet: RunningFleet, stop: Callable[[], bool]) -> list[tuple[float, dict[str, list[str]]]]:
    seen = []
    while not stop():
        seen.append((time.monotonic(), fleet.member_copies()))
        time.sleep(0.2)
    return seen


def test_a_higher_priority_job_evicts_the_newest_lower_one_of_its_leaf(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory({"member-1": POOL}, tree=TREE)
    fleet.objects.create(PRIORITY_CLASS, {"metadata": {"name": "urgent"}, "value": 1000})
    fleet.submit(npu_job("old", "team-a", 8, 600))
    fleet.wait_for("old running", lambda: state(fleet, "team-a", "old") == "Running", 30)
    fleet.submit(npu_job("new", "team-a", 8, 8))
    fleet.wait_for("new running", lambda: state(fleet, "team-a", "new") == "Running", 30)
    fleet.submit(npu_job("vip", "team-a", 8, 3, "urgent"))
    fleet.wait_for("vip running", lambda: state(fleet, "team-a", "vip") == "Running", 40)
    # The newest of the two lower-priority jobs went; the older one kept running.
    assert state(fleet, "team-a", "old") == "Running"
    history = conditions(fleet, "team-a", "new")
    # Marked, then back in the queue (whose reason is the quota's again once the dispatcher looks).
    assert history[-2:] in (
        [("Rescheduling", "Preempted"), ("Queued", "Preempted")],
        [("Rescheduling", "Preempted"), ("Queued", "QuotaExceeded")],
    ), history
    vip = fleet.objects.get(FLEET_ASCENDJOB, "team-a", "vip")
    new = fleet.objects.get(FLEET_ASCENDJOB, "team-a", "new")
    [event] = [e for e in events_for(fleet.objects, new) if e["reason"] == "Preempted"]
    assert "team-a/vip" in event["message"] and event["type"] == "Warning"
    assert new["status"]["preemptedBy"] == "team-a/vip"
    # The victim's copy was gone before the preemptor was admitted.
    gone = max(c["lastTransitionTime"] for c in new["status"]["conditions"] if c["type"] == "Queued")
    admitted = max(c["lastTransitionTime"] for c in vip["status"]["conditions"] if c["type"] == "Admitted")
    assert gone <= admitted
    # The victim is back in the queue and runs to the end once the preemptor is done.
    fleet.wait_for("new succeeded", lambda: state(fleet, "team-a", "new") == "Succeeded", 60)
    assert new["status"]["attempt"] == 1
    assert fleet.objects.get(FLEET_ASCENDJOB, "team-a", "new")["status"]["attempt"] == 2
    assert fleet.ledger.rebuild() == []


def test_a_leaf_below_its_min_reclaims_what_a_sibling_borrowed(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory({"member-1": POOL}, tree=TREE)
    for i in range(4):
        fleet.submit(npu_job(f"b{i}", "team-b", 4, 600 if i < 2 else 20))
        fleet.wait_for(f"b{i} running", running(fleet, "team-b", f"b{i}"), 30)
    assert fleet.ledger.usage("team-b")[NPU] == 16  # 8 of them borrowed from team-a
    fleet.submit(npu_job("a0", "team-a", 4, 3))
    fleet.wait_for("a0 running", lambda: state(fleet, "team-a", "a0") == "Running", 40)
    # The most recently started borrower's job went back to its queue, the others kept running.
    assert [state(fleet, "team-b", f"b{i}") for i in range(3)] == ["Running"] * 3
    b3 = fleet.objects.get(FLEET_ASCENDJOB, "team-b", "b3")
    assert ("Rescheduling", "Preempted") in conditions(fleet, "team-b", "b3")
    [event] = [e for e in events_for(fleet.objects, b3) if e["reason"] == "Preempted"]
    assert "team-a/a0 (reclaiming the guaranteed quota of root-team-a)" in event["message"]
    assert fleet.ledger.usage("team-b")[NPU] <= 12
    fleet.wait_for("b3 succeeded", lambda: state(fleet, "team-b", "b3") == "Succeeded", 90)
    assert fleet.ledger.rebuild() == []


def test_a_job_whose_class_never_preempts_waits(fleet_factory: Callable[..., RunningFleet]) -> None:
    fleet = fleet_factory({"member-1": POOL}, tree=TREE)
    fleet.objects.create(
        PRIORITY_CLASS, {"metadata": {"name": "polite"}, "value": 1000, "preemptionPolicy": "Never"}
    )
    for name in ("low-1", "low-2"):
        fleet.submit(npu_job(name, "team-a", 8, 600))
        fleet.wait_for(f"{name} running", running(fleet, "team-a", name), 30)
    fleet.submit(npu_job("polite", "team-a", 8, 3, "polite"))
    fleet.wait_for(
        "polite's pending reason",
        lambda: "QuotaExceeded" in str(conditions(fleet, "team-a", "polite")[-1]),
        20,
    )
    time.sleep(3)
    states = [state(fleet, "team-a", n) for n in ("low-1", "low-2", "polite")]
    assert states == ["Running", "Running", "Queued"]
