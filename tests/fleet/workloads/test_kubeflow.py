"""Kubeflow's PyTorchJob, TFJob and MPIJob adapters: what their webhooks refuse, the gang they
ask for, how their status reads and how their failures are classified."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from fleet.workloads import Outcome, WorkloadStatus, adapter_for
from fleet.workloads.base import unschedulable
from fleet.workloads.kubeflow_jobs import mpijob, pytorchjob, tfjob

SAMPLE = Path(__file__).resolve().parents[3] / "config" / "samples" / "pytorchjob.yaml"


def sample() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    return loaded


def paths(obj: dict[str, Any]) -> list[str]:
    return [e.path for e in adapter_for(obj).validate(obj)]


def test_the_sample_is_a_gang_of_three_8_npu_pods_master_first() -> None:
    job = sample()
    assert adapter_for(job) is pytorchjob and pytorchjob.validate(job) == []
    demand = pytorchjob.demand(job)
    assert demand.pods == 3 and demand.gang == 3 and demand.npus == 24
    assert [(s.replica_type, s.count) for s in demand.shapes] == [("Master", 1), ("Worker", 2)]


def test_what_the_training_operator_webhook_refuses() -> None:
    job = sample()
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    job["spec"]["pytorchReplicaSpecs"]["Chief"] = copy.deepcopy(job["spec"]["pytorchReplicaSpecs"]["Worker"])
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] = "main"
    job["spec"]["runPolicy"]["cleanPodPolicy"] = "Sometimes"
    job["spec"]["elasticPolicy"] = {"minReplicas": 3, "maxReplicas": 1, "nProcPerNode": 8}
    job["metadata"]["name"] = "Not_DNS"
    assert sorted(paths(job)) == sorted(
        [
            "metadata.name",
            "spec.pytorchReplicaSpecs.Master.replicas",
            "spec.pytorchReplicaSpecs.Chief",
            "spec.pytorchReplicaSpecs.Worker.template.spec.containers",
            "spec.runPolicy.cleanPodPolicy",
            "spec.elasticPolicy.minReplicas",
            "spec.elasticPolicy.nProcPerNode",
        ]
    )


def test_types_and_gang_size_are_checked() -> None:
    job = sample()
    job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = 4
    job["spec"]["runPolicy"]["backoffLimit"] = "3"
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = True
    assert set(paths(job)) >= {"spec.runPolicy.backoffLimit", "spec.pytorchReplicaSpecs.Worker.replicas"}
    job = sample()
    job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = 4
    assert paths(job) == ["spec.runPolicy.schedulingPolicy.minAvailable"]
    job = sample()
    del job["spec"]["pytorchReplicaSpecs"]
    assert paths(job) == ["spec.pytorchReplicaSpecs"]


def test_tfjob_and_mpijob_share_the_base() -> None:
    worker = sample()["spec"]["pytorchReplicaSpecs"]["Worker"]
    tf: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "mnist", "namespace": "default"},
        "spec": {"tfReplicaSpecs": {"PS": copy.deepcopy(worker), "Worker": copy.deepcopy(worker)}},
    }
    for replica in tf["spec"]["tfReplicaSpecs"].values():
        replica["template"]["spec"]["containers"][0]["name"] = "tensorflow"
    assert adapter_for(tf) is tfjob and tfjob.validate(tf) == []
    assert [s.replica_type for s in tfjob.demand(tf).shapes] == ["PS", "Worker"]
    mpi: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": "default"},
        "spec": {"slotsPerWorker": 8, "mpiReplicaSpecs": {"Worker": copy.deepcopy(worker)}},
    }
    assert adapter_for(mpi) is mpijob and paths(mpi) == ["spec.mpiReplicaSpecs.Launcher"]
    launcher = copy.deepcopy(worker)
    launcher["replicas"] = 1
    launcher["template"]["spec"]["containers"][0]["resources"] = {}
    mpi["spec"]["mpiReplicaSpecs"]["Launcher"] = launcher
    assert mpijob.validate(mpi) == []
    assert [(s.replica_type, s.count) for s in mpijob.demand(mpi).shapes] == [("Launcher", 1), ("Worker", 2)]


def test_status_and_failure_classification() -> None:
    def status(kind: str, reason: str) -> WorkloadStatus:
        copy_ = {"status": {"conditions": [{"type": kind, "status": "True", "reason": reason}]}}
        return pytorchjob.map_status(copy_)

    assert pytorchjob.classify(status("Created", "PyTorchJobCreated")) is Outcome.STARTING
    assert pytorchjob.classify(status("Running", "PyTorchJobRunning")) is Outcome.RUNNING
    assert pytorchjob.classify(status("Restarting", "PyTorchJobRestarting")) is Outcome.RUNNING
    assert pytorchjob.classify(status("Succeeded", "PyTorchJobSucceeded")) is Outcome.SUCCEEDED
    assert pytorchjob.classify(status("Failed", "PyTorchJobFailed")) is Outcome.RETRIABLE
    assert pytorchjob.classify(status("Failed", "PyTorchJobFailedValidation")) is Outcome.USER_ERROR


def test_member_copy_labels_every_template_and_pins_by_replica_type() -> None:
    job = sample()
    job["metadata"]["uid"] = "u1"
    body = pytorchjob.member_copy(job, "u1", 2, pin={"Worker": ["n1", "n2"]})
    for rtype in ("Master", "Worker"):
        labels = body["spec"]["pytorchReplicaSpecs"][rtype]["template"]["metadata"]["labels"]
        assert labels["fleet.io/job-uid"] == "u1" and labels["fleet.io/attempt"] == "2"
    worker = body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert (
        "affinity" in worker
        and "affinity" not in body["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    )
    assert "uid" not in body["metadata"] and "status" not in body


def test_the_kubeflow_samples_are_valid_jobs_of_their_kinds() -> None:
    samples = SAMPLE.parent
    expected = {
        "pytorchjob.yaml": (pytorchjob, 3),
        "tfjob.yaml": (tfjob, 3),
        "mpijob-kubeflow.yaml": (mpijob, 3),
    }
    for name, (adapter, pods) in expected.items():
        job = yaml.safe_load((samples / name).read_text())
        assert adapter_for(job) is adapter and adapter.validate(job) == [], name
        assert adapter.demand(job).pods == pods, name


def test_elastic_bounds_do_not_shrink_the_gang_min_available_does() -> None:
    """The training operator's PodGroup waits for every pod (``minMember := totalReplicas``)
    unless ``schedulingPolicy.minAvailable`` says otherwise; ``elasticPolicy.minReplicas`` only
    feeds torchrun's ``--nnodes``. Fleet's gang follows the same rule."""
    job = sample()
    del job["spec"]["runPolicy"]["schedulingPolicy"]
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 3
    job["spec"]["elasticPolicy"] = {"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 4}
    demand = pytorchjob.demand(job)
    assert (demand.pods, demand.gang) == (4, 4)
    job["spec"]["runPolicy"]["schedulingPolicy"] = {"minAvailable": 2}
    assert pytorchjob.demand(job).gang == 2


def test_an_mpijob_gang_is_its_workers_and_its_launcher_whatever_runs_as_a_worker() -> None:
    """The MPI operator's ``calculateMinAvailable``: workers + 1 unless ``minAvailable``."""
    job = yaml.safe_load((SAMPLE.parent / "mpijob-kubeflow.yaml").read_text())
    assert mpijob.demand(job).gang == 3
    job["spec"]["runLauncherAsWorker"] = True
    assert mpijob.demand(job).gang == 3
    job["spec"]["runPolicy"]["schedulingPolicy"] = {"minAvailable": 2}
    assert mpijob.demand(job).gang == 2
    labels = mpijob.pod_labels("pi", "Launcher")
    assert labels["training.kubeflow.org/job-role"] == "launcher"
    assert "training.kubeflow.org/replica-type" not in labels


