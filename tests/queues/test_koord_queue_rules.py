"""koord-queue's quota tree rules, rule by rule, on trees written as koord-queue's users write
them (dotted node names, ``koord-queue/max-jobs`` and ``kube-queue/max-jobs`` in ``min`` and
``max``, a parent that caps its children's job count). Source: koordinator-sh/koord-queue,
``pkg/framework/plugins/elasticquota/elasticquotatree/elasticquota.go`` (``UsedOverMaxWithOverSell``,
``ParentUsedOverMaxWithOverSell``, ``UsedOverMinWithOverSell``, ``ParentUsedOverMinWithOverSell``)
and ``elastic_quota_tree.go`` (``Filter``); docs/koord-queue.md says where Fleet matches each rule
and where (and why) it differs."""

from __future__ import annotations

import re
from typing import Any

import pytest
import redis

from queues import Ledger, load
from tests.queues.support import assert_invariants, tree_doc

CPU = 1000  # one core in millicores
NPU = "huawei.com/Ascend910"


@pytest.fixture
def ledger(redis_client: redis.Redis) -> Ledger:
    return Ledger(redis_client)


def koord_tree(**overrides: Any) -> dict[str, Any]:
    """A platform team's tree as ack-kube-queue users write it: ``root.algo`` groups two teams
    and caps their running jobs together; each team has its own job limit."""
    algo_max: dict[str, Any] = {"cpu": "40", NPU: "32", "kube-queue/max-jobs": "3"}
    algo_max.update(overrides.get("algo_max", {}))
    return {
        "name": "root",
        "min": {"cpu": "100", NPU: "64", "kube-queue/max-jobs": "10"},
        "max": {"cpu": "100", NPU: "64"},
        "children": [
            {
                "name": "root.algo",
                "min": {"cpu": "40", NPU: "32", "kube-queue/max-jobs": "2"},
                "max": algo_max,
                "children": [
                    {
                        "name": "root.algo.nlp",
                        "min": {"cpu": "20", NPU: "16", "koord-queue/max-jobs": "1"},
                        "max": {"cpu": "40", NPU: "32", "koord-queue/max-jobs": "2"},
                        "namespaces": ["nlp"],
                    },
                    {
                        "name": "root.algo.cv",
                        "min": {"cpu": "20", NPU: "16"},
                        "max": {"cpu": "40", NPU: "32", "koord-queue/max-jobs": "2"},
                        "namespaces": ["cv"],
                    },
                ],
            },
            {
                "name": "root.infer",
                "min": {"cpu": "60", NPU: "32"},
                "max": {"cpu": "60", NPU: "32"},
                "namespaces": ["infer"],
            },
        ],
    }


def apply(ledger: Ledger, root: dict[str, Any]) -> None:
    tree, _ = load(tree_doc(root))
    ledger.apply(tree)


def test_max_jobs_on_a_leaf_s_max_caps_its_running_jobs(ledger: Ledger) -> None:
    """``UsedOverMaxWithOverSell``: a job is refused when count + 1 > max-jobs (rate 1)."""
    apply(ledger, koord_tree())
    assert ledger.admit("nlp-1", "root.algo.nlp", {"cpu": CPU}).admitted
    assert ledger.admit("nlp-2", "root.algo.nlp", {"cpu": CPU}).admitted
    refused = ledger.admit("nlp-3", "root.algo.nlp", {"cpu": CPU})
    assert refused.reason == "quota root/root.algo/root.algo.nlp: kube-queue/max-jobs 2/2 in use"
    assert_invariants(ledger)


def test_max_jobs_on_a_parent_caps_its_children_together(ledger: Ledger) -> None:
    """``ParentUsedOverMaxWithOverSell``: each ancestor's max-jobs against its subtree's count."""
    apply(ledger, koord_tree())
    assert ledger.admit("nlp-1", "root.algo.nlp", {"cpu": CPU}).admitted
    assert ledger.admit("nlp-2", "root.algo.nlp", {"cpu": CPU}).admitted
    assert ledger.admit("cv-1", "root.algo.cv", {"cpu": CPU}).admitted
    refused = ledger.admit("cv-2", "root.algo.cv", {"cpu": CPU})  # cv has room; root.algo has not
    assert refused.reason == "quota root/root.algo: kube-queue/max-jobs 3/3 in use"
    assert ledger.admit("infer-1", "root.infer", {"cpu": CPU}).admitted  # another subtree
    assert_invariants(ledger)


def test_resources_are_checked_up_the_parent_chain(ledger: Ledger) -> None:
    """``ParentUsedOverMaxWithOverSell``: request + the parent's use against the parent's max."""
    apply(ledger, koord_tree())
    assert ledger.admit("nlp-1", "root.algo.nlp", {NPU: 24}).admitted
    refused = ledger.admit("cv-1", "root.algo.cv", {NPU: 16})  # cv's max 32 holds; root.algo's 32 not
    assert refused.reason == f"quota root/root.algo: {NPU} 24 used + 16 requested exceeds max 32"
    assert ledger.admit("cv-1", "root.algo.cv", {NPU: 8}).admitted
    assert_invariants(ledger)


def test_a_max_jobs_in_min_is_a_guarantee_not_a_cap(ledger: Ledger) -> None:
    """koord-queue caps a *non-preemptible* job at ``min`` (``UsedOverMinWithOverSell``: count + 1 >
    min max-jobs refuses it) and lets only preemptible jobs run up to ``max``. Fleet has no
    preemptible/non-preemptible split: a job beyond its leaf's min borrows up to max and may be
    reclaimed (docs/koord-queue.md). So nlp's second job runs (its max-jobs is 2)."""
    apply(ledger, koord_tree())
    assert ledger.admit("nlp-1", "root.algo.nlp", {"cpu": CPU}).admitted
    assert ledger.admit("nlp-2", "root.algo.nlp", {"cpu": CPU}).admitted
    assert ledger.usage("root.algo.nlp")["kube-queue/max-jobs"] == 2
    assert_invariants(ledger)


def test_an_unlimited_max_jobs_as_koord_queue_writes_it_limits_nothing(ledger: Ledger) -> None:
    """koord-queue skips a limit at or above MaxInt32 (``v < math.MaxInt32``)."""
    apply(ledger, koord_tree(algo_max={"kube-queue/max-jobs": str(2**31 - 1)}))
    for i in range(4):
        leaf = "root.algo.nlp" if i < 2 else "root.algo.cv"
        assert ledger.admit(f"j-{i}", leaf, {"cpu": CPU}).admitted
    assert_invariants(ledger)


def test_a_leaf_s_min_max_jobs_needs_its_ancestors_to_guarantee_it(ledger: Ledger) -> None:
    """koord-queue reads each node's ``min`` on its own; Fleet keeps a min a guarantee every
    ancestor can honour, so children's min may not sum above their parent's, max-jobs included
    (docs/koord-queue.md): the leaf-only spelling is refused, naming the node and resource."""
    root = koord_tree()
    del root["min"]["kube-queue/max-jobs"]
    del root["children"][0]["min"]["kube-queue/max-jobs"]
    why = re.escape("root/root.algo: children's min.kube-queue/max-jobs sum 1 exceeds")
    with pytest.raises(ValueError, match=why):
        apply(ledger, root)
