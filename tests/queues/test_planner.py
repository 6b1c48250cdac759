"""The scheduling cycle's quota side (queues.planner), on a real ledger (fakeredis) as the dispatcher
drives it: snapshot, class heads, plan, admit the picks through the ledger."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import fakeredis
import pytest

from queues import Ledger
from queues.planner import Plan, Planner, PlannerSettings, PreemptionKind
from queues.quantity import MAX_JOBS
from queues.reasons import Refusal, RefusalKind
from tests.queues.support import make_tree

NPU = "huawei.com/Ascend910"


def node(name: str, low: int, high: int, children: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "min": {NPU: low}, "max": {NPU: high}}
    if children:
        out["children"] = children
    else:
        out["namespaces"] = [name]
    return out


@pytest.fixture
def ledger() -> Iterator[Ledger]:
    client = fakeredis.FakeRedis()
    yield Ledger(client)
    client.close()


class Driver:
    """The dispatcher's loop without clusters: every pick fits, the ledger admits it."""

    def __init__(self, ledger: Ledger, settings: PlannerSettings | None = None) -> None:
        self.ledger = ledger
        self.planner = Planner(settings or PlannerSettings(starvation_seconds=30))
        self.serial = 0
        self.checks = 0

    def submit(self, leaf: str, npus: int, priority: int = 0, name: str | None = None) -> str:
        self.serial += 1
        job = f"{leaf}/{name or f'j{self.serial}'}"
        self.ledger.enqueue(job, leaf, {NPU: npus}, priority)
        return job

    def cycle(self, now: float = 0.0) -> Plan:
        snap = self.ledger.snapshot()
        active = [leaf for leaf in snap.leaves() if snap.nodes[leaf].pending > 0]
        heads = self.ledger.class_heads(active, 8)
        work = snap.copy()
        real_check = work.check

        def counted(leaf: str, request: Mapping[str, int]) -> Refusal | None:
            self.checks += 1
            return real_check(leaf, request)

        work.check = counted  # type: ignore[method-assign]  # counting the checks a cycle makes
        plan = self.planner.plan(work, heads, now)
        decisions = self.ledger.admit_pending_many([p.job for p in plan.picks])
        assert all(d.admitted for d in decisions), decisions  # the model never over-admits
        self.planner.admitted(p.job for p in plan.picks)
        return plan

    def admitted(self) -> set[str]:
        return set(self.ledger.records())


def test_a_refused_class_is_not_checked_again_until_quota_is_released(ledger: Ledger) -> None:
    ledger.apply(make_tree(node("root", 8, 8, [node("a", 8, 8)])))
    d = Driver(ledger)
    first = d.submit("a", 8)
    for _ in range(50):
        d.submit("a", 8)
    assert [p.job for p in d.cycle().picks] == [first]
    plan = d.cycle()
    assert plan.picks == [] and [r.refusal.kind for r in plan.refused] == [RefusalKind.MAX]
    checks = d.checks
    for _ in range(20):  # nothing changed: no refusal is made again, no reason written again
        plan = d.cycle()
        assert plan.picks == [] and plan.refused == []
    assert d.checks == checks
    d.submit("a", 8)  # an arrival of the same class and priority changes nothing either
    assert d.cycle().refused == [] and d.checks == checks
    ledger.release(first)
    assert len(d.cycle().picks) == 1


def test_a_higher_priority_arrival_is_looked_at_at_once(ledger: Ledger) -> None:
    ledger.apply(make_tree(node("root", 8, 8, [node("a", 8, 8)])))
    d = Driver(ledger)
    d.submit("a", 8)
    d.submit("a", 8)
    d.cycle()
    d.cycle()
    urgent = d.submit("a", 8, priority=10)
    plan = d.cycle()
    assert [r.job for r in plan.refused] == [urgent]
    assert plan.refused[0].leaf_head


def test_best_effort_a_refused_big_class_does_not_stop_small_ones(ledger: Ledger) -> None:
    ledger.apply(make_tree(node("root", 8, 8, [node("a", 8, 8)])))
    d = Driver(ledger)
    d.submit("a", 6)
    d.cycle()
    big = d.submit("a", 4)
    small = d.submit("a", 1)
    plan = d.cycle()
    assert [p.job for p in plan.picks] == [small]
    assert [r.job for r in plan.refused] == [big]


