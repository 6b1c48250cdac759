"""kill -9 the redis-server during a burst of admissions, restart it from its AOF: every
acknowledged change survives, nothing is half-admitted, and the invariants hold."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from queues import JobState, Ledger
from tests.queues.support import assert_invariants, make_tree
from tests.support.redis_server import RedisServer

ROUNDS = 3


class Burst(threading.Thread):
    """Queues, admits and releases jobs as fast as it can until Redis goes away.

    For each job it keeps the last state Redis acknowledged and the state of the one call that
    was in flight when the connection broke (which may or may not have happened).
    """

    def __init__(self, server: RedisServer, round_: int) -> None:
        super().__init__()
        # No retries: the kill must surface here, not be papered over by redis-py's backoff.
        self.client = server.client(socket_timeout=5, retry=Retry(NoBackoff(), 0))
        self.ledger = Ledger(self.client)
        self.round = round_
        self.acked: dict[str, JobState] = {}
        self.in_flight: tuple[str, JobState] | None = None
        self.calls = 0

    def run(self) -> None:
        try:
            for i in range(10**6):
                job = f"ns/r{self.round}-{i}/uid"
                self.in_flight = (job, JobState.PENDING)
                self.ledger.enqueue(job, "a" if i % 2 else "b", {"cpu": 500})
                self.acked[job] = JobState.PENDING
                self.in_flight = (job, JobState.ADMITTED)
                admitted = self.ledger.admit_pending(job).admitted
                self.acked[job] = JobState.ADMITTED if admitted else JobState.PENDING
                if i % 3 == 0:
                    self.in_flight = (job, JobState.ABSENT)
                    self.ledger.release(job)
                    self.acked[job] = JobState.ABSENT
                self.in_flight = None
                self.calls += 1
        except redis.ConnectionError:
            return
        finally:
            self.client.close()


@pytest.mark.integration
def test_kill9_during_admissions_loses_nothing_acknowledged(redis_server: RedisServer) -> None:
    client = redis_server.client()
    ledger = Ledger(client)
    ledger.apply(
        make_tree(
            {
                "name": "root",
                "min": {"cpu": 6},
                "max": {"cpu": 6, "kube-queue/max-jobs": 9},
                "children": [
                    {"name": "a", "min": {"cpu": 3}, "max": {"cpu": 5}, "namespaces": ["a"]},
                    {"name": "b", "min": {"cpu": 3}, "max": {"cpu": 5}, "namespaces": ["b"]},
                ],
            }
        )
    )
    client.close()
    acked: dict[str, JobState] = {}
    uncertain: dict[str, set[JobState]] = {}
    for round_ in range(ROUNDS):
        burst = Burst(redis_server, round_)
        burst.start()
        time.sleep(0.4)
        redis_server.kill9()
        burst.join(timeout=30)
        assert not burst.is_alive()
        assert burst.calls > 10, "the burst did not get going before the kill"
        acked.update(burst.acked)
        if burst.in_flight is not None:
            job, target = burst.in_flight
            uncertain[job] = {target, burst.acked.get(job, JobState.ABSENT)}
        redis_server.start()  # same port, same directory: the AOF is replayed
        client = redis_server.client()
        ledger = Ledger(client)
        assert_invariants(ledger)
        for job, state in acked.items():
            allowed = uncertain.get(job, {state})
            assert ledger.state(job) in allowed, f"{job}: acknowledged {state}, found {ledger.state(job)}"
        client.close()
    assert len(acked) > 60
