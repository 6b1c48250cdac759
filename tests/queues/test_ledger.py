"""The quota ledger's behaviour, on fakeredis and on a real redis-server (same Lua, same answers)."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from redis.crc import key_slot

from queues import (
    ApplyRefused,
    InvalidRequest,
    JobState,
    Ledger,
    LedgerError,
    QueuePolicy,
    UnboundJob,
    VersionConflict,
    format_views,
    leaf_in,
    queue_views,
)
from queues.heads import ClassHeads, HeadCache
from queues.quantity import MAX_JOBS, MAX_JOBS_UNLIMITED, UNLIMITED
from tests.queues.support import assert_invariants, make_tree

CPU = 1000  # one core in millicores


@pytest.fixture
def ledger(redis_client: redis.Redis) -> Ledger:
    return Ledger(redis_client)


def two_teams(root_cpu: int = 10, a_max: int = 10, b_max: int = 10, **extra: object) -> dict[str, Any]:
    return {
        "name": "root",
        "min": {"cpu": root_cpu},
        "max": {"cpu": root_cpu, **extra},
        "children": [
            {"name": "a", "min": {"cpu": 5}, "max": {"cpu": a_max}, "namespaces": ["team-a"]},
            {"name": "b", "min": {"cpu": 5}, "max": {"cpu": b_max}, "namespaces": ["team-b"]},
        ],
    }


def test_without_a_tree_admission_is_unlimited_and_order_holds(ledger: Ledger) -> None:
    assert leaf_in(ledger.tree(), "anything") == "root"
    assert ledger.admit("huge", "root", {"cpu": 10**9 * CPU}).admitted
    ledger.enqueue("low", "root", {"cpu": CPU}, priority=1)
    ledger.enqueue("high", "root", {"cpu": CPU}, priority=9)
    ledger.enqueue("low-2", "root", {"cpu": CPU}, priority=1)
    assert ledger.pending.peek("root", 10) == ["high", "low", "low-2"]
    with pytest.raises(LedgerError, match="no ElasticQuotaTree is applied"):
        ledger.enqueue("x", "team-a", {"cpu": 1})
    assert_invariants(ledger)


def test_admission_charges_leaf_and_every_ancestor(ledger: Ledger) -> None:
    ledger.apply(make_tree(two_teams()))
    decision = ledger.admit("j1", "a", {"cpu": 3 * CPU, "memory": 2**30})
    assert (decision.admitted, decision.leaf, decision.reason) == (True, "a", None)
    assert ledger.usage("a") == {"cpu": 3 * CPU, "memory": 2**30, MAX_JOBS: 1}
    assert ledger.usage("root") == {"cpu": 3 * CPU, "memory": 2**30, MAX_JOBS: 1}
    assert ledger.usage("b") == {}
    assert_invariants(ledger)


def test_refusal_names_the_node_resource_and_numbers(ledger: Ledger) -> None:
    ledger.apply(make_tree(two_teams(a_max=10, b_max=10)))
    assert ledger.admit("a1", "a", {"cpu": 5 * CPU}).admitted
    assert ledger.admit("b1", "b", {"cpu": 4 * CPU}).admitted
    refused = ledger.admit("b2", "b", {"cpu": 2 * CPU})
    assert not refused.admitted
    assert refused.reason == "quota root: cpu 9 used + 2 requested exceeds max 10"
    leaf = ledger.admit("a2", "a", {"cpu": 6 * CPU})
    assert leaf.reason == "quota root/a: cpu 5 used + 6 requested exceeds max 10"
    assert ledger.state("b2") is JobState.ABSENT
    assert_invariants(ledger)


def test_koord_queue_max_jobs_limits_a_dotted_leaf_to_one_job(ledger: Ledger) -> None:
    """The issue's case: ``koord-queue/max-jobs: 1`` on ``root.algo.nlp`` runs one job, not two."""
    from queues import load_file

    tree, _ = load_file("config/samples/elasticquotatree-koord-queue.yaml")
    ledger.apply(tree)
    leaf = leaf_in(ledger.tree(), "nlp")
    assert leaf == "root.algo.nlp"
    ledger.enqueue("nlp/one/u1", leaf, {"cpu": CPU})
    ledger.enqueue("nlp/two/u2", leaf, {"cpu": CPU})
    assert ledger.admit_pending("nlp/one/u1").admitted
    refused = ledger.admit_pending("nlp/two/u2")
    assert refused.reason == "quota root/root.algo/root.algo.nlp: kube-queue/max-jobs 1/1 in use"
    assert_invariants(ledger)


