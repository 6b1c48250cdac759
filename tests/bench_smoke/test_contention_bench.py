"""The contention benchmark's workload and arithmetic, without running it (milliseconds).

The benchmark itself takes minutes (``bench/contention_bench.py``); what is checked here is what
the issue asks of its design and what its figures rest on: the tree is valid for the ledger,
its mins add up, the default workload has the size and spread asked for, every job is a valid
AscendJob that its leaf accepts, and the fairness and floor arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import redis

from bench import contention_bench as bench
from fleet.apiserver.validation import dns1035_label
from fleet.jobs import submit
from fleet.state import Objects
from fleet.workloads import adapter_for
from queues import Ledger, load


@pytest.fixture(params=bench.TREE_SHAPES)
def shape(request: pytest.FixtureRequest) -> Iterator[str]:
    bench.use_tree(request.param)
    yield request.param
    bench.use_tree("elastic")


@pytest.fixture
def tight() -> Iterator[None]:
    bench.use_tree("tight")
    yield
    bench.use_tree("elastic")


def test_the_tree_is_valid_and_its_mins_add_up(shape: str) -> None:
    tree, _ = load(bench.tree_document())  # raises on any error
    assert len(bench.GROUPS) >= 4
    assert len(bench.leaves()) >= 30
    assert len({len(g.leaves) for g in bench.GROUPS}) > 1  # uneven groups
    assert sum(g.min for g in bench.GROUPS) == bench.QUOTA
    for g in bench.GROUPS:
        assert sum(leaf.min for leaf in g.leaves) == g.min
        assert g.max > g.min
        assert all(g.leaf_max(leaf) > leaf.min for leaf in g.leaves)
        assert all(g.leaf_max(leaf) >= 32 for leaf in g.leaves)  # a 4x8 gang fits every leaf
    capacity = sum(bench.MEMBER_NODES) * bench.NODE_NPUS
    assert capacity == pytest.approx(1.25 * bench.QUOTA)
    assert tree.spec.root.max[bench.NPU] == bench.QUOTA


def test_the_default_workload() -> None:
    specs, window = bench.workload(bench.DEFAULT_JOBS, seed=16, burst=0.5, window=0.7, priority_mix=False)
    assert len(specs) == 10_000
    assert {s.cls for s in specs} == {c.name for c in bench.CLASSES}
    assert {s.leaf for s in specs} == {leaf.name for _, leaf in bench.leaves()}
    assert sum(1 for s in specs if s.arrival == 0.0) == 5_000
    assert max(s.arrival for s in specs) <= window
    assert [s.arrival for s in specs] == sorted(s.arrival for s in specs)
    assert all(2.0 <= s.duration <= 8.0 and s.priority == 0 for s in specs)
    assert all(dns1035_label(s.name) is None for s in specs)  # names a member accepts
    mixed, _ = bench.workload(1000, seed=16, burst=0.5, window=0.7, priority_mix=True)
    assert {s.priority for s in mixed} == {0, 10, 100}


def test_every_class_is_a_valid_job_its_leaf_accepts(fake_redis: redis.Redis) -> None:
    ledger, objects = Ledger(fake_redis), Objects(fake_redis)
    ledger.apply(load(bench.tree_document())[0])
    for i, cls in enumerate(bench.CLASSES):
        spec = bench.Spec(f"t{i}", "lab-rl", cls.name, cls.pods, cls.npus, 3.0, 10, 0.0)
        obj = bench.job_object(spec)
        assert adapter_for(obj).demand(obj).total(bench.NPU) == cls.total
        stored = submit(objects, ledger, obj)
        assert stored["metadata"]["annotations"][bench.DURATION] == "3.0"
    assert ledger.pending_counts()["lab-rl"] == len(bench.CLASSES)


def test_water_fill() -> None:
    assert bench.water_fill(10, [1, 1], [100, 100]) == [5, 5]
    assert bench.water_fill(10, [1, 1], [2, 100]) == [2, 8]
    assert bench.water_fill(10, [1, 3], [100, 100]) == [2.5, 7.5]
    assert bench.water_fill(10, [1, 1], [2, 3]) == [2, 3]  # what the caps allow, no more


def test_entitlements(tight: None) -> None:
    names = [leaf.name for _, leaf in bench.leaves()]
    idle = {name: 0 for name in names}
    # Every leaf with a backlog: each is entitled to its min (they add up to the quota).
    backlog = {name: [8] * 100 for name in names}
    fair = bench.entitlements(idle, idle, backlog)
    assert fair == {leaf.name: pytest.approx(leaf.min) for _, leaf in bench.leaves()}
    # One leaf waits alone: it may take its max, nobody else needs anything.
    alone = bench.entitlements(idle, idle, {"llm-pretrain": [32] * 100})
    assert alone["llm-pretrain"] == 256 and sum(alone.values()) == 256
    # A 32-NPU gang that cannot fit under its leaf's max is not held back by anyone.
    used = idle | {"llm-eval": 48}
    stuck = bench.entitlements(used, idle | {"llm-eval": 2}, {"llm-eval": [32]})
    assert stuck["llm-eval"] == 48


def test_an_elastic_tree_lets_a_leaf_waiting_alone_use_the_quota() -> None:
    names = [leaf.name for _, leaf in bench.leaves()]
    idle = {name: 0 for name in names}
    alone = bench.entitlements(idle, idle, {"llm-pretrain": [32] * 100})
    assert alone["llm-pretrain"] == bench.QUOTA
    # Max-jobs still caps: a research leaf takes 12 jobs' worth, whatever the quota.
    lab = bench.entitlements(idle, idle, {"lab-rl": [8] * 100})
    assert lab["lab-rl"] == 12 * 8


def test_floor(tight: None) -> None:
    specs = [
        bench.Spec("a", "llm-pretrain", "4x8", 4, 8, 4.0, 0, 0.0),
        bench.Spec("b", "lab-rl", "1x1", 1, 1, 6.0, 0, 10.0),
    ]
    bound = bench.floor(specs, {"b": 12.0})
    assert bound.quota == pytest.approx((32 * 4 + 6) / bench.QUOTA)
    assert bound.arrival == pytest.approx(18.0)
    assert bound.seconds == pytest.approx(18.0)


def test_a_leaf_emptying_for_its_own_head_counts_as_served_once_the_head_goes_first() -> None:
    """Whole jobs: asr-en (min 32, entitled to 32 with every leaf backlogged) holds 12 NPUs while
    its head, a 32-NPU gang, waits; only an empty leaf fits it within its share. Once the head has
    waited past the grace (it goes before the 1-NPU jobs behind it), the leaf is served; before,
    and for a leaf whose head is small, it is not."""
    nodes = bench.node_names()
    used = [0] * len(nodes)
    for _, leaf in bench.leaves():
        used[nodes.index(leaf.name)] = leaf.min
    used[nodes.index("asr-en")] = 12
    pending = [1] * len(nodes)
    jobs = [0] * len(nodes)
    waits = [bench.Wait(f"w-{leaf.name}", leaf.name, 8, 0.0, math.inf) for _, leaf in bench.leaves()]
    waits = [w for w in waits if w.leaf not in ("asr-en", "tts")]
    gang = bench.Wait("gang", "asr-en", 32, 0.0, math.inf)
    small = [bench.Wait(f"s{i}", "asr-en", 1, 1.0, math.inf) for i in range(4)]
    used[nodes.index("tts")] = 12  # tts: its head is a 1-NPU job, it is simply short of its share
    tts = [bench.Wait(f"t{i}", "tts", 1, 0.0, math.inf) for i in range(20)]

    def share(at: float, leaf: str) -> float:
        fair = bench.fairness([(at, used, jobs, pending)], nodes, [*waits, gang, *small, *tts])
        return fair.shares[leaf][0]

    assert share(10.0, "asr-en") == 1.0
    assert share(3.0, "asr-en") < 0.5  # 12 NPUs of about 32
    assert share(10.0, "tts") < 0.6  # 12 NPUs of about 24
    # Without the head rule (the measure of the earlier rows), the drain counts against the leaf.
    before = bench.fairness([(10.0, used, jobs, pending)], nodes, [*waits, gang, *small], head_grace=math.inf)
    assert before.shares["asr-en"][0] < 0.5
