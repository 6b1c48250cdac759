"""An acknowledged submission survives a crash of Redis (issue 23, req. 6).

Real processes: ``fleet api`` over a private ``redis-server`` that is killed with SIGKILL in the
middle of a burst of submissions. Every submission answered 201 before the kill is there after it:
stored and queued, from the append-only file of a server that runs ``appendfsync always`` (what
``fleet up`` runs), or on the replica that ``--durability replicas`` waited for (what a Sentinel
failover promotes). A submission whose durability is not confirmed in time is answered 504, not
201. ``--durability aof`` on a Redis older than 7.2 (no ``WAITAOF``) refuses to start.

What a test can crash is the process. Redis ``write(2)``s its append-only file before it replies
in every ``appendfsync`` mode, so a killed process leaves it in the OS page cache and ``everysec``
survives this test too (tried twice, by hand: 61 and 60 acknowledged, none lost). What fsync, and
so ``always`` or ``WAITAOF``, adds is surviving the loss of the host (power, kernel), which no test
here can cause; ``everysec`` can also lose writes to a process kill when an fsync stalls for over
a second and Redis postpones its writes meanwhile.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from fleet.state import Objects
from queues import Ledger
from queues.records import JobState
from tests.fleet.endpoint.conftest import JOBS
from tests.fleet.endpoint.test_process import sample_job
from tests.support.api_process import Replica, request, start_replica, stop
from tests.support.kinds import FLEET_ASCENDJOB
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.integration

SUBMIT = f"{JOBS}/namespaces/default/ascendjobs"
THREADS = 6
#: Acknowledged submissions after which Redis is killed (others are still in flight then).
KILL_AFTER = 60


def burst(replica: Replica, kill: Callable[[], None]) -> tuple[list[str], int]:
    """Submit from several threads until Redis is killed after ``KILL_AFTER`` acknowledgements;
    returns the names answered 201 and how many submissions were sent."""
    acked: list[str] = []
    sent = 0
    lock = threading.Lock()
    killed = threading.Event()

    def submit(thread: int) -> None:
        nonlocal sent
        n = 0
        while not killed.is_set():
            job = sample_job()
            job["metadata"]["name"] = f"burst-{thread}-{n}"
            n += 1
            with lock:
                sent += 1
            code, _ = request(replica, "POST", SUBMIT, job, timeout=15)
            if code == 201:
                with lock:
                    acked.append(job["metadata"]["name"])
                    if len(acked) == KILL_AFTER and not killed.is_set():
                        kill()  # at once, while the other threads' submissions are in flight
                        killed.set()
            elif killed.is_set() or code == 0:
                return

    threads = [threading.Thread(target=submit, args=(i,), daemon=True) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert killed.is_set(), "the burst never reached its kill point"
    return acked, sent


def missing(client: redis.Redis, names: list[str]) -> tuple[list[str], list[str]]:
    """Of ``names``: those not stored, and those stored but not in the quota ledger."""
    objects = Objects(client)
    ledger = Ledger(client)
    stored = objects.get_many(FLEET_ASCENDJOB, [("default", name) for name in names])
    lost = [name for name, obj in zip(names, stored, strict=True) if obj is None]
    unqueued = [name for name in names if ledger.state(f"default/{name}") is JobState.ABSENT]
    return lost, unqueued


@pytest.fixture
def api_on(tmp_path: Path) -> Iterator[Callable[..., Replica]]:
    started: list[Replica] = []

    def start(url: str, *extra: str) -> Replica:
        replica = start_replica(url, tmp_path, f"api-{len(started)}", *extra)
        started.append(replica)
        return replica

    yield start
    for replica in started:
        stop(replica)


def test_acknowledged_submissions_survive_redis_kill9_with_appendfsync_always(
    redis_server: RedisServer, api_on: Callable[..., Replica]
) -> None:
    assert redis_server.appendfsync == "always"  # what fleet up's embedded Redis runs with
    api = api_on(redis_server.url)

    acked, sent = burst(api, redis_server.kill9)
    redis_server.start()  # the same data directory: back from its append-only file

    assert sent >= len(acked) >= KILL_AFTER
    client = redis_server.client()
    try:
        lost, unqueued = missing(client, acked)
    finally:
        client.close()
    assert lost == [], f"{len(lost)} of {len(acked)} acknowledged submissions lost"
    # A job stored before the kill whose queueing met it is accepted all the same (stored, hence
    # accepted; the dispatcher's reconcile queues it: fleet.jobs.submit), and the API said so.
    for name in unqueued:
        assert f"event=enqueue_deferred job=default/{name}" in api.log()
    # And the API serves them again.
    deadline = time.monotonic() + 20
    while (code := request(api, "GET", f"{SUBMIT}/{acked[-1]}")[0]) != 200 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert code == 200


def _synced(replica: RedisServer) -> bool:
    client = replica.client()
    try:
        info: dict[str, Any] = client.info("replication")
    finally:
        client.close()
    return info.get("master_link_status") == "up"


def _wait_synced(replica: RedisServer) -> None:
    deadline = time.monotonic() + 15
    while not _synced(replica):
        assert time.monotonic() < deadline, "the replica did not sync"
        time.sleep(0.1)


def test_durability_replicas_waits_for_a_replica_or_answers_504(
    tmp_path: Path, api_on: Callable[..., Replica]
) -> None:
    primary = RedisServer(tmp_path / "primary", appendfsync="everysec")
    primary.directory.mkdir()
    primary.start()
    follower = RedisServer(tmp_path / "replica", appendfsync="everysec", replicaof=primary.port)
    follower.directory.mkdir()
    try:
        follower.start()
        _wait_synced(follower)
        api = api_on(primary.url, "--durability", "replicas", "--durability-timeout", "0.5")
        assert "event=durability mode=replicas" in api.log()

        # No replica to confirm: not acknowledged, and said so.
        follower.kill9()
        job = sample_job()
        job["metadata"]["name"] = "unconfirmed"
        began = time.monotonic()
        code, status = request(api, "POST", SUBMIT, job)
        assert (code, status["reason"]) == (504, "Timeout"), status
        assert "not confirmed durable" in status["message"] and "0 of 1 replicas" in status["message"]
        assert time.monotonic() - began < 5

        follower.start()
        _wait_synced(follower)
        acked, _ = burst(api, primary.kill9)

        # The primary is gone for good (as when Sentinel promotes the replica): the replica has
        # every acknowledged submission.
        client = follower.client()
        try:
            lost, unqueued = missing(client, acked)
        finally:
            client.close()
        assert lost == [] and unqueued == []
    finally:
        follower.stop()
        primary.stop()


def test_durability_aof_needs_waitaof(redis_server: RedisServer) -> None:
    client = redis_server.client()
    try:
        version = str(client.info("server")["redis_version"])
    finally:
        client.close()
    if tuple(int(p) for p in version.split(".")[:2]) >= (7, 2):
        pytest.skip(f"redis-server {version} has WAITAOF")
    result = subprocess.run(
        [
            sys.executable, "-c", "from fleet.cli import main; main(prog_name='fleet')",
            "api", "--redis", redis_server.url, "--port", "0", "--durability", "aof",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert result.returncode != 0
    assert "WAITAOF (Redis 7.2 or newer)" in result.stderr, result.stderr
