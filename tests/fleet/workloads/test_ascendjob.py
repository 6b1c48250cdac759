"""The AscendJob adapter: the ascend-operator's validation, demand, member copy and status."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fleet.ascend import NPU_RESOURCE
from fleet.workloads import (
    ATTEMPT_LABEL,
    JOB_NAME_LABEL,
    JOB_NAMESPACE_LABEL,
    JOB_UID_LABEL,
    InvalidWorkload,
    UnknownKind,
    adapter_for,
    ascendjob,
)
from tests.fleet.placement.factory import sample_job

Job = dict[str, Any]

MASTER = "spec.replicaSpecs.Master"
WORKER = "spec.replicaSpecs.Worker"


def _container(job: Job, rtype: str = "Master") -> dict[str, Any]:
    container: dict[str, Any] = job["spec"]["replicaSpecs"][rtype]["template"]["spec"]["containers"][0]
    return container


def _mindspore(job: Job) -> None:
    job["metadata"]["labels"]["framework"] = "mindspore"


def _rename(job: Job, old: str, new: str) -> None:
    specs = job["spec"]["replicaSpecs"]
    specs[new] = specs.pop(old)


CASES: list[tuple[str, Callable[[Job], object], list[str]]] = [
    (
        "no framework label",
        lambda j: j["metadata"]["labels"].pop("framework"),
        ["metadata.labels.framework: is required (one of pytorch, mindspore, tensorflow)"],
    ),
    (
        "unknown framework",
        lambda j: j["metadata"]["labels"].update(framework="jax"),
        [
            "metadata.labels.framework: 'jax' is not a supported framework "
            "(one of pytorch, mindspore, tensorflow)"
        ],
    ),
    (
        "pytorch leader with two replicas",
        lambda j: j["spec"]["replicaSpecs"]["Master"].update(replicas=2),
        [f"{MASTER}.replicas: must be 1 for the pytorch leader"],
    ),
    (
        "replica type of another framework",
        _mindspore,
        [
            f"{MASTER}: is not a replica type of a mindspore job (allowed: Scheduler, Worker)",
            "spec.replicaSpecs.Scheduler: is required for a mindspore job of more than one pod",
        ],
    ),
    (
        "distributed job without its leader",
        lambda j: _rename(j, "Master", "Chief"),
        [
            "spec.replicaSpecs.Chief: is not a replica type of a pytorch job (allowed: Master, Worker)",
            f"{MASTER}: is required for a pytorch job of more than one pod",
        ],
    ),
    (
        "worker replicas out of bounds",
        lambda j: j["spec"]["replicaSpecs"]["Worker"].update(replicas=0),
        [f"{WORKER}.replicas: must be between 1 and 10000"],
    ),
    (
        "replicas not a number",
        lambda j: j["spec"]["replicaSpecs"]["Worker"].update(replicas="many"),
        [f"{WORKER}.replicas: must be an integer"],
    ),
    (
        "no container named ascend",
        lambda j: _container(j).update(name="main"),
        [f"{MASTER}.template.spec.containers: must have a container named ascend"],
    ),
    (
        "ascend container without an image",
        lambda j: _container(j, "Worker").pop("image"),
        [f"{WORKER}.template.spec.containers[0].image: is required"],
    ),
    (
        "minAvailable above the replicas",
        lambda j: j["spec"]["runPolicy"]["schedulingPolicy"].update(minAvailable=3),
        ["spec.runPolicy.schedulingPolicy.minAvailable: must be between 1 and the job's 2 replicas"],
    ),
    (
        "invalid quantity",
        lambda j: _container(j)["resources"]["requests"].update(cpu="lots"),
        [f"{MASTER}.template.spec.containers[0].resources.requests.cpu: 'lots' is not a quantity"],
    ),
    (
        "request above limit",
        lambda j: _container(j)["resources"].update(requests={"memory": "2Gi"}, limits={"memory": "1Gi"}),
        [
            f"{MASTER}.template.spec.containers[0].resources.requests.memory: "
            "must be less than or equal to its limit"
        ],
    ),
    (
        "NPU request differs from its limit",
        lambda j: _container(j)["resources"]["requests"].update({NPU_RESOURCE: 1}),
        [
            f"{MASTER}.template.spec.containers[0].resources.requests.{NPU_RESOURCE}: "
            "must equal its limit (extended resource)"
        ],
    ),
    (
        "malformed schedule policy",
        lambda j: j["metadata"].update(annotations={"huawei.com/schedule_policy": "eight"}),
        [
            "metadata.annotations.huawei.com/schedule_policy: "
            "huawei.com/schedule_policy 'eight' is not of the form chip<C>-node<N>"
        ],
    ),
    (
        "no replica specs",
        lambda j: j["spec"].update(replicaSpecs={}),
        ["spec.replicaSpecs: must name at least one replica type"],
    ),
    ("no spec at all", lambda j: j.pop("spec"), ["spec: is required"]),
]


@pytest.mark.parametrize(("mutate", "messages"), [(m, e) for _, m, e in CASES], ids=[c[0] for c in CASES])
def test_invalid_jobs_get_one_message_per_failure(
    mutate: Callable[[Job], object], messages: list[str]
) -> None:
    job = sample_job()
    mutate(job)
    assert [str(e) for e in ascendjob.validate(job)] == messages
    with pytest.raises(InvalidWorkload) as raised:
        ascendjob.demand(job)
    assert [str(e) for e in raised.value.errors] == messages


def test_the_sample_is_valid_and_its_demand_is_two_exclusive_two_npu_pods() -> None:
    job = sample_job()
    assert adapter_for(job) is ascendjob
    assert ascendjob.validate(job) == []
    d = ascendjob.demand(job)
    assert d.gang == d.pods == 2 and d.npus == 4
    assert [(s.replica_type, s.count, s.npus, s.exclusive) for s in d.shapes] == [
        ("Master", 1, 2, True),
        ("Worker", 1, 2, True),
    ]
    assert dict(d.shapes[0].node_selector) == {"host-arch": "huawei-arm", "accelerator-type": "card-910b-2"}


def test_single_pod_jobs_need_no_leader_per_framework() -> None:
    job = sample_job()
    job["metadata"]["labels"]["framework"] = "mindspore"
    del job["spec"]["replicaSpecs"]["Master"]
    job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = 1
    assert ascendjob.validate(job) == []


def test_other_kinds_have_no_adapter() -> None:
    with pytest.raises(UnknownKind, match="kind 'PyTorchJob'"):
        adapter_for({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"})


def test_member_copy_is_labelled_and_carries_no_server_fields() -> None:
    job = sample_job()
    job["metadata"].update(uid="abc", resourceVersion="7", namespace="team-a", finalizers=["fleet.io/x"])
    job["status"] = {"conditions": []}
    body = ascendjob.member_copy(job, "abc", 2)
    labels = {JOB_NAMESPACE_LABEL: "team-a", JOB_NAME_LABEL: "default-test-pytorch", JOB_UID_LABEL: "abc"}
    labels[ATTEMPT_LABEL] = "2"
    assert body["metadata"]["name"] == "default-test-pytorch" and body["metadata"]["namespace"] == "team-a"
    assert labels.items() <= body["metadata"]["labels"].items()
    assert body["metadata"]["labels"]["framework"] == "pytorch"
    assert not {"uid", "resourceVersion", "finalizers"} & set(body["metadata"]) and "status" not in body
    for spec in body["spec"]["replicaSpecs"].values():
        assert labels.items() <= spec["template"]["metadata"]["labels"].items()
    assert "fleet.io/job-uid" not in job["spec"]["replicaSpecs"]["Master"]["template"]["metadata"]["labels"]


def test_status_maps_the_last_true_condition() -> None:
    member = {
        "status": {
            "conditions": [
                {"type": "Created", "status": "True", "reason": "JobCreated"},
                {"type": "Running", "status": "True", "reason": "JobRunning", "message": "all up"},
                {"type": "Restarting", "status": "False", "reason": "jobRestarting"},
            ],
            "replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 1}},
            "startTime": "2026-11-22T08:00:00Z",
        }
    }
    status = ascendjob.map_status(member)
    assert (status.state, status.reason, status.message) == ("Running", "JobRunning", "all up")
    assert not status.finished
    assert status.to_status()["replicaStatuses"] == {"Master": {"active": 1}, "Worker": {"active": 1}}
    assert ascendjob.map_status({}).state is None
