"""Every role against a Redis that demands a password (and, where redis-server has it, TLS with
client certificates): each starts, does its work, and never shows the password.

A real ``redis-server`` with ``requirepass`` (and ``--tls-port``, ``--tls-auth-clients yes``) is
given to ``fleet dispatcher``, ``fleet worker`` and ``fleet syncer`` as ``--redis URL`` and to
``fleet api`` as ``$FLEET_REDIS_URL``; a job submitted through the API runs on a member and its
MemberClusters are Ready, which takes every role. Then the captured output of every role, its
metrics and the API's answers are searched for the password.
"""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import redis
from kubernetes import client as k8s

from fleet.jobs import current_state
from tests.fleet.dispatch.conftest import MODULE_POOL, RunningFleet
from tests.fleet.placement.factory import job
from tests.support.api_process import TOKEN, Replica, start_replica, stop
from tests.support.net import free_port
from tests.support.redis_server import TLSUnsupported

pytestmark = pytest.mark.integration

#: The password: URL-special characters in it, percent-encoded in the URL as redis-py wants.
PASSWORD = "Pw-7c1f/e2+9a=b"
NS = "team-a"
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode(errors="replace")
    except OSError:
        return 0, ""


@pytest.fixture
def api_process(tmp_path: Path) -> Iterator[Callable[[RunningFleet], Replica]]:
    """``fleet api`` with the Redis URL in ``$FLEET_REDIS_URL`` (as a deployment's Secret gives it)."""
    started: list[Replica] = []

    def start(fleet: RunningFleet) -> Replica:
        replica = start_replica(
            None,
            tmp_path,
            "api",
            "--kubeconfig",
            str(fleet.sim.kubeconfig),
            env={"FLEET_REDIS_URL": fleet.redis_server.url},
        )
        started.append(replica)
        return replica

    yield start
    for replica in started:
        stop(replica)


def _job(name: str) -> dict[str, Any]:
    obj = job(name, workers=0, npus=1, exclusive=False)
    obj["metadata"]["namespace"] = NS
    obj["metadata"]["annotations"] = {"sim.fleet.io/duration-seconds": "60"}
    return obj


@pytest.mark.parametrize("transport", ["password", "password-and-tls"])
def test_every_role_works_against_a_redis_with_a_password_and_never_shows_it(
    transport: str,
    fleet_factory: Callable[..., RunningFleet],
    api_process: Callable[[RunningFleet], Replica],
) -> None:
    metrics = {role: free_port() for role in ("dispatcher", "worker", "syncer")}
    try:
        fleet = fleet_factory(
            members={"member-1": MODULE_POOL},
            workers=1,
            redis_password=PASSWORD,
            redis_tls=transport == "password-and-tls",
            dispatcher_args=("--metrics-port", str(metrics["dispatcher"])),
            syncer_args=("--metrics-port", str(metrics["syncer"]), "--probe-interval", "0.3"),
        )
    except TLSUnsupported as error:
        if IN_CI:
            raise
        pytest.skip(f"redis-server here has no TLS: {error}")
    url = fleet.redis_server.url
    assert url.startswith("rediss://" if transport == "password-and-tls" else "redis://")
    assert PASSWORD not in url  # percent-encoded in the URL...
    with pytest.raises(redis.AuthenticationError):  # ...and Redis really demands it
        fleet.redis_server.client(password=None).ping()
    # The worker's metrics port: the fixture starts it without one, so start a second worker.
    fleet.procs.start("worker-2", "worker", "--metrics-port", str(metrics["worker"]))
    api = api_process(fleet)

    configuration = k8s.Configuration()
    configuration.host = api.url
    configuration.api_key = {"authorization": f"Bearer {TOKEN}"}
    api_client = k8s.ApiClient(configuration)
    jobs = k8s.CustomObjectsApi(api_client)
    jobs.create_namespaced_custom_object("mindxdl.gitee.com", "v1", NS, "ascendjobs", _job("with-secret"))

    def running() -> bool:
        obj = jobs.get_namespaced_custom_object("mindxdl.gitee.com", "v1", NS, "ascendjobs", "with-secret")
        return current_state(cast(dict[str, Any], obj)) == "Running"

    fleet.wait_for("the job to run in member-1 (api, dispatcher, worker, syncer all at work)", running, 60)
    member: Any = jobs.get_cluster_custom_object("fleet.io", "v1alpha1", "memberclusters", "member-1")
    assert [c["status"] for c in member["status"]["conditions"]] == ["True"]

    seen = [json.dumps(member)]
    for port in [*metrics.values(), api.metrics_port]:
        # worker-2 may still be starting on a busy machine: its port answers once it serves.
        at = f"http://127.0.0.1:{port}/metrics"
        fleet.wait_for(f"metrics at {at}", lambda at=at: "fleet_" in _get(at)[1], 30)  # type: ignore[misc]
        code, text = _get(at)
        assert code == 200 and "fleet_" in text
        seen.append(text)
    logs = {role.name: role.log_path.read_text(errors="replace") for role in fleet.procs.roles.values()}
    logs["api"] = api.log_path.read_text(errors="replace")
    for role, text in logs.items():
        shown = "rediss://:***@" if transport == "password-and-tls" else "redis://:***@"
        assert f"redis={shown}127.0.0.1:{fleet.redis_server.port}/0" in text, (role, text)
    text = "\n".join([*seen, *logs.values()])
    for secret in (PASSWORD, urllib.parse.quote(PASSWORD, safe=""), "Pw-7c1f"):
        assert secret not in text
