"""What readers of the fleet see about a failing member says what failed, never where.

A member that refuses connections, hangs past the probe timeout, or answers 503: its
MemberCluster turns NotReady with a message read through the fleet API (the official client and
kubectl) that names neither its host nor its port; a job that a member could not take is queued
again with conditions, a pending reason and Events that name neither either. The roles' own logs
keep the whole story (the address included), for the operator.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import pytest
from kubernetes import client as k8s

from fleet.endpoint.members import members_from
from fleet.jobs import current_state
from tests.fleet.dispatch.conftest import MODULE_POOL, RunningFleet
from tests.fleet.placement.factory import job
from tests.support.fleet_api import FleetApiThread
from tests.support.kubectl import KUBECTL, Kubectl

pytestmark = pytest.mark.integration

NS = "team-a"
FAST_PROBES = ("--probe-interval", "0.3", "--failure-threshold", "2")


def _addresses(fleet: RunningFleet) -> list[str]:
    """Every way a member's address could show: host, port, host:port, the URL."""
    found = []
    for url in fleet.sim.servers.values():
        parts = urlsplit(url)
        found += [url, parts.netloc, str(parts.hostname), str(parts.port)]
    return found


def _assert_no_address(fleet: RunningFleet, text: str) -> None:
    for needle in [*_addresses(fleet), "localhost", "://", "host=", "port="]:
        pattern = rf"(?<!\d){needle}(?!\d)" if needle.isdigit() else re.escape(needle)
        found = re.search(pattern, text)
        assert found is None, f"{needle!r} in ...{text[max(found.start() - 300, 0) : found.end() + 100]}..."


@pytest.fixture
def api(
    fleet_factory: Callable[..., RunningFleet],
) -> Iterator[Callable[..., tuple[RunningFleet, k8s.ApiClient]]]:
    """``api(**fleet_args)``: a fleet and an official client of a fleet API replica over its Redis."""
    started: list[FleetApiThread] = []

    def start(**kwargs: Any) -> tuple[RunningFleet, k8s.ApiClient]:
        fleet = fleet_factory(**kwargs)
        server = FleetApiThread(fleet.client, members=members_from(fleet.sim.kubeconfig)).start()
        started.append(server)
        configuration = k8s.Configuration()
        configuration.host = server.url
        return fleet, k8s.ApiClient(configuration)

    yield start
    for server in started:
        server.close()


def _member_cluster(api_client: k8s.ApiClient, name: str) -> dict[str, Any]:
    obj = k8s.CustomObjectsApi(api_client).get_cluster_custom_object(
        "fleet.io", "v1alpha1", "memberclusters", name
    )
    return cast(dict[str, Any], obj)


def _ready(obj: dict[str, Any]) -> dict[str, Any]:
    [condition] = [c for c in obj["status"]["conditions"] if c["type"] == "Ready"]
    return cast(dict[str, Any], condition)


def _events(api_client: k8s.ApiClient) -> list[dict[str, Any]]:
    response: Any = k8s.CoreV1Api(api_client).list_event_for_all_namespaces(_preload_content=False)
    items: list[dict[str, Any]] = json.loads(response.data)["items"]
    return items


def _kubeconfig(api_client: k8s.ApiClient, directory: Path) -> Path:
    """A kubeconfig for kubectl against the fleet API the client talks to."""
    path = directory / "fleet.kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: fleet\n"
        f"clusters:\n- name: fleet\n  cluster:\n    server: {api_client.configuration.host}\n"
        "users:\n- name: fleet\n  user: {}\n"
        "contexts:\n- name: fleet\n  context:\n    cluster: fleet\n    user: fleet\n"
    )
    return path


def _wait(fleet: RunningFleet, what: str, check: Callable[[], bool], timeout: float = 30) -> None:
    fleet.wait_for(what, check, timeout)


#: Each fault, how it is undone, and the words the message must say instead of an address.
FAULTS: list[tuple[tuple[str, dict[str, Any]], tuple[str, dict[str, Any]], str]] = [
    (("down", {}), ("up", {}), "probe: unavailable: connection refused"),
    (("slow", {"ms": 3000}), ("ok", {}), "probe: unavailable: timed out waiting for an answer"),
    (("503", {}), ("ok", {}), "probe: unavailable: 503 ServiceUnavailable"),
]