def test_what_the_tfjob_webhook_and_the_mpi_validation_refuse() -> None:
    tf = yaml.safe_load((SAMPLE.parent / "tfjob.yaml").read_text())
    tf["spec"]["tfReplicaSpecs"]["Chief"] = {
        **copy.deepcopy(tf["spec"]["tfReplicaSpecs"]["PS"]),
        "replicas": 1,
    }
    tf["spec"]["tfReplicaSpecs"]["Master"] = copy.deepcopy(tf["spec"]["tfReplicaSpecs"]["Chief"])
    tf["spec"]["successPolicy"] = "AnyWorker"
    assert sorted(paths(tf)) == ["spec.successPolicy", "spec.tfReplicaSpecs"]
    mpi = yaml.safe_load((SAMPLE.parent / "mpijob-kubeflow.yaml").read_text())
    mpi["spec"]["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] = "ExitCode"
    mpi["spec"]["launcherCreationPolicy"] = "Later"
    mpi["spec"]["mpiImplementation"] = "LAM"
    assert sorted(paths(mpi)) == [
        "spec.launcherCreationPolicy",
        "spec.mpiImplementation",
        "spec.mpiReplicaSpecs.Launcher.restartPolicy",
    ]
    mpi = yaml.safe_load((SAMPLE.parent / "mpijob-kubeflow.yaml").read_text())
    mpi["spec"]["runLauncherAsWorker"] = "yes"
    assert paths(mpi) == ["spec.runLauncherAsWorker"]
    mpi = yaml.safe_load((SAMPLE.parent / "mpijob-kubeflow.yaml").read_text())
    mpi["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 0
    assert paths(mpi) == ["spec.mpiReplicaSpecs.Worker.replicas"]


def test_suspend_is_the_switch_and_the_queue_names_a_leaf_unless_default() -> None:
    job = sample()
    assert (pytorchjob.pause_field, pytorchjob.held_state) == ("spec.runPolicy.suspend", "Suspended")
    assert not pytorchjob.paused(job)
    suspended = copy.deepcopy(job)
    suspended["spec"]["runPolicy"]["suspend"] = True
    assert pytorchjob.paused(suspended)
    assert pytorchjob.without_pause_switch(suspended) == pytorchjob.without_pause_switch(job)
    bare = copy.deepcopy(job)
    del bare["spec"]["runPolicy"]
    added = copy.deepcopy(bare)
    added["spec"]["runPolicy"] = {"suspend": False}  # a switch added where there was none
    assert pytorchjob.without_pause_switch(added) == pytorchjob.without_pause_switch(bare)
    other = copy.deepcopy(suspended)
    other["spec"]["runPolicy"]["backoffLimit"] = 9
    assert pytorchjob.without_pause_switch(other) != pytorchjob.without_pause_switch(job)
    assert pytorchjob.queue(job) is None
    for name, named in (("default", None), ("", None), ("team-a", "team-a"), ("root-team-a", "root-team-a")):
        job["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = name
        assert pytorchjob.queue(job) == named, name


def _copy(*conditions: tuple[str, str, str]) -> dict[str, Any]:
    return {"status": {"conditions": [{"type": t, "status": s, "reason": r} for t, s, r in conditions]}}


def test_the_state_is_the_last_true_condition_and_goes_last() -> None:
    """The MPI operator leaves a false Running after a finish it never saw running, and the
    operators leave Running False and Suspended after a suspend: the fleet reads its state from
    the last condition, so the state's own condition is put last (never Suspended: Fleet never
    suspends a copy, it holds the job)."""
    finished = mpijob.map_status(
        _copy(
            ("Created", "True", "MPIJobCreated"),
            ("Succeeded", "True", "MPIJobSucceeded"),
            ("Running", "False", "MPIJobRunning"),
        )
    )
    assert (finished.state, finished.conditions[-1]["type"]) == ("Succeeded", "Succeeded")
    assert mpijob.classify(finished) is Outcome.SUCCEEDED
    resumed = pytorchjob.map_status(
        _copy(
            ("Created", "True", "PyTorchJobCreated"),
            ("Running", "False", "PyTorchJobSuspended"),
            ("Suspended", "True", "PyTorchJobSuspended"),
        )
    )
    assert (resumed.state, resumed.reason, resumed.conditions[-1]["type"]) == (
        "Created",
        "PyTorchJobCreated",
        "Created",
    )
    assert pytorchjob.classify(resumed) is Outcome.STARTING


def test_each_kinds_failures_and_a_gang_its_pods_say_cannot_be_placed() -> None:
    assert tfjob.classify(tfjob.map_status(_copy(("Failed", "True", "TFJobFailed")))) is Outcome.RETRIABLE
    assert (
        tfjob.classify(tfjob.map_status(_copy(("Failed", "True", "TFJobFailedValidation"))))
        is Outcome.USER_ERROR
    )
    assert (
        tfjob.classify(tfjob.map_status(_copy(("Restarting", "True", "TFJobRestarting")))) is Outcome.RUNNING
    )
    backoff = mpijob.map_status(
        _copy(("Created", "True", "MPIJobCreated"), ("Failed", "True", "BackoffLimitExceeded/"))
    )
    assert mpijob.classify(backoff) is Outcome.RETRIABLE
    created = tfjob.map_status(_copy(("Created", "True", "TFJobCreated")))
    assert tfjob.classify(created) is Outcome.STARTING
    pending = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/4 nodes are available",
    }
    pods: list[dict[str, Any]] = [
        {"metadata": {"name": "tf-mnist-ps-0"}, "status": {"phase": "Pending"}},  # not looked at yet
        {"metadata": {"name": "tf-mnist-worker-0"}, "status": {"phase": "Pending", "conditions": [pending]}},
    ]
    evidence = unschedulable(pods)
    assert evidence == "pod tf-mnist-worker-0 is unschedulable: 0/4 nodes are available"
    assert tfjob.classify(replace(created, unschedulable=evidence)) is Outcome.STUCK_PENDING
    running = tfjob.map_status(_copy(("Running", "True", "TFJobRunning")))
    assert tfjob.classify(replace(running, unschedulable=evidence)) is Outcome.RUNNING
    assert unschedulable(pods[:1]) is None
    # What the ascend-operator writes on its job is no evidence for a Kubeflow kind's.
    assert (
        pytorchjob.classify(pytorchjob.map_status(_copy(("Created", "True", "PodGroupPending"))))
        is Outcome.STARTING
    )
