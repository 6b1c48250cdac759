"""Kueue's queue label names a job's quota leaf on every kind, as jobs written for Kueue say it.

``kueue.x-k8s.io/queue-name`` routes a job to the leaf it names under the quota label's rule:
another team's leaf only where the tree makes it available (else 403 naming the label), never
an inner node (422 naming the label); Kueue's ``default`` leaves the job to its namespace's leaf;
the quota label wins over it, and it wins over a kind's own queue field (a vcjob's
``spec.queue: default`` as Volcano writes it, an AscendJob's ``schedulingPolicy.queue``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import fakeredis
import pytest
import redis
import yaml

from fleet.endpoint.auth import parse_token_file
from fleet.jobs import KUEUE_QUEUE_LABEL
from queues import AVAILABLE_ATTRIBUTE, QUOTA_LABEL, Ledger
from tests.fleet.endpoint.conftest import call
from tests.fleet.endpoint.test_quota_routing import TOKEN_FILE, TOKENS, apply_tree, job, submit, tree
from tests.support.fleet_api import FleetApiThread

pytestmark = pytest.mark.integration

KUEUE_FIELD: Final = f"metadata.labels[{KUEUE_QUEUE_LABEL}]"
VCJOBS: Final = "/apis/batch.volcano.sh/v1alpha1/namespaces/team-a/jobs"
SAMPLE: Final = Path(__file__).resolve().parents[3] / "config" / "samples" / "vcjob-mindspore-910b.yaml"


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    redis_client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    yield redis_client
    redis_client.close()


@pytest.fixture
def api(client: redis.Redis) -> Iterator[FleetApiThread]:
    with FleetApiThread(client, tokens=parse_token_file(TOKEN_FILE), members=lambda: ["member-1"]) as server:
        yield server


def kueue_job(name: str, queue: str) -> dict[str, Any]:
    body = job("team-a", name)
    body["metadata"]["labels"][KUEUE_QUEUE_LABEL] = queue
    return body


def vcjob(name: str, queue: str) -> dict[str, Any]:
    """The sample vcjob (``spec.queue: default``), with Kueue's label, in team-a."""
    docs = [d for d in yaml.safe_load_all(SAMPLE.read_text()) if d]
    body: dict[str, Any] = copy.deepcopy(next(d for d in docs if d["kind"] == "Job"))
    body["metadata"].update(name=name, namespace="team-a")
    body["metadata"]["labels"][KUEUE_QUEUE_LABEL] = queue
    return body


def test_the_kueue_label_routes_like_the_quota_label(api: FleetApiThread, client: redis.Redis) -> None:
    apply_tree(api, tree())
    code, stored = submit(api, "alice", kueue_job("own", "child-a"))
    assert code == 201, stored
    assert stored["status"]["queue"] == "root-teams-child-a"
    code, stored = submit(api, "alice", kueue_job("plain", "default"))  # Kueue's default LocalQueue
    assert code == 201 and stored["status"]["queue"] == "root-teams-child-a", stored

    code, answer = submit(api, "alice", kueue_job("steal", "root-teams-child-b"))
    assert (code, answer["reason"]) == (403, "Forbidden"), answer
    (cause,) = answer["details"]["causes"]
    assert (cause["field"], cause["reason"]) == (KUEUE_FIELD, "FieldValueForbidden")
    assert cause["message"].startswith(f"{KUEUE_FIELD}='root-teams-child-b' names the job's quota leaf: ")
    code, answer = submit(api, "alice", kueue_job("above", "teams"))
    assert (code, answer["reason"]) == (422, "Invalid"), answer
    assert answer["details"]["causes"][0]["field"] == KUEUE_FIELD

    apply_tree(api, tree(**{"child-b": {AVAILABLE_ATTRIBUTE: "team-a"}}))
    code, stored = submit(api, "alice", kueue_job("borrowed", "child-b"))
    assert code == 201 and stored["status"]["queue"] == "root-teams-child-b", stored
    assert Ledger(client).pending.records()["team-a/borrowed"].leaf == "child-b"


def test_the_quota_label_wins_and_the_kueue_label_wins_over_a_queue_field(api: FleetApiThread) -> None:
    apply_tree(api, tree(**{"child-b": {AVAILABLE_ATTRIBUTE: "team-a"}}))
    both = kueue_job("both", "child-b")
    both["metadata"]["labels"][QUOTA_LABEL] = "child-a"
    code, stored = submit(api, "alice", both)
    assert code == 201 and stored["status"]["queue"] == "root-teams-child-a", stored
    fielded = kueue_job("fielded", "child-b")
    fielded["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = "child-a"
    code, stored = submit(api, "alice", fielded)
    assert code == 201 and stored["status"]["queue"] == "root-teams-child-b", stored


def test_a_vcjob_written_for_kueue_runs_in_the_leaf_its_label_names(api: FleetApiThread) -> None:
    apply_tree(api, tree(**{"child-b": {AVAILABLE_ATTRIBUTE: "team-a"}}))
    code, stored = call(api, "POST", VCJOBS, vcjob("kueue-vc", "child-b"), token=TOKENS["alice"])
    assert code == 201, stored
    assert stored["status"]["queue"] == "root-teams-child-b"
    unlabelled = vcjob("plain-vc", "default")
    code, stored = call(api, "POST", VCJOBS, unlabelled, token=TOKENS["alice"])
    assert code == 201 and stored["status"]["queue"] == "root-teams-child-a", stored
