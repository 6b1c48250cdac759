"""AscendJobs at the fleet through the real kubectl: submit, list, describe, refuse, dry run.

No dispatcher runs here: what the tests read is what the API itself writes (the ``Queued`` state,
its queue, the ``Submitted`` event); where a test needs a dispatcher's decision it makes it the
way the dispatcher does, through the ledger and :class:`fleet.state.Objects`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from fleet.kinds import FLEET_EVENT
from fleet.state import Objects
from queues import Ledger
from tests.fleet.endpoint.conftest import JOB, JOB_NAME, JOBS, TREE, call
from tests.support.dispatch_pass import dispatch_once
from tests.support.fleet_api import FleetApiThread
from tests.support.kinds import FLEET_ASCENDJOB
from tests.support.kubectl import Kubectl, table

pytestmark = pytest.mark.integration


def sample() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(JOB.read_text())
    return loaded


def renamed(name: str) -> str:
    job = sample()
    job["metadata"]["name"] = name
    return yaml.safe_dump(job)


def stored_jobs(client: redis.Redis) -> list[str]:
    items, _ = Objects(client).list(FLEET_ASCENDJOB)
    return [item["metadata"]["name"] for item in items]


def assert_nothing_stored(client: redis.Redis) -> None:
    assert stored_jobs(client) == []
    assert Objects(client).list(FLEET_EVENT)[0] == []
    assert Ledger(client).pending.records() == {}


@pytest.fixture
def with_tree(kubectl: Kubectl) -> Kubectl:
    kubectl("apply", "-f", str(TREE))
    return kubectl


def test_submit_then_get_shows_state_cluster_queue_age(with_tree: Kubectl, fleet_redis: redis.Redis) -> None:
    kubectl = with_tree
    created = kubectl("create", "-f", str(JOB))
    assert created.stdout.strip() == f"ascendjob.mindxdl.gitee.com/{JOB_NAME} created"
    rows = table(kubectl("get", "acjob").stdout)
    assert rows[0] == ["NAME", "STATE", "CLUSTER", "QUEUE", "AGE"]
    assert rows[1][:4] == [JOB_NAME, "Queued", "<none>", "root-child-2"]
    assert len(rows) == 2
    assert (
        kubectl("get", "acjob", JOB_NAME, "-o", "jsonpath={.status.conditions[-1].type}").stdout == "Queued"
    )
    assert list(Ledger(fleet_redis).pending.records()) == [f"default/{JOB_NAME}"]
    again = kubectl("create", "-f", str(JOB), ok=False)
    assert "AlreadyExists" in again.stderr
    assert list(Ledger(fleet_redis).pending.records()) == [f"default/{JOB_NAME}"]


def test_describe_shows_the_events_and_the_pending_reason(with_tree: Kubectl) -> None:
    kubectl = with_tree
    kubectl("create", "-f", str(JOB))
    described = kubectl("describe", "acjob", JOB_NAME).stdout
    assert "Message:               waiting in queue root-child-2" in described
    assert "Reason:                Submitted" in described
    events = described.split("Events:", 1)[1]
    assert table(events)[2][:2] == ["Normal", "Submitted"]
    assert events.rstrip().endswith("fleet  queued in root-child-2")


def test_a_second_job_waits_for_max_jobs_and_describe_says_so(
    with_tree: Kubectl, fleet_redis: redis.Redis
) -> None:
    kubectl = with_tree
    kubectl("create", "-f", str(JOB))
    kubectl("create", "-f", "-", stdin=renamed("second"))
    outcome = dispatch_once(fleet_redis, [f"default/{JOB_NAME}", "default/second"])
    assert "kube-queue/max-jobs" in outcome["second"]
    rows = {row[0]: row[1:4] for row in table(kubectl("get", "acjob").stdout)[1:]}
    assert rows == {
        JOB_NAME: ["Admitted", "member-1", "root-child-2"],
        "second": ["Queued", "<none>", "root-child-2"],
    }
    described = kubectl("describe", "acjob", "second").stdout
    assert "Reason:                QuotaExceeded" in described
    assert f"Message:               {outcome['second']}" in described
    events = described.split("Events:", 1)[1]
    assert sorted(row[1] for row in table(events)[2:]) == ["QuotaExceeded", "Submitted"]
    assert f"fleet-dispatcher  {outcome['second']}" in events


INVALID = [
    pytest.param(
        lambda job: job["metadata"]["labels"].pop("framework"),
        "metadata.labels.framework",
        id="no-framework-label",
    ),
    pytest.param(
        lambda job: job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].update(
            name="main"
        ),
        "spec.replicaSpecs.Worker.template.spec.containers",
        id="no-ascend-container",
    ),
]


@pytest.mark.parametrize(("breaks", "field"), INVALID)
def test_an_invalid_job_is_422_with_the_field_and_nothing_is_stored(
    with_tree: Kubectl, fleet_api: FleetApiThread, fleet_redis: redis.Redis, breaks: Any, field: str
) -> None:
    job = copy.deepcopy(sample())
    breaks(job)
    done = with_tree("create", "-f", "-", stdin=yaml.safe_dump(job), ok=False)
    assert done.returncode == 1
    assert done.stderr.startswith(f'The AscendJob "{JOB_NAME}" is invalid: ')
    assert f"{field}: " in done.stderr
    assert_nothing_stored(fleet_redis)
    code, status = call(fleet_api, "POST", f"{JOBS}/namespaces/default/ascendjobs", job)
    assert (code, status["kind"], status["reason"], status["code"]) == (422, "Status", "Invalid", 422)
    assert [cause["field"] for cause in status["details"]["causes"]] == [field]
    assert_nothing_stored(fleet_redis)


def test_a_namespace_no_quota_node_binds_is_refused(with_tree: Kubectl, fleet_redis: redis.Redis) -> None:
    done = with_tree("create", "-n", "team-x", "-f", str(JOB), ok=False)
    assert done.returncode == 1
    assert "metadata.namespace: " in done.stderr
    assert "team-x" in done.stderr
    assert_nothing_stored(fleet_redis)


def test_server_dry_run_stores_and_queues_nothing(with_tree: Kubectl, fleet_redis: redis.Redis) -> None:
    done = with_tree("apply", "-f", str(JOB), "--dry-run=server")
    assert done.stdout.strip() == f"ascendjob.mindxdl.gitee.com/{JOB_NAME} created (server dry run)"
    assert_nothing_stored(fleet_redis)
    assert "No resources found" in with_tree("get", "acjob").stderr


def test_the_spec_of_a_submitted_job_cannot_change(with_tree: Kubectl, tmp_path: Path) -> None:
    with_tree("apply", "-f", str(JOB))
    job = sample()
    job["spec"]["replicaSpecs"]["Worker"]["replicas"] = 2
    done = with_tree("apply", "-f", "-", stdin=yaml.safe_dump(job), ok=False)
    assert done.returncode == 1
    assert "spec: field is immutable: the job was queued and charged with this spec" in done.stderr


def test_delete_marks_the_job_until_fleet_releases_it(with_tree: Kubectl, fleet_redis: redis.Redis) -> None:
    with_tree("create", "-f", str(JOB))
    done = with_tree("delete", "acjob", JOB_NAME, "--wait=false")
    assert done.stdout.strip() == f'ascendjob.mindxdl.gitee.com "{JOB_NAME}" deleted'
    [obj] = Objects(fleet_redis).list(FLEET_ASCENDJOB)[0]
    assert obj["metadata"]["deletionTimestamp"]
    assert obj["metadata"]["finalizers"] == ["fleet.io/dispatch"]