def test_max_jobs_reason_on_the_sample_tree(ledger: Ledger) -> None:
    from queues import load_file

    tree, _ = load_file("config/samples/elasticquotatree.yaml")
    ledger.apply(tree)
    leaf = leaf_in(ledger.tree(), "default")
    ledger.enqueue("default/one/u1", leaf, {"cpu": CPU})
    ledger.enqueue("default/two/u2", leaf, {"cpu": CPU})
    assert ledger.admit_pending("default/one/u1").admitted
    refused = ledger.admit_pending("default/two/u2")
    assert refused.reason == "quota root/child-2: kube-queue/max-jobs 1/1 in use"
    assert ledger.state("default/two/u2") is JobState.PENDING
    assert ledger.release("default/one/u1") is JobState.ADMITTED
    assert ledger.admit_pending("default/two/u2").admitted
    assert_invariants(ledger)


def test_unnamed_resources_and_huge_limits_do_not_limit(ledger: Ledger) -> None:
    root = {
        "name": "root",
        "max": {"cpu": 2, MAX_JOBS: MAX_JOBS_UNLIMITED, "memory": UNLIMITED},
        "children": [{"name": "a", "max": {MAX_JOBS: 2**40}, "namespaces": ["a"]}],
    }
    ledger.apply(make_tree(root))
    for i in range(3):
        assert ledger.admit(f"j{i}", "a", {"cpu": 0, "memory": UNLIMITED - 1, "npu": 10**6}).admitted
    assert ledger.admit("j3", "a", {"cpu": 2 * CPU}).admitted
    assert ledger.admit("j4", "a", {"cpu": 1}).reason == "quota root: cpu 2 used + 1m requested exceeds max 2"
    assert_invariants(ledger)


def test_admit_and_release_are_idempotent(ledger: Ledger) -> None:
    ledger.apply(make_tree(two_teams()))
    first = ledger.admit("j", "a", {"cpu": CPU})
    again = ledger.admit("j", "a", {"cpu": CPU})
    assert (first.already, again.admitted, again.already) == (False, True, True)
    assert ledger.usage("root") == {"cpu": CPU, MAX_JOBS: 1}
    assert ledger.release("j") is JobState.ADMITTED
    assert ledger.release("j") is JobState.ABSENT
    assert ledger.usage("root") == {}
    assert ledger.enqueue("p", "a", {"cpu": CPU}) is JobState.ABSENT
    assert ledger.enqueue("p", "a", {"cpu": CPU}) is JobState.PENDING
    assert ledger.admit_pending("p").admitted
    assert ledger.admit_pending("p").already
    assert ledger.enqueue("p", "a", {"cpu": CPU}) is JobState.ADMITTED
    assert_invariants(ledger)


def test_an_enqueue_sent_by_the_caller_answers_as_enqueue_does(ledger: Ledger) -> None:
    """enqueue_call/enqueue_outcome: the same write and the same answers, sent by the caller."""
    ledger.apply(make_tree(two_teams()))

    def sent(job: str, leaf: str, priority: int = 0) -> JobState:
        script, keys, args = ledger.pending.enqueue_call(job, leaf, {"cpu": CPU}, priority)
        return ledger.pending.enqueue_outcome(script(keys=keys, args=args))

    assert sent("late", "a") is JobState.ABSENT
    assert sent("urgent", "a", priority=5) is JobState.ABSENT
    assert sent("late", "a") is JobState.PENDING
    assert ledger.pending.peek("a", 10) == ["urgent", "late"]
    assert ledger.pending.record("late") == ledger.pending.records()["late"]
    with pytest.raises(LedgerError, match="no-such-leaf is not in the applied ElasticQuotaTree"):
        sent("lost", "no-such-leaf")
    assert "lost" not in ledger.pending.records()
    assert_invariants(ledger)


