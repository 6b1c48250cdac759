"""A job's verdict is remembered by the content its kind's rules read (fleet.workloads.verdicts)."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.workloads import InvalidWorkload, adapter_for, ascendjob
from fleet.workloads.ascendjob import AscendJobAdapter
from fleet.workloads.kubeflow_jobs import KubeflowAdapter, pytorchjob
from fleet.workloads.verdicts import VERDICT_MEMORY, remembered
from tests.fleet.placement.factory import sample_job

SAMPLES = Path(__file__).resolve().parents[3] / "config" / "samples"
PYTORCHJOB = SAMPLES / "pytorchjob.yaml"


def _named(job: dict[str, Any]) -> dict[str, Any]:
    """The job under a name no other test used: the memory is the process's."""
    job["metadata"]["name"] = f"v-{uuid.uuid4().hex[:12]}"
    return job


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the AscendJobs whose rules really ran, and ``kubeflow`` each time a Kubeflow
    job's replica specs were read (a few times in one run of its rules)."""
    seen: list[str] = []
    ascend_parse = AscendJobAdapter._parse

    def ascend(self: AscendJobAdapter, obj: Any) -> Any:
        seen.append(obj["metadata"]["name"])
        return ascend_parse(self, obj)

    monkeypatch.setattr(AscendJobAdapter, "_parse", ascend)
    kubeflow_fields = KubeflowAdapter.replica_specs

    def kubeflow(self: KubeflowAdapter, spec: Any) -> Any:
        seen.append("kubeflow")
        return kubeflow_fields(self, spec)

    monkeypatch.setattr(KubeflowAdapter, "replica_specs", kubeflow)
    return seen


def test_a_submission_asking_three_times_runs_the_rules_once(parses: list[str]) -> None:
    job = _named(sample_job())
    first = ascendjob.demand(job)
    assert ascendjob.validate(job) == []
    job["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
    job["metadata"]["uid"] = "u-1"
    job["status"] = {"conditions": []}
    assert ascendjob.demand(job) is first
    assert parses == [job["metadata"]["name"]]


def test_a_change_to_what_the_rules_read_is_judged_again(parses: list[str]) -> None:
    job = _named(sample_job())
    two = ascendjob.demand(job)
    job["spec"]["replicaSpecs"]["Worker"]["replicas"] = 3
    four = ascendjob.demand(job)
    assert four.pods == two.pods + 2
    job["metadata"]["annotations"] = {"sp-block": "16"}
    ascendjob.validate(job)
    job["metadata"]["labels"]["framework"] = "jax"
    assert [e.path for e in ascendjob.validate(job)] == ["metadata.labels.framework"]
    assert len(parses) == 4


def test_a_broken_jobs_errors_come_back_whole_each_time(parses: list[str]) -> None:
    job = _named(sample_job())
    job["spec"]["replicaSpecs"]["Master"]["replicas"] = 2
    errors = ascendjob.validate(job)
    assert [e.path for e in errors] == ["spec.replicaSpecs.Master.replicas"]
    errors.clear()  # a caller's list is its own
    with pytest.raises(InvalidWorkload) as raised:
        ascendjob.demand(job)
    assert [e.path for e in raised.value.errors] == ["spec.replicaSpecs.Master.replicas"]
    assert len(parses) == 1


def test_one_as_a_number_and_true_are_not_the_same_content(parses: list[str]) -> None:
    job = _named(sample_job())
    job["spec"]["replicaSpecs"]["Master"]["replicas"] = 1
    assert ascendjob.validate(job) == []
    job["spec"]["replicaSpecs"]["Master"]["replicas"] = True
    assert [e.path for e in ascendjob.validate(job)] == ["spec.replicaSpecs.Master.replicas"]
    assert len(parses) == 2


def test_a_value_marshal_cannot_hold_is_judged_each_time(parses: list[str]) -> None:
    job = _named(sample_job())
    job["spec"]["replicaSpecs"]["Master"]["template"]["metadata"] = {"labels": {"a": object()}}
    ascendjob.validate(job)
    ascendjob.validate(job)
    assert len(parses) == 2


def test_kinds_keep_their_own_verdicts_and_the_memory_is_bounded(parses: list[str]) -> None:
    pytorch = yaml.safe_load(PYTORCHJOB.read_text())
    job = _named(copy.deepcopy(pytorch))
    pytorchjob.demand(job)
    once = len(parses)
    pytorchjob.demand(job)
    assert once > 0 and len(parses) == once
    as_ascend = {**job, "apiVersion": "mindxdl.gitee.com/v1", "kind": "AscendJob"}
    assert ascendjob.validate(as_ascend) != []  # the AscendJob adapter judges it by its own rules
    for _ in range(VERDICT_MEMORY):
        ascendjob.validate(_named(sample_job()))
    del parses[:]
    pytorchjob.demand(job)
    assert parses.count("kubeflow") == once  # pushed out by newer verdicts: judged again


@pytest.mark.parametrize("sample", ["kueue-batch-job.yaml", "vcjob-mindspore-910b.yaml"])
def test_a_batch_job_and_a_volcano_job_are_judged_once_for_their_three_askings(
    sample: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = _named(next(d for d in yaml.safe_load_all((SAMPLES / sample).read_text()) if d and "spec" in d))
    adapter = adapter_for(job)
    rules = type(adapter)._check.__wrapped__  # type: ignore[attr-defined]
    runs: list[int] = []

    def counted(self: Any, obj: Any) -> Any:
        runs.append(1)
        return rules(self, obj)

    monkeypatch.setattr(type(adapter), "_check", remembered(counted))
    first = adapter.demand(job)
    assert adapter.validate(job) == []
    assert adapter.demand({**job, "status": {"active": 1}}) is first
    assert len(runs) == 1
