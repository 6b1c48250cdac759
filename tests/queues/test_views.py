"""Derived queue views (queues.views) on a contended tree: every number exact, from one read.

The tree: the root guarantees 32 NPUs and 64 cores and caps them there; ``team-a`` (an inner
node: ``a1``, ``a2``), ``b`` and ``c`` share them. ``b`` borrows 12 NPUs beyond its ``min`` of 8,
which fills the root: ``team-a`` and ``c`` each find part of their unused guarantee taken.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from queues import Ledger, QueueView, format_views, job_wait, queue_views
from queues.quantity import MAX_JOBS
from queues.reasons import Refusal, RefusalKind
from tests.queues.support import make_tree

NPU = "huawei.com/Ascend910"
CPU = 1000  # one core in millicores
GI = 2**30


def node(name: str, npu_min: int, cpu_min: int, **rest: Any) -> dict[str, Any]:
    return {"name": name, "min": {NPU: npu_min, "cpu": cpu_min}, "max": {NPU: 32, "cpu": 64}, **rest}


CONTENDED = {
    "name": "root",
    "min": {NPU: 32, "cpu": 64},
    "max": {NPU: 32, "cpu": 64},
    "children": [
        node(
            "team-a",
            16,
            32,
            children=[node("a1", 8, 16, namespaces=["a1"]), node("a2", 8, 16, namespaces=["a2"])],
        ),
        node("b", 8, 16, namespaces=["b"]),
        node("c", 8, 16, namespaces=["c"]),
    ],
}


@pytest.fixture
def ledger(redis_client: redis.Redis) -> Ledger:
    return Ledger(redis_client)


def contend(ledger: Ledger) -> None:
    ledger.apply(make_tree(CONTENDED))
    # Memory is named by no node: it is used, never borrowed.
    assert ledger.admit("b/1", "b", {NPU: 20, "cpu": 8 * CPU, "memory": GI}).admitted
    assert ledger.admit("a1/1", "a1", {NPU: 8, "cpu": 16 * CPU}).admitted
    assert ledger.admit("c/1", "c", {NPU: 4, "cpu": 4 * CPU}).admitted
    ledger.enqueue("a2/low", "a2", {NPU: 8}, priority=0)
    ledger.enqueue("a2/high", "a2", {NPU: 8}, priority=5)
    ledger.enqueue("a2/low-2", "a2", {NPU: 8}, priority=0)
    ledger.enqueue("c/2", "c", {NPU: 2})
    ledger.enqueue("b/huge", "b", {NPU: 40})


def test_views_on_a_contended_tree_are_exact(ledger: Ledger) -> None:
    contend(ledger)
    views = {v.name: v for v in queue_views(ledger)}
    assert list(views) == ["root", "root-team-a", "root-team-a-a1", "root-team-a-a2", "root-b", "root-c"]

    def numbers(v: QueueView) -> tuple[Any, ...]:
        return (v.used, v.admitted, v.waiting, v.borrowed, v.lent, round(v.share, 6), v.below_min)

    assert numbers(views["root"]) == (
        {NPU: 32, "cpu": 28 * CPU, "memory": GI},
        3,
        5,
        {},  # nothing above the root to borrow from
        {},
        1.0,  # all its NPUs, though not all its cores
        True,
    )
    # b: 20 of its 8 NPUs (dominant share 2.5), yet below its min of cpu: served first anyway.
    assert numbers(views["root-b"]) == (
        {NPU: 20, "cpu": 8 * CPU, "memory": GI},
        1,
        1,
        {NPU: 12},
        {},
        2.5,
        True,
    )
    # The root is full: what team-a and c do not use of their guarantee, b uses (8 + 4 = 12).
    assert numbers(views["root-team-a"]) == ({NPU: 8, "cpu": 16 * CPU}, 1, 3, {}, {NPU: 8}, 0.5, True)
    assert numbers(views["root-c"]) == ({NPU: 4, "cpu": 4 * CPU}, 1, 1, {}, {NPU: 4}, 0.5, True)
    assert numbers(views["root-team-a-a1"]) == ({NPU: 8, "cpu": 16 * CPU}, 1, 0, {}, {}, 1.0, False)
    # a2's 8 are part of team-a's 8: lent amounts overlap down a chain and are not summed.
    assert numbers(views["root-team-a-a2"]) == ({}, 0, 3, {}, {NPU: 8}, 0.0, True)
    assert views["root-team-a-a2"].pending == 3  # the first name of ``waiting``
    assert views["root-team-a"].path == "root/team-a"
    assert views["root-team-a"].min == {NPU: 16, "cpu": 32 * CPU}
    # The planner's own numbers, which these are.
    snapshot = ledger.snapshot()
    for name in ("b", "c", "team-a", "a1", "a2"):
        view = next(v for v in views.values() if v.path.endswith("/" + name))
        assert view.share == snapshot.share(name)
        assert view.below_min == snapshot.below_min(name)


def test_lent_is_what_the_ancestors_headroom_lacks(ledger: Ledger) -> None:
    """Three idle-or-not siblings of min 4 under a max of 12 (the docstring's example)."""
    ledger.apply(
        make_tree(
            {
                "name": "root",
                "min": {"cpu": 12},
                "max": {"cpu": 12},
                "children": [
                    {"name": x, "min": {"cpu": 4}, "max": {"cpu": 12}, "namespaces": [x]}
                    for x in ("a", "b", "c")
                ],
            }
        )
    )
    assert ledger.admit("c/1", "c", {"cpu": 8 * CPU}).admitted

    def lent_borrowed() -> dict[str, tuple[dict[str, int], dict[str, int]]]:
        return {v.name: (v.lent, v.borrowed) for v in queue_views(ledger)}

    # c borrows 4; a or b could still take its 4 alone: neither lends anything yet.
    assert lent_borrowed() == {
        "root": ({}, {}),
        "root-a": ({}, {}),
        "root-b": ({}, {}),
        "root-c": ({}, {"cpu": 4 * CPU}),
    }
    assert ledger.admit("a/1", "a", {"cpu": 2 * CPU}).admitted
    assert lent_borrowed()["root-b"] == ({"cpu": 2 * CPU}, {})
    assert lent_borrowed()["root-a"] == ({}, {})  # 2 idle, 2 free: a could take them


def test_without_a_tree_there_is_the_implicit_root(ledger: Ledger) -> None:
    ledger.admit("j", "root", {"cpu": CPU})
    ledger.enqueue("k", "root", {"cpu": CPU})
    [root] = queue_views(ledger)
    assert (root.name, root.path, root.used, root.admitted, root.waiting) == (
        "root",
        "root",
        {"cpu": CPU},
        1,
        1,
    )
    assert (root.borrowed, root.lent, root.share, root.below_min) == ({}, {}, 0.0, False)
    assert (root.min, root.max) == ({}, {})


def test_limits_show_as_written_unlimited_ones_included(ledger: Ledger) -> None:
    tree = {
        "name": "root",
        "max": {"cpu": 10, MAX_JOBS: 10_000_000_000},
        "children": [{"name": "a", "max": {MAX_JOBS: 1}, "namespaces": ["a"]}],
    }
    ledger.apply(make_tree(tree))
    ledger.admit("a/1", "a", {"cpu": CPU})
    root, a = queue_views(ledger)
    assert root.max == {"cpu": 10 * CPU, MAX_JOBS: 10_000_000_000}
    # No min: measured against the max; a's one job of one is its dominant share.
    assert (round(root.share, 6), a.share, a.borrowed) == (0.1, 1.0, {"cpu": CPU})


def test_the_table_shows_every_column_readably(ledger: Ledger) -> None:
    contend(ledger)
    lines = format_views(queue_views(ledger)).splitlines()
    assert lines[0].split() == [
        "NAME",
        "MIN",
        "MAX",
        "USED",
        "BORROWED",
        "LENT",
        "SHARE",
        "BELOW-MIN",
        "ADMITTED",
        "WAITING",
    ]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["root-b"] == [
        "root-b",
        f"cpu=16,{NPU}=8",
        f"cpu=64,{NPU}=32",
        f"cpu=8,{NPU}=20,memory=1Gi",
        f"{NPU}=12",
        "-",
        "2.50",
        "true",
        "1",
        "1",
    ]
    assert rows["root-team-a"][4:] == ["-", f"{NPU}=8", "0.50", "true", "1", "3"]


def test_queue_views_read_the_ledger_once(real_redis: redis.Redis, round_trips: list[int]) -> None:
    ledger = Ledger(real_redis)
    contend(ledger)
    queue_views(ledger)  # the ledger parses the tree once per version
    before = round_trips[0]
    queue_views(ledger)
    assert round_trips[0] - before == 1


# --- one waiting job ------------------------------------------------------------------------------


def test_a_waiting_job_knows_its_place_and_its_exact_blocker(ledger: Ledger) -> None:
    contend(ledger)
    high, low, low2 = (job_wait(ledger, j) for j in ("a2/high", "a2/low", "a2/low-2"))
    assert high is not None and low is not None and low2 is not None
    assert [w.where for w in (high, low, low2)] == [
        "1 of 3 in queue root-team-a-a2",
        "2 of 3 in queue root-team-a-a2",
        "3 of 3 in queue root-team-a-a2",
    ]
    assert high.refusal == Refusal(RefusalKind.MAX, "root", NPU, 32, 8, 32)
    assert (
        high.blocker("queued in root-team-a-a2") == f"quota root: {NPU} 32 used + 8 requested exceeds max 32"
    )
    huge = job_wait(ledger, "b/huge")
    # The ledger's figures: what root/b uses now (its admitted jobs), not an empty tree's 0.
    assert huge is not None and huge.never == Refusal(RefusalKind.MAX, "root/b", NPU, 20, 40, 32)
    assert huge.blocker("x") == (
        f"can never be admitted: quota root/b: {NPU} 20 used + 40 requested exceeds max 32; "
        "it waits for the tree to change"
    )
    # Not pending: admitted or unknown.
    assert job_wait(ledger, "b/1") is None
    assert job_wait(ledger, "nobody/nothing") is None


def test_the_blocker_names_a_starving_sibling_or_says_the_quota_admits_it(ledger: Ledger) -> None:
    ledger.apply(
        make_tree(
            {
                "name": "root",
                "min": {"cpu": 10},
                "max": {"cpu": 10},
                "children": [
                    {"name": x, "min": {"cpu": 5}, "max": {"cpu": 10}, "namespaces": [x]} for x in ("a", "b")
                ],
            }
        )
    )
    ledger.enqueue("a/fits", "a", {"cpu": CPU})
    fits = job_wait(ledger, "a/fits")
    assert fits is not None and fits.refusal is None and fits.never is None
    assert (
        fits.blocker("queued in root-a")
        == "quota admits it; waiting for capacity or its turn: queued in root-a"
    )
    assert fits.blocker("") == "quota admits it; waiting for capacity or its turn"
    assert ledger.admit_pending("a/fits").admitted
    assert ledger.admit("a/2", "a", {"cpu": 4 * CPU}).admitted
    ledger.enqueue("b/1", "b", {"cpu": 5 * CPU})  # b is owed its whole unused min: its job asks it
    ledger.enqueue("a/3", "a", {"cpu": CPU})
    wait = job_wait(ledger, "a/3")
    assert wait is not None and wait.refusal is not None and wait.refusal.kind is RefusalKind.MIN
    assert wait.blocker("") == (
        "quota root/a: cpu 5 used + 1 requested exceeds min 5 while root/b, below its min "
        "(0 of 5 used), has 1 pending job"
    )
    # The admission script gives the same refusal.
    assert ledger.admit_pending("a/3").refusal == wait.refusal


def test_a_waiting_job_costs_three_round_trips(real_redis: redis.Redis, round_trips: list[int]) -> None:
    ledger = Ledger(real_redis)
    contend(ledger)
    job_wait(ledger, "c/2")  # the ledger learns the node names once per tree
    before = round_trips[0]
    wait = job_wait(ledger, "c/2")
    assert round_trips[0] - before == 3
    assert wait is not None and wait.where == "1 of 1 in queue root-c"
