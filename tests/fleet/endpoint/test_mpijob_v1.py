"""Kubeflow's MPIJob at ``kubeflow.org/v1`` (training operator 1.x) served beside ``v2beta1``: one
kind with two versions, as kube-apiserver serves a CRD with several ``versions`` (one storage
version, the ``None`` conversion strategy). Written the way the training operator's users write
it: ``spec.cleanPodPolicy`` at the top of the spec, ``slotsPerWorker``, ``mainContainer``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from queues import Ledger
from tests.fleet.endpoint.conftest import TREE
from tests.support.kubectl import Kubectl

pytestmark = pytest.mark.integration

V1_MPIJOB = """
apiVersion: kubeflow.org/v1
kind: MPIJob
metadata:
  name: tensorflow-benchmarks
spec:
  slotsPerWorker: 8
  cleanPodPolicy: Running
  mainContainer: tensorflow-benchmarks
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: tensorflow-benchmarks
            image: mpioperator/tensorflow-benchmarks:latest
            command: [mpirun, --allow-run-as-root, -np, "16", python, scripts/tf_cnn_benchmarks.py]
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: tensorflow-benchmarks
            image: mpioperator/tensorflow-benchmarks:latest
            resources:
              limits:
                huawei.com/Ascend910: 8
"""


def test_an_mpijob_written_at_v1_is_queued_and_read_at_either_version(
    kubectl: Kubectl, fleet_redis: redis.Redis, tmp_path: Path
) -> None:
    kubectl("apply", "-f", str(TREE))
    path = tmp_path / "mpijob-v1.yaml"
    path.write_text(V1_MPIJOB)
    assert kubectl("apply", "-f", str(path)).stdout.strip() == (
        "mpijob.kubeflow.org/tensorflow-benchmarks created"
    )
    # Queued like any MPIJob, under the one kind's key.
    assert "mpijobs.kubeflow.org:default/tensorflow-benchmarks" in Ledger(fleet_redis).pending.records()
    # Read at v1 it is v1; at v2beta1 the same object, its v1-only fields in v2beta1's places.
    at_v1: dict[str, Any] = json.loads(
        kubectl("get", "mpijobs.v1.kubeflow.org", "tensorflow-benchmarks", "-o", "json").stdout
    )
    at_v2: dict[str, Any] = json.loads(
        kubectl("get", "mpijobs.v2beta1.kubeflow.org", "tensorflow-benchmarks", "-o", "json").stdout
    )
    assert at_v1["apiVersion"] == "kubeflow.org/v1"
    assert at_v2["apiVersion"] == "kubeflow.org/v2beta1"
    assert at_v1["metadata"]["uid"] == at_v2["metadata"]["uid"]
    assert at_v2["spec"]["runPolicy"] == {"cleanPodPolicy": "Running"}
    assert "cleanPodPolicy" not in at_v2["spec"] and "mainContainer" not in at_v2["spec"]
    assert at_v2["spec"]["slotsPerWorker"] == 8
    # Both versions are discovered; applying the same file again changes nothing.
    versions = kubectl("api-versions").stdout.split()
    assert "kubeflow.org/v1" in versions and "kubeflow.org/v2beta1" in versions
    again = kubectl("apply", "-f", str(path)).stdout.strip()
    assert again in (
        "mpijob.kubeflow.org/tensorflow-benchmarks unchanged",
        "mpijob.kubeflow.org/tensorflow-benchmarks configured",
    )
    rows = kubectl("get", "mpijobs.v1.kubeflow.org").stdout.split("\n")
    assert rows[1].split()[:2] == ["tensorflow-benchmarks", "Queued"]


def test_a_v1_mpijob_the_operator_would_refuse_is_refused_naming_the_field(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    kubectl("apply", "-f", str(TREE))
    job = yaml.safe_load(V1_MPIJOB)
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["replicas"] = 2
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(job))
    refused = kubectl("apply", "-f", str(path), ok=False)
    assert refused.returncode != 0
    assert "spec.mpiReplicaSpecs.Launcher.replicas" in refused.stderr
