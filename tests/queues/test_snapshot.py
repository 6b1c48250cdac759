"""The in-memory model of the tree (queues.snapshot) against the authority (the Lua scripts).

On random trees, queues, admissions, releases and requeues: the model's refusal for a job is the
one the admission script then gives, field for field; a model advanced in memory by the same
steps equals a fresh read of the ledger; the class index and running index agree with the job
records (the rebuild script finds no drift).
"""

from __future__ import annotations

import hypothesis.strategies as st
import redis
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from queues import ElasticQuotaTree, JobState, Ledger
from queues.heads import HeadCache, class_request
from queues.snapshot import Snapshot
from tests.queues.support import make_tree
from tests.queues.test_ledger_stateful import requests, trees


def same_state(a: Snapshot, b: Snapshot) -> None:
    assert set(a.nodes) == set(b.nodes)
    for name, node in a.nodes.items():
        other = b.nodes[name]
        mine = (node.used, node.pending, node.want, node.kids, node.due)
        assert mine == (other.used, other.pending, other.want, other.kids, other.due), name


class ModelMachine(RuleBasedStateMachine):
    client: redis.Redis

    def __init__(self) -> None:
        super().__init__()
        self.client.flushall()
        self.ledger = Ledger(self.client)
        self.model = self.ledger.snapshot()
        self.serial = 0
        self.cache = HeadCache()

    @initialize(tree=st.none() | trees())
    def first_tree(self, tree: ElasticQuotaTree | None) -> None:
        if tree is not None:
            self.ledger.apply(tree)
        self.model = self.ledger.snapshot()

    @rule(data=st.data(), request=requests, priority=st.integers(-2, 2))
    def enqueue(self, data: st.DataObject, request: dict[str, int], priority: int) -> None:
        leaf = data.draw(st.sampled_from(self.model.leaves()))
        self.serial += 1
        assert self.ledger.enqueue(f"ns/j{self.serial}", leaf, request, priority) is JobState.ABSENT
        self.model.enqueue(leaf, request)

    @rule(data=st.data())
    def admit(self, data: st.DataObject) -> None:
        pending = sorted(self.ledger.pending.records().items())
        if not pending:
            return
        job, record = data.draw(st.sampled_from(pending))
        predicted = self.model.check(record.leaf, record.request)
        [decision] = self.ledger.admit_pending_many([job])
        assert decision.refusal == predicted, (decision, predicted)
        if decision.admitted:
            self.model.admit(record.leaf, record.request)

    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        admitted = sorted(self.ledger.records().items())
        if not admitted:
            return
        job, record = data.draw(st.sampled_from(admitted))
        self.ledger.release(job)
        self.model.release(record.leaf, record.request)

    @rule(data=st.data())
    def requeue(self, data: st.DataObject) -> None:
        admitted = sorted(self.ledger.records().items())
        if not admitted:
            return
        job, record = data.draw(st.sampled_from(admitted))
        assert self.ledger.requeue(job)
        self.model.release(record.leaf, record.request, to_queue=True)

    @rule(data=st.data())
    def drain_a_node(self, data: st.DataObject) -> None:
        """``Snapshot.drained(node)`` is the ledger once every job under the node has ended."""
        name = data.draw(st.sampled_from(sorted(self.model.nodes)))
        expected = self.ledger.snapshot().drained(name)
        under = {n for n, node in self.model.nodes.items() if name in node.chain}
        for job, record in sorted(self.ledger.records().items()):
            if record.leaf in under:
                self.ledger.release(job)
                self.model.release(record.leaf, record.request)
        same_state(expected, self.ledger.snapshot())

    @invariant()
    def model_is_the_ledger(self) -> None:
        same_state(self.model, self.ledger.snapshot())
        assert self.ledger.rebuild() == []

    @invariant()
    def kept_heads_are_the_heads(self) -> None:
        """Heads kept across steps and read again only where a leaf's queue version moved are
        the heads read afresh."""
        leaves = self.model.leaves()
        snap = self.ledger.snapshot()
        kept = self.cache.heads(leaves, snap.queue_versions, lambda stale: self.ledger.class_heads(stale, 3))
        fresh = self.ledger.class_heads(leaves, 3)
        assert {leaf: kept[leaf] for leaf in fresh} == fresh
        assert all(kept[leaf] == [] for leaf in leaves if leaf not in fresh)

    @invariant()
    def class_heads_are_the_queue(self) -> None:
        """Each leaf's head is the least of its class heads, and every class's request is the
        governed part of its jobs' requests."""
        leaves = self.model.leaves()
        heads = self.ledger.class_heads(leaves, count=3)
        for leaf in leaves:
            classes = heads.get(leaf, [])
            firsts = [c.heads[0] for c in classes if c.heads]
            head = self.ledger.pending.head(leaf)
            assert (min(firsts).job if firsts else None) == head
            assert sum(c.pending for c in classes) == self.ledger.pending.length(leaf)
            for c in classes:
                for h in c.heads:
                    record = self.ledger.pending.record(h.job)
                    assert record is not None and record.priority == h.priority
                    governed = {r: a for r, a in record.request.items() if a and r in self.model.governed}
                    assert class_request(c.cls) == governed


