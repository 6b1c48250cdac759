"""What cannot run never blocks what can (issue 29, requirement 6).

Real processes (redis-server, the simulator, dispatcher, worker, syncer). In one leaf two jobs
run; a job that no member of the fleet could ever hold (its nodes exist nowhere) and one larger
than the leaf's ``max`` are submitted while the quota refuses them, and wait past the grace after
which a refused head holds back the jobs submitted after it. A job that fits, submitted after
them, must run at once: the two hold no place in line and no reservation. Each keeps its exact
reason (with the ledger's own figures) and an Event; the one over its ``max`` is looked at again
when the tree changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from fleet.jobs import condition, current_state
from fleet.state import events_for
from queues import job_wait, load
from tests.fleet.dispatch.conftest import MODULE_POOL, RunningFleet
from tests.fleet.placement.factory import job
from tests.support.kinds import FLEET_ASCENDJOB

pytestmark = pytest.mark.integration

NPU = "huawei.com/Ascend910"


def one_leaf(team_max: int) -> Any:
    return load(
        f"""
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {{name: elasticquotatree, namespace: kube-system}}
spec:
  root:
    name: root
    max: {{{NPU}: 64, kube-queue/max-jobs: 10}}
    min: {{{NPU}: 64}}
    children:
    - name: team-a
      max: {{{NPU}: {team_max}, kube-queue/max-jobs: 6}}
      min: {{{NPU}: 24}}
      namespaces: [team-a]
"""
    )[0]


def team_job(name: str, npus: int, *, workers: int = 0, **extra: Any) -> dict[str, Any]:
    obj = job(name, workers=workers, npus=npus, exclusive=False, **extra)
    obj["metadata"]["namespace"] = "team-a"
    obj["metadata"]["annotations"] = {"sim.fleet.io/duration-seconds": "600"}
    return obj


def test_a_job_that_can_never_run_does_not_delay_one_that_fits(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(members={"member-1": MODULE_POOL}, workers=1, tree=None)
    fleet.ledger.apply(one_leaf(24))

    def state(name: str) -> str | None:
        return current_state(fleet.objects.get(FLEET_ASCENDJOB, "team-a", name))

    for name in ("run-1", "run-2"):
        fleet.submit(team_job(name, 8))
    fleet.wait_for("two jobs to run", lambda: state("run-1") == state("run-2") == "Running", 30)
    # Refused by the quota now (16 used + 16 > 24), and no member has an x86 node at all.
    fleet.submit(team_job("nowhere", 8, workers=1, selector={"host-arch": "huawei-x86"}))
    fleet.submit(team_job("too-big", 8, workers=3))  # 32 NPUs, above team-a's max of 24
    time.sleep(7.0)  # past the 5 s grace after which a refused head holds back later jobs
    fleet.submit(team_job("fits", 8))
    fleet.wait_for("the job that fits to run", lambda: state("fits") == "Running", 15)

    nowhere = fleet.objects.get(FLEET_ASCENDJOB, "team-a", "nowhere")
    queued = condition(nowhere, "Queued")
    assert queued is not None and queued["status"] == "True" and queued["reason"] == "NoFittingCluster"
    assert "can ever fit" in queued["message"] and "huawei-x86" in queued["message"]
    assert any(e["reason"] == "NoFittingCluster" for e in events_for(fleet.objects, nowhere))
    assert fleet.ledger.parked()["team-a/nowhere"][1] == "fleet"

    big = fleet.objects.get(FLEET_ASCENDJOB, "team-a", "too-big")
    said = condition(big, "Queued")
    assert said is not None and said["reason"] == "QuotaExceeded"
    # The ledger's figures: what team-a used when it was refused, not an empty tree's 0.
    assert f"{NPU} 16 used + 32 requested exceeds max 24" in said["message"], said["message"]
    assert any(e["reason"] == "QuotaExceeded" for e in events_for(fleet.objects, big))
    wait = job_wait(fleet.ledger, "team-a/too-big")
    assert wait is not None and wait.never is not None
    assert wait.blocker("") == (
        f"can never be admitted: quota root/team-a: {NPU} 24 used + 32 requested exceeds max 24; "
        "it waits for the tree to change"
    )

    # The tree changes: what it refused is looked at again; it waits in line now, for capacity.
    fleet.ledger.apply(one_leaf(64))

    def looked_at_again() -> bool:
        again = condition(fleet.objects.get(FLEET_ASCENDJOB, "team-a", "too-big"), "Queued") or {}
        return "team-a/too-big" not in fleet.ledger.parked() and again.get("reason") == "NoFittingCluster"

    fleet.wait_for("the job over its old max to be looked at again", looked_at_again, 20)
    assert state("nowhere") == "Queued" and "team-a/nowhere" in fleet.ledger.parked(), "no fleet change"
