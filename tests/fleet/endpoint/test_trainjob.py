"""Kubeflow Trainer v2 at the fleet API: the runtimes are served, a TrainJob is queued once its
runtime exists (refused naming ``spec.runtimeRef`` before), and records the runtime it was
submitted with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from queues import Ledger
from tests.fleet.endpoint.conftest import SAMPLES
from tests.support.kubectl import Kubectl, table

pytestmark = pytest.mark.integration


def test_a_trainjob_waits_for_its_runtime_then_is_queued_with_it(
    kubectl: Kubectl, fleet_redis: redis.Redis, tmp_path: Path
) -> None:
    train = SAMPLES / "trainjob-torch-npu.yaml"
    refused = kubectl("apply", "-f", str(train), ok=False)
    assert refused.returncode != 0
    assert "spec.runtimeRef" in refused.stderr and "not found" in refused.stderr
    assert Ledger(fleet_redis).pending.records() == {}
    kubectl("apply", "-f", str(SAMPLES / "trainer-torch-npu-runtime.yaml"))
    assert "torch-npu-distributed" in kubectl("get", "clustertrainingruntimes").stdout
    assert "trainjob.trainer.kubeflow.org/qwen-sft created" in kubectl("apply", "-f", str(train)).stdout
    assert "trainjobs.trainer.kubeflow.org:default/qwen-sft" in Ledger(fleet_redis).pending.records()
    rows = table(kubectl("get", "trainjobs").stdout)
    assert rows[1][:2] == ["qwen-sft", "Queued"]
    stored = json.loads(kubectl("get", "trainjob", "qwen-sft", "-o", "json").stdout)
    recorded = json.loads(stored["metadata"]["annotations"]["trainer.fleet.io/runtime"])
    assert recorded["name"] == "torch-npu-distributed" and recorded["kind"] == "ClusterTrainingRuntime"
