"""``fleet api`` as it runs in production: separate processes over one real Redis.

Replicas are stateless (what one accepts, another serves and streams to its watchers); a replica
outlives Redis going away (503 Status meanwhile, never a crash) and serves again, with nothing
lost, once Redis is back from its append-only file; it logs one structured line per request
without the token, exposes its metrics on its own port, and stops cleanly on SIGTERM.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fleet.endpoint.conftest import JOB, JOB_NAME, JOBS, TREE
from tests.support.api_process import TOKEN, Replica, request, start_replica, stop
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.integration

TREES = "/apis/scheduling.sigs.k8s.io/v1beta1/namespaces/kube-system/elasticquotatrees"


@pytest.fixture
def replicas(redis_server: RedisServer, tmp_path: Path) -> Iterator[tuple[Replica, Replica]]:
    first = start_replica(redis_server.url, tmp_path, "api-1")
    try:
        second = start_replica(redis_server.url, tmp_path, "api-2")
    except BaseException:
        stop(first)
        raise
    yield first, second
    for replica in (first, second):
        stop(replica)


def sample_job() -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(JOB.read_text())
    job["metadata"]["namespace"] = "default"
    return job


def watch_names(replica: Replica, path: str, seen: list[str], ready: threading.Event) -> None:
    """Read a watch stream and note the name of every ADDED object."""
    req = urllib.request.Request(
        f"{replica.url}{path}?watch=1&resourceVersion=0&timeoutSeconds=20",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    with urllib.request.urlopen(req, timeout=30) as response:
        ready.set()
        for line in response:
            event = json.loads(line)
            if event["type"] == "ADDED":
                seen.append(event["object"]["metadata"]["name"])
                return


def test_replicas_share_one_redis_survive_its_loss_and_stop_cleanly(
    replicas: tuple[Replica, Replica], redis_server: RedisServer
) -> None:
    one, two = replicas
    assert request(one, "POST", TREES, yaml.safe_load(TREE.read_text()))[0] == 201

    # A watch on one replica sees what another accepts.
    seen: list[str] = []
    ready = threading.Event()
    watcher = threading.Thread(
        target=watch_names, args=(two, f"{JOBS}/namespaces/default/ascendjobs", seen, ready), daemon=True
    )
    watcher.start()
    assert ready.wait(10)
    code, created = request(one, "POST", f"{JOBS}/namespaces/default/ascendjobs", sample_job())
    assert code == 201, created
    watcher.join(15)
    assert seen == [JOB_NAME]
    code, got = request(two, "GET", f"{JOBS}/namespaces/default/ascendjobs/{JOB_NAME}")
    assert (code, got["metadata"]["uid"]) == (200, created["metadata"]["uid"])

    # Redis goes away: a Status 503, not a crash; back from its AOF: served again, nothing lost.
    redis_server.kill9()
    code, status = request(two, "GET", f"{JOBS}/namespaces/default/ascendjobs/{JOB_NAME}", timeout=30)
    assert code == 503, status
    assert (status["kind"], status["reason"]) == ("Status", "ServiceUnavailable")
    assert one.process.poll() is None and two.process.poll() is None
    redis_server.start()
    deadline = time.monotonic() + 30
    while True:
        code, got = request(two, "GET", f"{JOBS}/namespaces/default/ascendjobs/{JOB_NAME}")
        if code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert (code, got["metadata"]["uid"]) == (200, created["metadata"]["uid"])
    assert request(one, "GET", TREES + "/elasticquotatree")[0] == 200

    # Metrics on their own port, no token needed; queue and quota gauges from the ledger.
    with urllib.request.urlopen(f"http://127.0.0.1:{one.metrics_port}/metrics", timeout=10) as response:
        metrics = response.read().decode()
    assert 'fleet_queue_pending_jobs{queue="root-child-2"} 1.0' in metrics
    assert "fleet_quota_scrape_ok 1.0" in metrics

    for replica in (one, two):
        assert stop(replica) == 0, replica.log()
        log = replica.log()
        assert "event=api_stopped" in log
        assert TOKEN not in log
    requests = [line for line in one.log().splitlines() if "event=request" in line]
    assert any("method=POST" in line and "code=201" in line and "user=admin" in line for line in requests)
