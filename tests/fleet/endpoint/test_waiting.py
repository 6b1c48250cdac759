"""A waiting job read by name says where it stands and what holds it, computed when it is read.

``status.position`` and ``status.blocker`` of a ``Queued`` job (fleet.endpoint.computed): through the
real ``kubectl describe``, for a job refused for quota, one larger than its quota can ever admit,
and one the quota admits; never computed for a list, never stored.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

import fleet.endpoint.computed
import fleet.endpoint.job_backend
from fleet.jobs import WaitingFields
from fleet.state import Objects
from tests.fleet.endpoint.conftest import JOB, JOBS, TREE, call
from tests.support.dispatch_pass import dispatch_once
from tests.support.fleet_api import FleetApiThread
from tests.support.kinds import FLEET_ASCENDJOB
from tests.support.kubectl import Kubectl

pytestmark = pytest.mark.integration


def job_named(name: str) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(JOB.read_text())
    job["metadata"]["name"] = name
    return job


def submit(kubectl: Kubectl, *names: str) -> None:
    for name in names:
        kubectl("create", "-f", "-", stdin=yaml.safe_dump(job_named(name)))


def field(described: str, label: str) -> str | None:
    """The value of a top-level status field in ``kubectl describe`` output."""
    status = described.split("\nStatus:\n", 1)[1].split("\nEvents:", 1)[0]
    found = re.search(rf"^  {label}:\s+(.*)$", status, re.MULTILINE)
    return None if found is None else found.group(1)


def test_describe_shows_the_position_and_the_exact_blocker(
    kubectl: Kubectl, fleet_redis: redis.Redis
) -> None:
    kubectl("apply", "-f", str(TREE))
    submit(kubectl, "first", "second", "third")
    outcome = dispatch_once(fleet_redis, ["default/first", "default/second"])
    assert outcome["second"] == "quota root/child-2: kube-queue/max-jobs 1/1 in use"
    # The dispatcher wrote the refusal on the class head only; third still says it was queued.
    third = kubectl("describe", "acjob", "third").stdout
    assert "Message:               waiting in queue root-child-2" in third
    assert field(third, "Position") == "2 of 2 in queue root-child-2"
    assert field(third, "Blocker") == "quota root/child-2: kube-queue/max-jobs 1/1 in use"
    second = kubectl("describe", "acjob", "second").stdout
    assert field(second, "Position") == "1 of 2 in queue root-child-2"
    admitted = kubectl("describe", "acjob", "first").stdout
    assert field(admitted, "Position") is None and field(admitted, "Blocker") is None
    # kubectl get -o of one job reads it by name too.
    assert kubectl("get", "acjob", "third", "-o", "jsonpath={.status.position}").stdout == (
        "2 of 2 in queue root-child-2"
    )


def test_a_job_larger_than_its_quota_is_told_it_can_never_be_admitted(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    tree = yaml.safe_load(TREE.read_text())
    tree["spec"]["root"]["children"][0]["max"]["huawei.com/Ascend910"] = 2  # the job asks 2 x 2
    path = tmp_path / "tree.yaml"
    path.write_text(yaml.safe_dump(tree))
    kubectl("apply", "-f", str(path))
    submit(kubectl, "big")
    described = kubectl("describe", "acjob", "big").stdout
    assert field(described, "Position") == "1 of 1 in queue root-child-2"
    assert field(described, "Blocker") == (
        "can never be admitted: quota root/child-2: huawei.com/Ascend910 0 used + 4 requested exceeds "
        "max 2; it waits for the tree to change"
    )


def test_when_the_quota_admits_it_the_blocker_says_what_else_it_waits_for(kubectl: Kubectl) -> None:
    submit(kubectl, "free")  # no tree: the quota limits nothing
    described = kubectl("describe", "acjob", "free").stdout
    message = kubectl("get", "acjob", "free", "-o", "jsonpath={.status.conditions[-1].message}").stdout
    assert field(described, "Blocker") == f"quota admits it; waiting for capacity or its turn: {message}"
    assert field(described, "Position") == "1 of 1 in queue root"


def test_a_list_computes_nothing_per_job_and_nothing_is_stored(
    fleet_api: FleetApiThread, fleet_redis: redis.Redis, kubectl: Kubectl, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubectl("apply", "-f", str(TREE))
    for i in range(30):
        code, _ = call(fleet_api, "POST", f"{JOBS}/namespaces/default/ascendjobs", job_named(f"job-{i:02d}"))
        assert code == 201
    calls: list[str] = []
    computed = fleet.endpoint.computed.waiting_fields

    def counted(ledger: Any, obj: Any) -> WaitingFields:
        calls.append(obj["metadata"]["name"])
        return computed(ledger, obj)

    monkeypatch.setattr(fleet.endpoint.job_backend, "waiting_fields", counted)
    assert len(kubectl("get", "acjob").stdout.splitlines()) == 31
    code, listing = call(fleet_api, "GET", f"{JOBS}/namespaces/default/ascendjobs")
    assert code == 200 and len(listing["items"]) == 30
    assert not any("position" in item["status"] or "blocker" in item["status"] for item in listing["items"])
    code, listing = call(fleet_api, "GET", f"{JOBS}/ascendjobs?limit=10")
    assert code == 200 and len(listing["items"]) == 10
    assert calls == []

    code, one = call(fleet_api, "GET", f"{JOBS}/namespaces/default/ascendjobs/job-16")
    assert code == 200 and calls == ["job-16"]
    assert one["status"]["position"] == "17 of 30 in queue root-child-2"
    # A status write that sends the computed fields back does not store them.
    code, written = call(fleet_api, "PUT", f"{JOBS}/namespaces/default/ascendjobs/job-16/status", one)
    assert code == 200, written
    stored = Objects(fleet_redis).get(FLEET_ASCENDJOB, "default", "job-16")
    assert stored is not None
    assert "position" not in stored["status"] and "blocker" not in stored["status"]
    assert stored["status"]["conditions"] == one["status"]["conditions"]