def test_leaves_are_served_by_share_not_by_place_in_the_tree(ledger: Ledger) -> None:
    """Group g1 has one leaf, g2 has three; equal group guarantees: each group gets half the
    root, and g2's half is split evenly among its leaves, whatever order the jobs came in."""
    tree = node(
        "root",
        16,
        16,
        [
            node("g1", 8, 16, [node("a", 8, 16)]),
            node("g2", 8, 16, [node("b", 2, 16), node("c", 2, 16), node("d", 4, 16)]),
        ],
    )
    ledger.apply(make_tree(tree))
    d = Driver(ledger)
    for leaf in ("a", "b", "c", "d"):  # a's jobs first: FIFO across leaves would give it all
        for _ in range(20):
            d.submit(leaf, 1)
    d.cycle()
    used = {n: ledger.usage(n).get(NPU, 0) for n in ("a", "b", "c", "d", "g1", "g2")}
    assert used["g1"] == used["g2"] == 8
    assert used["a"] == 8
    assert (used["b"], used["c"], used["d"]) == (2, 2, 4)


def test_a_leaf_below_its_min_goes_first(ledger: Ledger) -> None:
    tree = node("root", 8, 8, [node("a", 6, 8), node("b", 2, 8)])
    ledger.apply(make_tree(tree))
    d = Driver(ledger)
    for _ in range(8):
        d.submit("a", 1)
    d.cycle()  # a takes everything (b has nothing waiting)
    for job in sorted(ledger.records())[:4]:
        ledger.release(job)
    b_job = d.submit("b", 2)
    a_job = d.submit("a", 2)
    plan = d.cycle()
    assert plan.picks[0].job == b_job  # b is below its min, a is not
    assert a_job in {p.job for p in plan.picks}


def test_the_head_passed_too_long_holds_its_leaf_until_it_starts(ledger: Ledger) -> None:
    ledger.apply(make_tree(node("root", 8, 8, [node("a", 8, 8)])))
    d = Driver(ledger, PlannerSettings(starvation_seconds=10))
    running = [d.submit("a", 2) for _ in range(4)]
    d.cycle(now=0)
    big = d.submit("a", 4)
    for _ in range(8):
        d.submit("a", 1)
    ledger.release(running[0])
    plan = d.cycle(now=1)  # within the bound: small jobs pass the big head
    assert len(plan.picks) == 2 and big not in {p.job for p in plan.picks}
    assert d.planner.starving_since("a") == (big, 1)
    ledger.release(running[1])
    plan = d.cycle(now=12)  # past the bound: nothing passes it any more
    assert plan.picks == [] and {b.holder.job for b in plan.blocked} == {big}
    ledger.release(running[2])
    plan = d.cycle(now=13)
    assert [p.job for p in plan.picks] == [big]
    assert d.planner.starving_since("a") is None


def test_a_head_larger_than_its_quota_never_holds_others(ledger: Ledger) -> None:
    ledger.apply(make_tree(node("root", 8, 8, [node("a", 4, 4)])))
    d = Driver(ledger, PlannerSettings(starvation_seconds=0))
    huge = d.submit("a", 6)
    small = d.submit("a", 1)
    plan = d.cycle(now=100)
    assert [p.job for p in plan.picks] == [small]
    [refused] = plan.refused
    assert refused.job == huge and refused.never is not None
    assert d.planner.reservations(200) == []