def test_a_job_is_never_both_pending_and_admitted(ledger: Ledger) -> None:
    ledger.apply(make_tree(two_teams()))
    ledger.enqueue("p", "a", {"cpu": CPU})
    with pytest.raises(LedgerError, match="is pending: admit it from its queue"):
        ledger.admit("p", "a", {"cpu": CPU})
    with pytest.raises(LedgerError, match="neither pending nor admitted"):
        ledger.admit_pending("ghost")
    assert ledger.admit_pending("p").admitted
    assert ledger.state("p") is JobState.ADMITTED
    assert ledger.pending.peek("a") == []
    assert_invariants(ledger)


def test_queue_order_and_policies(ledger: Ledger) -> None:
    ledger.apply(make_tree(two_teams(a_max=5)))
    ledger.enqueue("big", "a", {"cpu": 8 * CPU}, priority=5)
    ledger.enqueue("small-1", "a", {"cpu": CPU}, priority=1)
    ledger.enqueue("small-2", "a", {"cpu": CPU}, priority=1)
    assert ledger.pending.peek("a", 5) == ["big", "small-1", "small-2"]
    assert ledger.pending.head("a") == "big"
    assert ledger.admit_pending("big").reason == "quota root/a: cpu 0 used + 8 requested exceeds max 5"
    strict = ledger.admit_pending("small-1", QueuePolicy.STRICT)
    assert strict.reason == "queue root-a: strict order, waiting behind big"
    assert ledger.admit_pending("small-2", QueuePolicy.BEST_EFFORT).admitted
    assert ledger.pending.peek("a", 5) == ["big", "small-1"]
    ledger.release("big")
    assert ledger.admit_pending("small-1", QueuePolicy.STRICT).admitted
    assert_invariants(ledger)


def test_requeue_puts_the_job_back_in_its_old_place(ledger: Ledger) -> None:
    ledger.apply(make_tree(two_teams()))
    ledger.enqueue("first", "a", {"cpu": CPU})
    ledger.enqueue("second", "a", {"cpu": CPU})
    assert ledger.admit_pending("first").admitted
    ledger.enqueue("third", "a", {"cpu": CPU})
    assert ledger.requeue("first")
    assert ledger.pending.peek("a", 5) == ["first", "second", "third"]
    assert ledger.usage("a") == {}
    assert not ledger.requeue("first")
    assert_invariants(ledger)


def test_release_takes_a_pending_job_out_of_its_queue(ledger: Ledger) -> None:
    ledger.apply(make_tree(two_teams()))
    ledger.enqueue("p", "b", {"cpu": CPU})
    assert ledger.pending_counts() == {"a": 0, "b": 1, "root": 1}
    assert ledger.release("p") is JobState.PENDING
    assert ledger.pending.peek("b") == []
    assert_invariants(ledger)


def test_borrowing_stops_where_a_waiting_sibling_needs_its_min(ledger: Ledger) -> None:
    ledger.apply(make_tree(two_teams()))
    assert ledger.admit("a-1", "a", {"cpu": 5 * CPU}).admitted  # a at its min
    assert ledger.admit("a-2", "a", {"cpu": 1 * CPU}).admitted  # b waits for nothing: a borrows
    ledger.enqueue("b-1", "b", {"cpu": 3 * CPU})
    # b is owed what its waiting job asks for (3), not its whole unused min (5): 10 - 6 leaves 4.
    refused = ledger.admit("a-3", "a", {"cpu": 2 * CPU})
    assert refused.reason == (
        "quota root/a: cpu 6 used + 2 requested exceeds min 5 while root/b, "
        "below its min (0 of 5 used), has 1 pending job"
    )
    assert ledger.admit("a-3", "a", {"cpu": 1 * CPU}).admitted  # 3 left: exactly b's job
    assert ledger.admit_pending("b-1").admitted
    assert ledger.usage("root")["cpu"] == 10 * CPU
    assert_invariants(ledger)


