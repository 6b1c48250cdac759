"""The AscendJob adapter: the ascend-operator's validation, demand, member copy and status."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fleet.ascend import NPU_RESOURCE
from fleet.labels import ATTEMPT_LABEL, JOB_NAME_LABEL, JOB_NAMESPACE_LABEL, JOB_UID_LABEL
from fleet.workloads import (
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
            "spec.replicaSpecs.Scheduler: is required for a mindspore job whose workers take "
            "more than one NPU (2)",
        ],
    ),
    (
        "distributed job without its leader",
        lambda j: _rename(j, "Master", "Chief"),
        [
            "spec.replicaSpecs.Chief: is not a replica type of a pytorch job (allowed: Master, Worker)",
            f"{MASTER}: is required for a pytorch job",
        ],
    ),
    (
        "negative worker replicas (validateReplicas)",
        lambda j: j["spec"]["replicaSpecs"]["Worker"].update(replicas=-1),
        [f"{WORKER}.replicas: can not be negative, but got -1"],
    ),
    (
        "replicas not a number",
        lambda j: j["spec"]["replicaSpecs"]["Worker"].update(replicas="many"),
        [f'{WORKER}.replicas: must be an integer, not a string ("many")'],
    ),
    (
        "no container named ascend",
        lambda j: _container(j).update(name="main"),
        [f"{MASTER}.template.spec.containers: must have a container named ascend"],
    ),
    (
        "ascend container without an image",
        lambda j: _container(j, "Worker").pop("image"),
        [f"{WORKER}.template.spec.containers[0].image: Required value"],
    ),
    (
        "minAvailable above the replicas",
        lambda j: j["spec"]["runPolicy"]["schedulingPolicy"].update(minAvailable=3),
        ["spec.runPolicy.schedulingPolicy.minAvailable: must be between 1 and the job's 2 replicas"],
    ),
    (
        "invalid quantity",
        lambda j: _container(j)["resources"]["requests"].update(cpu="lots"),
        [
            f'{MASTER}.template.spec.containers[0].resources.requests[cpu]: Invalid value: "lots": '
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        ],
    ),
    (
        "request above limit",
        lambda j: _container(j)["resources"].update(requests={"memory": "2Gi"}, limits={"memory": "1Gi"}),
        [
            f'{MASTER}.template.spec.containers[0].resources.requests[memory]: Invalid value: "2Gi": '
            "must be less than or equal to memory limit of 1Gi"
        ],
    ),
    (
        "NPU request differs from its limit",
        lambda j: _container(j)["resources"]["requests"].update({NPU_RESOURCE: 1}),
        [
            f"{MASTER}.template.spec.containers[0].resources.requests[{NPU_RESOURCE}]: Invalid value: 1: "
            f"must be equal to {NPU_RESOURCE} limit of 2"
        ],
    ),
    (
        "soft share without its quota labels",
        lambda j: j["metadata"].update(annotations={"huawei.com/schedule_policy": "chip1-softShareDev"}),
        [
            "metadata.labels.huawei.com/scheduler.softShareDev.aicoreQuota: "
            "is required by schedule policy chip1-softShareDev"
        ],
    ),
    (
        "no replica specs",
        lambda j: j["spec"].update(replicaSpecs={}),
        ["spec.replicaSpecs: must name at least one replica type"],
    ),
    ("no spec at all", lambda j: j.pop("spec"), ["spec: is required"]),
    # The CRD's integer fields: no strings or booleans where an int32 is due.
    (
        "replicas as a string",
        lambda j: j["spec"]["replicaSpecs"]["Worker"].update(replicas="2"),
        [f'{WORKER}.replicas: must be an integer, not a string ("2")'],
    ),
    (
        "replicas as a boolean",
        lambda j: j["spec"]["replicaSpecs"]["Worker"].update(replicas=True),
        [f"{WORKER}.replicas: must be an integer, not a boolean (true)"],
    ),
    (
        "minAvailable as a string",
        lambda j: j["spec"]["runPolicy"]["schedulingPolicy"].update(minAvailable="2"),
        ['spec.runPolicy.schedulingPolicy.minAvailable: must be an integer, not a string ("2")'],
    ),
    (
        "backoffLimit beyond int32",
        lambda j: j["spec"]["runPolicy"].update(backoffLimit=2**31),
        ["spec.runPolicy.backoffLimit: must be at most 2147483647"],
    ),
    (
        "more replicas than the operator's maxReplicas",
        lambda j: j["spec"]["replicaSpecs"]["Worker"].update(replicas=20_001),
        [f"{WORKER}.replicas: can not be larger than 20000, but got 20001"],
    ),
    # The operator's rules beyond replica types.
    (
        "unknown success policy",
        lambda j: j["spec"].update(successPolicy="AnyWorker"),
        ['spec.successPolicy: must be "" or "AllWorkers"'],
    ),
    (
        "unknown scale-out type",
        lambda j: j["metadata"]["labels"].update({"scaleout-type": "infiniband"}),
        ["metadata.labels.scaleout-type: 'infiniband' is not a scale-out type (RoCE or UBoE, in any case)"],
    ),
    (
        "scaling rule without its group labels",
        lambda j: j["metadata"]["labels"].update({"mind-cluster/scaling-rule": "rule-a"}),
        [
            "metadata.labels.mind-cluster/group-name: is required with the mind-cluster/scaling-rule label",
            "metadata.labels.jobID: is required with the mind-cluster/scaling-rule label",
        ],
    ),
    # Names: a DNS-1035 label, leaving room for the leader's Service <name>-master-0.
    (
        "name of 64 characters",
        lambda j: j["metadata"].update(name="a" * 64),
        [
            f'metadata.name: Invalid value: "{"a" * 64}": must be no more than 63 bytes',
        ],
    ),
    (
        "name too long for the Master's Service",
        lambda j: j["metadata"].update(name="a" * 55),
        [
            f'metadata.name: Invalid value: "{"a" * 55}": must be no more than 54 characters for a '
            f"pytorch job: the ascend-operator names the Master's Service '{'a' * 55}-master-0', "
            "a DNS-1035 label of at most 63 characters",
        ],
    ),
    (
        "name with a dot",
        lambda j: j["metadata"].update(name="train.v2"),
        [
            'metadata.name: Invalid value: "train.v2": a DNS-1035 label must consist of lower case '
            "alphanumeric characters or '-', start with an alphabetic character, and end with an "
            "alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
            "'[a-z]([-a-z0-9]*[a-z0-9])?')"
        ],
    ),
    # The API server's rules for the pod templates.
    (
        "fractional NPUs",
        lambda j: _container(j)["resources"].update(
            requests={NPU_RESOURCE: "1500m"}, limits={NPU_RESOURCE: "1500m"}
        ),
        [
            f"{MASTER}.template.spec.containers[0].resources.limits[{NPU_RESOURCE}]: "
            'Invalid value: "1500m": must be an integer',
            f"{MASTER}.template.spec.containers[0].resources.requests[{NPU_RESOURCE}]: "
            'Invalid value: "1500m": must be an integer',
        ],
    ),
    (
        "NPU request without a limit",
        lambda j: _container(j)["resources"].pop("limits"),
        [
            f"{MASTER}.template.spec.containers[0].resources.limits[{NPU_RESOURCE}]: "
            "Required value: Limit must be set for non overcommitable resources"
        ],
    ),
    (
        "quantity as a float",
        lambda j: _container(j)["resources"]["requests"].update(cpu=0.5),
        [
            f"{MASTER}.template.spec.containers[0].resources.requests[cpu]: Invalid value: 0.5: "
            "must be of type integer or string (a quantity)"
        ],
    ),
    (
        "unknown container resource",
        lambda j: _container(j)["resources"]["requests"].update(cpuu="1"),
        [
            f'{MASTER}.template.spec.containers[0].resources.requests[cpuu]: Invalid value: "cpuu": '
            "must be a standard resource type or fully qualified; must be a standard resource for containers"
        ],
    ),
    (
        "container port as a string",
        lambda j: _container(j)["ports"][0].update(containerPort="2222"),
        [
            f'{MASTER}.template.spec.containers[0].ports[0].containerPort: Invalid value: "2222": '
            "must be of type integer"
        ],
    ),
    (
        "container port out of range",
        lambda j: _container(j)["ports"][0].update(containerPort=70000),
        [
            f"{MASTER}.template.spec.containers[0].ports[0].containerPort: Invalid value: 70000: "
            "must be between 1 and 65535, inclusive"
        ],
    ),
    (
        "the ascendjob-port twice in the ascend container",
        lambda j: _container(j)["ports"].append({"containerPort": 2223, "name": "ascendjob-port"}),
        [f'{MASTER}.template.spec.containers[0].ports[1].name: Duplicate value: "ascendjob-port"'],
    ),
    (
        "an environment value that is a number",
        lambda j: _container(j)["env"].append({"name": "EPOCHS", "value": 90}),
        [f"{MASTER}.template.spec.containers[0].env[2].value: Invalid value: 90: must be of type string"],
    ),
    (
        "a sidecar without an image, named like the ascend container",
        lambda j: j["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"].append(
            {"name": "ascend"}
        ),
        [
            f'{MASTER}.template.spec.containers[1].name: Duplicate value: "ascend"',
            f"{MASTER}.template.spec.containers[1].image: Required value",
        ],
    ),
    (
        "a pod template label that is too long",
        lambda j: j["spec"]["replicaSpecs"]["Worker"]["template"]["metadata"]["labels"].update(app="x" * 64),
        [
            f'{WORKER}.template.metadata.labels[app]: Invalid value: "{"x" * 64}": '
            "must be no more than 63 bytes"
        ],
    ),
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


def _worker_only(framework: str, npus: int) -> Job:
    job = sample_job()
    job["metadata"]["labels"]["framework"] = framework
    del job["spec"]["replicaSpecs"]["Master"]
    job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = 1
    _container(job, "Worker")["resources"] = {
        "limits": {NPU_RESOURCE: npus},
        "requests": {NPU_RESOURCE: npus},
    }
    return job


def test_only_a_mindspore_job_of_one_npu_may_go_without_its_leader() -> None:
    """``checkReplicaSpecs``: pytorch and tensorflow always need their leader; a mindspore job
    needs its Scheduler once its workers take more than one NPU."""
    assert ascendjob.validate(_worker_only("mindspore", 1)) == []
    assert [str(e) for e in ascendjob.validate(_worker_only("mindspore", 2))] == [
        "spec.replicaSpecs.Scheduler: is required for a mindspore job whose workers take more than one NPU"
        " (2)"
    ]
    for framework, leader in (("pytorch", "Master"), ("tensorflow", "Chief")):
        assert [str(e) for e in ascendjob.validate(_worker_only(framework, 1))] == [
            f"spec.replicaSpecs.{leader}: is required for a {framework} job"
        ]


def test_names_as_long_as_the_operator_can_use_are_valid() -> None:
    """A pytorch job's name may have 54 characters (its Service ``<name>-master-0`` then has
    63); a mindspore job of workers only has no Service, so its name may have 63."""
    job = sample_job()
    job["metadata"]["name"] = "p" * 54
    assert ascendjob.validate(job) == []
    job = _worker_only("mindspore", 1)
    job["metadata"]["name"] = "m" * 63
    assert ascendjob.validate(job) == []
    assert ascendjob.member_copy(job, "uid", 1)["metadata"]["labels"][JOB_NAME_LABEL] == "m" * 63


def test_whole_npus_written_either_way_are_valid() -> None:
    for npus in (2, "2", "2e0"):
        job = sample_job()
        for rtype in ("Master", "Worker"):
            _container(job, rtype)["resources"] = {"limits": {NPU_RESOURCE: npus}}
        assert ascendjob.validate(job) == [], npus
        assert ascendjob.demand(job).npus == 4


def test_kinds_fleet_does_not_serve_have_no_adapter() -> None:
    with pytest.raises(UnknownKind, match="kind 'XGBoostJob'"):
        adapter_for({"apiVersion": "kubeflow.org/v1", "kind": "XGBoostJob"})
    with pytest.raises(UnknownKind, match="kind 'PyTorchJob'"):  # a served kind at another version
        adapter_for({"apiVersion": "kubeflow.org/v2", "kind": "PyTorchJob"})


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


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON value (keys and list indexes)."""
    out = [path]
    if isinstance(value, dict):
        out += [p for k, v in value.items() for p in _paths(v, (*path, k))]
    elif isinstance(value, list):
        out += [p for i, v in enumerate(value) for p in _paths(v, (*path, i))]
    return out


