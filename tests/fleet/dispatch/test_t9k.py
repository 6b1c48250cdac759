"""T9k jobs through a running fleet: failure classification decides application failover.

A TensorFlowTrainingJob whose chief is killed (exit 137, the environment's doing by the seed's
ExitCode rule) is failed over to another member; one whose chief exits 1 (its code's fault) ends
``Failed`` where it ran, never retried. The members run the T9k controller of the simulator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fleet.jobs import attempt_of, cluster_of, current_state
from fleet.kinds import fleet_kind
from fleet.state import events_for
from fleet.workloads.t9k_jobs import t9k_tfjob
from tests.fleet.dispatch.conftest import RunningFleet
from tests.support.sim import CARD_POOL

FLEET_TFJOB = fleet_kind(t9k_tfjob)


def tf_job(name: str, exit_code: int) -> dict[str, Any]:
    """A chief and a worker of 1 cpu each; the chief exits ``exit_code`` after a second."""
    template = {
        "spec": {
            "containers": [
                {
                    "name": "tensorflow",
                    "image": "tensorflow/tensorflow:2.11.0",
                    "resources": {"requests": {"cpu": "1"}},
                }
            ]
        }
    }
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "TensorFlowTrainingJob",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {"sim.fleet.io/duration-seconds": "1", "sim.fleet.io/exit-code": str(exit_code)},
        },
        "spec": {
            "replicaSpecs": [
                {"type": "chief", "replicas": 1, "restartPolicy": "Never", "template": template},
                {"type": "worker", "replicas": 1, "restartPolicy": "Never", "template": template},
            ]
        },
    }


def test_a_killed_chief_fails_over_and_a_code_error_fails_where_it_ran(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(members={"member-1": CARD_POOL, "member-2": CARD_POOL}, workers=1, tree=None)
    fleet.submit(tf_job("killed", 137))
    fleet.submit(tf_job("buggy", 1))

    def obj(name: str) -> dict[str, Any]:
        return fleet.objects.get(FLEET_TFJOB, "default", name)

    fleet.wait_for("the buggy job Failed", lambda: current_state(obj("buggy")) == "Failed", 60)
    buggy = obj("buggy")
    assert attempt_of(buggy) == 1  # never retried
    assert buggy["status"]["phase"] == "Failed"
    assert buggy["status"]["tasks"][0]["type"] == "chief"

    fleet.wait_for("the killed job placed a second time", lambda: attempt_of(obj("killed")) >= 2, 60)
    killed = obj("killed")
    failovers = [e for e in events_for(fleet.objects, killed) if e["reason"] == "ApplicationFailover"]
    assert failovers, [e["reason"] for e in events_for(fleet.objects, killed)]
    assert "exited with 137" in str(failovers[0].get("message"))
    assert cluster_of(killed) in ("member-1", "member-2")
