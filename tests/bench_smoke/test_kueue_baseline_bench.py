"""The Kueue baseline benchmark's workload and arithmetic, without running it (milliseconds).

The benchmark itself runs the roles for minutes (``bench/kueue_baseline_bench.py``); what is
checked here is that its plan is Kueue's ``test/performance/scheduler/configs/baseline/
generator.yaml`` (5 cohorts of 6 ClusterQueues, nominal quota 20 and borrowing limit 100, 350 /
100 / 50 workloads of 1 / 5 / 20 units running 0.2 / 0.5 / 1 s, one every 100 / 500 / 1,200 ms
per queue, priorities 50 / 100 / 200), mapped to an ElasticQuotaTree the ledger accepts, and the
floor arithmetic.
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import pytest
import redis

from bench import kueue_baseline_bench as bench
from bench.contention_bench import ADMITTED, DURATION, NPU, PRIORITY
from fleet.apiserver.validation import dns1035_label
from fleet.jobs import submit
from fleet.sim.topology import Topology
from fleet.state import Objects
from fleet.workloads import adapter_for
from queues import Ledger, load

#: generator.yaml's workload sets: class -> (count, creationIntervalMs, runtimeMs, priority, request).
KUEUE_SETS = {
    "small": (350, 100, 200, 50, 1),
    "medium": (100, 500, 500, 100, 5),
    "large": (50, 1200, 1000, 200, 20),
}


def test_the_classes_are_kueues() -> None:
    assert {k.name: (k.count, k.interval_ms, k.runtime_ms, k.priority, k.npus) for k in bench.CLASSES} == (
        KUEUE_SETS
    )
    assert (bench.COHORTS, bench.QUEUES_PER_COHORT, bench.NOMINAL, bench.BORROWING_LIMIT) == (5, 6, 20, 100)


def test_the_tree_maps_cohorts_to_groups_and_queues_to_leaves() -> None:
    tree, _ = load(bench.tree_document())  # raises on any error
    root = tree.spec.root
    assert root.min[NPU] == root.max[NPU] == 600 == bench.QUOTA
    assert [g.name for g in root.children] == [f"cohort-{c}" for c in range(5)]
    for c, group in enumerate(root.children):
        # A cohort lends nothing outside itself: its max is its queues' nominal quota.
        assert group.min[NPU] == group.max[NPU] == 120
        assert len(group.children) == 6
        for q, leaf in enumerate(group.children):
            assert leaf.name == f"cq-0-{q}-cohort-{c}"  # Kueue's ClusterQueue name
            assert leaf.min[NPU] == 20  # nominalQuota
            assert leaf.max[NPU] == 120  # nominalQuota + borrowingLimit
            assert list(leaf.namespaces) == [leaf.name]


def test_the_plan_has_kueues_counts_and_arrivals() -> None:
    specs = bench.workload()
    assert len(specs) == 15_000
    assert len({s.key for s in specs}) == len({s.name for s in specs}) == 15_000
    assert all(dns1035_label(s.name) is None for s in specs)
    per_queue = Counter(s.leaf for s in specs)
    assert len(per_queue) == 30 and set(per_queue.values()) == {500}
    cohort_of = dict((leaf, cohort) for cohort, leaf in bench.queues())
    assert set(Counter(cohort_of[s.leaf] for s in specs).values()) == {3000}
    assert Counter(s.cls for s in specs) == {"small": 10_500, "medium": 3_000, "large": 1_500}
    assert [s.arrival for s in specs] == sorted(s.arrival for s in specs)
    for leaf in per_queue:
        for name, (count, interval, runtime, priority, npus) in KUEUE_SETS.items():
            mine = [s for s in specs if s.leaf == leaf and s.cls == name]
            assert len(mine) == count
            assert {(s.pods, s.npus, s.duration, s.priority) for s in mine} == {
                (1, npus, runtime / 1000, priority)
            }
            # The k-th is due k x interval after the start, counted from the first due (100 ms).
            assert mine[0].arrival == pytest.approx((interval - 100) / 1000)
            assert all(b.arrival - a.arrival == pytest.approx(interval / 1000) for a, b in pairwise(mine))
    assert max(s.arrival for s in specs) == pytest.approx(59.9)


def test_scale_shrinks_every_set() -> None:
    specs = bench.workload(0.1)
    assert Counter(s.cls for s in specs) == {"small": 1050, "medium": 300, "large": 150}
    assert max(s.arrival for s in specs) == pytest.approx(5.9)


def test_the_floor() -> None:
    specs = bench.workload()
    bound = bench.floor(specs)
    assert bound.plain == pytest.approx(66.0)  # 39,600 NPU-seconds over 600; 7,920 over 120 per cohort
    assert bound.arrival == pytest.approx(60.9)  # the last large job: due at 59.9 s, runs 1 s
    # Until the first large job (1.1 s) a cohort receives 6 x (11 x 0.2 + 2 x 2.5) NPU-seconds.
    assert bound.quota == pytest.approx(1.1 + (7920 - 6 * (11 * 0.2 + 2 * 2.5)) / 120)
    assert bound.quota_node.startswith("cohort-")
    assert bound.seconds == bound.quota
    # A late submission moves the arrival bound, and the quota bound of the work after it.
    last = specs[-1]
    late = bench.floor(specs, {last.key: 100.0})
    assert late.arrival == pytest.approx(100.0 + last.duration)
    assert late.quota == pytest.approx(
        100.0 + last.total * last.duration / 120
    )  # alone, within its leaf's max
    assert bench.floor(specs, {last.key: 100.0}).seconds == pytest.approx(101.0)


def test_the_quota_binds_not_capacity() -> None:
    topology = Topology.model_validate(bench.topology())
    nodes = [(pool.allocatable[NPU], pool) for m in topology.members for pool in m.node_pools]
    capacity = sum(int(npus) * pool.count for npus, pool in nodes)
    assert capacity == 2 * bench.QUOTA
    assert all(int(npus) >= 20 and "accelerator-type" not in pool.labels for npus, pool in nodes)


def test_every_class_is_a_valid_job_its_leaf_accepts(fake_redis: redis.Redis) -> None:
    ledger, objects = Ledger(fake_redis), Objects(fake_redis)
    ledger.apply(load(bench.tree_document())[0])
    leaf = "cq-0-3-cohort-2"
    for k in bench.CLASSES:
        spec = next(s for s in bench.workload(0.01) if s.leaf == leaf and s.cls == k.name)
        obj = bench.job_object(spec)
        assert adapter_for(obj).demand(obj).total(NPU) == k.npus
        stored = submit(objects, ledger, obj)
        annotations = stored["metadata"]["annotations"]
        assert float(annotations[DURATION]) == k.runtime_ms / 1000
        assert annotations[PRIORITY] == str(k.priority)
    assert ledger.pending_counts()[leaf] == 3


def test_each_client_takes_whole_queues_in_order() -> None:
    specs = bench.workload(0.1)
    parts = bench._clients(specs, 6)
    assert len(parts) == 6 and sum(len(p) for p in parts) == len(specs)
    owner = {s.leaf: i for i, part in enumerate(parts) for s in part}
    assert all(owner[s.leaf] == i for i, part in enumerate(parts) for s in part)
    assert all([s.arrival for s in part] == sorted(s.arrival for s in part) for part in parts)


def test_running_mean() -> None:
    intervals = [(0.0, 10.0, 20), (5.0, 15.0, 5), (20.0, 30.0, 1)]
    assert bench.running_mean(intervals, 0.0, 10.0) == pytest.approx((200 + 25) / 10)
    assert bench.running_mean(intervals, 10.0, 20.0) == pytest.approx(25 / 10)
    assert bench.running_mean(intervals, 5.0, 5.0) == 0.0


def test_admitted_to_copy_is_measured_per_attempt() -> None:
    """A job preempted while Admitted, before its copy, is admitted again later: each attempt's
    wait for its copy counts from its own admission, not the whole wait in the queue between."""
    preempted_before_its_copy = [
        ("Queued", 0.0),
        (ADMITTED, 1.0),
        ("Queued", 1.5),
        (ADMITTED, 40.0),
        ("Dispatched", 40.25),
        ("Running", 40.5),
        ("Succeeded", 41.0),
    ]
    assert bench.admitted_to_copy(preempted_before_its_copy) == [0.25]
    ran_twice = [
        (ADMITTED, 1.0),
        ("Dispatched", 1.5),
        ("Running", 2.0),
        ("Queued", 3.0),
        (ADMITTED, 9.0),
        ("Dispatched", 9.125),
    ]
    assert bench.admitted_to_copy(ran_twice) == [0.5, 0.125]
    assert bench.admitted_to_copy([(ADMITTED, 1.0), ("Running", 2.0)]) == []
