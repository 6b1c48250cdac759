"""A running ``fleet sim`` subprocess, driven over HTTP with the official ``kubernetes`` client."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client import ApiException

from fleet.ascend import ASCENDJOB_GROUP, ASCENDJOB_PLURAL, ASCENDJOB_VERSION
from tests.fleet.sim.builders import sample_job, simple_job
from tests.support.sim import CARD_POOL, RunningSim, running_sim, small_topology

pytestmark = pytest.mark.integration

MEMBERS = ("lifecycle", "failures", "capacity", "faults", "readiness", "rebuilt")


@pytest.fixture(scope="module")
def fleet_sim() -> Iterator[RunningSim]:
    with running_sim(small_topology(dict.fromkeys(MEMBERS, CARD_POOL))) as running:
        yield running


def jobs_api(sim: RunningSim, member: str) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(sim.api_client(member))


def create(api: client.CustomObjectsApi, job: dict[str, Any]) -> dict[str, Any]:
    job["metadata"].pop("uid", None)
    created = api.create_namespaced_custom_object(
        ASCENDJOB_GROUP, ASCENDJOB_VERSION, "default", ASCENDJOB_PLURAL, job
    )
    return cast(dict[str, Any], created)


def get(api: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    found = api.get_namespaced_custom_object(
        ASCENDJOB_GROUP, ASCENDJOB_VERSION, "default", ASCENDJOB_PLURAL, name
    )
    return cast(dict[str, Any], found)


def pods_of(core: client.CoreV1Api, job: str) -> list[dict[str, Any]]:
    """The job's pods as the JSON the API served (camelCase keys)."""
    listed = core.list_namespaced_pod("default", label_selector=f"job-name={job}")
    return [pod.to_dict(serialize=True) for pod in listed.items]


def last_condition(job: dict[str, Any]) -> dict[str, Any]:
    conditions = (job.get("status") or {}).get("conditions") or [{}]
    last: dict[str, Any] = conditions[-1]
    return last


def states(
    api: client.CustomObjectsApi, name: str, until: str, *, since: str | None = None, timeout: int = 20
) -> list[str]:
    """The states a watch on the job delivers after ``since``, repeats folded, up to ``until``."""
    seen: list[str] = []
    extra = {"resource_version": since} if since else {}
    stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
        api.list_namespaced_custom_object,
        ASCENDJOB_GROUP,
        ASCENDJOB_VERSION,
        "default",
        ASCENDJOB_PLURAL,
        field_selector=f"metadata.name={name}",
        timeout_seconds=timeout,
        **extra,
    )
    for event in stream:
        kind = last_condition(event["object"]).get("type")
        if kind and (not seen or seen[-1] != kind):
            seen.append(kind)
        if kind == until:
            break
    return seen


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def with_duration(job: dict[str, Any], seconds: float) -> dict[str, Any]:
    job["metadata"].setdefault("annotations", {})["sim.fleet.io/duration-seconds"] = str(seconds)
    return job


def test_a_job_runs_then_succeeds(fleet_sim: RunningSim) -> None:
    api = jobs_api(fleet_sim, "lifecycle")
    since = create(api, with_duration(sample_job(), 0.5))["metadata"]["resourceVersion"]
    assert states(api, "default-test-pytorch", "Succeeded", since=since) == [
        "Created",
        "Running",
        "Succeeded",
    ]
    core = client.CoreV1Api(fleet_sim.api_client("lifecycle"))
    pods = pods_of(core, "default-test-pytorch")
    assert sorted(p["metadata"]["name"] for p in pods) == [
        "default-test-pytorch-master-0",
        "default-test-pytorch-worker-0",
    ]
    assert {p["status"]["phase"] for p in pods} == {"Succeeded"}
    assert len({p["spec"]["nodeName"] for p in pods}) == 2
    assert all(p["status"]["hostIP"] for p in pods)
    events = core.list_namespaced_event(
        "default", field_selector="involvedObject.name=default-test-pytorch"
    ).items
    assert {"JobCreated", "Scheduled", "JobRunning", "JobSucceeded"} <= {e.reason for e in events}