def test_a_head_no_release_under_its_node_could_let_in_holds_nothing(ledger: Ledger) -> None:
    """Found by the stateful cycle test: ``wide`` (guarantee 1 NPU) and ``narrow`` (guarantee 2)
    share 4 NPUs, and each one's waiting jobs are bigger than its guarantee, so each is refused for
    what the other is owed. ``wide``'s starving 3-NPU head is refused at ``wide`` (it would borrow),
    though nothing runs there: no release under ``wide`` can ever let it in. It must not hold the
    2-NPU job of ``wide``'s other leaf, which fits now; before, the cycle admitted nothing, ever."""
    tree = {
        "name": "root",
        "min": {NPU: 4},
        "max": {NPU: 4},
        "children": [
            {
                "name": "wide",
                "min": {NPU: 1},
                "max": {NPU: 5},
                "children": [
                    {"name": "solo", "max": {NPU: 8}, "namespaces": ["solo"]},
                    {"name": "batch", "max": {NPU: 8}, "namespaces": ["batch"]},
                ],
            },
            node("narrow", 2, 4),
        ],
    }
    ledger.apply(make_tree(tree))
    d = Driver(ledger, PlannerSettings(starvation_seconds=10, grace_seconds=5))
    narrow = d.submit("narrow", 4)
    start = time.time()
    head = d.submit("batch", 3)
    plan = d.cycle(now=start)
    assert plan.picks == [] and {r.job for r in plan.refused} == {narrow, head}
    assert d.planner.starving_since("batch") == (head, start)
    # Long past the grace and the bound, a job of the sibling leaf arrives; it fits now.
    ledger.client.set(ledger.keys.seq, int((start + 60) * 1e6))
    fits = d.submit("solo", 2)
    plan = d.cycle(now=start + 61)
    assert [p.job for p in plan.picks] == [fits]
    assert plan.blocked == [] and d.planner.reservations(start + 61) == []
    # Had it been held, the hold would be futile: drained, the head is still refused.
    snap = ledger.snapshot()
    assert snap.drained("wide").check("batch", {NPU: 3}) is not None


def running_of(ledger: Ledger) -> dict[str, Any]:
    snap = ledger.snapshot()
    return ledger.running_jobs(snap.leaves())


def test_priority_preemption_takes_the_fewest_lowest_priority_most_recent(ledger: Ledger) -> None:
    ledger.apply(make_tree(node("root", 8, 8, [node("a", 8, 8)])))
    d = Driver(ledger)
    old_low = d.submit("a", 2, priority=1, name="old-low")
    d.cycle()
    high = d.submit("a", 2, priority=9, name="high")
    d.cycle()
    new_low = d.submit("a", 2, priority=1, name="new-low")
    d.cycle()
    lowest = d.submit("a", 2, priority=0, name="lowest")
    d.cycle()
    urgent = d.submit("a", 4, priority=5, name="urgent")
    plan = d.cycle()
    [refused] = plan.refused
    assert refused.job == urgent and refused.leaf_head
    found = d.planner.victims(ledger.snapshot(), "a", {NPU: 4}, 5, running_of(ledger))
    assert found is not None
    kind, victims = found
    assert kind is PreemptionKind.PRIORITY
    assert [v.job for v in victims] == [lowest, new_low]  # lowest priority, then most recent
    assert old_low not in {v.job for v in victims} and high not in {v.job for v in victims}
    # Equal priority is never taken: a priority-1 job finds no victims among jobs of 1 or more
    # (only "lowest" is below it, and it alone is not enough for 6).
    assert d.planner.victims(ledger.snapshot(), "a", {NPU: 6}, 1, running_of(ledger)) is None


def test_reclaim_takes_back_what_a_sibling_borrowed_and_no_more(ledger: Ledger) -> None:
    tree = node("root", 8, 8, [node("a", 4, 8), node("b", 4, 8)])
    ledger.apply(make_tree(tree))
    d = Driver(ledger)
    borrowed = [d.submit("b", 2) for _ in range(4)]  # b uses 8: 4 borrowed from a
    d.cycle()
    waiting = d.submit("a", 2)
    plan = d.cycle()
    [refused] = plan.refused
    assert refused.job == waiting and refused.refusal.kind is RefusalKind.MAX
    found = d.planner.victims(ledger.snapshot(), "a", {NPU: 2}, 0, running_of(ledger))
    assert found is not None
    kind, victims = found
    assert kind is PreemptionKind.RECLAIM
    assert [v.job for v in victims] == [borrowed[-1]]  # the most recent borrower's job, one
    # A job of a that would take it beyond its min may not reclaim.
    assert d.planner.victims(ledger.snapshot(), "a", {NPU: 6}, 0, running_of(ledger)) is None


