"""Every role through Redis Sentinel, across a failover (issue 21, req. 6).

Real processes: a primary, a replica and three sentinels (``tests/support/sentinel.py``); the
simulator; ``fleet api --durability replicas`` (a submission is acknowledged once the replica
holds it: ``WAIT 1``), dispatcher, worker and syncer, all given the ``redis+sentinel://`` URL.
The primary is killed with -9 in the middle of a burst of submissions. The sentinels promote the
replica, every role finds it, and: no submission answered 201 is lost, every one of them runs
and succeeds, and none runs twice (one attempt, one member copy each).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet.connections import check_url, parse_sentinel_url, redis_from_url
from fleet.jobs import attempt_of, current_state
from fleet.labels import JOB_UID_LABEL
from fleet.members import load_members
from fleet.state import Objects
from tests.conftest import _require_redis_server
from tests.fleet.endpoint.test_durability import SUBMIT, burst, missing
from tests.fleet.endpoint.test_process import sample_job
from tests.support.api_process import Replica, request, start_replica, stop
from tests.support.fleet import FleetProcesses
from tests.support.kinds import FLEET_ASCENDJOB, JOBS
from tests.support.sentinel import SentinelSet
from tests.support.sim import CARD_POOL, running_sim, small_topology


def test_a_sentinel_url_names_the_sentinels_the_service_and_the_db() -> None:
    url = "redis+sentinel://:p%40ss@10.0.0.1:26379,10.0.0.2/fleet/2?sentinel_password=s"
    where = parse_sentinel_url(url)
    assert where.sentinels == (("10.0.0.1", 26379), ("10.0.0.2", 26379))
    assert (where.service, where.db, where.password, where.sentinel_password) == ("fleet", 2, "p@ss", "s")
    problem = check_url("redis+sentinel://:secret@10.0.0.1:26379/")
    assert problem is not None and "SERVICE" in problem and "secret" not in problem
    assert check_url("redis+sentinel://10.0.0.1:x/fleet") is not None


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelSet]:
    _require_redis_server()
    group = SentinelSet(tmp_path / "redis")
    try:
        group.start()
        yield group
    finally:
        group.stop()


@pytest.mark.integration
def test_no_accepted_job_is_lost_or_run_twice_across_a_sentinel_failover(
    sentinels: SentinelSet, tmp_path: Path
) -> None:
    pool: dict[str, Any] = {**CARD_POOL, "count": 40}
    with running_sim(small_topology({"member-1": pool}, jobDurationSeconds=1)) as sim:
        procs = FleetProcesses(sentinels.url, sim.kubeconfig, tmp_path)
        api: Replica | None = None
        try:
            for role in ("dispatcher", "worker", "syncer"):
                procs.start(role, role)
            api = start_replica(
                sentinels.url, tmp_path, "api", "--durability", "replicas", "--durability-timeout", "2"
            )
            old = sentinels.primary_port()
            acked, _sent = burst(api, sentinels.kill_primary)
            sentinels.wait(lambda: sentinels.primary_port() != old, "the replica to be promoted")

            # The service is back: a submission after the failover is acknowledged too.
            after = sample_job()
            after["metadata"]["name"] = "after-failover"
            deadline = time.monotonic() + 30
            while (code := request(api, "POST", SUBMIT, after, timeout=15)[0]) not in (201, 409):
                assert time.monotonic() < deadline, f"no submission accepted after the failover ({code})"
                time.sleep(0.5)
            acked.append("after-failover")

            client = redis_from_url(sentinels.url)
            lost, _unqueued = missing(client, acked)
            assert lost == [], f"{len(lost)} of {len(acked)} acknowledged submissions lost"
            objects = Objects(client)

            def states() -> dict[str, Any]:
                found = objects.get_many(FLEET_ASCENDJOB, [("default", name) for name in acked])
                return {name: obj for name, obj in zip(acked, found, strict=True)}

            deadline = time.monotonic() + 120
            while not all(current_state(o) == "Succeeded" for o in states().values() if o is not None):
                if time.monotonic() > deadline:
                    left = {n: current_state(o) for n, o in states().items()}
                    left = {n: s for n, s in left.items() if s != "Succeeded"}
                    pytest.fail(f"jobs not succeeded: {left}\n{procs.logs()}\n{api.log()[-3000:]}")
                time.sleep(0.5)
            final = states()
            assert all(attempt_of(obj) == 1 for obj in final.values() if obj is not None), "a job ran twice"
            members = load_members(sim.kubeconfig)
            try:
                copies = members["member-1"].list_objects(JOBS, label_selector=JOB_UID_LABEL).items
            finally:
                for member in members.values():
                    member.close()
            uids = [c["metadata"]["labels"][JOB_UID_LABEL] for c in copies]
            assert len(uids) == len(set(uids)), "a job has two copies"
            assert {str(o["metadata"]["uid"]) for o in final.values() if o is not None} <= set(uids)
            client.close()
        finally:
            if api is not None:
                stop(api)
            procs.stop()
