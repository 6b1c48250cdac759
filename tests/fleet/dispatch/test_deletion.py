"""Deleting a job holds it until its member copy is gone (issue 23, requirement 3).

Real processes (redis-server, the simulated members over HTTP, ``fleet dispatcher``, ``fleet
worker``, ``fleet syncer``), one member, and a fleet API replica read through the official
``kubernetes`` client and kubectl, as a user would:

* a job deleted while its member is down stays ``Terminating`` (deletionTimestamp set, its last
  condition ``Terminating``/``WaitingForMember`` naming the member), its quota held in the ledger;
  once the member is back, its copy is deleted there, and only then are the quota released and the
  fleet object gone;
* a job whose policy says ``purgeMode: Never`` is gone at once, with a ``MemberCopyLeft`` Event,
  its copy left running in the member, and not purged later as an orphan.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from fleet.kinds import PROPAGATION_POLICY
from tests.fleet.dispatch.conftest import MODULE_POOL, RunningFleet
from tests.fleet.placement.factory import job
from tests.support.fleet_api import FleetApiThread, official_client
from tests.support.kubectl import KUBECTL, Kubectl, table

pytestmark = pytest.mark.integration

MEMBER = "member-1"
WAITS, LEFT = ("team-a", "waits"), ("team-b", "left")
GROUP, VERSION, PLURAL = "mindxdl.gitee.com", "v1", "ascendjobs"
NPU = "huawei.com/Ascend910"
#: Member health quickly: NotReady after two failed probes 0.3 s apart.
FAST_PROBES = ("--probe-interval", "0.3", "--failure-threshold", "2")


def _never_policy(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "policy.one.alibabacloud.com/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "leave-copies", "namespace": namespace},
        "spec": {
            "failover": {"application": {"purgeMode": "Never"}},
            "resourceSelectors": [{"apiVersion": "mindxdl.gitee.com/v1", "kind": "AscendJob"}],
        },
    }


def _long_job(namespace: str, name: str) -> dict[str, Any]:
    obj = job(name, workers=0, npus=1, exclusive=False)
    obj["metadata"]["namespace"] = namespace
    obj["metadata"]["annotations"] = {"sim.fleet.io/duration-seconds": "600"}
    return obj


def _read(jobs: client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any] | None:
    """The fleet job as the API serves it; None once it is gone (404)."""
    try:
        obj = jobs.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    assert isinstance(obj, dict)
    return obj


def _waiting_for_member(obj: dict[str, Any] | None) -> bool:
    if obj is None or not obj["metadata"].get("deletionTimestamp"):
        return False
    last = obj["status"]["conditions"][-1]
    return (last["type"], last["reason"]) == ("Terminating", "WaitingForMember") and MEMBER in last["message"]


def _holds(fleet: RunningFleet, namespace: str, name: str) -> bool:
    """Whether the ledger still counts the job (admitted, its NPU in its leaf's usage)."""
    used = fleet.ledger.usages([namespace])[namespace].get(NPU, 0)
    return f"{namespace}/{name}" in fleet.ledger.records() and used >= 1


def test_a_job_deleted_while_its_member_is_down_waits_for_its_copy_to_go(
    fleet_factory: Callable[..., RunningFleet], tmp_path: Path
) -> None:
    fleet = fleet_factory(members={MEMBER: MODULE_POOL}, workers=1, syncer_args=FAST_PROBES)
    fleet.objects.create(PROPAGATION_POLICY, _never_policy(LEFT[0]))
    waits, left = fleet.submit(_long_job(*WAITS)), fleet.submit(_long_job(*LEFT))
    fleet.wait_for("both jobs to run", lambda: set(fleet.states().values()) == {"Running"}, 30)

    def copies(obj: dict[str, Any]) -> list[str]:
        return fleet.member_copies().get(obj["metadata"]["uid"], [])

    with FleetApiThread(fleet.client) as api:
        official = official_client(api, tmp_path)
        jobs, core = client.CustomObjectsApi(official), client.CoreV1Api(official)

        # purgeMode Never: the finalizer goes at once, an Event says where the copy was left.
        listed = core.list_namespaced_event(LEFT[0])
        assert listed.metadata is not None
        since = listed.metadata.resource_version
        jobs.delete_namespaced_custom_object(GROUP, VERSION, LEFT[0], PLURAL, LEFT[1])
        fleet.wait_for("the purgeMode Never job to go at once", lambda: _read(jobs, *LEFT) is None, 5)
        seen = [
            e["object"]
            for e in watch.Watch().stream(  # type: ignore[no-untyped-call]
                core.list_namespaced_event, LEFT[0], resource_version=since, timeout_seconds=2
            )
            if e["type"] == "ADDED" and e["object"].reason == "MemberCopyLeft"
        ]
        assert len(seen) == 1, seen
        assert seen[0].type == "Warning"
        assert seen[0].involved_object.name == LEFT[1]
        assert MEMBER in seen[0].message and "purgeMode Never" in seen[0].message
        assert f"{LEFT[0]}/{LEFT[1]}" not in fleet.ledger.records()
        assert copies(left) == [MEMBER], "purgeMode Never leaves the copy where it runs"

        # The member goes down; the job deleted meanwhile stays Terminating, its quota held.
        fleet.sim.fault(MEMBER, "down")
        jobs.delete_namespaced_custom_object(GROUP, VERSION, WAITS[0], PLURAL, WAITS[1])
        fleet.wait_for(
            "the job to say it waits for its member", lambda: _waiting_for_member(_read(jobs, *WAITS)), 15
        )
        said = (_read(jobs, *WAITS) or {})["status"]["conditions"][-1]["message"]
        assert "127.0.0.1" not in said, said  # the member's name, never its address
        if KUBECTL is not None:
            kubectl = Kubectl(KUBECTL, api.kubeconfig(tmp_path / "kubectl.kubeconfig"), tmp_path / "cache")
            rows = table(kubectl("get", "acjob", "-n", WAITS[0]).stdout)
            assert rows[1][:2] == [WAITS[1], "Terminating"], rows
        until = time.monotonic() + 3.0
        while time.monotonic() < until:
            assert _waiting_for_member(_read(jobs, *WAITS)), "the job left before its copy did"
            assert _holds(fleet, *WAITS), "the quota was released before the copy was gone"
            time.sleep(0.3)

        # The member is back: the copy goes first, then the quota, then the fleet job.
        fleet.sim.fault(MEMBER, "up")
        deadline = time.monotonic() + 20
        while True:
            held = _holds(fleet, *WAITS)
            present = _read(jobs, *WAITS) is not None
            there = copies(waits)
            assert held or not there, "quota released while the copy is still in the member"
            assert present or not there, "the fleet job went while its copy is still in the member"
            if not present:
                break
            if time.monotonic() > deadline:
                pytest.fail(f"the deleted job never went\n{fleet.procs.logs()}")
            time.sleep(0.2)
        assert not _holds(fleet, *WAITS)
        assert fleet.ledger.usages([WAITS[0]])[WAITS[0]].get(NPU, 0) == 0
        assert fleet.ledger.records() == {}

        # The copy purgeMode Never left is not taken for an orphan now that the member is back.
        time.sleep(1.0)
        assert copies(left) == [MEMBER]


def test_a_copy_the_member_deletes_in_the_background_holds_the_job_until_it_is_no_longer_listed(
    fleet_factory: Callable[..., RunningFleet], tmp_path: Path
) -> None:
    fleet = fleet_factory(members={MEMBER: MODULE_POOL}, workers=1, syncer_args=FAST_PROBES)
    waits = fleet.submit(_long_job(*WAITS))
    fleet.wait_for("the job to run", lambda: fleet.states() == {"/".join(WAITS): "Running"}, 30)
    # Someone's finalizer on the member copy: the member answers the delete (200) but keeps
    # listing the copy, marked with its deletionTimestamp, until that finalizer goes.
    member = client.CustomObjectsApi(fleet.sim.api_client(MEMBER))
    hold = {"metadata": {"finalizers": ["example.com/hold"]}}
    member.patch_namespaced_custom_object(GROUP, VERSION, WAITS[0], PLURAL, WAITS[1], hold)

    def finishing(obj: dict[str, Any] | None) -> bool:
        last = (obj or {}).get("status", {}).get("conditions", [{}])[-1]
        return last.get("reason") == "WaitingForMember" and "finish deleting" in last.get("message", "")

    with FleetApiThread(fleet.client) as api:
        jobs = client.CustomObjectsApi(official_client(api, tmp_path))
        jobs.delete_namespaced_custom_object(GROUP, VERSION, WAITS[0], PLURAL, WAITS[1])
        fleet.wait_for(
            "the job to wait for the member's own deletion", lambda: finishing(_read(jobs, *WAITS)), 15
        )
        copy = member.get_namespaced_custom_object(GROUP, VERSION, WAITS[0], PLURAL, WAITS[1])
        assert isinstance(copy, dict) and copy["metadata"]["deletionTimestamp"]
        time.sleep(1.5)
        assert _read(jobs, *WAITS) is not None and _holds(fleet, *WAITS)
        # The member's finalizer goes, so does the copy; then the quota and the fleet job.
        member.patch_namespaced_custom_object(
            GROUP, VERSION, WAITS[0], PLURAL, WAITS[1], {"metadata": {"finalizers": None}}
        )
        fleet.wait_for("the fleet job to go", lambda: _read(jobs, *WAITS) is None, 10)
        assert fleet.member_copies().get(waits["metadata"]["uid"]) is None
        assert fleet.ledger.records() == {}


def _toleration_policy(namespace: str, seconds: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy.one.alibabacloud.com/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "short-toleration", "namespace": namespace},
        "spec": {
            "failover": {"application": {"decisionConditions": {"tolerationSeconds": seconds}}},
            "resourceSelectors": [{"apiVersion": "mindxdl.gitee.com/v1", "kind": "AscendJob"}],
        },
    }


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_a_delete_while_the_member_is_down_returns_after_the_toleration_and_the_copy_goes_on_return(
    fleet_factory: Callable[..., RunningFleet], tmp_path: Path
) -> None:
    """``kubectl delete --force --grace-period=0`` waits, as kube-apiserver makes it wait for a
    finalizer, but no longer than the member's failover toleration: then the member is declared
    failed, the deletion completes without it (quota released), and the copy is deleted when the
    member answers again. Nothing runs twice: the job is gone, not queued again."""
    toleration = 6
    fleet = fleet_factory(members={MEMBER: MODULE_POOL}, workers=1, syncer_args=FAST_PROBES)
    fleet.objects.create(PROPAGATION_POLICY, _toleration_policy(WAITS[0], toleration))
    waits = fleet.submit(_long_job(*WAITS))
    fleet.wait_for("the job to run", lambda: fleet.states() == {"/".join(WAITS): "Running"}, 30)
    with FleetApiThread(fleet.client) as api:
        assert KUBECTL is not None
        kubectl = Kubectl(KUBECTL, api.kubeconfig(tmp_path / "kubectl.kubeconfig"), tmp_path / "cache")
        jobs = client.CustomObjectsApi(official_client(api, tmp_path))
        fleet.sim.fault(MEMBER, "down")
        started = time.monotonic()
        done = kubectl("delete", "acjob", WAITS[1], "-n", WAITS[0], "--force", "--grace-period=0",
                       "--timeout=25s")  # fmt: skip
        took = time.monotonic() - started
        assert "deleted" in done.stdout + done.stderr
        assert took >= toleration - 1, f"returned after {took:.1f}s, before the member was declared failed"
        assert took <= toleration + 12, f"returned after {took:.1f}s"
        assert _read(jobs, *WAITS) is None
        assert fleet.ledger.records() == {} and fleet.ledger.usages([WAITS[0]])[WAITS[0]].get(NPU, 0) == 0
        # Back: the copy it left is deleted there as one no fleet job expects.
        fleet.sim.fault(MEMBER, "up")
        fleet.wait_for(
            "the copy to be purged once the member is back",
            lambda: fleet.member_copies().get(waits["metadata"]["uid"]) is None,
            30,
        )
        assert fleet.states() == {}, "deleted for good: not queued again anywhere"


