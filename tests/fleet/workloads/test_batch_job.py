"""The batch/v1 Job adapter: kube-apiserver's rules, Kueue's pod set, suspend as Kubernetes'
switch and Kueue's gate, status as the job controller writes it, failures."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.workloads import Pausable, adapter_for
from fleet.workloads.base import Outcome, WorkloadStatus
from fleet.workloads.batch_jobs import batch_job, pods_count

SAMPLE = Path(__file__).resolve().parents[3] / "config" / "samples" / "kueue-batch-job.yaml"


def sample() -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    return obj


def pi() -> dict[str, Any]:
    """The Kubernetes docs' pi Job: no parallelism, no completions, backoffLimit 4."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "pi", "namespace": "default"},
        "spec": {
            "backoffLimit": 4,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "pi",
                            "image": "perl:5.34.0",
                            "command": ["perl", "-Mbignum=bpi", "-wle", "print bpi(2000)"],
                        }
                    ],
                    "restartPolicy": "Never",
                }
            },
        },
    }


def test_the_kueue_sample_is_one_pod_set_of_three_admitted_whole() -> None:
    job = sample()
    assert adapter_for(job) is batch_job and batch_job.validate(job) == []
    demand = batch_job.demand(job)
    [main] = demand.shapes
    assert (main.replica_type, main.count, main.request("huawei.com/Ascend910")) == ("main", 3, 1)
    assert demand.gang == 3
    assert demand.hardware.types == frozenset({"card-910b-2"})


@pytest.mark.parametrize(
    ("parallelism", "completions", "pods"),
    [(None, None, 1), (3, None, 3), (None, 5, 1), (4, 2, 2), (2, 10, 2)],
)
def test_the_pod_set_is_parallelism_at_most_completions(
    parallelism: int | None, completions: int | None, pods: int
) -> None:
    job = pi()
    if parallelism is not None:
        job["spec"]["parallelism"] = parallelism
    if completions is not None:
        job["spec"]["completions"] = completions
    assert pods_count(job["spec"]) == pods
    assert batch_job.demand(job).gang == pods


def _errors(job: dict[str, Any]) -> dict[str, str]:
    return {e.path: e.message for e in batch_job.validate(job)}


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        (
            lambda s: s["template"]["spec"].update(restartPolicy="Always"),
            "spec.template.spec.restartPolicy",
            '"Always"',
        ),
        (
            lambda s: s["template"]["spec"].pop("restartPolicy"),
            "spec.template.spec.restartPolicy",
            "Required value",
        ),
        (lambda s: s.update(parallelism=-1), "spec.parallelism", "at least 0"),
        (lambda s: s.update(completions="3"), "spec.completions", "integer"),
        (lambda s: s.update(backoffLimit=-1), "spec.backoffLimit", "at least 0"),
        (lambda s: s.update(activeDeadlineSeconds=0), "spec.activeDeadlineSeconds", "at least 1"),
        (lambda s: s.update(completionMode="Sometimes"), "spec.completionMode", "Unsupported value"),
        (lambda s: s.update(completionMode="Indexed"), "spec.completions", "Indexed"),
        (lambda s: s.update(parallelism=0), "spec.parallelism", "at least one pod"),
        (lambda s: s.update(suspend="yes"), "spec.suspend", "bool"),
        (
            lambda s: s.update(podFailurePolicy={"rules": [{"action": "Retry"}]}),
            "spec.podFailurePolicy.rules[0].action",
            "Unsupported value",
        ),
        (
            lambda s: (
                s["template"]["spec"].update(restartPolicy="OnFailure")
                or s.update(podFailurePolicy={"rules": [{"action": "FailJob"}]})
            ),
            "spec.podFailurePolicy",
            "Never",
        ),
    ],
)
def test_kube_apiservers_rules(change: Callable[[dict[str, Any]], Any], path: str, words: str) -> None:
    job = pi()
    change(job["spec"])
    errors = _errors(job)
    assert path in errors and words in errors[path], errors


def test_a_name_longer_than_a_label_value_is_refused() -> None:
    job = pi()
    job["metadata"]["name"] = "p" * 64
    assert "must be no more than 63 characters" in _errors(job)["metadata.name"]


def test_suspend_holds_a_plain_job_and_is_kueues_gate_on_a_kueue_job() -> None:
    assert isinstance(batch_job, Pausable)
    assert batch_job.held_state == "Suspended" and batch_job.held_reason == "JobSuspended"
    kueue = sample()
    assert kueue["spec"]["suspend"] is True and not batch_job.paused(kueue)
    plain = pi()
    assert not batch_job.paused(plain)
    plain["spec"]["suspend"] = True
    assert batch_job.paused(plain)
    assert "suspend" not in batch_job.without_pause_switch(plain)
    body = batch_job.member_copy(kueue, "uid-1", 1, pin={"main": ["n-1"]})
    assert body["spec"]["suspend"] is False
    assert body["spec"]["parallelism"] == 3 and body["metadata"]["labels"]["fleet.io/attempt"] == "1"
    template = body["spec"]["template"]
    assert template["metadata"]["labels"]["fleet.io/job-uid"] == "uid-1"
    terms = template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n-1"]


def _member(**status: Any) -> dict[str, Any]:
    job = copy.deepcopy(pi())
    job["status"] = status
    return job


def _condition(kind: str, reason: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": reason, "lastTransitionTime": "2026-11-28T10:00:00Z"}


@pytest.mark.parametrize(
    ("status", "state", "outcome"),
    [
        ({}, None, Outcome.STARTING),
        ({"active": 1, "ready": 0, "startTime": "t"}, "Created", Outcome.STARTING),
        ({"active": 1, "ready": 1, "startTime": "t"}, "Running", Outcome.RUNNING),
        (
            {
                "succeeded": 1,
                "conditions": [
                    _condition("SuccessCriteriaMet", "CompletionsReached"),
                    _condition("Complete", "CompletionsReached"),
                ],
            },
            "Succeeded",
            Outcome.SUCCEEDED,
        ),
        (
            {
                "failed": 5,
                "conditions": [
                    _condition("FailureTarget", "BackoffLimitExceeded"),
                    _condition("Failed", "BackoffLimitExceeded"),
                ],
            },
            "Failed",
            Outcome.RETRIABLE,
        ),
        (
            {"failed": 1, "conditions": [_condition("Failed", "PodFailurePolicy")]},
            "Failed",
            Outcome.USER_ERROR,
        ),
        ({"conditions": [_condition("Failed", "DeadlineExceeded")]}, "Failed", Outcome.USER_ERROR),
    ],
)
def test_status_as_the_job_controller_writes_it(
    status: dict[str, Any], state: str | None, outcome: Outcome
) -> None:
    mapped = batch_job.map_status(_member(**status))
    assert mapped.state == state and batch_job.classify(mapped) is outcome
    if state is not None:
        assert mapped.conditions[-1]["type"] == state
    for key in ("active", "ready", "succeeded", "failed"):
        if key in status:
            assert mapped.extra[key] == status[key]


def test_a_waiting_copy_whose_pods_are_unschedulable_is_stuck_pending() -> None:
    mapped = batch_job.map_status(_member(active=3, ready=0, startTime="t"))
    stuck = WorkloadStatus(**{**mapped.__dict__, "unschedulable": "pod pi-abcde is unschedulable: no node"})
    assert batch_job.reads_pods and batch_job.classify(stuck) is Outcome.STUCK_PENDING