def test_an_injected_failure_restarts_then_fails_at_the_backoff_limit(fleet_sim: RunningSim) -> None:
    api = jobs_api(fleet_sim, "failures")
    job = with_duration(sample_job(), 30)
    job["spec"]["runPolicy"]["backoffLimit"] = 1
    create(api, job)
    eventually(lambda: last_condition(get(api, "default-test-pytorch")).get("type") == "Running")
    since = get(api, "default-test-pytorch")["metadata"]["resourceVersion"]
    answer = subprocess.run(
        [
            sys.executable,
            "-c",
            "from fleet.cli import main; main(prog_name='fleet')",
            "sim",
            "fault",
            "--kubeconfig",
            str(fleet_sim.kubeconfig),
            "failures",
            "fail-job",
            "default/default-test-pytorch",
            "--always",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert answer.returncode == 0, answer.stderr
    assert states(api, "default-test-pytorch", "Failed", since=since) == ["Restarting", "Running", "Failed"]
    final = last_condition(get(api, "default-test-pytorch"))
    assert final["reason"] == "JobFailed"
    assert "reached the specified backoff limit" in final["message"]


def test_deleting_a_job_frees_its_nodes_for_a_job_that_waited(fleet_sim: RunningSim) -> None:
    api = jobs_api(fleet_sim, "capacity")
    create(api, with_duration(simple_job("hog", workers=3, npus=2), 60))
    eventually(lambda: last_condition(get(api, "hog")).get("type") == "Running")
    create(api, with_duration(sample_job(), 60))
    eventually(lambda: last_condition(get(api, "default-test-pytorch")).get("reason") == "PodGroupPending")
    assert "Insufficient huawei.com/Ascend910" in last_condition(get(api, "default-test-pytorch"))["message"]
    api.delete_namespaced_custom_object(
        ASCENDJOB_GROUP, ASCENDJOB_VERSION, "default", ASCENDJOB_PLURAL, "hog"
    )
    eventually(lambda: last_condition(get(api, "default-test-pytorch")).get("type") == "Running")
    core = client.CoreV1Api(fleet_sim.api_client("capacity"))
    assert pods_of(core, "hog") == []


def _refused(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_down_refuses_connections_and_up_brings_back_the_same_state(fleet_sim: RunningSim) -> None:
    api = jobs_api(fleet_sim, "faults")
    created = create(api, with_duration(simple_job("steady", workers=1, npus=2), 60))
    eventually(lambda: last_condition(get(api, "steady")).get("type") == "Running")
    before = get(api, "steady")
    port = int(fleet_sim.servers["faults"].rsplit(":", 1)[1])
    assert fleet_sim.fault("faults", "down")["down"] is True
    assert _refused(port)
    quick = client.CoreV1Api(fleet_sim.api_client("faults"))
    quick.api_client.rest_client.pool_manager.connection_pool_kw["retries"] = False
    with pytest.raises(urllib3.exceptions.HTTPError) as refused:
        quick.list_node(_request_timeout=2)
    assert "refused" in repr(refused.value).lower()
    assert fleet_sim.fault("faults", "up")["down"] is False
    after = get(api, "steady")
    assert after["metadata"]["uid"] == created["metadata"]["uid"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_wipe_rebuilds_the_member_empty_with_its_nodes_on_the_same_port(fleet_sim: RunningSim) -> None:
    """A member restored from nothing: its nodes register again, its jobs and pods are gone, and
    its resourceVersions start over (below what a client saw before)."""
    api = jobs_api(fleet_sim, "rebuilt")
    create(api, with_duration(simple_job("lost", workers=1, npus=2), 60))
    eventually(lambda: last_condition(get(api, "lost")).get("type") == "Running")

    def raw(path: str) -> dict[str, Any]:
        with urllib.request.urlopen(fleet_sim.servers["rebuilt"] + path, timeout=10) as response:
            return cast(dict[str, Any], json.loads(response.read()))

    nodes_before = sorted(n["metadata"]["name"] for n in raw("/api/v1/nodes")["items"])
    seen = int(raw("/api/v1/namespaces/default/pods")["metadata"]["resourceVersion"])
    assert fleet_sim.fault("rebuilt", "wipe")["down"] is False
    assert sorted(n["metadata"]["name"] for n in raw("/api/v1/nodes")["items"]) == nodes_before
    jobs = f"/apis/{ASCENDJOB_GROUP}/{ASCENDJOB_VERSION}/namespaces/default/{ASCENDJOB_PLURAL}"
    assert raw(jobs)["items"] == []
    pods = raw("/api/v1/namespaces/default/pods")
    assert pods["items"] == [] and int(pods["metadata"]["resourceVersion"]) < seen


def test_503_and_slow_responses(fleet_sim: RunningSim) -> None:
    core = client.CoreV1Api(fleet_sim.api_client("faults"))
    fleet_sim.fault("faults", "503")
    try:
        with pytest.raises(ApiException) as unavailable:
            core.list_node()
        assert unavailable.value.status == 503
        assert "ServiceUnavailable" in str(unavailable.value.body)
    finally:
        fleet_sim.fault("faults", "ok")
    assert len(core.list_node().items) == 4
    fleet_sim.fault("faults", "slow", ms=300)
    try:
        started = time.monotonic()
        core.list_node()
        assert time.monotonic() - started >= 0.3
    finally:
        fleet_sim.fault("faults", "ok")


def test_not_ready_nodes_hold_a_gang_back_until_ready(fleet_sim: RunningSim) -> None:
    for i in range(3):
        fleet_sim.fault("readiness", "node-notready", node=f"card-{i}")
    core = client.CoreV1Api(fleet_sim.api_client("readiness"))
    nodes = [n.to_dict(serialize=True) for n in core.list_node().items]
    ready = {n["metadata"]["name"]: n["status"]["conditions"][-1]["status"] for n in nodes}
    assert ready == {"card-0": "Unknown", "card-1": "Unknown", "card-2": "Unknown", "card-3": "True"}
    api = jobs_api(fleet_sim, "readiness")
    create(api, with_duration(sample_job(), 60))
    eventually(lambda: last_condition(get(api, "default-test-pytorch")).get("reason") == "PodGroupPending")
    assert "3 node(s) were not ready" in last_condition(get(api, "default-test-pytorch"))["message"]
    fleet_sim.fault("readiness", "node-ready", node="card-1")
    eventually(lambda: last_condition(get(api, "default-test-pytorch")).get("type") == "Running")
    assert {p["spec"]["nodeName"] for p in pods_of(core, "default-test-pytorch")} == {"card-1", "card-3"}


def test_a_bad_fault_is_refused_and_changes_nothing(fleet_sim: RunningSim) -> None:
    import urllib.error

    with pytest.raises(urllib.error.HTTPError) as bad:
        fleet_sim.fault("faults", "slow", ms="soon")
    assert bad.value.code == 400
    assert "ms:" in bad.value.read().decode()
    assert client.CoreV1Api(fleet_sim.api_client("faults")).list_node(_request_timeout=5).items


def test_sigterm_stops_cleanly_and_frees_the_ports() -> None:
    with running_sim(small_topology({"only": CARD_POOL})) as running:
        ports = [int(url.rsplit(":", 1)[1]) for url in running.servers.values()]
        ports.append(int(running.control_url.rsplit(":", 1)[1]))
        assert not any(_refused(port) for port in ports)
        assert running.terminate() == 0
        assert all(_refused(port) for port in ports)
        assert "event=stopped" in running.log()
