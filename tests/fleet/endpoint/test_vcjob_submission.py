"""Volcano's Job submitted at the fleet API: its priority is its PriorityClass's value, an unknown
class or a policy Volcano's webhook refuses is refused naming the field, nothing stored."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import fakeredis
import pytest
import redis
import yaml

from tests.fleet.endpoint.conftest import call
from tests.support.fleet_api import FleetApiThread

pytestmark = pytest.mark.integration

VCJOBS: Final = "/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs"
CLASSES: Final = "/apis/scheduling.k8s.io/v1/priorityclasses"
SAMPLE: Final = Path(__file__).resolve().parents[3] / "config" / "samples" / "vcjob-mindspore-910b.yaml"


def vcjob(name: str) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(SAMPLE.read_text()) if d]
    body: dict[str, Any] = copy.deepcopy(next(d for d in docs if d["kind"] == "Job"))
    body["metadata"]["name"] = name
    return body


@pytest.fixture
def api() -> Iterator[FleetApiThread]:
    client: redis.Redis = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    with FleetApiThread(client, members=lambda: ["member-1"]) as server:
        yield server
    client.close()


def test_priority_class_name_is_resolved_and_an_unknown_one_refused(api: FleetApiThread) -> None:
    high = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 1000,
    }
    assert call(api, "POST", CLASSES, high)[0] == 201
    job = vcjob("prioritized")
    job["spec"]["priorityClassName"] = "high"
    code, stored = call(api, "POST", VCJOBS, job)
    assert code == 201, stored
    assert stored["status"]["priority"] == 1000
    job = vcjob("unknown-class")
    job["spec"]["priorityClassName"] = "nope"
    code, answer = call(api, "POST", VCJOBS, job)
    assert (code, answer["reason"]) == (403, "Forbidden"), answer  # as kube-apiserver's Priority plugin
    assert answer["details"]["causes"][0]["field"] == "spec.priorityClassName"
    assert call(api, "GET", f"{VCJOBS}/unknown-class")[0] == 404


def test_a_policy_volcanos_webhook_refuses_is_a_422_naming_it(api: FleetApiThread) -> None:
    job = vcjob("bad-policy")
    job["spec"]["policies"] = [{"event": "PodEvicted", "exitCode": 137, "action": "RestartJob"}]
    code, answer = call(api, "POST", VCJOBS, job)
    assert (code, answer["reason"]) == (422, "Invalid"), answer
    (cause,) = answer["details"]["causes"]
    assert cause["field"] == "spec.policies[0]" and "event and exitCode" in cause["message"]
    assert call(api, "GET", f"{VCJOBS}/bad-policy")[0] == 404
