"""Kubeflow Trainer v2's TrainJob: the JobSet Trainer builds of it on its runtime (kubeflow/trainer
``pkg/runtime/core/trainingruntime.go``, ``plugins/torch``, ``plugins/jobset/builder.go``), the
gang Fleet queues, and its status as Trainer reports it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.trainer import RUNTIME_ANNOTATION
from fleet.workloads import with_runtime
from fleet.workloads.base import InvalidWorkload, Outcome
from fleet.workloads.trainjob import effective_jobset, trainjob

SAMPLES = Path(__file__).resolve().parents[3] / "config" / "samples"
RUNTIME: dict[str, Any] = yaml.safe_load((SAMPLES / "trainer-torch-npu-runtime.yaml").read_text())


def job(**trainer: Any) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((SAMPLES / "trainjob-torch-npu.yaml").read_text())
    obj["metadata"]["namespace"] = "team-a"
    obj["spec"]["trainer"].update(trainer)
    return obj


def resolved(obj: dict[str, Any], runtime: dict[str, Any] | None = RUNTIME) -> dict[str, Any]:
    with_runtime(
        obj, lambda kind, namespace, name: runtime if runtime and kind.kind == runtime["kind"] else None
    )
    return obj


def test_the_trainer_overrides_the_runtime_s_node_job() -> None:
    spec = effective_jobset(job(), RUNTIME["spec"])
    node = spec["replicatedJobs"][0]
    assert node["replicas"] == 1
    assert node["template"]["spec"]["parallelism"] == node["template"]["spec"]["completions"] == 2
    container = node["template"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example.com/llm/qwen-sft:npu-8.0"
    assert container["command"][-1] == "--model=qwen2.5-7b"
    # resourcesPerNode wins per resource; the runtime's cpu and memory stay.
    assert container["resources"]["requests"] == {"cpu": "16", "memory": "64Gi", "huawei.com/Ascend910": "4"}
    assert [e["name"] for e in container["env"]] == [
        "ASCEND_RT_VISIBLE_DEVICES",
        "HCCL_CONNECT_TIMEOUT",
        "HCCL_BUFFSIZE",
    ]
    assert RUNTIME["spec"]["template"]["spec"]["replicatedJobs"][0].get("replicas") is None  # not changed


def test_numnodes_falls_back_to_the_runtime_s_ml_policy() -> None:
    obj = job()
    del obj["spec"]["trainer"]["numNodes"]
    runtime = copy.deepcopy(RUNTIME)
    runtime["spec"]["mlPolicy"]["numNodes"] = 3
    demand = trainjob.demand(resolved(obj, runtime))
    assert demand.gang == demand.pods == 3
    assert trainjob.demand(resolved(job(numNodes=4))).pods == 4


def test_a_trainjob_whose_runtime_is_missing_is_refused_naming_runtime_ref() -> None:
    obj = resolved(job(), None)
    assert RUNTIME_ANNOTATION not in obj["metadata"]["annotations"]
    [error] = trainjob.validate(obj)
    assert error.path == "spec.runtimeRef"
    assert "ClusterTrainingRuntime 'torch-npu-distributed' not found" in error.message
    with pytest.raises(InvalidWorkload):
        trainjob.demand(obj)
    bad = resolved(job(numNodes=-1))
    assert [e.path for e in trainjob.validate(bad)] == ["spec.trainer.numNodes"]


def test_the_member_gets_the_runtime_first_and_a_copy_naming_it() -> None:
    obj = resolved(job())
    [runtime] = trainjob.dependencies(obj)
    assert (runtime["kind"], runtime["metadata"]["namespace"]) == ("TrainingRuntime", "team-a")
    assert runtime["spec"] == RUNTIME["spec"]
    copy_ = trainjob.member_copy(obj, "uid-1", 1)
    assert copy_["spec"]["runtimeRef"]["kind"] == "TrainingRuntime"
    assert RUNTIME_ANNOTATION not in copy_["metadata"]["annotations"]


def test_status_as_trainer_reports_it() -> None:
    running = trainjob.map_status({"status": {"jobsStatus": [{"name": "node", "active": 2, "ready": 2}]}})
    assert running.state == "Running" and trainjob.classify(running) is Outcome.RUNNING
    done = trainjob.map_status(
        {"status": {"conditions": [{"type": "Complete", "status": "True", "reason": "AllJobsCompleted"}]}}
    )
    assert done.state == "Succeeded" and [c["type"] for c in done.conditions] == ["Complete", "Succeeded"]
    deadline = trainjob.map_status(
        {"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]}}
    )
    assert trainjob.classify(deadline) is Outcome.USER_ERROR
    jobs = trainjob.map_status(
        {"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "ReachedMaxRestarts"}]}}
    )
    assert trainjob.classify(jobs) is Outcome.RETRIABLE
