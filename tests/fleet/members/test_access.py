"""Member calls over real HTTP against the serving core: CRUD, namespaces, retries, typed refusals."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from fleet.apiserver import NAMESPACE, NODE, POD
from fleet.members import (
    NODES,
    Conflict,
    Member,
    MemberRefused,
    MemberUnavailable,
    NotFound,
    load_members,
)
from fleet.members.guard import CircuitOpen, State
from tests.fleet.members.conftest import FAST, MemberServer, member_for, state_of
from tests.fleet.members.kubeconfig import TOKEN, write_kubeconfig
from tests.fleet.members.objects import job, names, node, pod, sample_job
from tests.support.kinds import JOBS

pytestmark = pytest.mark.integration

JOBS_PATH = "/apis/mindxdl.gitee.com/v1/namespaces/default/ascendjobs"


def test_job_crud_creates_the_namespace_first(member: Member, member_server: MemberServer) -> None:
    sample = sample_job()
    name = sample["metadata"]["name"]
    created = member.create_job(JOBS, "team-a", sample)
    assert created["metadata"]["namespace"] == "team-a"
    assert created["metadata"]["uid"]
    assert (
        member_server.call(member_server.store.get(NAMESPACE, None, "team-a"))["metadata"]["name"] == "team-a"
    )

    fetched = member.get_job(JOBS, "team-a", name)
    assert fetched["metadata"]["uid"] == created["metadata"]["uid"]
    assert fetched["spec"] == sample["spec"]
    latency = REGISTRY.get_sample_value(
        "fleet_member_request_seconds_count", {"member": "m1", "operation": "get_job"}
    )
    assert latency is not None and latency >= 1

    member.create_job(JOBS, "team-a", job("other", framework="mindspore"))
    member.create_job(JOBS, "team-b", job("elsewhere", framework="pytorch"))
    assert sorted(names(member.list_jobs(JOBS, "framework=pytorch"))) == ["default-test-pytorch", "elsewhere"]
    assert names(member.list_jobs(JOBS, "framework=pytorch", namespace="team-a")) == [name]
    assert len(member.list_jobs(JOBS)) == 3

    assert member.delete_job(JOBS, "team-a", name) is True
    assert member.delete_job(JOBS, "team-a", name) is False  # already gone: fine
    with pytest.raises(NotFound) as caught:
        member.get_job(JOBS, "team-a", name)
    assert caught.value.code == 404


def test_delete_with_uid_spares_a_newer_copy(member: Member) -> None:
    stale = member.create_job(JOBS, "default", job("attempt"))
    assert member.delete_job(JOBS, "default", "attempt", uid=stale["metadata"]["uid"]) is True
    fresh = member.create_job(JOBS, "default", job("attempt"))
    with pytest.raises(Conflict) as caught:
        member.delete_job(JOBS, "default", "attempt", uid=stale["metadata"]["uid"])
    assert "Precondition failed" in caught.value.message
    assert member.get_job(JOBS, "default", "attempt")["metadata"]["uid"] == fresh["metadata"]["uid"]
    assert member.delete_job(JOBS, "default", "attempt", uid=fresh["metadata"]["uid"]) is True
    assert member.delete_job(JOBS, "default", "attempt", uid=fresh["metadata"]["uid"]) is False


def test_namespace_deleted_behind_our_back_is_created_again(
    member: Member, member_server: MemberServer
) -> None:
    member.create_job(JOBS, "team-c", job("first"))
    member_server.delete(NAMESPACE, None, "team-c")
    created = member.create_job(JOBS, "team-c", job("second"))
    assert created["metadata"]["namespace"] == "team-c"
    assert names(member.list_jobs(JOBS, namespace="team-c")) == ["second"]


def test_bad_job_bodies_are_refused_before_any_request(member: Member, member_server: MemberServer) -> None:
    before = len(member_server.faults.requests)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"kind": "AscendJob", "metadata": {"name": "x"}, "apiVersion": "v1"}, "body.apiVersion: must be"),
        ({"metadata": {"name": "x"}, "kind": "Pod"}, "body.kind: must be 'AscendJob'"),
        ({"metadata": {"name": "x", "namespace": "other"}}, "body.metadata.namespace: 'other' differs"),
        ({"metadata": {}}, "body.metadata.name: required"),
    ]
    for body, message in cases:
        with pytest.raises(ValueError, match=message):
            member.create_job(JOBS, "default", body)
    with pytest.raises(ValueError, match="namespace: must be a non-empty string"):
        member.create_job(JOBS, "", job("x"))
    assert len(member_server.faults.requests) == before


def test_existing_job_is_a_conflict_and_not_retried(member: Member, member_server: MemberServer) -> None:
    member.create_job(JOBS, "default", job("twice"))
    before = member_server.faults.hits(JOBS_PATH, "POST")
    with pytest.raises(Conflict) as caught:
        member.create_job(JOBS, "default", job("twice"))
    assert (caught.value.code, caught.value.reason) == (409, "AlreadyExists")
    assert member_server.faults.hits(JOBS_PATH, "POST") - before == 1


def test_invalid_object_is_refused_with_field_causes(member: Member, member_server: MemberServer) -> None:
    before = member_server.faults.hits(JOBS_PATH, "POST")
    with pytest.raises(MemberRefused) as caught:
        member.create_job(JOBS, "default", job("Not_A_DNS_Name"))
    assert (caught.value.code, caught.value.reason) == (422, "Invalid")
    assert any(cause.startswith("metadata.name:") for cause in caught.value.causes)
    assert member_server.faults.hits(JOBS_PATH, "POST") - before == 1


@pytest.mark.parametrize("code", [400, 403, 422])
def test_permanent_refusals_are_typed_and_not_retried(
    member: Member, member_server: MemberServer, code: int
) -> None:
    member.ensure_namespace("default")
    member_server.faults.fail(code, times=-1, path=JOBS_PATH, method="POST")
    with pytest.raises(MemberRefused) as caught:
        member.create_job(JOBS, "default", job("refused"))
    assert caught.value.code == code
    assert caught.value.message == f"injected {code}"
    assert member_server.faults.hits(JOBS_PATH, "POST") == 1
    member_server.faults.clear()
    assert member.list_jobs(JOBS) == []


def _retries(operation: str) -> float:
    value = REGISTRY.get_sample_value(
        "fleet_member_request_retries_total", {"member": "m1", "operation": operation}
    )
    return value or 0.0


@pytest.mark.parametrize("code", [429, 500, 502, 503, 504])
def test_transient_errors_are_retried_then_succeed(
    member: Member, member_server: MemberServer, code: int
) -> None:
    member.ensure_namespace("default")
    member_server.faults.fail(code, times=2, path=JOBS_PATH, method="POST")
    retries_before = _retries("create_job")
    created = member.create_job(JOBS, "default", job("eventually"))
    assert created["metadata"]["name"] == "eventually"
    assert member_server.faults.hits(JOBS_PATH, "POST") == 3
    assert _retries("create_job") - retries_before == 2
    assert names(member.list_jobs(JOBS)) == ["eventually"]


def test_retry_after_is_honoured(member: Member, member_server: MemberServer) -> None:
    member_server.faults.fail(429, times=1, path="/ascendjobs", method="GET", retry_after=0.09)
    start = time.monotonic()
    assert member.list_jobs(JOBS) == []
    assert time.monotonic() - start >= 0.09


def test_trouble_that_persists_is_unavailable(member: Member, member_server: MemberServer) -> None:
    member_server.faults.fail(503, times=-1, path="/ascendjobs", method="GET")
    with pytest.raises(MemberUnavailable) as caught:
        member.list_jobs(JOBS)
    assert caught.value.status == 503
    assert member_server.faults.hits("/ascendjobs", "GET") == FAST.attempts


def test_member_down_then_back(member: Member, member_server: MemberServer) -> None:
    assert member.list_nodes() == []  # a pooled keep-alive connection now exists
    member_server.stop_listener()
    with pytest.raises(MemberUnavailable) as caught:
        member.list_nodes()
    assert caught.value.status is None
    assert state_of(member.breaker) is State.OPEN  # three refused connections in a row
    with pytest.raises(CircuitOpen) as fast:
        member.list_nodes()  # not called at all
    assert not fast.value.timed_out
    probe = member.probe()  # probes are not guarded: they are how a member is seen back
    assert not probe.healthy and probe.error is not None
    member_server.start_listener()
    assert member.probe().healthy
    member_server.create(NODE, node("n1"))
    time.sleep(FAST.breaker_reset)  # then one trial goes through, and closes the breaker
    assert names(member.list_nodes()) == ["n1"]
    assert state_of(member.breaker) is State.CLOSED


def test_probe_reports_an_unready_member(member: Member, member_server: MemberServer) -> None:
    assert member.probe().healthy
    member_server.faults.fail(503, times=1, path="/readyz")
    probe = member.probe()
    assert not probe.healthy
    assert probe.error is not None and "503" in probe.error
    assert member_server.faults.hits("/readyz") == 2  # one attempt each: thresholds are the caller's


def test_nodes_and_pods_with_selectors_across_pages(member_server: MemberServer, tmp_path: Path) -> None:
    member = member_for(member_server, tmp_path, replace(FAST, page_size=2))
    for index in range(5):
        kind = "card-910b-2" if index % 2 == 0 else "module-910b-8"
        member_server.create(NODE, node(f"n{index}", **{"accelerator-type": kind}))
    member_server.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    member_server.create(POD, pod("j1-master-0", "n0", **{"job-name": "j1"}))
    member_server.create(POD, pod("j1-worker-0", "n2", **{"job-name": "j1"}))
    member_server.create(POD, pod("j2-master-0", "n0", namespace="team-a", **{"job-name": "j2"}))

    assert names(member.list_nodes()) == ["n0", "n1", "n2", "n3", "n4"]
    assert member_server.faults.hits("/api/v1/nodes", "GET") == 3  # pages of 2
    assert names(member.list_nodes("accelerator-type=card-910b-2")) == ["n0", "n2", "n4"]
    assert sorted(names(member.list_pods(label_selector="job-name=j1"))) == ["j1-master-0", "j1-worker-0"]
    assert sorted(names(member.list_pods(field_selector="spec.nodeName=n0"))) == [
        "j1-master-0",
        "j2-master-0",
    ]
    assert names(member.list_pods(namespace="team-a")) == ["j2-master-0"]
    listing = member.list_objects(NODES)
    assert int(listing.resource_version) >= 8
    member.close()


def test_wrong_token_is_refused_not_retried(member_server: MemberServer, tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kc", {"m1": member_server.url}, token="not-the-token")
    member = load_members(path, settings=FAST)["m1"]
    with pytest.raises(MemberRefused) as caught:
        member.list_nodes()
    assert caught.value.code == 401
    assert member_server.faults.hits("/api/v1/nodes") == 1
    member.close()


def test_credentials_never_reach_the_logs(
    member: Member, member_server: MemberServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    watcher = member.watch_jobs(JOBS, lambda event: None)
    assert watcher.wait_synced(5.0)
    member_server.faults.fail(503, times=1, path=JOBS_PATH, method="POST")
    member.create_job(JOBS, "default", job("logged"))
    with pytest.raises(Conflict) as conflict:
        member.create_job(JOBS, "default", job("logged"))
    member_server.stop_listener()
    with pytest.raises(MemberUnavailable) as unavailable:
        member.get_job(JOBS, "default", "logged")
    member_server.start_listener()
    watcher.stop()
    assert "member=m1 operation=create_job event=retry" in caplog.text
    assert "member=m1 kind=ascendjobs event=sync" in caplog.text
    assert "member=m1 kind=ascendjobs event=added" in caplog.text
    assert "member=m1 operation=get_job event=failed" in caplog.text
    for text in (caplog.text, str(conflict.value), str(unavailable.value), repr(member)):
        assert TOKEN not in text