def test_model_decides_as_the_scripts(redis_client: redis.Redis) -> None:
    ModelMachine.client = redis_client
    run_state_machine_as_test(
        ModelMachine,
        settings=settings(
            max_examples=25,
            stateful_step_count=40,
            deadline=None,
            phases=[Phase.explicit, Phase.reuse, Phase.generate],
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


def test_running_jobs_most_recent_first(redis_client: redis.Redis) -> None:
    redis_client.flushall()
    ledger = Ledger(redis_client)
    for i in range(4):
        ledger.enqueue(f"ns/j{i}", "root", {"cpu": 1000 * (i + 1)}, priority=i % 2)
    ledger.admit_pending_many(["ns/j2", "ns/j0", "ns/j3"])
    running = ledger.running_jobs(["root"])["root"]
    assert [r.job for r in running] == ["ns/j3", "ns/j0", "ns/j2"]
    assert [r.priority for r in running] == [1, 0, 0]
    assert running[0].request == {"cpu": 4000}
    ledger.requeue("ns/j0")
    ledger.release("ns/j3")
    assert [r.job for r in ledger.running_jobs(["root"])["root"]] == ["ns/j2"]
    assert ledger.rebuild() == []


def test_position_in_leaf(redis_client: redis.Redis) -> None:
    redis_client.flushall()
    ledger = Ledger(redis_client)
    for i in range(3):
        ledger.enqueue(f"ns/j{i}", "root", {"cpu": 1}, priority=0)
    ledger.enqueue("ns/urgent", "root", {"cpu": 1}, priority=5)
    assert ledger.position("ns/urgent") == (1, 4)
    assert ledger.position("ns/j2") == (4, 4)
    assert ledger.position("ns/absent") is None


def test_fair_shares_give_each_node_its_guarantee_then_what_others_leave(redis_client: redis.Redis) -> None:
    """The root's max water-filled down by min, capped by what each node holds plus what its
    waiting jobs could take: a team that wants little gets what it wants, the rest is shared by
    guarantee, and no team is given more than its max lets it use."""
    npu = "huawei.com/Ascend910"

    def leaf(name: str, low: int, high: int) -> dict[str, object]:
        return {"name": name, "min": {npu: low}, "max": {npu: high}, "namespaces": [name]}

    ledger = Ledger(redis_client)
    tree: dict[str, object] = {"name": "root", "min": {npu: 100}, "max": {npu: 100}}
    tree["children"] = [leaf("small", 20, 100), leaf("big", 70, 100), leaf("capped", 10, 10)]
    ledger.apply(make_tree(tree))
    ledger.enqueue("small/one", "small", {npu: 5}, 0)
    for i in range(20):
        ledger.enqueue(f"big/j{i}", "big", {npu: 8}, 0)
        ledger.enqueue(f"capped/j{i}", "capped", {npu: 8}, 0)
    fair = ledger.snapshot().fair_shares()
    # small wants 5; capped can hold 10 at most; big takes the rest (100 - 5 - 10).
    assert fair["small"][npu] == 5 and fair["capped"][npu] == 10 and fair["big"][npu] == 85
    assert fair["root"][npu] == 100


def test_an_inner_node_holding_jobs_queued_on_it_is_a_queue_to_look_at(redis_client: redis.Redis) -> None:
    """Jobs queued on the implicit root before the first tree, or on a leaf a tree change then
    gave children, are scheduled from where they wait."""
    redis_client.flushall()
    ledger = Ledger(redis_client)
    ledger.enqueue("ns/early", "root", {"huawei.com/Ascend910": 1}, 0)
    ledger.apply(
        make_tree(
            {
                "name": "root",
                "max": {"huawei.com/Ascend910": 8},
                "children": [{"name": "a", "max": {"huawei.com/Ascend910": 8}, "namespaces": ["a"]}],
            }
        )
    )
    ledger.enqueue("a/late", "a", {"huawei.com/Ascend910": 1}, 0)
    snap = ledger.snapshot()
    assert snap.leaves() == ["a"] and snap.queues() == ["root", "a"]
    assert [c.heads[0].job for c in ledger.class_heads(snap.queues())["root"]] == ["ns/early"]
