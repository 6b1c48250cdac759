"""The Volcano Job adapter: Volcano's webhook rules, the gang, the Ascend rules as for an AscendJob,
queue and priority, status as Volcano reports it, failures by its policies, the member copy."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.workloads import adapter_for, ascendjob
from fleet.workloads.base import Outcome
from fleet.workloads.volcano_jobs import vcjob

SAMPLES = Path(__file__).resolve().parents[3] / "config" / "samples"


def sample() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all((SAMPLES / "vcjob-mindspore-910b.yaml").read_text()) if d]
    job: dict[str, Any] = next(d for d in docs if d["kind"] == "Job")
    return job


def two_tasks() -> dict[str, Any]:
    """An MPI-style vcjob as Volcano's examples write one: a master and workers, a gang of 3."""
    template = {
        "spec": {
            "containers": [
                {
                    "name": "mpi",
                    "image": "volcanosh/example-mpi:0.0.3",
                    "resources": {"requests": {"cpu": "1"}},
                }
            ],
            "restartPolicy": "OnFailure",
        }
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "lm-mpi-job", "namespace": "default"},
        "spec": {
            "minAvailable": 3,
            "schedulerName": "volcano",
            "plugins": {"ssh": [], "svc": []},
            "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
            "tasks": [
                {
                    "name": "mpimaster",
                    "replicas": 1,
                    "policies": [{"event": "TaskCompleted", "action": "CompleteJob"}],
                    "template": copy.deepcopy(template),
                },
                {"name": "mpiworker", "replicas": 2, "template": copy.deepcopy(template)},
            ],
        },
    }


def test_the_sample_is_a_valid_vcjob_and_its_demand_is_its_gang() -> None:
    job = sample()
    assert adapter_for(job) is vcjob and vcjob.validate(job) == []
    demand = vcjob.demand(job)
    [workers] = demand.shapes
    assert (workers.replica_type, workers.count, workers.request("huawei.com/Ascend910")) == ("worker", 2, 8)
    assert demand.gang == 2
    assert demand.hardware.types == frozenset({"module-910b-8"})


def test_the_gang_is_min_available_else_the_tasks_min_available_else_every_pod() -> None:
    job = two_tasks()
    assert [(s.replica_type, s.count) for s in vcjob.demand(job).shapes] == [
        ("mpimaster", 1),
        ("mpiworker", 2),
    ]
    assert vcjob.demand(job).gang == 3
    job["spec"]["minAvailable"] = 2
    assert vcjob.demand(job).gang == 2
    del job["spec"]["minAvailable"]
    job["spec"]["tasks"][1]["minAvailable"] = 1
    assert vcjob.demand(job).gang == 2  # 1 master (its replicas) + 1 worker
    del job["spec"]["tasks"][1]["minAvailable"]
    assert vcjob.demand(job).gang == 3


def _as_acjob(job: dict[str, Any]) -> dict[str, Any]:
    """The same pods and the same labels and annotations, written as an AscendJob."""
    template = copy.deepcopy(job["spec"]["tasks"][0]["template"])
    template["spec"]["containers"][0]["name"] = "ascend"
    meta = copy.deepcopy(job["metadata"])
    meta["labels"] = {**meta.get("labels", {}), "framework": "pytorch"}
    return {
        "apiVersion": "mindxdl.gitee.com/v1",
        "kind": "AscendJob",
        "metadata": meta,
        "spec": {
            "replicaSpecs": {
                "Master": {"replicas": 1, "template": copy.deepcopy(template)},
                "Worker": {"replicas": 1, "template": template},
            }
        },
    }


@pytest.mark.parametrize(
    "change",
    [
        lambda j: None,
        # no accelerator-type: ring-controller.atlas alone names the 910B family
        lambda j: j["spec"]["tasks"][0]["template"]["spec"]["nodeSelector"].pop("accelerator-type"),
        # a schedule policy that contradicts the pods' nodes: the same warning as for an AscendJob
        lambda j: (
            j["metadata"].setdefault("annotations", {}).update({"huawei.com/schedule_policy": "module-a3-16"})
        ),
    ],
)
def test_the_ascend_rules_read_a_vcjob_as_they_read_an_ascendjob(
    change: Callable[[dict[str, Any]], Any],
) -> None:
    job = sample()
    change(job)
    assert vcjob.demand(job).hardware == ascendjob.demand(_as_acjob(job)).hardware