def test_a_guarantee_no_waiting_job_asks_for_is_lent(ledger: Ledger) -> None:
    """A sibling below its min whose waiting jobs ask for other resources holds nothing back."""
    ledger.apply(make_tree(two_teams()))
    assert ledger.admit("a-1", "a", {"cpu": 5 * CPU}).admitted
    ledger.enqueue("b-1", "b", {"memory": 1})  # b waits, but not for cpu
    assert ledger.admit("a-2", "a", {"cpu": 5 * CPU}).admitted
    assert_invariants(ledger)


def test_a_guarantee_the_sibling_could_not_use_is_lent(ledger: Ledger) -> None:
    """A sibling below its min whose waiting jobs are held by its own max-jobs, or by a max of a
    group above them, holds nothing back: no schedule could give it that quota now."""
    tree = {
        "name": "root",
        "min": {"cpu": 10},
        "max": {"cpu": 10},
        "children": [
            {"name": "a", "min": {"cpu": 5}, "max": {"cpu": 10}, "namespaces": ["team-a"]},
            {
                "name": "org",
                "min": {"cpu": 5},
                "max": {"cpu": 10, MAX_JOBS: 1},
                "children": [{"name": "b", "min": {"cpu": 3}, "max": {"cpu": 3}, "namespaces": ["team-b"]}],
            },
        ],
    }
    ledger.apply(make_tree(tree))
    assert ledger.admit("b-1", "b", {"cpu": 1 * CPU}).admitted  # org at its max-jobs
    ledger.enqueue("b-2", "b", {"cpu": 2 * CPU})
    assert ledger.admit("a-1", "a", {"cpu": 9 * CPU}).admitted  # borrows all org could not use
    ledger.release("a-1")
    ledger.release("b-1")  # org has room for a job now; b's max lets it take 3, it asks 2
    assert ledger.admit("a-2", "a", {"cpu": 9 * CPU}).reason == (
        "quota root/a: cpu 0 used + 9 requested exceeds min 5 while root/org, "
        "below its min (0 of 5 used), has 1 pending job"
    )
    assert ledger.admit("a-3", "a", {"cpu": 8 * CPU}).admitted  # exactly b-2's 2 left
    assert ledger.admit_pending("b-2").admitted
    assert_invariants(ledger)


def test_a_ledger_kept_in_the_older_shape_is_recomputed_once(ledger: Ledger) -> None:
    """A ledger an older Fleet kept (want:<r> summed on every node, no kids:<r>) owes siblings
    the wrong amounts until its derived fields are recomputed: upgrade() does that once."""
    tree = two_teams()
    tree["children"] = [{"name": "org", "min": {"cpu": 10}, "max": {"cpu": 10}, "children": tree["children"]}]
    ledger.apply(make_tree(tree))
    ledger.enqueue("b-1", "b", {"cpu": 3 * CPU})
    client = ledger.client
    client.hdel(ledger.keys.meta, "layout")  # as the older scripts left it: no shape recorded,
    client.hdel(ledger.keys.node("org"), "kids:cpu")  # no kids:<r>, want:<r> on inner nodes
    client.hset(ledger.keys.node("org"), "want:cpu", 3 * CPU)
    drift = {(d.node, d.field) for d in ledger.upgrade()}
    assert drift == {("org", "kids:cpu"), ("org", "want:cpu")}
    assert ledger.rebuild() == []
    assert ledger.upgrade() == []  # once: the shape is recorded
    assert_invariants(ledger)


