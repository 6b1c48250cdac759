"""A job's demand: per-pod requests as Kubernetes counts them, constraints, and the gang."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.ascend import NPU_RESOURCE
from fleet.placement import DemandError, ReplicaTemplate, build_demand, pod_requests

W = "spec.replicaSpecs.Worker.template.spec"


def _template(spec: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"labels": labels or {}}, "spec": spec}


def test_pod_requests_follow_the_kubernetes_rules() -> None:
    spec = {
        "containers": [
            {
                "name": "a",
                "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "1", "memory": "1Gi"}},
            },
            {"name": "b", "resources": {"limits": {NPU_RESOURCE: 2}}},  # request defaults to the limit
        ],
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2", "memory": "512Mi"}}}],
        "overhead": {"cpu": "100m"},
    }
    assert pod_requests(spec) == {"cpu": 2100, "memory": 2**30, NPU_RESOURCE: 2, "pods": 1}


def test_hostname_anti_affinity_against_the_jobs_own_pods_means_one_pod_per_node() -> None:
    def anti(selector: dict[str, Any], key: str = "kubernetes.io/hostname") -> dict[str, Any]:
        term = {"labelSelector": selector, "topologyKey": key}
        return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}

    sample_form = {"matchExpressions": [{"key": "job-name", "operator": "In", "values": ["j"]}]}
    cases = [
        (anti(sample_form), True),
        (anti({"matchLabels": {"app": "train"}}), True),  # matches the template's own labels
        (anti({"matchLabels": {"job-name": "other"}}), False),  # another job's pods
        (anti(sample_form, "topology.kubernetes.io/zone"), False),  # not per node
        (None, False),
    ]
    for affinity, exclusive in cases:
        spec = {"containers": [{"name": "ascend"}], **({"affinity": affinity} if affinity else {})}
        replica = ReplicaTemplate(
            "Worker",
            2,
            _template(spec, {"app": "train"}),
            "spec.replicaSpecs.Worker.template",
            pod_labels={"job-name": "j"},  # what the ascend-operator labels them with
        )
        assert build_demand([replica]).shapes[0].exclusive is exclusive, affinity


def test_the_gang_is_the_first_min_available_pods_leader_first() -> None:
    master = ReplicaTemplate("Master", 1, _template({"containers": [{"name": "ascend"}]}), "m")
    worker = ReplicaTemplate("Worker", 4, _template({"containers": [{"name": "ascend"}]}), "w")
    demand = build_demand([master, worker], min_available=3)
    assert demand.pods == 5 and demand.gang == 3
    assert [(s.replica_type, s.count) for s in demand.gang_shapes()] == [("Master", 1), ("Worker", 2)]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"containers": [{"name": "a", "resources": {"requests": {"memory": "-1Gi"}}}]},
            f"{W}.containers[0].resources.requests.memory: must not be negative",
        ),
        (
            {"containers": [{"name": "a"}], "tolerations": [{"operator": "Sometimes"}]},
            f"{W}.tolerations[0].operator: must be Equal or Exists",
        ),
        (
            {
                "containers": [{"name": "a"}],
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Near"}]}]
                        }
                    }
                },
            },
            f"{W}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
            ".matchExpressions[0].operator: must be one of DoesNotExist, Exists, Gt, In, Lt, NotIn",
        ),
    ],
)
def test_bad_pod_fields_name_their_path(spec: dict[str, Any], message: str) -> None:
    replica = ReplicaTemplate("Worker", 1, _template(spec), "spec.replicaSpecs.Worker.template")
    with pytest.raises(DemandError) as raised:
        build_demand([replica])
    assert str(raised.value) == message