def test_reclaim_stops_when_the_sibling_no_longer_borrows(ledger: Ledger) -> None:
    tree = node("root", 8, 8, [node("a", 4, 8), node("b", 4, 8)])
    ledger.apply(make_tree(tree))
    d = Driver(ledger)
    d.submit("b", 4)
    d.cycle()
    d.submit("b", 4)  # b at 8, its second job borrowed
    d.cycle()
    # a asks 4 (its whole min): one victim of b's (4 NPUs) is enough, b keeps its min.
    found = d.planner.victims(ledger.snapshot(), "a", {NPU: 4}, 0, running_of(ledger))
    assert found is not None and len(found[1]) == 1


def test_a_job_asking_for_what_its_leaf_is_not_guaranteed_reclaims_nothing(ledger: Ledger) -> None:
    """a is guaranteed cpu only: its job asking for NPUs too would borrow them, so it may not
    take NPUs back from b, which borrows them as much as a would (else the two evict each other
    for ever: b's job, within its cpu guarantee, would pass a's again)."""
    tree = {
        "name": "root",
        "min": {"cpu": 8000, NPU: 4},
        "max": {"cpu": 8000, NPU: 4, "kube-queue/max-jobs": 1},
        "children": [
            {"name": "a", "min": {"cpu": 2000}, "max": {NPU: 4}, "namespaces": ["a"]},
            {"name": "b", "min": {"cpu": 2000}, "max": {NPU: 4}, "namespaces": ["b"]},
        ],
    }
    ledger.apply(make_tree(tree))
    d = Driver(ledger)
    ledger.enqueue("b/j1", "b", {"cpu": 1000, NPU: 1}, 0)
    d.cycle()
    ledger.enqueue("a/j2", "a", {"cpu": 1000, NPU: 3}, 0)
    [refused] = d.cycle().refused
    assert refused.refusal.resource == "kube-queue/max-jobs"
    snap = ledger.snapshot()
    assert d.planner.may_preempt(snap, "a", {"cpu": 1000, NPU: 3}, 0, None) == []
    assert d.planner.victims(snap, "a", {"cpu": 1000, NPU: 3}, 0, running_of(ledger)) is None


def test_a_nominated_preemptor_keeps_the_freed_quota_for_itself(ledger: Ledger) -> None:
    tree = node("root", 8, 8, [node("a", 4, 8), node("b", 4, 8)])
    ledger.apply(make_tree(tree))
    d = Driver(ledger)
    jobs = [d.submit("b", 2) for _ in range(4)]
    d.cycle()
    waiting = d.submit("a", 2)
    plan = d.cycle()
    snap = ledger.snapshot()
    _, victims = d.planner.victims(snap, "a", {NPU: 2}, 0, running_of(ledger)) or (None, [])
    d.planner.nominate(waiting, "a", snap, plan.refused[0].refusal, {NPU: 2}, until=60)
    d.submit("b", 2)  # b waits too, and would come first by submission were it not for the hold
    for victim in victims:
        ledger.requeue(victim.job)
    plan = d.cycle(now=1)
    assert [p.job for p in plan.picks] == [waiting]
    assert d.planner.nominated(waiting) is None
    assert set(jobs) - {v.job for v in victims} <= d.admitted()


def test_a_preemptor_whose_victims_are_gone_goes_before_the_fair_order(ledger: Ledger) -> None:
    """A priority preemptor's victim frees a job slot at the root, where the preemptor was not
    refused (its leaf's max was the limit): served in fair order, a poorer leaf's job would take
    that slot and leave the preemptor refused again, to evict a second victim for one start (the
    stateful cycle test found such a chain). The preemptor goes first once its victims are gone."""
    tree = node("root", 8, 8, [node("poor", 4, 8), node("rich", 0, 4)])
    tree["max"][MAX_JOBS] = 3
    ledger.apply(make_tree(tree))
    d = Driver(ledger)
    low = [d.submit("rich", 2, priority=0, name=f"low-{i}") for i in range(2)]
    d.cycle()
    d.submit("poor", 1, name="first")
    d.cycle()
    assert d.admitted() == {*low, "poor/first"}  # the root's three job slots in use
    urgent = d.submit("rich", 2, priority=9, name="urgent")  # refused by rich's max of 4
    later = d.submit("poor", 1, name="later")  # poor's share is lower: the fair order serves it first
    plan = d.cycle(now=1)
    [refused] = [r for r in plan.refused if r.job == urgent]
    snap = ledger.snapshot()
    found = d.planner.victims(snap, "rich", {NPU: 2}, 9, running_of(ledger))
    assert found is not None and found[0] is PreemptionKind.PRIORITY
    d.planner.nominate(urgent, "rich", snap, refused.refusal, {NPU: 2}, until=60)
    for victim in found[1]:
        ledger.requeue(victim.job)
    d.planner.victims_gone(urgent)
    plan = d.cycle(now=2)
    assert [p.job for p in plan.picks] == [urgent]  # not "later", which would take the root's slot
    assert later not in d.admitted()