def test_borrowing_that_leaves_the_sibling_its_min_is_allowed(ledger: Ledger) -> None:
    ledger.apply(make_tree(two_teams(root_cpu=20, a_max=20)))
    ledger.enqueue("b-1", "b", {"cpu": 5 * CPU})
    assert ledger.admit("a-1", "a", {"cpu": 10 * CPU}).admitted  # 20 - 10 leaves b its 5
    assert ledger.admit("a-2", "a", {"cpu": 6 * CPU}).reason == (
        "quota root/a: cpu 10 used + 6 requested exceeds min 5 while root/b, "
        "below its min (0 of 5 used), has 1 pending job"
    )
    assert ledger.admit("a-3", "a", {"cpu": 5 * CPU}).admitted  # exactly b's 5 left
    assert ledger.admit_pending("b-1").admitted
    assert_invariants(ledger)


def test_apply_keeps_usage_and_recomputes_it_for_the_new_shape(ledger: Ledger) -> None:
    first = ledger.apply(make_tree(two_teams()))
    ledger.admit("a-1", "a", {"cpu": 2 * CPU})
    ledger.admit("b-1", "b", {"cpu": 3 * CPU})
    ledger.enqueue("b-2", "b", {"cpu": CPU})
    moved = {
        "name": "root",
        "min": {"cpu": 10},
        "max": {"cpu": 10},
        "children": [
            {"name": "a", "namespaces": ["team-a"]},
            {"name": "org", "children": [{"name": "b", "namespaces": ["team-b"]}]},
        ],
    }
    second = ledger.apply(make_tree(moved))
    assert (first.version, second.version, second.changed) == (1, 2, True)
    assert ledger.usage("org") == {"cpu": 3 * CPU, MAX_JOBS: 1}
    assert ledger.usage("root") == {"cpu": 5 * CPU, MAX_JOBS: 2}
    assert ledger.pending_counts() == {"a": 0, "b": 1, "org": 1, "root": 1}
    unchanged = ledger.apply(make_tree(moved))
    assert (unchanged.version, unchanged.changed) == (2, False)
    assert_invariants(ledger)


def test_apply_refuses_to_lose_jobs_or_break_limits(ledger: Ledger, redis_client: redis.Redis) -> None:
    ledger.apply(make_tree(two_teams()))
    ledger.admit("a-1", "a", {"cpu": 4 * CPU})
    ledger.enqueue("b-1", "b", {"cpu": CPU})
    before = {key: redis_client.dump(key) for key in sorted(redis_client.keys("*"))}
    without_a = {"name": "root", "children": [{"name": "b", "namespaces": ["team-b"]}]}
    with pytest.raises(ApplyRefused, match=r"^root/a: still has admitted job a-1; a node with admitted"):
        ledger.apply(make_tree(without_a))
    without_b = {"name": "root", "children": [{"name": "a", "namespaces": ["team-a"]}]}
    with pytest.raises(ApplyRefused, match=r"^root/b: still has pending job b-1; a node with pending"):
        ledger.apply(make_tree(without_b))
    with pytest.raises(VersionConflict, match="the applied tree is version 1, not 7"):
        ledger.apply(make_tree(two_teams(root_cpu=12)), expected_version=7)
    assert {key: redis_client.dump(key) for key in sorted(redis_client.keys("*"))} == before
    assert ledger.apply(make_tree(two_teams(root_cpu=12)), expected_version=1).version == 2
    assert_invariants(ledger)


