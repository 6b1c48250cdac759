"""Jobs parked out of line (queues/lua/park.lua, unpark.lua): a pending job that cannot run as
things are keeps its record and its place, but holds no head position, counts in no pending or
want (no guarantee is owed for it), blocks no strict queue, and comes back in its old place when
what refused it changes. On fakeredis and a real redis-server (same Lua)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from queues import Fence, JobState, Ledger, LedgerError, QueuePolicy, job_wait
from tests.queues.support import assert_invariants, make_tree

NPU = "huawei.com/Ascend910"


def tree() -> dict[str, Any]:
    a: dict[str, Any] = {"name": "a", "min": {NPU: 8}, "max": {NPU: 16}, "namespaces": ["team-a"]}
    return {
        "name": "root",
        "min": {NPU: 16},
        "max": {NPU: 16},
        "children": [a, {"name": "b", "min": {NPU: 8}, "max": {NPU: 16}, "namespaces": ["team-b"]}],
    }


@pytest.fixture
def ledger(redis_client: redis.Redis) -> Ledger:
    ledger = Ledger(redis_client)
    ledger.apply(make_tree(tree()))
    return ledger


def heads(ledger: Ledger, leaf: str) -> list[str]:
    return [h.job for c in ledger.class_heads([leaf], 10).get(leaf, []) for h in c.heads]


def test_a_parked_job_holds_no_head_and_is_owed_nothing_then_comes_back_in_its_place(ledger: Ledger) -> None:
    ledger.enqueue("a/ghost", "a", {NPU: 8})
    ledger.enqueue("a/next", "a", {NPU: 8})
    before = job_wait(ledger, "a/ghost")
    assert before is not None and before.position == 1
    assert ledger.pending_counts()["a"] == 2
    assert ledger.park(["a/ghost"], "fleet") == 1
    assert ledger.park(["a/ghost", "a/nobody"], "fleet") == 0, "parked already, or not pending"
    assert heads(ledger, "a") == ["a/next"]
    assert ledger.pending_counts()["a"] == 1, "a parked job is not waiting for quota"
    assert ledger.state("a/ghost") is JobState.PENDING, "still accepted, still waiting"
    wait = job_wait(ledger, "a/ghost")
    assert wait is not None and wait.parked == "fleet" and "out of line" in wait.where
    assert_invariants(ledger)
    assert ledger.unpark("quota") == 0, "only those parked for that"
    assert ledger.unpark("fleet") == 1
    assert heads(ledger, "a") == ["a/ghost", "a/next"], "back in its old place"
    assert job_wait(ledger, "a/ghost") == before
    assert_invariants(ledger)


def test_a_parked_job_is_never_admitted_and_releases_cleanly(ledger: Ledger) -> None:
    ledger.enqueue("a/ghost", "a", {NPU: 8})
    ledger.park(["a/ghost"], "fleet")
    [decision] = ledger.admit_pending_many(["a/ghost"])
    assert not decision.admitted and "parked" in (decision.error or "")
    assert ledger.release("a/ghost") is JobState.PENDING
    assert ledger.state("a/ghost") is JobState.ABSENT and ledger.parked() == {}
    assert_invariants(ledger)


def test_a_parked_head_does_not_block_a_strict_queue(ledger: Ledger) -> None:
    ledger.enqueue("a/ghost", "a", {NPU: 8})
    ledger.enqueue("a/next", "a", {NPU: 4})
    strict = QueuePolicy.STRICT
    assert not ledger.admit_pending_many(["a/next"], strict)[0].admitted, "strict: behind its head"
    ledger.park(["a/ghost"], "fleet")
    assert ledger.admit_pending_many(["a/next"], strict)[0].admitted
    assert_invariants(ledger)


def test_a_tree_change_puts_every_parked_job_back(ledger: Ledger) -> None:
    ledger.enqueue("a/ghost", "a", {NPU: 8})
    ledger.enqueue("b/huge", "b", {NPU: 8})
    ledger.park(["a/ghost"], "fleet")
    ledger.park(["b/huge"], "quota")
    changed = tree()
    changed["children"][1]["max"] = {NPU: 12}
    ledger.apply(make_tree(changed))
    assert ledger.parked() == {}
    assert heads(ledger, "a") == ["a/ghost"] and heads(ledger, "b") == ["b/huge"]
    assert_invariants(ledger)


def test_the_fence_guards_parking(ledger: Ledger, redis_client: redis.Redis) -> None:
    ledger.enqueue("a/ghost", "a", {NPU: 8})
    redis_client.set("{quota}:lease", "mine")
    with pytest.raises(LedgerError):
        ledger.park(["a/ghost"], "fleet", fence=Fence("{quota}:lease", "theirs"))
    assert ledger.parked() == {}
