"""Fenced writes: with a current token they go through; with a stale or missing one the script
changes nothing and :class:`queues.Fenced` is raised (both lanes)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from queues import Fence, Fenced, InvalidRequest, JobState, Ledger, LedgerError, QueuePolicy
from queues.quantity import MAX_JOBS
from tests.queues.support import assert_invariants, make_tree

CPU = 1000
LEASE = "fleet:{quota}:state:lease:dispatcher"


@pytest.fixture
def ledger(redis_client: redis.Redis) -> Ledger:
    ledger = Ledger(redis_client)
    ledger.apply(
        make_tree(
            {
                "name": "root",
                "min": {"cpu": 10},
                "max": {"cpu": 10},
                "children": [
                    {"name": "a", "min": {"cpu": 5}, "max": {"cpu": 10}, "namespaces": ["team-a"]},
                    {"name": "b", "min": {"cpu": 5}, "max": {"cpu": 10}, "namespaces": ["team-b"]},
                ],
            }
        )
    )
    return ledger


def snapshot(client: redis.Redis) -> dict[Any, Any]:
    """Every key and its value, to prove a refused write changed nothing at all."""
    return {key: client.dump(key) for key in sorted(client.keys("*"))}


def test_a_current_token_lets_every_fenced_write_through(ledger: Ledger, redis_client: redis.Redis) -> None:
    redis_client.set(LEASE, "token-7")
    fence = Fence(LEASE, "token-7")
    for job in ("j1", "j2", "j3"):
        ledger.enqueue(job, "a", {"cpu": CPU})
    decisions = ledger.admit_pending_many(["j1", "j2"], fence=fence)
    assert [(d.job, d.admitted) for d in decisions] == [("j1", True), ("j2", True)]
    assert ledger.admit_pending("j3", QueuePolicy.STRICT, fence=fence).admitted
    assert ledger.admit("d1", "b", {"cpu": CPU}, fence=fence).admitted
    assert ledger.requeue("j1", fence=fence)
    assert ledger.state("j1") is JobState.PENDING
    assert ledger.release("j2", fence=fence) is JobState.ADMITTED
    assert ledger.release("j1", fence=fence) is JobState.PENDING
    assert ledger.usage("root") == {"cpu": 2 * CPU, MAX_JOBS: 2}
    assert_invariants(ledger)


def test_a_stale_or_missing_token_changes_nothing(ledger: Ledger, redis_client: redis.Redis) -> None:
    for job in ("p1", "p2", "p3"):
        ledger.enqueue(job, "a", {"cpu": CPU})
    assert ledger.admit_pending("p1").admitted
    redis_client.set(LEASE, "token-8")  # another dispatcher took the lease over
    stale = Fence(LEASE, "token-7")
    before = snapshot(redis_client)
    with pytest.raises(Fenced, match=r"fence fleet:\{quota\}:state:lease:dispatcher: token token-7"):
        ledger.admit_pending_many(["p2", "p3"], fence=stale)
    with pytest.raises(Fenced) as several:  # one script run per batch: every one is fenced
        ledger.admit_pending_many(["p2", "p3"], batch=1, fence=stale)
    assert several.value.decisions == []
    with pytest.raises(Fenced):
        ledger.admit_pending("p2", fence=stale)
    with pytest.raises(Fenced):
        ledger.admit("d1", "b", {"cpu": CPU}, fence=stale)
    with pytest.raises(Fenced):
        ledger.requeue("p1", fence=stale)
    with pytest.raises(Fenced):
        ledger.release("p1", fence=stale)
    with pytest.raises(Fenced):
        ledger.release("p2", fence=stale)  # a pending job: not taken out of its queue either
    assert snapshot(redis_client) == before
    redis_client.delete(LEASE)  # the lease expired: no token is current
    before = snapshot(redis_client)
    with pytest.raises(Fenced):
        ledger.admit_pending_many(["p2"], fence=stale)
    with pytest.raises(Fenced):
        ledger.release("p1", fence=Fence(LEASE, ""))
    assert snapshot(redis_client) == before
    assert ledger.state("p1") is JobState.ADMITTED
    assert ledger.pending.peek("a", 5) == ["p2", "p3"]
    assert_invariants(ledger)


def test_fenced_is_a_ledger_error_and_pipelined_release_reports_it(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    assert issubclass(Fenced, LedgerError)
    assert ledger.admit("j", "a", {"cpu": CPU}).admitted
    redis_client.set(LEASE, "new")
    before = snapshot(redis_client)
    pipe = redis_client.pipeline(transaction=False)
    assert ledger.release("j", pipeline=pipe, fence=Fence(LEASE, "old")) is None
    assert [[int(reply[0]), reply[1].decode()] for reply in pipe.execute()] == [[-2, "fenced"]]
    assert snapshot(redis_client) == before


def test_the_fence_key_must_share_the_ledger_hash_slot(ledger: Ledger, redis_client: redis.Redis) -> None:
    ledger.enqueue("j", "a", {"cpu": CPU})
    before = snapshot(redis_client)
    with pytest.raises(InvalidRequest, match=r"fence: lease:dispatcher is not in the ledger's hash slot"):
        ledger.admit_pending("j", fence=Fence("lease:dispatcher", "t"))
    with pytest.raises(InvalidRequest, match="must be a"):
        ledger.release("j", fence=Fence("", "t"))
    assert snapshot(redis_client) == before
