"""Kubeflow's PyTorchJob, TFJob and MPIJob adapters: what their webhooks refuse, the gang they
ask for, how their status reads and how their failures are classified."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from fleet.workloads import Outcome, WorkloadStatus, adapter_for
from fleet.workloads.kubeflow import mpijob, pytorchjob, tfjob

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