def test_an_npu_count_the_hardware_never_takes_is_refused_as_for_an_ascendjob() -> None:
    job = sample()
    for where in ("requests", "limits"):
        job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"][where][
            "huawei.com/Ascend910"
        ] = 9
    vc = {e.path: e.message for e in vcjob.validate(job)}
    ac = {e.path: e.message for e in ascendjob.validate(_as_acjob(job))}
    assert vc and list(vc.values()) == list(ac.values())


def _errors(job: dict[str, Any]) -> dict[str, str]:
    return {e.path: e.message for e in vcjob.validate(job)}


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        (lambda s: s.update(tasks=[]), "spec.tasks", "at least one task"),
        (lambda s: s["tasks"][1].update(name="mpimaster"), "spec.tasks[1].name", "duplicated task name"),
        (lambda s: s["tasks"][1].update(minAvailable=3), "spec.tasks[1].minAvailable", "greater than"),
        (lambda s: s.update(minAvailable=4), "spec.minAvailable", "replicas of all tasks (3)"),
        (lambda s: s.update(minAvailable=-1), "spec.minAvailable", "at least 0"),
        (lambda s: s.update(maxRetry=-1), "spec.maxRetry", "at least 0"),
        (lambda s: s["tasks"][1].update(replicas="2"), "spec.tasks[1].replicas", "integer"),
        (lambda s: s["tasks"][1].update(name="Worker_1"), "spec.tasks[1].name", "DNS-1123"),
        (lambda s: s.update(plugins={"horovod": []}), "spec.plugins.horovod", "unable to find job plugin"),
        (
            lambda s: s.update(policies=[{"event": "PodFailed", "exitCode": 1, "action": "RestartJob"}]),
            "spec.policies[0]",
            "event and exitCode",
        ),
        (
            lambda s: s.update(policies=[{"action": "RestartJob"}]),
            "spec.policies[0]",
            "either event or exitCode",
        ),
        (
            lambda s: s.update(policies=[{"event": "PodFailed", "action": "Reboot"}]),
            "spec.policies[0].action",
            "not a policy action",
        ),
        (
            lambda s: s.update(policies=[{"event": "OutOfSync", "action": "RestartJob"}]),
            "spec.policies[0].event",
            "not a policy event",
        ),
        (
            lambda s: s.update(policies=[{"exitCode": 0, "action": "RestartJob"}]),
            "spec.policies[0].exitCode",
            "0",
        ),
        (
            lambda s: s.update(
                policies=[
                    {"event": "PodFailed", "action": "RestartJob"},
                    {"event": "PodFailed", "action": "AbortJob"},
                ]
            ),
            "spec.policies[1].event",
            "duplicate event",
        ),
        (
            lambda s: s.update(
                policies=[
                    {"event": "*", "action": "RestartJob"},
                    {"event": "PodEvicted", "action": "AbortJob"},
                ]
            ),
            "spec.policies",
            "*",
        ),
        (
            lambda s: s["tasks"][0].update(replicas=0) or s["tasks"][1].update(replicas=0),
            "spec.tasks",
            "at least one pod",
        ),
    ],
)
def test_volcanos_webhook_rules(change: Callable[[dict[str, Any]], Any], path: str, words: str) -> None:
    job = two_tasks()
    if path == "spec.tasks" and words == "at least one pod":
        job["spec"].pop("minAvailable")
    change(job["spec"])
    errors = _errors(job)
    assert path in errors and words in errors[path], errors


def test_a_pod_name_beyond_a_dns_label_is_refused_with_the_job_name() -> None:
    job = two_tasks()
    job["metadata"]["name"] = "x" * 55
    errors = _errors(job)
    assert "must be a DNS-1123 label" in errors["spec.tasks[0].name"]


def test_queue_and_priority_class() -> None:
    job = two_tasks()
    assert vcjob.queue(job) is None and vcjob.priority_request(job).class_name == ""
    job["spec"].update(queue="default", priorityClassName="high")
    assert vcjob.queue(job) is None  # Volcano's default queue: the namespace's leaf
    assert vcjob.priority_request(job).class_name == "high"
    assert vcjob.priority_request(job).field == "spec.priorityClassName"
    job["spec"]["queue"] = "child-2"
    assert vcjob.queue(job) == "child-2" and vcjob.queue_field == "spec.queue"


def _member(phase: str, **status: Any) -> dict[str, Any]:
    job = two_tasks()
    job["status"] = {
        "state": {"phase": phase, "lastTransitionTime": "2026-11-28T10:00:00Z"},
        "minAvailable": 3,
        **status,
    }
    return job