def test_a_value_of_any_type_anywhere_is_an_error_or_fine_never_a_crash() -> None:
    """Validation judges what it is given: no wrongly typed value raises (a 500 at the API)."""
    paths = [p for p in _paths(sample_job()) if p and p[:3] != ("spec", "replicaSpecs", "Worker")]
    for path in paths:
        wrongs: tuple[Any, ...] = (None, "x", 7, True, 1.5, [], {}, [{}])
        for wrong in wrongs:
            job = sample_job()
            target = job
            for part in path[:-1]:
                target = target[part]
            target[path[-1]] = wrong
            assert isinstance(ascendjob.validate(job), list), (path, wrong)


def test_a_replica_type_of_zero_replicas_is_accepted_and_makes_no_pod() -> None:
    """MindCluster's ascend-operator ``validateReplicas`` (ascendjob_validate.go) refuses only a
    negative count and more than ``maxReplicas``: ``Worker: replicas: 0`` is a job of its Master."""
    job = sample_job()
    job["spec"]["replicaSpecs"]["Worker"]["replicas"] = 0
    job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = 1
    assert ascendjob.validate(job) == []
    d = ascendjob.demand(job)
    assert d.pods == d.gang == 1
    assert [(s.replica_type, s.count) for s in d.shapes] == [("Master", 1)]
    # A mindspore job of no Scheduler and no Worker would have no pod at all: Fleet refuses it.
    empty = _worker_only("mindspore", 1)
    empty["spec"]["replicaSpecs"]["Worker"]["replicas"] = 0
    assert [str(e) for e in ascendjob.validate(empty)] == [
        "spec.replicaSpecs: must ask for at least one pod (every replicas is 0)"
    ]
