"""A watch or list from a resourceVersion the fleet has not reached (issue 34, requirement 4).

kube-apiserver waits up to 3 seconds for its watch cache to reach such a version, then answers
``Timeout: Too large resource version: <asked>, current: <now>`` (504, reason ``Timeout``, one
cause of type ``ResourceVersionTooLarge``): a list as the response, a watch as an ``ERROR``
event. client-go's reflector and the official Python client then relist instead of waiting for a
version that may never come (the fleet's store lost history: Redis restored from an older
snapshot). Before, the fleet answered 200 and an empty stream.
"""

from __future__ import annotations

import asyncio
import faulthandler
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import fakeredis
import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from fleet.apiserver.store import FRESH_WAIT_SECONDS
from tests.fleet.endpoint.conftest import JOB, JOBS
from tests.support.fleet_api import FleetApiThread, official_client
from tests.support.kubectl import Kubectl, require_kubectl

pytestmark = pytest.mark.integration

GROUP, VERSION, PLURAL = "mindxdl.gitee.com", "v1", "ascendjobs"
AHEAD = 1000
#: How long the test replicas wait for a version not reached (kube-apiserver's 3 s, shortened).
WAIT = 1.0
#: A socket read's limit: far past any stream's own end, so that only a hang reaches it.
READ_TIMEOUT = 60


def read_events(response: Any) -> list[dict[str, Any]]:
    """Every event of a watch stream, to its end. A stream that hangs dumps every thread's stack
    before the read fails, so a hang seen once on a loaded CI machine says where it was."""
    try:
        body = response.read()
    except TimeoutError:
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        raise
    return [json.loads(line) for line in body.splitlines() if line.strip()]


def _replica(fresh_wait: float) -> Iterator[FleetApiThread]:
    redis_client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    with FleetApiThread(redis_client, members=lambda: ["member-1"], fresh_wait=fresh_wait) as api:
        yield api
    redis_client.close()


@pytest.fixture(scope="module")
def server() -> Iterator[FleetApiThread]:
    yield from _replica(WAIT)


@pytest.fixture(scope="module")
def patient_server() -> Iterator[FleetApiThread]:
    """A replica that waits kube-apiserver's whole 3 s for a version not reached: a create sent
    once a watch has answered reaches it in time on a busy machine too (1 s did not, once, in CI)."""
    yield from _replica(FRESH_WAIT_SECONDS)


def sample(name: str) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load(JOB.read_text())
    obj["metadata"]["name"] = name
    return obj


def current_version(jobs: client.CustomObjectsApi) -> int:
    listed: Any = jobs.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)
    return int(listed["metadata"]["resourceVersion"])


def assert_too_large(status: dict[str, Any], asked: int) -> None:
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 504, "Timeout"), status
    assert status["message"].startswith(f"Timeout: Too large resource version: {asked}, current: "), status
    assert status["details"]["causes"] == [
        {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    ]
    assert status["details"]["retryAfterSeconds"] == 1


def test_a_watch_from_a_version_not_reached_ends_with_too_large_and_the_client_relists(
    server: FleetApiThread, tmp_path: Path
) -> None:
    jobs = client.CustomObjectsApi(official_client(server, tmp_path))
    jobs.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, sample("before"))
    asked = current_version(jobs) + AHEAD

    # Plain HTTP: a 200 stream whose one event is the ERROR Status, after the wait.
    url = f"{server.url}{JOBS}/namespaces/default/ascendjobs?watch=1&resourceVersion={asked}"
    started = time.monotonic()
    with urllib.request.urlopen(url, timeout=READ_TIMEOUT) as response:
        lines = read_events(response)
    took = time.monotonic() - started
    assert WAIT <= took <= WAIT + 8, f"answered after {took:.1f}s"
    assert [e["type"] for e in lines] == ["ERROR"]
    assert_too_large(lines[0]["object"], asked)

    # The official client's watch raises it; the caller relists and watches from the list.
    with pytest.raises(ApiException) as raised:
        for _ in watch.Watch().stream(  # type: ignore[no-untyped-call]
            jobs.list_namespaced_custom_object,
            GROUP,
            VERSION,
            "default",
            PLURAL,
            resource_version=str(asked),
            timeout_seconds=20,
        ):
            pytest.fail("no event may come from a version the fleet has not reached")
    assert raised.value.status == 504
    assert "Too large resource version" in str(raised.value.reason)
    listed: Any = jobs.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)
    assert [o["metadata"]["name"] for o in listed["items"]] == ["before"]
    jobs.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, sample("after"))
    seen = [
        (e["type"], e["object"]["metadata"]["name"])
        for e in watch.Watch().stream(  # type: ignore[no-untyped-call]
            jobs.list_namespaced_custom_object,
            GROUP,
            VERSION,
            "default",
            PLURAL,
            resource_version=listed["metadata"]["resourceVersion"],
            timeout_seconds=2,
        )
    ]
    assert ("ADDED", "after") in seen


def test_a_version_reached_while_the_watch_waits_is_served(server: FleetApiThread, tmp_path: Path) -> None:
    """Within the wait the version comes (another replica's write): the watch goes on."""
    jobs = client.CustomObjectsApi(official_client(server, tmp_path))
    asked = current_version(jobs) + 1
    url = f"{server.url}{JOBS}/namespaces/default/ascendjobs?watch=1&resourceVersion={asked}&timeoutSeconds=4"
    with urllib.request.urlopen(url, timeout=READ_TIMEOUT) as response:
        for name in ("reaches-it", "after-it"):  # the first is written at the version asked
            jobs.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, sample(name))
        lines = read_events(response)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in lines] == [("ADDED", "after-it")]