@pytest.mark.parametrize(
    ("phase", "status", "state", "outcome"),
    [
        ("Pending", {"pending": 3}, "Created", Outcome.STARTING),
        (
            "Running",
            {"running": 3, "taskStatusCount": {"mpiworker": {"phase": {"Running": 2}}}},
            "Running",
            Outcome.RUNNING,
        ),
        ("Restarting", {"retryCount": 1}, "Restarting", Outcome.RUNNING),
        ("Completing", {"running": 1, "succeeded": 2}, "Running", Outcome.RUNNING),
        ("Completed", {"succeeded": 3}, "Succeeded", Outcome.SUCCEEDED),
        ("Failed", {"failed": 3}, "Failed", Outcome.USER_ERROR),
        ("Failed", {"retryCount": 3}, "Failed", Outcome.RETRIABLE),
        ("Aborted", {"failed": 1}, "Failed", Outcome.USER_ERROR),
        ("Terminated", {}, "Failed", Outcome.USER_ERROR),
    ],
)
def test_status_as_volcano_reports_it_and_failures_by_its_policies(
    phase: str, status: dict[str, Any], state: str, outcome: Outcome
) -> None:
    mapped = vcjob.map_status(_member(phase, **status))
    assert mapped.state == state and vcjob.classify(mapped) is outcome
    assert mapped.extra["state"]["phase"] == phase
    for key, value in status.items():
        assert mapped.extra[key] == value
    assert [c["type"] for c in mapped.conditions] == [state]
    assert mapped.conditions[0]["lastTransitionTime"] == "2026-11-28T10:00:00Z"


def test_failed_after_max_retry_names_the_retries_and_a_pending_gang_the_scheduler() -> None:
    job = _member("Failed", retryCount=2, failed=3)
    job["spec"]["maxRetry"] = 2
    mapped = vcjob.map_status(job)
    assert mapped.reason == "MaxRetryExceeded" and "restarted it 2 times" in str(mapped.message)
    fewer = vcjob.map_status(_member("Failed", retryCount=1, failed=3))  # maxRetry 3 not reached
    assert fewer.reason == "PodsFailed" and vcjob.classify(fewer) is Outcome.USER_ERROR
    pending = vcjob.map_status(_member("Pending", pending=3))
    stuck = type(pending)(
        **{**pending.__dict__, "unschedulable": "pod lm-mpi-job-mpiworker-0 is unschedulable"}
    )
    assert vcjob.classify(stuck) is Outcome.STUCK_PENDING and vcjob.reads_pods


def test_the_member_copy_keeps_the_spec_labels_every_task_and_pins_it() -> None:
    job = two_tasks()
    job["metadata"]["uid"] = "fleet-uid"
    body = vcjob.member_copy(job, "uid-1", 2, pin={"mpiworker": ["n-1", "n-2"]})
    assert body["spec"]["plugins"] == {"ssh": [], "svc": []}
    assert body["spec"]["policies"] == job["spec"]["policies"]
    assert "uid" not in body["metadata"]
    for task in body["spec"]["tasks"]:
        assert task["template"]["metadata"]["labels"]["fleet.io/attempt"] == "2"
    worker = body["spec"]["tasks"][1]["template"]["spec"]
    terms = worker["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms[0]["matchFields"][0]["values"] == ["n-1", "n-2"]
    assert "affinity" not in body["spec"]["tasks"][0]["template"]["spec"]
    assert vcjob.pod_labels("lm-mpi-job", "mpiworker") == {
        "volcano.sh/job-name": "lm-mpi-job",
        "volcano.sh/task-spec": "mpiworker",
    }


def test_mindclusters_rescheduling_vcjob_and_volcanos_newer_actions_are_accepted() -> None:
    """MindCluster's fault rescheduling has a vcjob say ``PodFailed`` -> ``Ignore`` (with its
    fault-scheduling labels); Volcano's webhook now also takes ``RestartPod`` and
    ``RestartPartition``."""
    job = sample()
    job["metadata"]["labels"].update(
        {"fault-scheduling": "grace", "fault-retry-times": "3", "pod-rescheduling": "on"}
    )
    job["spec"]["policies"] = [{"event": "PodFailed", "action": "Ignore"}]
    assert vcjob.validate(job) == []
    job["spec"]["tasks"][0]["policies"] = [
        {"event": "PodEvicted", "action": "RestartPod"},
        {"exitCode": 137, "action": "RestartPartition"},
    ]
    assert vcjob.validate(job) == []
