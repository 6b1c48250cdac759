"""Random trees, random admissions, releases, requeues and tree changes: the invariants hold
after every step, on fakeredis and on a real redis-server."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import redis
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from queues import (
    ApplyRefused,
    Decision,
    ElasticQuotaTree,
    JobState,
    Ledger,
    QueuePolicy,
    RefusalKind,
)
from queues.quantity import MAX_JOBS
from tests.queues.support import assert_invariants, expected_refusal, make_tree, over_max, pending_wants

RESOURCES = ("cpu", "huawei.com/Ascend910")
NAMES = [f"n{i}" for i in range(8)]


@st.composite
def trees(draw: st.DrawFn) -> ElasticQuotaTree:
    """Valid trees: children's min within the parent's, min <= max, namespaces on leaves.

    Mins are common and the root's max equals its min (as the seeds ask), so ancestors run out
    of headroom and the borrowing rule decides often.
    """
    pool = iter(draw(st.permutations(NAMES)))

    def node(name: str, depth: int, budget: dict[str, int]) -> dict[str, Any]:
        low = {r: draw(st.integers(b // 3, b)) for r, b in budget.items() if draw(st.integers(0, 3))}
        high: dict[str, int] = {}
        for resource in (*RESOURCES, MAX_JOBS):
            if draw(st.integers(0, 2)):
                high[resource] = low.get(resource, 0) + draw(st.integers(0, 8))
        out: dict[str, Any] = {"name": name, "min": low, "max": high}
        width = draw(st.integers(2, 3) if depth == 0 else st.integers(0, 2)) if depth < 2 else 0
        left = dict(low)
        children = []
        for _ in range(width):
            child_name = next(pool, None)
            if child_name is None:
                break
            children.append(node(child_name, depth + 1, left))
            for resource, amount in children[-1]["min"].items():
                left[resource] -= amount
        if children:
            out["children"] = children
        return out

    budget = {r: draw(st.integers(1, 12)) for r in RESOURCES}
    root = node("root", 0, budget)
    root["min"] = budget
    root["max"] = {**budget, MAX_JOBS: draw(st.integers(3, 16))}
    return make_tree(root)


requests = st.fixed_dictionaries(
    {},
    optional={
        "cpu": st.integers(0, 6).map(lambda n: n * 500),
        "huawei.com/Ascend910": st.integers(0, 4),
    },
)


class LedgerMachine(RuleBasedStateMachine):
    client: redis.Redis

    def __init__(self) -> None:
        super().__init__()
        self.client.flushall()
        self.ledger = Ledger(self.client)
        self.accepted: set[str] = set()
        self.lowered: dict[tuple[str, str], int] = {}
        self.serial = 0

    def leaves(self) -> list[str]:
        tree = self.ledger.tree()
        if tree is None:
            return ["root"]
        return [node.name for _, _, node in tree.walk() if node.is_leaf]

    @initialize(tree=st.none() | trees())
    def first_tree(self, tree: ElasticQuotaTree | None) -> None:
        if tree is not None:
            self.ledger.apply(tree)

    @rule(data=st.data(), jobs=st.lists(st.tuples(requests, st.integers(-3, 3)), min_size=1, max_size=4))
    def enqueue(self, data: st.DataObject, jobs: list[tuple[dict[str, int], int]]) -> None:
        for request, priority in jobs:
            leaf = data.draw(st.sampled_from(self.leaves()))
            self.serial += 1
            job = f"ns/job-{self.serial}/uid"
            assert self.ledger.enqueue(job, leaf, request, priority) is JobState.ABSENT
            self.accepted.add(job)

    @rule(data=st.data(), asks=st.lists(requests, min_size=1, max_size=4))
    def admit_direct(self, data: st.DataObject, asks: list[dict[str, int]]) -> None:
        for request in asks:
            leaf = data.draw(st.sampled_from(self.leaves()))
            self.serial += 1
            job = f"ns/direct-{self.serial}/uid"
            expected = self.expect(leaf, request)
            decision = self.ledger.admit(job, leaf, request)
            self.check_decision(decision, expected)
            if decision.admitted:
                self.accepted.add(job)

    @rule(data=st.data(), why=st.sampled_from(["fleet", "quota"]))
    def park(self, data: st.DataObject, why: str) -> None:
        pending = sorted(set(self.ledger.pending.records()) - set(self.ledger.parked()))
        if pending:
            job = data.draw(st.sampled_from(pending))
            assert self.ledger.park([job], why) == 1
            assert self.ledger.parked()[job][1] == why

    @rule(why=st.sampled_from(["", "fleet", "quota"]))
    def unpark(self, why: str) -> None:
        parked = self.ledger.parked()
        back = self.ledger.unpark(why)
        assert back == len([j for j, (_, w) in parked.items() if not why or w == why])

    @rule(data=st.data(), strict=st.booleans(), tries=st.integers(1, 6))
    def admit_pending(self, data: st.DataObject, strict: bool, tries: int) -> None:
        for _ in range(tries):
            parked = self.ledger.parked()
            pending = sorted((j, r) for j, r in self.ledger.pending.records().items() if j not in parked)
            if not pending:
                return
            job, record = data.draw(st.sampled_from(pending))
            expected = self.expect(record.leaf, record.request)
            if strict and self.ledger.pending.head(record.leaf) != job:
                expected = RefusalKind.ORDER
            policy = QueuePolicy.STRICT if strict else QueuePolicy.BEST_EFFORT
            decision = self.ledger.admit_pending(job, policy)
            self.check_decision(decision, expected)
            assert self.ledger.state(job) is (JobState.ADMITTED if decision.admitted else JobState.PENDING)

    def expect(self, leaf: str, request: dict[str, int]) -> RefusalKind | None:
        tree = self.ledger.tree()
        usages = self.ledger.usages(self.ledger.nodes())
        kind = expected_refusal(
            tree, usages, self.ledger.pending_counts(), leaf, request, wants=pending_wants(self.ledger)
        )
        return None if kind is None else RefusalKind(kind)

    def check_decision(self, decision: Decision, expected: RefusalKind | None) -> None:
        """Every decision is the one the rules give: no false admission, no spurious refusal."""
        assert decision.admitted is (expected is None), (decision, expected)
        if expected is not None:
            assert decision.refusal is not None
            assert decision.refusal.kind is expected, decision.reason

    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        jobs = sorted(self.accepted)
        if jobs:
            job = data.draw(st.sampled_from(jobs))
            assert self.ledger.release(job) in (JobState.ADMITTED, JobState.PENDING)
            assert self.ledger.release(job) is JobState.ABSENT
            self.accepted.discard(job)

    @rule(data=st.data())
    def requeue(self, data: st.DataObject) -> None:
        admitted = sorted(self.ledger.records())
        if admitted:
            job = data.draw(st.sampled_from(admitted))
            assert self.ledger.requeue(job)
            assert self.ledger.state(job) is JobState.PENDING

    @rule()
    def reapply_same_tree(self) -> None:
        tree = self.ledger.tree()
        if tree is not None:
            version = self.ledger.version()
            applied = self.ledger.apply(tree)
            assert (applied.version, applied.changed) == (version, False)

    @rule(tree=trees())
    def change_tree(self, tree: ElasticQuotaTree) -> None:
        version = self.ledger.version()
        try:
            applied = self.ledger.apply(tree, expected_version=version)
        except ApplyRefused:
            assert self.ledger.version() == version
        else:
            assert applied.version == version + (1 if applied.changed else 0)
            # A max lowered below use is applied (issue 33, req. 4): use may only fall there.
            self.lowered.update(over_max(self.ledger))

    @invariant()
    def invariants_hold(self) -> None:
        assert_invariants(self.ledger, self.lowered)
        states = {job: self.ledger.state(job) for job in self.accepted}
        assert JobState.ABSENT not in states.values(), "an accepted job was lost"


def test_ledger_invariants_after_every_step(redis_client: redis.Redis) -> None:
    LedgerMachine.client = redis_client
    run_state_machine_as_test(
        LedgerMachine,
        settings=settings(
            max_examples=20,
            stateful_step_count=40,
            deadline=None,
            # Shrinking a stateful run against Redis takes minutes (hypothesis allows itself
            # 300 s, the suite's timeout): a failure is reported with its unshrunk steps instead.
            phases=[Phase.explicit, Phase.reuse, Phase.generate],
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