def test_a_max_lowered_below_use_is_applied_with_a_warning_and_holds_new_jobs(ledger: Ledger) -> None:
    """As Kubernetes' ResourceQuota takes a hard limit below its use (issue 33, req. 4)."""
    ledger.apply(make_tree(two_teams()))
    assert ledger.admit("a-1", "a", {"cpu": 4 * CPU}).admitted
    smaller_a = two_teams(**{MAX_JOBS: 1})
    smaller_a["children"][0] = {"name": "a", "max": {"cpu": 3}, "namespaces": ["team-a"]}
    applied = ledger.apply(make_tree(smaller_a))
    assert (applied.version, applied.changed) == (2, True)
    assert [str(w) for w in applied.lowered] == [
        "root/a: max.cpu 3 is below the 4 in use: the admitted jobs keep running, new ones wait until "
        "use falls below it"
    ]
    assert ledger.state("a-1") is JobState.ADMITTED
    assert ledger.usage("a") == {"cpu": 4 * CPU, MAX_JOBS: 1}
    refused = ledger.admit("a-2", "a", {"cpu": CPU})
    assert not refused.admitted and refused.refusal is not None
    assert refused.reason == "quota root/a: cpu 4 used + 1 requested exceeds max 3"
    # max-jobs likewise: a second job waits for the first while the root allows one.
    assert not ledger.admit("b-1", "b", {"cpu": CPU}).admitted
    ledger.release("a-1")
    assert ledger.admit("a-2", "a", {"cpu": 3 * CPU}).admitted
    fewer = ledger.apply(make_tree(two_teams(**{MAX_JOBS: 0})))
    assert [str(w) for w in fewer.lowered] == [
        "root: max.kube-queue/max-jobs 0 is below the 1 in use: the admitted jobs keep running, new ones "
        "wait until use falls below it"
    ]


