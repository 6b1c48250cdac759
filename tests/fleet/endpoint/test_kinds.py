"""Every job kind at the fleet through the real kubectl: Kubeflow's PyTorchJob, TFJob and MPIJob
under their CRDs' names and short names, queued in the same leaf as AscendJobs, refused with
the field and rule when their operator's webhook would refuse them, and authorised as jobs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from queues import Ledger
from tests.fleet.endpoint.conftest import JOB, TREE
from tests.support.kubectl import Kubectl, table

pytestmark = pytest.mark.integration

PYTORCHJOB = Path(__file__).resolve().parents[3] / "config" / "samples" / "pytorchjob.yaml"


def _pytorchjob() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(PYTORCHJOB.read_text())
    return loaded


def _tfjob() -> dict[str, Any]:
    worker = copy.deepcopy(_pytorchjob()["spec"]["pytorchReplicaSpecs"]["Worker"])
    worker["template"]["spec"]["containers"][0]["name"] = "tensorflow"
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "mnist"},
        "spec": {"tfReplicaSpecs": {"Chief": {**copy.deepcopy(worker), "replicas": 1}, "Worker": worker}},
    }


def _mpijob() -> dict[str, Any]:
    worker = copy.deepcopy(_pytorchjob()["spec"]["pytorchReplicaSpecs"]["Worker"])
    launcher = copy.deepcopy(worker)
    launcher["replicas"] = 1
    launcher["template"]["spec"]["containers"][0].pop("resources")
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi"},
        "spec": {"slotsPerWorker": 8, "mpiReplicaSpecs": {"Launcher": launcher, "Worker": worker}},
    }


def test_every_kind_is_queued_in_one_leaf_under_its_own_names(
    kubectl: Kubectl, fleet_redis: redis.Redis, tmp_path: Path
) -> None:
    kubectl("apply", "-f", str(TREE))
    for name, obj in (("pytorchjob", _pytorchjob()), ("tfjob", _tfjob()), ("mpijob", _mpijob())):
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(obj))
        created = kubectl("create", "-f", str(path)).stdout.strip()
        assert created == f"{name}.kubeflow.org/{obj['metadata']['name']} created"
    kubectl("create", "-f", str(JOB))
    for resource, name in (("pytorchjob", "pytorch-test"), ("tfjobs", "mnist"), ("mpij", "pi")):
        rows = table(kubectl("get", resource).stdout)
        assert rows[0] == ["NAME", "STATE", "CLUSTER", "QUEUE", "AGE"]
        assert rows[1][:4] == [name, "Queued", "<none>", "root-child-2"]
    pending = set(Ledger(fleet_redis).pending.records())
    assert pending == {
        "pytorchjobs.kubeflow.org:default/pytorch-test",
        "tfjobs.kubeflow.org:default/mnist",
        "mpijobs.kubeflow.org:default/pi",
        "default/default-test-pytorch",
    }
    described = kubectl("describe", "pytorchjob", "pytorch-test").stdout
    assert "Submitted" in described and "waiting in queue root-child-2" in described
    resources = kubectl("api-resources", "--api-group", "kubeflow.org").stdout
    assert "mpij" in resources and "pytorchjobs" in resources and "tfjobs" in resources
    deleted = kubectl("delete", "pytorchjob", "pytorch-test", "--wait=false").stdout
    assert 'pytorchjob.kubeflow.org "pytorch-test" deleted' in deleted


def test_a_pytorchjob_the_webhook_would_refuse_is_refused_naming_the_field(
    kubectl: Kubectl, fleet_redis: redis.Redis, tmp_path: Path
) -> None:
    kubectl("apply", "-f", str(TREE))
    job = _pytorchjob()
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] = "trainer"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(job))
    refused = kubectl("create", "-f", str(path), ok=False)
    assert refused.returncode != 0
    assert 'The PyTorchJob "pytorch-test" is invalid' in refused.stderr
    assert "spec.pytorchReplicaSpecs.Master.replicas" in refused.stderr
    assert "must have a container named pytorch" in refused.stderr
    assert Ledger(fleet_redis).pending.records() == {}
