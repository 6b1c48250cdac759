"""The T9k adapters: validation, demand, priority and queue, status mapping, failure verdicts."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.t9k import mode_enabled
from fleet.workloads import adapter_for
from fleet.workloads.base import InvalidWorkload, Outcome
from fleet.workloads.t9k_jobs import t9k_mpijob, t9k_tfjob

SAMPLES = Path(__file__).resolve().parents[3] / "config" / "samples"


def sample(name: str) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((SAMPLES / name).read_text())
    return obj


def test_the_samples_are_valid_and_go_to_their_t9k_adapter_by_group() -> None:
    tf, mpi = sample("t9k-tensorflowtrainingjob.yaml"), sample("t9k-mpijob.yaml")
    assert adapter_for(tf) is t9k_tfjob and t9k_tfjob.validate(tf) == []
    assert adapter_for(mpi) is t9k_mpijob and t9k_mpijob.validate(mpi) == []
    kubeflow = {**mpi, "apiVersion": "kubeflow.org/v2beta1"}
    assert not t9k_mpijob.matches(kubeflow)


def test_demand_counts_cpu_and_memory_per_pod_and_the_mpi_launcher() -> None:
    tf = t9k_tfjob.demand(sample("t9k-tensorflowtrainingjob.yaml"))
    [workers] = tf.shapes
    assert (workers.count, workers.request("cpu"), workers.request("memory")) == (4, 500, 1024**3)
    assert tf.gang == 4
    mpi = t9k_mpijob.demand(sample("t9k-mpijob.yaml"))
    assert [(s.replica_type, s.count, s.request("cpu")) for s in mpi.shapes] == [
        ("launcher", 1, 0),
        ("worker", 5, 50),
    ]
    assert mpi.gang == 6


def _errors(obj: dict[str, Any]) -> dict[str, str]:
    adapter = adapter_for(obj)
    return {e.path: e.message for e in adapter.validate(obj)}


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        (
            lambda s: s["replicaSpecs"][0].update(type="master"),
            "spec.replicaSpecs[0].type",
            "not a replica type",
        ),
        (
            lambda s: s["replicaSpecs"][0].update(restartPolicy="Sometimes"),
            "spec.replicaSpecs[0].restartPolicy",
            "ExitCode",
        ),
        (
            lambda s: s["replicaSpecs"].append(copy.deepcopy(s["replicaSpecs"][0])),
            "spec.replicaSpecs[1].type",
            "twice",
        ),
        (lambda s: s.update(runPolicy={"cleanUpPolicy": "Some"}), "spec.runPolicy.cleanUpPolicy", "clean-up"),
        (lambda s: s.update(runPolicy={"backoffLimit": "3"}), "spec.runPolicy.backoffLimit", "integer"),
        (
            lambda s: s.update(scheduler={"t9kScheduler": {"queue": "q", "priority": 101}}),
            "spec.scheduler.t9kScheduler.priority",
            "at most 100",
        ),
        (
            lambda s: s.update(scheduler={"t9kScheduler": {"priority": 1}}),
            "spec.scheduler.t9kScheduler.queue",
            "required",
        ),
        (
            lambda s: s["replicaSpecs"][0].update(type="ps"),
            "spec.replicaSpecs",
            "chief or at least one worker",
        ),
    ],
)
def test_tensorflow_rules_name_the_field(change: Any, path: str, words: str) -> None:
    job = sample("t9k-tensorflowtrainingjob.yaml")
    change(job["spec"])
    errors = _errors(job)
    assert path in errors, errors
    assert words in errors[path]
    with pytest.raises(InvalidWorkload):
        t9k_tfjob.demand(job)


def test_mpi_rules_name_the_field() -> None:
    job = sample("t9k-mpijob.yaml")
    job["spec"]["worker"]["template"]["spec"]["containers"][0]["name"] = "worker"
    job["spec"]["ssh"]["sshdPath"] = "sshd"
    del job["spec"]["worker"]["cmd"]
    errors = _errors(job)
    assert "cmd" in str(errors)
    job = sample("t9k-mpijob.yaml")
    job["spec"]["worker"]["template"]["spec"]["containers"][0]["name"] = "worker"
    job["spec"]["ssh"]["sshdPath"] = "sshd"
    errors = _errors(job)
    assert "mpi-worker" in errors["spec.worker.template.spec.containers"]
    assert "absolute" in errors["spec.ssh.sshdPath"]


def test_priority_and_queue_come_from_the_t9k_scheduler() -> None:
    job = sample("t9k-tensorflowtrainingjob.yaml")
    assert t9k_tfjob.priority_request(job).value is None
    job["spec"]["scheduler"] = {"t9kScheduler": {"queue": "root-child-2", "priority": 50}}
    request = t9k_tfjob.priority_request(job)
    assert (request.value, request.field) == (50, "spec.scheduler.t9kScheduler.priority")
    assert t9k_tfjob.queue(job) == "root-child-2"
    job["spec"]["scheduler"]["t9kScheduler"]["queue"] = "default"
    assert t9k_tfjob.queue(job) is None  # T9k's default queue: the namespace decides


def test_pause_and_debug_read_either_spelling() -> None:
    job = sample("t9k-mpijob.yaml")
    assert not t9k_mpijob.paused(job)
    job["spec"]["runMode"] = {"pause": {"enabled": True}, "debug": {"enable": True}}
    assert t9k_mpijob.paused(job) and mode_enabled(job, "debug")


def _member(
    phase: str, conditions: list[tuple[str, str, str]], exit_code: int | None = None
) -> dict[str, Any]:
    containers = (
        [] if exit_code is None else [{"name": "tensorflow", "state": "Terminated", "exitCode": exit_code}]
    )
    job = sample("t9k-tensorflowtrainingjob.yaml")
    job["status"] = {
        "phase": phase,
        "conditions": [
            {"type": t, "status": s, "reason": r, "message": f"{t} {s}"} for t, s, r in conditions
        ],
        "tasks": [
            {"type": "worker", "restartCount": 0, "replicas": [{"name": "w-0", "containers": containers}]}
        ],
        "aggregate": {"running": 0, "succeeded": 1},
    }
    return job


def test_map_status_puts_the_phase_in_fleet_words_last_and_mirrors_tasks_and_aggregate() -> None:
    member = _member("Succeeded", [("Initialized", "True", "-"), ("Completed", "True", "Succeeded")], 0)
    seen = t9k_tfjob.map_status(member)
    assert seen.state == "Succeeded" and seen.finished
    assert [c["type"] for c in seen.conditions] == ["Initialized", "Completed", "Succeeded"]
    assert seen.extra["phase"] == "Succeeded"
    assert seen.extra["aggregate"] == {"running": 0, "succeeded": 1}
    assert seen.extra["tasks"][0]["type"] == "worker"
    paused = t9k_tfjob.map_status(
        _member("Paused", [("Paused", "True", "Paused"), ("Running", "False", "-")])
    )
    assert paused.state == "Paused"
    assert [(c["type"], c["status"]) for c in paused.conditions] == [("Running", "False"), ("Paused", "True")]
    failed = t9k_tfjob.map_status(
        _member("Failed", [("Failed", "True", "Failed"), ("ReplicaFailure", "True", "x")])
    )
    assert [c["type"] for c in failed.conditions] == ["ReplicaFailure", "Failed"]  # T9k's own, no duplicate
    assert t9k_tfjob.map_status(_member("Pending", [])).state == "Created"


@pytest.mark.parametrize(
    ("phase", "code", "reason", "verdict"),
    [
        ("Failed", 137, "Failed", Outcome.RETRIABLE),
        ("Failed", 1, "Failed", Outcome.USER_ERROR),
        ("Failed", 137, "DeadlineExceeded", Outcome.USER_ERROR),
        ("Failed", None, "InvalidSpec", Outcome.USER_ERROR),
        ("Succeeded", 0, "Succeeded", Outcome.SUCCEEDED),
        ("Running", None, "-", Outcome.RUNNING),
        ("Paused", None, "Paused", Outcome.STARTING),
    ],
)
def test_failures_are_the_users_unless_the_environment_killed_the_main_replica(
    phase: str, code: int | None, reason: str, verdict: Outcome
) -> None:
    member = _member(phase, [("Failed" if phase == "Failed" else "Running", "True", reason)], code)
    assert t9k_tfjob.classify(t9k_tfjob.map_status(member)) is verdict


def test_the_member_copy_labels_and_pins_each_replica_type() -> None:
    job = sample("t9k-mpijob.yaml")
    job["metadata"]["namespace"] = "team-a"
    body = t9k_mpijob.member_copy(job, "uid-1", 2, pin={"worker": ["n-1"]})
    template = body["spec"]["worker"]["template"]
    assert template["metadata"]["labels"]["fleet.io/attempt"] == "2"
    terms = template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n-1"]
    assert "status" not in body and body["metadata"]["labels"]["fleet.io/job-uid"] == "uid-1"


def test_a_job_whose_pods_all_wait_for_their_gang_is_stuck_pending() -> None:
    member = _member("Pending", [("Initialized", "True", "-")])
    member["status"]["aggregate"] = {"creating": 0, "pending": 4, "running": 0, "succeeded": 0}
    assert t9k_tfjob.classify(t9k_tfjob.map_status(member)) is Outcome.STUCK_PENDING
    member["status"]["aggregate"] = {"creating": 0, "pending": 1, "running": 3}
    assert t9k_tfjob.classify(t9k_tfjob.map_status(member)) is Outcome.STARTING


# -- the MPIJob in T9k's current shape (t9k/tutorial-examples job/mpijob/horovod-*/job.yaml) ------

REPLICA_SPECS_SAMPLE = "t9k-mpijob-replicaspecs.yaml"


def test_the_current_shape_is_valid_and_its_demand_is_the_launcher_then_the_npu_workers() -> None:
    job = sample(REPLICA_SPECS_SAMPLE)
    assert adapter_for(job) is t9k_mpijob and t9k_mpijob.validate(job) == []
    demand = t9k_mpijob.demand(job)
    assert [(s.replica_type, s.count, s.request("cpu"), s.npus) for s in demand.shapes] == [
        ("launcher", 1, 0, 0),  # template: {}: the controller's launcher, a pod slot only
        ("worker", 2, 32000, 8),
    ]
    assert demand.gang == 3
    assert demand.hardware.types == frozenset({"module-910b-8"})  # the workers' nodeSelector
    assert t9k_mpijob.priority_request(job).value == 60
    assert t9k_mpijob.queue(job) is None  # T9k's default queue


def test_a_launcher_with_a_pod_spec_of_its_own_is_counted_as_written() -> None:
    job = sample(REPLICA_SPECS_SAMPLE)
    job["spec"]["replicaSpecs"].reverse()  # the launcher first: the order is the user's
    job["spec"]["replicaSpecs"][0]["template"] = {
        "spec": {"containers": [{"name": "launcher", "image": "x", "resources": {"requests": {"cpu": "2"}}}]}
    }
    assert t9k_mpijob.validate(job) == []
    launcher, workers = t9k_mpijob.demand(job).shapes
    assert (launcher.replica_type, launcher.request("cpu"), launcher.npus) == ("launcher", 2000, 0)
    assert (workers.replica_type, workers.count) == ("worker", 2)


def test_without_a_launcher_entry_the_controller_s_launcher_is_still_counted() -> None:
    job = sample(REPLICA_SPECS_SAMPLE)
    job["spec"]["replicaSpecs"].pop()
    assert t9k_mpijob.validate(job) == []
    assert t9k_mpijob.demand(job).gang == 3


def _worker_spec(s: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = s["replicaSpecs"][0]["template"]["spec"]
    return spec


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        (
            lambda s: s["replicaSpecs"][0].update(type="Worker"),
            "spec.replicaSpecs[0].type",
            "worker, launcher",
        ),
        (lambda s: s["replicaSpecs"][1].update(type="worker"), "spec.replicaSpecs[1].type", "twice"),
        (lambda s: s["replicaSpecs"].pop(0), "spec.replicaSpecs", "type: worker"),
        (lambda s: s["replicaSpecs"][0].update(replicas=0), "spec.replicaSpecs[0].replicas", "at least 1"),
        (lambda s: s["replicaSpecs"][1].update(replicas=2), "spec.replicaSpecs[1].replicas", "one launcher"),
        (
            lambda s: s["replicaSpecs"][0].update(template={}),
            "spec.replicaSpecs[0].template.spec",
            "required",
        ),
        (
            lambda s: _worker_spec(s)["containers"][0].update(name="mpi-worker"),
            "spec.replicaSpecs[0].template.spec.containers",
            "named worker",
        ),
        (lambda s: s["mpiConfig"].pop("script"), "spec.mpiConfig.script", "required"),
        (lambda s: s["mpiConfig"].update(script=[]), "spec.mpiConfig.script", "empty"),
        (lambda s: s["mpiConfig"].update(home="usr/local"), "spec.mpiConfig.home", "absolute"),
        (lambda s: s.pop("mpiConfig"), "spec.mpiConfig", "required"),
        (
            lambda s: s.update(runPolicy={"cleanUpWorkers": "sometimes"}),
            "spec.runPolicy.cleanUpWorkers",
            "clean-up",
        ),
        (
            lambda s: s.update(runMode={"debug": {"enabled": True, "replicaSpecs": [{"type": "chief"}]}}),
            "spec.runMode.debug.replicaSpecs[0].type",
            "launcher, worker",
        ),
        (
            lambda s: s.update(worker={"cmd": ["x"], "template": s["replicaSpecs"][0]["template"]}),
            "spec.replicaSpecs",
            "either with spec.worker",
        ),
        (lambda s: s.update(mca={"btl": "^openib"}), "spec.mpiConfig", "may not be set with spec.mca"),
        (
            lambda s: _worker_spec(s)["containers"][0]["resources"].update(
                limits={"huawei.com/Ascend910": "4"}
            ),
            "spec.replicaSpecs[0].template.spec.containers[0].resources.requests[huawei.com/Ascend910]",
            "must be equal to huawei.com/Ascend910 limit",
        ),
        (
            lambda s: _worker_spec(s)["containers"][0].update(
                resources={
                    "requests": {"huawei.com/Ascend910": "16"},
                    "limits": {"huawei.com/Ascend910": "16"},
                }
            ),
            "spec.replicaSpecs",
            "per pod is not allowed for a distributed job",
        ),
    ],
)
def test_current_shape_rules_name_the_field(change: Any, path: str, words: str) -> None:
    job = sample(REPLICA_SPECS_SAMPLE)
    change(job["spec"])
    errors = _errors(job)
    assert path in errors, errors
    assert words in errors[path]
    with pytest.raises(InvalidWorkload):
        t9k_mpijob.demand(job)


def test_the_member_copy_of_the_current_shape_labels_and_pins_the_workers_and_leaves_the_launcher() -> None:
    job = sample(REPLICA_SPECS_SAMPLE)
    body = t9k_mpijob.member_copy(job, "uid-1", 1, pin={"worker": ["n-1", "n-2"], "launcher": ["n-1"]})
    worker, launcher = body["spec"]["replicaSpecs"]
    assert worker["template"]["metadata"]["labels"]["fleet.io/job-uid"] == "uid-1"
    terms = worker["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n-1", "n-2"]
    # Still T9k's empty launcher: its pod is made from the worker's template (labels, affinity).
    assert launcher == {"type": "launcher", "replicas": 1, "template": {}}
    assert body["spec"]["mpiConfig"] == job["spec"]["mpiConfig"]