#: The computed kinds (views of state other roles keep: Queue, MemberCluster, the fleet's
#: Namespace view), each watched by its collection path.
COMPUTED = ["/apis/fleet.io/v1alpha1/queues", "/apis/fleet.io/v1alpha1/memberclusters", "/api/v1/namespaces"]


@pytest.mark.parametrize("path", COMPUTED)
def test_a_watch_of_a_computed_kind_from_a_version_not_reached_ends_with_too_large(
    server: FleetApiThread, tmp_path: Path, path: str
) -> None:
    """The views answer as the stored kinds do: ``kubectl get queue -w`` resumed from a version the
    fleet lost gets the Status that makes it relist, not a quiet stream."""
    jobs = client.CustomObjectsApi(official_client(server, tmp_path))
    asked = current_version(jobs) + AHEAD
    started = time.monotonic()
    with urllib.request.urlopen(
        f"{server.url}{path}?watch=1&resourceVersion={asked}", timeout=READ_TIMEOUT
    ) as response:
        lines = read_events(response)
    took = time.monotonic() - started
    assert WAIT <= took <= WAIT + 8, f"answered after {took:.1f}s"
    assert [e["type"] for e in lines] == ["ERROR"]
    assert_too_large(lines[0]["object"], asked)


@pytest.mark.parametrize("path", COMPUTED)
def test_a_watch_of_a_computed_kind_from_a_version_reached_while_it_waits_is_served(
    patient_server: FleetApiThread, tmp_path: Path, path: str
) -> None:
    jobs = client.CustomObjectsApi(official_client(patient_server, tmp_path))
    asked = current_version(jobs) + 1
    url = f"{patient_server.url}{path}?watch=1&resourceVersion={asked}&timeoutSeconds=3"
    with urllib.request.urlopen(url, timeout=READ_TIMEOUT) as response:
        jobs.create_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, sample(f"reach-{uuid4().hex[:6]}")
        )
        lines = read_events(response)
    assert "ERROR" not in [e["type"] for e in lines], lines


def test_a_list_from_a_version_not_reached_is_a_504_kubectl_shows(
    server: FleetApiThread, tmp_path: Path
) -> None:
    """What client-go's reflector gets when it relists from its last version: 504 with the
    ResourceVersionTooLarge cause (``isTooLargeResourceVersionError``), so it lists again from
    scratch; kubectl prints it as kube-apiserver's."""
    jobs = client.CustomObjectsApi(official_client(server, tmp_path))
    asked = current_version(jobs) + AHEAD
    with pytest.raises(ApiException) as raised:
        jobs.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, resource_version=str(asked))
    assert raised.value.status == 504
    assert_too_large(json.loads(raised.value.body or "{}"), asked)
    kubectl = Kubectl(require_kubectl(), server.kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")
    done = kubectl("get", "--raw", f"{JOBS}/namespaces/default/ascendjobs?resourceVersion={asked}", ok=False)
    assert done.returncode == 1
    assert (
        f"Error from server (Timeout): Timeout: Too large resource version: {asked}, current:" in done.stderr
    )


def test_client_go_relists_after_the_store_went_back_to_an_older_snapshot(tmp_path: Path) -> None:
    """``kubectl wait`` (client-go's informer) across a Redis restored from an older snapshot:
    its watch ends, its next watch and list ask for a version the store no longer has, get
    ``Too large resource version``, and it lists again from scratch, so it sees the change made
    after the restore. (Before, the watch from that version answered nothing until the store's
    counter passed it, and the wait timed out.)"""
    redis_client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    with FleetApiThread(redis_client, members=lambda: ["member-1"], fresh_wait=WAIT) as api:
        jobs = client.CustomObjectsApi(official_client(api, tmp_path))
        jobs.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, sample("waited"))
        snapshot = {key: redis_client.dump(key) for key in redis_client.keys("*")}
        for n in range(3):  # versions the snapshot does not have
            jobs.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, sample(f"lost-{n}"))
        kubectl = Kubectl(require_kubectl(), api.kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")
        ready = "--for=jsonpath={.metadata.labels.ready}=yes"
        waiting = subprocess.Popen(
            [*kubectl.base, "wait", "acjob/waited", "-n", "default", ready, "--timeout=45s"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            time.sleep(3.0)  # listed and watching from the newest version
            assert waiting.poll() is None
            # Redis comes back from the older snapshot; the replica's streams end (as on its restart).
            redis_client.flushall()
            for key, value in snapshot.items():
                if value is not None:
                    redis_client.restore(key, 0, value)
            api.call(_end_watches(api))
            jobs.patch_namespaced_custom_object(
                GROUP, VERSION, "default", PLURAL, "waited", {"metadata": {"labels": {"ready": "yes"}}}
            )
            out, err = waiting.communicate(timeout=60)
        finally:
            if waiting.poll() is None:
                waiting.kill()
                waiting.communicate()
        assert waiting.returncode == 0, err
        assert "ascendjob.mindxdl.gitee.com/waited condition met" in out, out
    redis_client.close()


async def _end_watches(api: FleetApiThread) -> None:
    hub = api.replica.app.state.api_hub
    hub.close_all()
    await asyncio.sleep(0.5)
    hub.reopen()