def test_a_failing_members_status_says_what_failed_never_where(
    api: Callable[..., tuple[RunningFleet, k8s.ApiClient]], tmp_path: Path
) -> None:
    fleet, api_client = api(
        members={"member-1": MODULE_POOL, "member-2": MODULE_POOL},
        workers=0,
        dispatchers=0,
        syncer_args=FAST_PROBES,
    )
    _wait(fleet, "both members Ready", lambda: all(
        _ready(_member_cluster(api_client, m))["status"] == "True" for m in ("member-1", "member-2")
    ))  # fmt: skip
    seen: list[str] = []
    for (fault, args), (undo, undo_args), says in FAULTS:
        fleet.sim.fault("member-1", fault, **args)
        _wait(
            fleet,
            f"member-1 NotReady after {fault}",
            lambda: _ready(_member_cluster(api_client, "member-1"))["status"] == "False",
        )
        obj = _member_cluster(api_client, "member-1")
        condition = _ready(obj)
        assert condition["reason"] == "ProbeFailed"
        assert condition["message"].startswith(says), (fault, condition)
        seen.append(json.dumps(obj))
        if KUBECTL is not None:  # what kubectl users read, in every form it offers
            kubectl = Kubectl(KUBECTL, _kubeconfig(api_client, tmp_path), tmp_path / "cache")
            seen.append(kubectl("get", "mc", "-o", "wide").stdout)
            seen.append(kubectl("describe", "mc", "member-1").stdout)
        fleet.sim.fault("member-1", undo, **undo_args)
        _wait(
            fleet,
            f"member-1 Ready after {undo}",
            lambda: _ready(_member_cluster(api_client, "member-1"))["status"] == "True",
        )
    seen.append(json.dumps(_events(api_client)))
    _assert_no_address(fleet, "\n".join(seen))
    # The operator's log has what the readers do not: the address the probe failed on.
    log = fleet.procs.roles["syncer"].log_path.read_text()
    assert "event=member_not_ready member=member-1" in log
    port = urlsplit(fleet.sim.servers["member-1"]).port
    assert re.search(rf"event=member_not_ready member=member-1 error=.*port={port}", log), log


def _single(name: str) -> dict[str, Any]:
    obj = job(name, workers=0, npus=1, exclusive=False)
    obj["metadata"]["namespace"] = NS
    return obj


def test_a_job_no_member_could_take_says_why_never_where(
    api: Callable[..., tuple[RunningFleet, k8s.ApiClient]],
) -> None:
    # The members stay Ready to the syncer (a huge failure threshold), so jobs are sent to them:
    # member-1 refuses connections, member-2 answers 503.
    fleet, api_client = api(
        members={"member-1": MODULE_POOL, "member-2": MODULE_POOL},
        workers=1,
        syncer_args=("--probe-interval", "0.3", "--failure-threshold", "100000"),
    )
    _wait(fleet, "both members Ready and the dispatcher leading", lambda: all(
        _ready(_member_cluster(api_client, m))["status"] == "True" for m in ("member-1", "member-2")
    ) and "event=dispatcher_started" in fleet.procs.roles["dispatcher"].log_path.read_text())  # fmt: skip
    fleet.sim.fault("member-1", "down")
    fleet.sim.fault("member-2", "503")
    jobs = k8s.CustomObjectsApi(api_client)
    jobs.create_namespaced_custom_object("mindxdl.gitee.com", "v1", NS, "ascendjobs", _single("stuck"))

    def get() -> dict[str, Any]:
        obj = jobs.get_namespaced_custom_object("mindxdl.gitee.com", "v1", NS, "ascendjobs", "stuck")
        return cast(dict[str, Any], obj)

    def tried() -> int:
        found = [e for e in _events(api_client) if e["reason"] == "MemberUnavailable"]
        return int(found[0].get("count") or 1) if found else 0

    fleet.wait_for("the job to be refused by both members", lambda: tried() >= 2, 60)
    # The reason is the dispatcher's next look at the job: a read between its two refusals' rounds
    # still holds the first one's reason alone.
    fleet.wait_for(
        "its pending reason to name both members",
        lambda: all(
            f"{m}: avoided" in (get()["status"].get("blocker") or "") for m in ("member-1", "member-2")
        ),
        30,
    )
    obj = get()
    assert current_state(obj) == "Queued"
    # Both are kept off for a while, and the job says so; its last refusal says why, in words.
    assert set(obj["status"]["excludedFirmly"]) == {"member-1", "member-2"}, obj["status"]
    assert "member-1: avoided" in obj["status"]["blocker"] and "member-2: avoided" in obj["status"]["blocker"]
    events = _events(api_client)
    (refusals,) = [e for e in events if e["reason"] == "MemberUnavailable"]
    said = refusals["message"]
    assert (
        said.startswith("member-2 could not be reached (") and "503 ServiceUnavailable" in said
    ) or said in (
        "member-1 could not be reached (create_job: unavailable: connection refused)",
        "member-1 could not be reached (get_namespace: unavailable: connection refused)",
    ), said
    _assert_no_address(
        fleet, json.dumps(obj["status"]) + json.dumps(events)
    )  # (its spec names an NFS server)
    # The worker's log keeps the address, for the operator.
    port = urlsplit(fleet.sim.servers["member-1"]).port
    assert re.search(rf"event=member_unavailable .*member=member-1 .*{port}", fleet.procs.logs(tail=10_000))