def test_a_job_waiting_for_its_member_says_so_in_an_event(
    fleet_factory: Callable[..., RunningFleet], tmp_path: Path
) -> None:
    fleet = fleet_factory(members={MEMBER: MODULE_POOL}, workers=1, syncer_args=FAST_PROBES)
    fleet.submit(_long_job(*WAITS))
    fleet.wait_for("the job to run", lambda: fleet.states() == {"/".join(WAITS): "Running"}, 30)
    with FleetApiThread(fleet.client) as api:
        official = official_client(api, tmp_path)
        jobs, core = client.CustomObjectsApi(official), client.CoreV1Api(official)
        fleet.sim.fault(MEMBER, "down")
        jobs.delete_namespaced_custom_object(GROUP, VERSION, WAITS[0], PLURAL, WAITS[1])

        def said() -> list[str]:
            listed = core.list_namespaced_event(WAITS[0], field_selector=f"involvedObject.name={WAITS[1]}")
            return [f"{e.reason}: {e.message}" for e in listed.items if e.reason == "WaitingForMember"]

        fleet.wait_for("an Event saying it waits for its member", lambda: bool(said()), 15)
        assert MEMBER in said()[0] and "NotReady" in said()[0]
        fleet.sim.fault(MEMBER, "up")
        fleet.wait_for("the deleted job to go", lambda: _read(jobs, *WAITS) is None, 20)
