"""JobSet's webhook rules and the gang Kueue admits it as (kubernetes-sigs/jobset
``jobset_webhook.go``; kubernetes-sigs/kueue ``pkg/controller/jobs/jobset``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.workloads import adapter_for
from fleet.workloads.base import InvalidWorkload, Outcome
from fleet.workloads.jobset import jobset

SAMPLE = Path(__file__).resolve().parents[3] / "config" / "samples" / "jobset-ascend.yaml"


def sample() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    return loaded


def test_the_sample_is_one_gang_of_every_pod_of_every_replicated_job() -> None:
    job = sample()
    assert adapter_for(job) is jobset
    demand = jobset.demand(job)
    assert demand.gang == demand.pods == 3
    assert [(s.replica_type, s.count, s.npus) for s in demand.shapes] == [("driver", 1, 0), ("workers", 2, 8)]


def test_parallelism_times_replicas_capped_by_completions() -> None:
    job = sample()
    workers = job["spec"]["replicatedJobs"][1]
    workers["replicas"] = 3
    workers["template"]["spec"].update(parallelism=4, completions=2)
    assert jobset.demand(job).pods == 1 + 3 * 2


def test_what_the_webhook_refuses_is_refused_naming_the_field() -> None:
    job = sample()
    job["metadata"]["name"] = "x" * 60
    job["spec"]["successPolicy"] = {"operator": "Most", "targetReplicatedJobs": ["trainers"]}
    job["spec"]["failurePolicy"] = {"maxRestarts": -1, "rules": [{"name": "r", "action": "Explode"}]}
    job["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    job["spec"]["replicatedJobs"].append(dict(job["spec"]["replicatedJobs"][1]))
    paths = [e.path for e in jobset.validate(job)]
    assert "metadata.name" in paths
    assert "spec.successPolicy.operator" in paths
    assert "spec.successPolicy.targetReplicatedJobs[0]" in paths
    assert "spec.failurePolicy.maxRestarts" in paths
    assert "spec.failurePolicy.rules[0].action" in paths
    assert "spec.replicatedJobs[0].template.spec.template.spec.restartPolicy" in paths
    assert "spec.replicatedJobs[2].name" in paths  # a duplicate name
    with pytest.raises(InvalidWorkload):
        jobset.demand(job)


def test_status_as_jobset_reports_it_and_its_meaning() -> None:
    running = jobset.map_status(
        {"status": {"replicatedJobsStatus": [{"name": "workers", "active": 2, "ready": 2}], "restarts": 0}}
    )
    assert running.state == "Running" and jobset.classify(running) is Outcome.RUNNING
    done = jobset.map_status(
        {
            "status": {
                "terminalState": "Completed",
                "conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted"}],
            }
        }
    )
    assert done.state == "Succeeded" and done.extra["terminalState"] == "Completed"
    assert [c["type"] for c in done.conditions] == ["Completed", "Succeeded"]
    failed = jobset.map_status(
        {"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "ReachedMaxRestarts"}]}}
    )
    assert jobset.classify(failed) is Outcome.RETRIABLE
    ruled = jobset.map_status(
        {
            "status": {
                "conditions": [{"type": "Failed", "status": "True", "reason": "FailJobSetActionMatched"}]
            }
        }
    )
    assert jobset.classify(ruled) is Outcome.USER_ERROR


def test_the_member_copy_is_never_suspended_and_labels_every_pod_template() -> None:
    job = sample()
    job["spec"]["suspend"] = False
    copy = jobset.member_copy(job, "uid-1", 2, pin={"workers": ["a2-0", "a2-1"]})
    assert "suspend" not in copy["spec"]
    for rjob in copy["spec"]["replicatedJobs"]:
        labels = rjob["template"]["spec"]["template"]["metadata"]["labels"]
        assert labels["fleet.io/job-uid"] == "uid-1"
    pinned = copy["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["affinity"]
    assert "nodeAffinity" in pinned
