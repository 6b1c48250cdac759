"""Propagation policies as Karmada and ACK One users write them, honoured by the running
dispatcher: a fieldSelector over the members' regions, clusterNames with an exclusion in a
ClusterPropagationPolicy, a PropagationPolicy winning over it, and both kinds of suspension."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from fleet.jobs import cluster_of, current_state
from fleet.kinds import (
    CLUSTER_PROPAGATION_POLICY,
    KARMADA_CLUSTER_PROPAGATION_POLICY,
    KARMADA_PROPAGATION_POLICY,
)
from tests.fleet.dispatch.conftest import A800_POOL, MODULE_POOL, RunningFleet
from tests.fleet.placement.factory import job
from tests.support.job_events import happened
from tests.support.kinds import FLEET_ASCENDJOB

pytestmark = pytest.mark.integration

REGIONS = {
    "member-1": {"topology.kubernetes.io/region": "cn-north-1"},
    "member-2": {"topology.kubernetes.io/region": "cn-north-1"},
    "member-3": {"topology.kubernetes.io/region": "cn-south-1"},
}

SOUTH_ONLY = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: south
  namespace: team-a
spec:
  resourceSelectors:
    - apiVersion: mindxdl.gitee.com/v1
      kind: AscendJob
  placement:
    clusterAffinity:
      fieldSelector:
        matchExpressions:
          - key: region
            operator: In
            values: [cn-south-1]
"""

EVERYONE = """
apiVersion: policy.one.alibabacloud.com/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: everyone
spec:
  priority: 100
  resourceSelectors:
  - apiVersion: mindxdl.gitee.com/v1
    kind: AscendJob
  placement:
    clusterAffinity:
      clusterNames: [member-1, member-2]
      exclude: [member-2]
"""

HOLD = """
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: hold
spec:
  priority: 200
  resourceSelectors:
    - apiVersion: mindxdl.gitee.com/v1
      kind: AscendJob
      labelSelector:
        matchLabels:
          hold: "yes"
  suspension:
    dispatching: true
"""

NOT_THERE = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: not-there
  namespace: team-c
spec:
  resourceSelectors:
    - apiVersion: mindxdl.gitee.com/v1
      kind: AscendJob
  suspension:
    dispatchingOnClusters:
      clusterNames: [member-1, member-3]
"""


def _one_npu(name: str, namespace: str, **labels: str) -> dict[str, Any]:
    obj = job(name, workers=0, npus=1, exclusive=False)
    obj["metadata"]["namespace"] = namespace
    obj["metadata"]["labels"].update(labels)
    obj["metadata"]["annotations"] = {"sim.fleet.io/duration-seconds": "600"}
    return obj


def test_policies_of_both_groups_steer_where_jobs_go_and_whether_they_go(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(syncer=False, tree=None, workers=1, member_labels=REGIONS)
    fleet.objects.create(KARMADA_PROPAGATION_POLICY, yaml.safe_load(SOUTH_ONLY))
    fleet.objects.create(CLUSTER_PROPAGATION_POLICY, yaml.safe_load(EVERYONE))
    fleet.objects.create(KARMADA_CLUSTER_PROPAGATION_POLICY, yaml.safe_load(HOLD))
    fleet.objects.create(KARMADA_PROPAGATION_POLICY, yaml.safe_load(NOT_THERE))
    fleet.submit(_one_npu("south", "team-a"))  # its namespace's policy wins over "everyone"
    fleet.submit(_one_npu("anywhere", "team-b"))  # "everyone": member-1 or member-2, not member-2
    fleet.submit(_one_npu("held", "team-b", hold="yes"))  # "hold" outranks "everyone"
    fleet.submit(_one_npu("elsewhere", "team-c"))

    def job_of(namespace: str, name: str) -> dict[str, Any]:
        return fleet.objects.get(FLEET_ASCENDJOB, namespace, name)

    placed = {
        ("team-a", "south"): "member-3",
        ("team-b", "anywhere"): "member-1",
        ("team-c", "elsewhere"): "member-2",
    }
    fleet.wait_for(
        "three jobs dispatched",
        lambda: all(current_state(job_of(*key)) == "Dispatched" for key in placed),
        60,
    )
    assert {key: cluster_of(job_of(*key)) for key in placed} == placed
    fleet.wait_for(
        "the held job's reason",
        lambda: job_of("team-b", "held")["status"]["conditions"][-1]["reason"] == "DispatchingSuspended",
        15,
    )
    held = job_of("team-b", "held")
    assert current_state(held) == "Queued"
    assert held["status"]["conditions"][-1]["message"] == (
        "ClusterPropagationPolicy hold suspends dispatching (spec.suspension.dispatching)"
    )


#: A Karmada user's toleration of the NotReady taint: 2 s, though the application toleration
#: (which Fleet would use without it) is ten minutes.
TOLERATES_TWO_SECONDS = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: short-outages-only
  namespace: team-a
spec:
  resourceSelectors:
    - apiVersion: mindxdl.gitee.com/v1
      kind: AscendJob
  placement:
    clusterTolerations:
      - key: cluster.karmada.io/not-ready
        operator: Exists
        effect: NoExecute
        tolerationSeconds: 2
  failover:
    application:
      decisionConditions:
        tolerationSeconds: 600
      purgeMode: Directly
"""


def test_a_cluster_toleration_of_the_not_ready_taint_sets_when_a_job_leaves_a_down_member(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(
        members={"member-1": MODULE_POOL, "member-3": A800_POOL},
        workers=1,
        syncer_args=("--probe-interval", "0.3", "--failure-threshold", "2"),
    )
    fleet.objects.create(KARMADA_PROPAGATION_POLICY, yaml.safe_load(TOLERATES_TWO_SECONDS))
    fleet.submit(_one_npu("mover", "team-a"))
    fleet.wait_for("the job to run", lambda: current_state(_get(fleet, "team-a", "mover")) == "Running", 60)
    first = cluster_of(_get(fleet, "team-a", "mover"))
    assert first is not None
    fleet.sim.fault(first, "down")
    fleet.wait_for(
        "the job to run on the other member",
        lambda: cluster_of(_get(fleet, "team-a", "mover")) not in (None, first),
        15,
    )
    fleet.wait_for(
        "its ClusterFailover Event",
        lambda: happened(fleet.objects, _get(fleet, "team-a", "mover"), "ClusterFailover"),
        5,
    )


def _get(fleet: RunningFleet, namespace: str, name: str) -> dict[str, Any]:
    return fleet.objects.get(FLEET_ASCENDJOB, namespace, name)
