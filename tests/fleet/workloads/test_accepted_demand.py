"""The demand of a stored job, read without asking its kind's rules again (AcceptedDemand): the
same demand as the full rules give for every job they accept, rules added later not asked, and a
job that reading cannot take judged by the full rules."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.workloads import (
    AcceptedDemand,
    InvalidWorkload,
    UnknownKind,
    adapter_for,
    ascendjob,
    stored_demand,
)
from fleet.workloads.kubeflow_jobs import pytorchjob
from tests.fleet.placement.factory import job as ascend_job
from tests.fleet.placement.factory import sample_job

SAMPLES = Path(__file__).resolve().parents[3] / "config" / "samples"


def _accepted(obj: dict[str, Any]) -> bool:
    try:
        adapter_for(obj).demand(obj)
    except (InvalidWorkload, UnknownKind):
        return False
    return True


def _manifests() -> Iterator[tuple[str, dict[str, Any]]]:
    """Every job of the samples that its kind's rules accept (some samples are refusals)."""
    for path in sorted([*SAMPLES.glob("*.yaml"), *SAMPLES.glob("ascend/*.yaml")]):
        for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if isinstance(doc, dict) and _accepted(doc):
                yield f"{path.relative_to(SAMPLES)}#{i}", doc


def _variants() -> Iterator[tuple[str, dict[str, Any]]]:
    """Jobs as their users write them, beyond the samples: a gang smaller than the job, pods kept
    apart by the operator's job-name label, node selectors and tolerations, a chosen card."""
    yield "ascend: two workers, minAvailable 2", ascend_job("gang", workers=2, npus=8, min_available=2)
    yield "ascend: pods kept apart by their job-name label", ascend_job("apart", workers=3, npus=4)
    yield "ascend: shared nodes", ascend_job("shared", workers=2, npus=2, exclusive=False)
    yield (
        "ascend: a node selector",
        ascend_job("picky", workers=1, npus=8, selector={"accelerator-type": "card"}),
    )
    tolerant = sample_job()
    for spec in tolerant["spec"]["replicaSpecs"].values():
        spec["template"]["spec"]["tolerations"] = [
            {"key": "npu", "operator": "Exists", "effect": "NoSchedule"}
        ]
    yield "ascend: tolerations", tolerant
    no_gang = sample_job()
    no_gang["spec"].pop("runPolicy", None)
    yield "ascend: no runPolicy", no_gang
    torch = yaml.safe_load((SAMPLES / "pytorchjob.yaml").read_text())
    torch["spec"].setdefault("runPolicy", {})["schedulingPolicy"] = {"minAvailable": 1}
    yield "pytorch: minAvailable 1", torch
    one = copy.deepcopy(torch)
    for spec in one["spec"]["pytorchReplicaSpecs"].values():
        spec.pop("replicas", None)  # the operator's default: one
    yield "pytorch: replicas left to their default", one
    vcjob = _first(SAMPLES / "vcjob-mindspore-910b.yaml", "Job")
    by_task = copy.deepcopy(vcjob)
    by_task["spec"].pop("minAvailable", None)  # the webhook sums the tasks' own
    by_task["spec"]["tasks"][0]["minAvailable"] = 1
    yield "volcano: the gang summed from the tasks' minAvailable", by_task
    two = copy.deepcopy(vcjob)
    two["spec"].pop("minAvailable", None)
    two["spec"]["tasks"].append({**copy.deepcopy(two["spec"]["tasks"][0]), "name": "ps", "replicas": 1})
    yield "volcano: two tasks, each whole", two
    batch = _first(SAMPLES / "kueue-batch-job.yaml", "Job")
    fewer = copy.deepcopy(batch)
    fewer["spec"]["parallelism"] = 2  # two at a time of three completions
    yield "batch: parallelism below completions", fewer
    work_queue = copy.deepcopy(batch)
    del work_queue["spec"]["completions"]  # a work queue: parallelism pods
    yield "batch: a work queue", work_queue


def _first(path: Path, kind: str) -> dict[str, Any]:
    """The first document of ``kind`` in the sample at ``path``."""
    found: dict[str, Any] = next(
        d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == kind
    )
    return found


CASES = [*_manifests(), *_variants()]


@pytest.mark.parametrize(("name", "obj"), CASES, ids=[name for name, _ in CASES])
def test_an_accepted_job_has_the_demand_its_full_rules_give(name: str, obj: dict[str, Any]) -> None:
    adapter = adapter_for(obj)
    full = adapter.demand(obj)
    assert stored_demand(obj) == full
    if isinstance(adapter, AcceptedDemand):
        assert adapter.accepted_demand(obj) == full


def test_the_samples_exercise_the_reading_of_every_kind_that_has_it() -> None:
    """The comparison above is not vacuous: every kind that reads accepted jobs (AscendJob, the
    Kubeflow kinds, batch/v1 and Volcano's Job) is read both ways on jobs its rules accept."""
    compared = {
        f"{adapter_for(obj).kind}.{adapter_for(obj).api_version}"
        for _, obj in CASES
        if isinstance(adapter_for(obj), AcceptedDemand)
    }
    assert {
        "AscendJob.mindxdl.gitee.com/v1",
        "PyTorchJob.kubeflow.org/v1",
        "TFJob.kubeflow.org/v1",
        "MPIJob.kubeflow.org/v2beta1",
        "Job.batch/v1",
        "Job.batch.volcano.sh/v1alpha1",
    } <= compared, compared


def test_a_stored_job_is_not_judged_again_by_a_rule_that_does_not_touch_its_pods() -> None:
    """As kube-apiserver never judges a stored object again: a job accepted before a rule came
    (here the framework label, as if required later) is dispatched as accepted."""
    job = sample_job()
    accepted = ascendjob.demand(job)
    del job["metadata"]["labels"]["framework"]
    with pytest.raises(InvalidWorkload, match="framework"):
        ascendjob.demand(job)
    assert stored_demand(job) == accepted


def test_a_stored_job_whose_pods_cannot_be_read_fails_with_the_full_rules_answer() -> None:
    bad_quantity = sample_job()
    worker = bad_quantity["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["resources"]["requests"]["cpu"] = "lots"
    with pytest.raises(InvalidWorkload, match=r"spec\.replicaSpecs\.Worker\.template"):
        stored_demand(bad_quantity)
    not_a_map = sample_job()
    not_a_map["spec"]["replicaSpecs"] = [not_a_map["spec"]["replicaSpecs"]["Master"]]
    with pytest.raises(InvalidWorkload, match="replicaSpecs"):
        stored_demand(not_a_map)
    vcjob = _first(SAMPLES / "vcjob-mindspore-910b.yaml", "Job")
    vcjob["spec"]["minAvailable"] = "two"  # stored by hand, never through the API
    with pytest.raises(InvalidWorkload, match=r"spec\.minAvailable"):
        stored_demand(vcjob)
    torch = yaml.safe_load((SAMPLES / "pytorchjob.yaml").read_text())
    torch["spec"]["pytorchReplicaSpecs"]["Master"]["template"] = "a string"
    with pytest.raises(InvalidWorkload, match=r"pytorchReplicaSpecs\.Master"):
        pytorchjob.demand(torch)
    with pytest.raises(InvalidWorkload, match=r"pytorchReplicaSpecs\.Master"):
        stored_demand(torch)
