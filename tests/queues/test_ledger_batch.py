"""A batch of decisions in one script run is exactly the decisions one script run each would make.

Two ledgers under different hash tags in one Redis get the same random tree, the same queued jobs
and the same history; then one decides a random list of jobs (duplicates, unknown ids, ids with a
newline or a backslash) with :meth:`Ledger.admit_pending_many` in random batch sizes, the other
job by job with :meth:`Ledger.admit_pending`. Every decision and the whole state afterwards must
be the same, on fakeredis and on a real redis-server.
"""

from __future__ import annotations

from dataclasses import replace

import hypothesis.strategies as st
import redis
from hypothesis import HealthCheck, given, settings

from queues import Decision, ElasticQuotaTree, JobRecord, Keys, Ledger, LedgerError, QueuePolicy
from queues.quantity import MAX_JOBS, UNLIMITED
from tests.queues.support import assert_invariants, make_tree
from tests.queues.test_ledger_stateful import requests, trees

IDS = ["ns/a/1", "ns/b/2", "ns/c/3", "ns/d/4", "ns/e/5", "ns/f/6", "odd\nid", "back\\slash", "ns/g/7"]


def outcome(decision: Decision | LedgerError) -> tuple[object, ...]:
    """A decision as a user sees it (an ``error`` in a batch is the single call's exception)."""
    if isinstance(decision, LedgerError):
        return ("error", str(decision))
    if decision.error:
        return ("error", decision.error)
    return (decision.admitted, decision.already, decision.leaf, decision.reason)


def state(ledger: Ledger) -> tuple[object, ...]:
    """Everything the ledger holds; submission sequences (which are clock readings) by rank."""
    nodes = ledger.nodes()
    admitted, pending = ledger.records(), ledger.pending.records()
    rank = {seq: i for i, seq in enumerate(sorted({r.seq for r in (*admitted.values(), *pending.values())}))}

    def ranked(records: dict[str, JobRecord]) -> dict[str, JobRecord]:
        return {job: replace(r, seq=rank[r.seq]) for job, r in records.items()}

    return (
        ledger.usages(nodes),
        ledger.pending_counts(),
        ranked(admitted),
        ranked(pending),
        {node: ledger.pending.peek(node, 100) for node in nodes},
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.data(),
    tree=st.none() | trees(),
    strict=st.booleans(),
    batch=st.integers(1, 5),
)
def test_a_batch_decides_as_one_script_per_job(
    redis_client: redis.Redis, data: st.DataObject, tree: ElasticQuotaTree | None, strict: bool, batch: int
) -> None:
    redis_client.flushall()
    batched, single = Ledger(redis_client, Keys(tag="batched")), Ledger(redis_client, Keys(tag="single"))
    leaves = ["root"]
    if tree is not None:
        leaves = [node.name for _, _, node in tree.walk() if node.is_leaf]
    queued = data.draw(st.lists(st.sampled_from(IDS), unique=True, max_size=len(IDS)))
    jobs = [
        (job, data.draw(st.sampled_from(leaves)), data.draw(requests), data.draw(st.integers(-2, 2)))
        for job in queued
    ]
    early = data.draw(st.lists(st.sampled_from(queued), unique=True)) if queued else []
    for ledger in (batched, single):
        if tree is not None:
            ledger.apply(tree)
        for job, leaf, request, priority in jobs:
            ledger.enqueue(job, leaf, request, priority)
        for job in early:  # some history: admitted and released jobs change usage and queues
            ledger.admit_pending(job)
        for job in early[::2]:
            ledger.release(job)
    assert state(batched)[:2] == state(single)[:2]
    policy = QueuePolicy.STRICT if strict else QueuePolicy.BEST_EFFORT
    # Random picks, or every queue from its head (so that strict heads move within a batch).
    in_order = [job for leaf in leaves for job in single.pending.peek(leaf, 100)]
    asked = data.draw(
        st.lists(st.sampled_from([*IDS, "ghost"]), min_size=1, max_size=12)
        | st.just([*in_order, *in_order[:2], "ghost"])
    )
    together = batched.admit_pending_many(asked, policy, batch=batch)
    alone: list[Decision | LedgerError] = []
    for job in asked:
        try:
            alone.append(single.admit_pending(job, policy))
        except LedgerError as error:
            alone.append(error)
    assert [outcome(d) for d in together] == [outcome(d) for d in alone]
    assert [d.job for d in together] == asked
    assert state(batched) == state(single)
    assert batched.rebuild() == []
    assert_invariants(batched)


def test_usage_beyond_two_to_the_53_stays_exact_within_a_batch(redis_client: redis.Redis) -> None:
    ledger = Ledger(redis_client)
    ledger.apply(
        make_tree(
            {
                "name": "root",
                "max": {"cpu": 100},
                "children": [{"name": "a", "max": {"cpu": 100}, "namespaces": ["a"]}],
            }
        )
    )
    huge = UNLIMITED - 1  # 2**53 - 1, the largest amount a request may ask
    jobs = [f"j{i}" for i in range(4)]
    for job in jobs:
        ledger.enqueue(job, "a", {"cpu": 1, "memory": huge})
    assert all(d.admitted for d in ledger.admit_pending_many(jobs))
    assert ledger.usage("root") == {"cpu": 4, "memory": 4 * huge, MAX_JOBS: 4}
    ledger.release("j0")
    assert ledger.requeue("j1")
    assert ledger.usage("a") == {"cpu": 2, "memory": 2 * huge, MAX_JOBS: 2}
    assert all(d.admitted for d in ledger.admit_pending_many(["j1"]))
    assert ledger.usage("a") == {"cpu": 3, "memory": 3 * huge, MAX_JOBS: 3}
    assert_invariants(ledger)


def test_strict_heads_move_within_one_batch(redis_client: redis.Redis) -> None:
    ledger = Ledger(redis_client)
    for job in ("h1", "h2", "h3", "h4"):
        ledger.enqueue(job, "root", {"cpu": 1})
    decisions = ledger.admit_pending_many(["h2", "h1", "h2", "h4", "h3"], QueuePolicy.STRICT)
    assert [d.reason for d in decisions] == [
        "queue root: strict order, waiting behind h1",
        None,
        None,
        "queue root: strict order, waiting behind h3",
        None,
    ]
    assert ledger.pending.peek("root", 5) == ["h4"]
    assert_invariants(ledger)