def test_a_head_that_waited_far_longer_is_not_passed_by_younger_jobs(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Waits are measured from submission (the sequence is a clock reading): small jobs pass a big
    head only while it has waited at most the grace, or at most twice as long as they have."""
    ledger.apply(make_tree(node("root", 8, 8, [node("a", 8, 8)])))
    d = Driver(ledger, PlannerSettings(starvation_seconds=1000, grace_seconds=5, wait_ratio=2))
    running = [d.submit("a", 2) for _ in range(4)]
    start = time.time()
    d.cycle(now=start)
    big = d.submit("a", 4)
    submitted = ledger.pending.record(big)
    assert submitted is not None and abs(submitted.seq / 1e6 - start) < 5  # the clock, in µs
    ledger.release(running[0])
    old_small = d.submit("a", 1)
    plan = d.cycle(now=start + 1)  # the head waited 1 s: within the grace, the small one passes
    assert [p.job for p in plan.picks] == [old_small]
    # 20 s later (the sequence moved on as the clock would) a new small job arrives; a second
    # later the head has waited 21 s, more than twice the new job's 1 s.
    ledger.release(running[1])
    later = submitted.seq / 1e6 + 20
    ledger.client.set(ledger.keys.seq, int(later * 1e6))
    fresh = d.submit("a", 1)
    plan = d.cycle(now=later + 1)
    assert plan.picks == [] and [(b.job, b.holder.job, b.holder.why) for b in plan.blocked] == [
        (fresh, big, "older")
    ]
    ledger.release(running[2])
    plan = d.cycle(now=later + 2)
    assert [p.job for p in plan.picks] == [big]


def test_a_head_beyond_its_leafs_fair_share_lets_the_leaf_fill_that_share_until_it_starves(
    ledger: Ledger,
) -> None:
    """A gang larger than its leaf's fair share can only start on quota other leaves leave
    unused: during the wait rule the leaf's smaller jobs fill the leaf's fair share rather than
    leave it idle behind the gang (beyond the leaf's min, which they pass anyway); past the
    starvation bound the gang's reservation holds them, and it starts."""
    ledger.apply(make_tree(node("root", 32, 32, [node("a", 8, 32), node("b", 24, 32)])))
    d = Driver(ledger, PlannerSettings(starvation_seconds=10, grace_seconds=0))
    t0 = time.time()
    running = [d.submit("a", 2), d.submit("a", 2), d.submit("b", 16)]
    assert len(d.cycle(now=t0).picks) == 3
    # b wants nothing more: a's fair share is 16 (32 less b's 16); the gang asks for 24.
    big = d.submit("a", 24)
    plan = d.cycle(now=t0 + 1)
    assert plan.picks == [] and plan.refused[0].job == big
    smalls = [d.submit("a", 2) for _ in range(8)]
    plan = d.cycle(now=t0 + 2)
    # Two fill a's min (guaranteed), four more its fair share (16); the next is held for the gang.
    assert [p.job for p in plan.picks] == smalls[:6]
    assert [(b.job, b.holder.job) for b in plan.blocked] == [(smalls[6], big)]
    ledger.release(running[2])  # b's job ends: 16 free, the gang needs 24
    plan = d.cycle(now=t0 + 20)  # past the bound: the gang's reservation holds a's jobs
    assert plan.picks == [] and {b.holder.job for b in plan.blocked} == {big}
    for job in smalls[:4]:
        ledger.release(job)
    plan = d.cycle(now=t0 + 21)
    assert [p.job for p in plan.picks] == [big]