def test_unbound_namespace_and_unknown_node_change_nothing(ledger: Ledger, redis_client: redis.Redis) -> None:
    ledger.apply(make_tree(two_teams()))
    with pytest.raises(UnboundJob, match="namespace 'team-c' is bound to no node"):
        leaf_in(ledger.tree(), "team-c")
    assert leaf_in(ledger.tree(), "team-b") == "b"
    before = sorted(redis_client.keys("*"))
    with pytest.raises(LedgerError, match="quota node nope is not in the applied ElasticQuotaTree"):
        ledger.enqueue("j", "nope", {"cpu": 1})
    with pytest.raises(LedgerError, match="quota node nope is not in the applied ElasticQuotaTree"):
        ledger.admit("j", "nope", {"cpu": 1})
    assert sorted(redis_client.keys("*")) == before


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"cpu": -1}, r"^request.cpu: -1 is outside 0..2\*\*53-1$"),
        ({"cpu": 1.5}, r"^request.cpu: 1.5 is not an integer in canonical units$"),
        ({"cpu": True}, r"^request.cpu: True is not an integer"),
        ({MAX_JOBS: 1}, r"^request.kube-queue/max-jobs: counted by the ledger"),
        ({"bad name": 1}, r"^request: 'bad name' is not a valid resource name$"),
        ({"memory": UNLIMITED}, r"^request.memory: 9007199254740992 is outside"),
    ],
)
def test_invalid_requests_are_refused_before_redis(
    ledger: Ledger, redis_client: redis.Redis, request_: dict[str, int], message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        ledger.admit("j", "root", request_)
    with pytest.raises(InvalidRequest, match=message):
        ledger.enqueue("j", "root", request_)
    assert redis_client.keys("*") == []


def test_rebuild_reports_and_fixes_drift(ledger: Ledger, redis_client: redis.Redis) -> None:
    ledger.apply(make_tree(two_teams()))
    ledger.admit("a-1", "a", {"cpu": 2 * CPU})
    ledger.enqueue("b-1", "b", {"cpu": CPU})
    assert ledger.rebuild() == []
    redis_client.hincrby(ledger.keys.node("a"), "used:cpu", 7)
    redis_client.hset(ledger.keys.node("b"), "pending", 5)
    redis_client.delete(ledger.keys.queue("b"))
    drift = sorted(str(d) for d in ledger.rebuild())
    assert drift == [
        "a: used:cpu counter 2007, job records say 2000",
        "b: pending counter 5, job records say 1",
        "b: queue counter 0, job records say 1",
    ]
    assert len(ledger.rebuild(fix=True)) == 3
    assert ledger.rebuild() == []
    assert ledger.pending.peek("b") == ["b-1"]
    assert_invariants(ledger)


def test_queue_views_per_node(ledger: Ledger) -> None:
    from queues import load_file

    assert [v.name for v in queue_views(ledger)] == ["root"]
    tree, _ = load_file("config/samples/elasticquotatree.yaml")
    ledger.apply(tree)
    ledger.enqueue("j1", "child-2", {"cpu": 2 * CPU})
    ledger.enqueue("j2", "child-2", {"cpu": CPU})
    ledger.admit_pending("j1")
    views = {v.name: v for v in queue_views(ledger)}
    assert list(views) == ["root", "root-child-2"]
    child = views["root-child-2"]
    assert (child.path, child.admitted, child.pending, child.used) == ("root/child-2", 1, 1, {"cpu": 2 * CPU})
    assert child.max[MAX_JOBS] == 1
    assert (views["root"].admitted, views["root"].pending, views["root"].min["memory"]) == (1, 1, 40 * 2**30)
    table = format_views(list(views.values())).splitlines()
    header = ["NAME", "MIN", "MAX", "USED", "BORROWED", "LENT", "SHARE", "BELOW-MIN", "ADMITTED", "WAITING"]
    assert table[0].split() == header
    row = table[2].split()
    assert row[:1] + row[3:] == ["root-child-2", "cpu=2", "cpu=2", "-", "1.00", "false", "1", "1"]


def test_pipelined_writes_and_decisions(ledger: Ledger, redis_client: redis.Redis) -> None:
    ledger.apply(make_tree(two_teams()))
    pipe = redis_client.pipeline(transaction=False)
    for i in range(6):
        assert ledger.enqueue(f"j{i}", "a", {"cpu": 2 * CPU}, pipeline=pipe) is None
    pipe.execute()
    decisions = ledger.admit_pending_many([f"j{i}" for i in range(6)])
    assert [d.admitted for d in decisions] == [True] * 5 + [False]
    assert decisions[5].reason == "quota root/a: cpu 10 used + 2 requested exceeds max 10"
    pipe = redis_client.pipeline(transaction=False)
    ledger.release("j0", pipeline=pipe)
    pipe.execute()
    assert ledger.state("j0") is JobState.ABSENT
    assert_invariants(ledger)


def test_every_key_is_in_one_hash_slot(ledger: Ledger, redis_client: redis.Redis) -> None:
    ledger.apply(make_tree(two_teams()))
    ledger.admit("a-1", "a", {"cpu": CPU})
    ledger.enqueue("b-1", "b", {"cpu": CPU})
    ledger.admit("a-2", "a", {"cpu": CPU})
    keys = redis_client.keys("*")
    assert len(keys) > 8
    assert {key_slot(k if isinstance(k, bytes) else k.encode()) for k in keys} == {
        key_slot(ledger.keys.meta.encode())
    }


def test_kept_heads_are_read_again_only_for_leaves_whose_queue_changed(ledger: Ledger) -> None:
    """A cycle's head reads follow the changes, not the backlog (issue 16, requirement 1)."""
    ledger.apply(make_tree(two_teams()))
    for i in range(5):
        ledger.enqueue(f"a{i}", "a", {"cpu": 20 * CPU})  # above a's max: refused for ever
        ledger.enqueue(f"b{i}", "b", {"cpu": CPU})
    cache = HeadCache()

    def read() -> dict[str, list[ClassHeads]]:
        return cache.heads(
            ["a", "b"], ledger.snapshot().queue_versions, lambda stale: ledger.class_heads(stale, 2)
        )

    first = read()
    assert cache.reads == 2 and [h.job for h in first["b"][0].heads] == ["b0", "b1"]
    assert read() == first and cache.reads == 2  # nothing changed: nothing read
    assert ledger.admit_pending_many(["b0"])[0].admitted
    second = read()
    assert cache.reads == 3 and second["a"] == first["a"]  # only b was read again
    assert [h.job for h in second["b"][0].heads] == ["b1", "b2"]
    ledger.release("b1")  # a pending job taken out of its queue
    assert [h.job for h in read()["b"][0].heads] == ["b2", "b3"] and cache.reads == 4
    ledger.apply(make_tree(two_teams(a_max=200)))  # a new tree rewrites every leaf's classes
    read()
    assert cache.reads == 6
