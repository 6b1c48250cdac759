"""The scheduling cycle over random trees, priorities, arrivals and finishes (hypothesis, stateful),
driven as the dispatcher drives it (snapshot, class heads, plan, admit the picks through the
ledger, preempt for refused leaf heads, evict the victims), on fakeredis and a real redis-server.

At every step: DESIGN.md's invariants 1 and 2 (checked from the job records, independently of the
engine) and the indexes agree with the records. Along the way:

* the model never admits what the ledger refuses (every pick is admitted);
* a pick never passes a reservation it must respect (a starving head's or a preemptor's);
* priority preemption only takes jobs of the preemptor's leaf of strictly lower priority;
  reclaim only takes jobs of subtrees that borrow something the preemptor asks for, and only
  for a preemptor that fits within its leaf's min;
* after each settled cycle, no leaf's head that fits within its leaf's ``min`` still waits while
  evicting one borrower's job would let it in, and no head waits while evicting one job of lower
  priority in its own leaf would let it in (unless held back by another job's reservation);
* once a leaf's head holds its starvation reservation, no job submitted after it is admitted
  before it under the node that holds it back (but other leaves' guaranteed jobs); after
  everything running ends, the cycle admits something whenever a waiting job fits (no two holds
  wait on each other), and the oldest head is admitted unless jobs submitted before it, a job
  limit (max-jobs) or a sibling's guarantee come first.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import hypothesis.strategies as st
import redis
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from queues import ElasticQuotaTree, Ledger
from queues.heads import ClassHeads
from queues.planner import Plan, Planner, PlannerSettings, PreemptionKind, Reservation
from queues.quantity import MAX_JOBS
from queues.reasons import RefusalKind
from queues.snapshot import Snapshot
from tests.queues.support import assert_invariants
from tests.queues.test_ledger_stateful import requests, trees

STARVATION = 20.0


def leaf_head(classes: Sequence[ClassHeads]) -> Any:
    heads = [c.heads[0] for c in classes if c.heads]
    return min(heads) if heads else None


def fits_within_min(snap: Snapshot, leaf: str, request: Mapping[str, int]) -> bool:
    """Within the leaf's guarantee: every governed resource asked for fits its ``min`` (0 where
    the ``min`` does not name it), and the ``min`` names one of them."""
    node = snap.nodes[leaf]
    asked = {r: a for r, a in request.items() if a > 0 and r in snap.governed}
    if node.min.get(MAX_JOBS, 0) > 0:
        asked[MAX_JOBS] = 1
    named = [r for r in asked if node.min.get(r, 0) > 0]
    return bool(named) and all(node.used.get(r, 0) + a <= node.min.get(r, 0) for r, a in asked.items())


def subtree_of(snap: Snapshot, name: str) -> set[str]:
    out = {name}
    for child in snap.nodes[name].children:
        out |= subtree_of(snap, child)
    return out


def borrowing_tops(snap: Snapshot, leaf: str, asks: set[str]) -> dict[str, str]:
    """Leaf -> the sibling subtree (of the leaf or one of its ancestors) it belongs to, for every
    leaf under a sibling subtree that borrows something in ``asks``."""
    out: dict[str, str] = {}
    chain = snap.chain(leaf)
    for i in range(len(chain) - 1):
        for sibling in snap.nodes[chain[i + 1]].children:
            if sibling != chain[i] and set(snap.borrowed(sibling)) & asks:
                for name in subtree_of(snap, sibling):
                    out[name] = sibling
    return out


class CycleMachine(RuleBasedStateMachine):
    client: redis.Redis

    def __init__(self) -> None:
        super().__init__()
        self.client.flushall()
        self.ledger = Ledger(self.client)
        self.planner = Planner(PlannerSettings(starvation_seconds=STARVATION, nomination_seconds=1000))
        # The planner's clock, moved on by the rules; submission times come from the ledger's
        # sequences (the Redis clock), so jobs submitted before a jump look as old as it makes them.
        self.now = time.time()
        self.blocked: set[str] = set()
        self.serial = 0
        self.priority: dict[str, int] = {}

    @initialize(tree=trees())
    def first_tree(self, tree: ElasticQuotaTree) -> None:
        self.ledger.apply(tree)

    def leaves(self) -> list[str]:
        return self.ledger.snapshot().leaves()

    @rule(data=st.data(), jobs=st.lists(st.tuples(requests, st.integers(0, 3)), min_size=1, max_size=5))
    def submit(self, data: st.DataObject, jobs: list[tuple[dict[str, int], int]]) -> None:
        for request, priority in jobs:
            leaf = data.draw(st.sampled_from(self.leaves()))
            self.serial += 1
            job = f"{leaf}/j{self.serial}"
            # Submitted "now" on the machine's clock: the sequence is a clock reading (the next
            # one is the later of the last one plus one and the server's clock).
            if int(self.client.get(self.ledger.keys.seq) or 0) < self.now * 1e6:
                self.client.set(self.ledger.keys.seq, int(self.now * 1e6))
            self.ledger.enqueue(job, leaf, request, priority)
            self.priority[job] = priority

    @rule(data=st.data())
    def finish_some(self, data: st.DataObject) -> None:
        running = sorted(self.ledger.records())
        if running:
            for job in data.draw(st.lists(st.sampled_from(running), max_size=3, unique=True)):
                self.ledger.release(job)

    @rule()
    def drain(self) -> None:
        """Everything running ends; the oldest starving head that fits its leaf is admitted then."""
        for job in list(self.ledger.records()):
            self.ledger.release(job)
        self.now += 1
        held = [r for r in self.planner.reservations(self.now) if r.why == "starving"]
        plan = self.cycle()
        for _ in range(3):  # as the dispatcher does: again at once when the holds changed
            if not plan.changed or plan.picks:
                break
            plan = self.cycle()
        snap = self.ledger.snapshot()
        pending = self.ledger.pending.records()
        if not plan.picks and any(snap.check(r.leaf, r.request) is None for r in pending.values()):
            raise AssertionError(
                "nothing runs, jobs that fit wait, and the cycle admits none (a deadlock): "
                f"refused {[(r.job, str(r.refusal)) for r in plan.refused]}, "
                f"blocked {[(b.job, b.holder) for b in plan.blocked]}, pending {pending}, "
                f"parked {self.planner._parked}, starving {self.planner._starving}"
            )
        if not held:
            return
        oldest = held[0]
        if oldest.job in {p.job for p in plan.picks}:
            return
        record = self.ledger.pending.record(oldest.job)
        if record is None:
            return  # admitted meanwhile
        refusal = snap.check(record.leaf, record.request)
        assert refusal is not None, f"{oldest.job} fits, yet was not admitted after the drain"
        # Jobs submitted before it, or other leaves' guaranteed ones, went first (cycle() checks
        # that no other job passed it); else only a job limit or a sibling's guarantee stops it.
        assert plan.picks or refusal.kind is RefusalKind.MIN or refusal.resource == MAX_JOBS, refusal

    @rule(dt=st.sampled_from([0.5, 5.0, 30.0]))
    def settle(self, dt: float) -> None:
        self.now += dt
        history = []
        for _ in range(8):  # until a cycle neither admits nor preempts anything
            plan = self.cycle()
            self.blocked = {b.job for b in plan.blocked}
            preempted = self.preempt(plan)
            history.append((len(plan.picks), preempted, plan.changed, sorted(self.planner._holds.items())))
            if not preempted and not plan.picks and not plan.changed:
                break
        else:
            raise AssertionError(f"the cycles did not settle: {history}")
        self.check_no_one_waits_for_nothing()

    # ---- the dispatcher's steps ---------------------------------------------------------------

    def heads(self, snap: Snapshot) -> dict[str, list[ClassHeads]]:
        active = [leaf for leaf in snap.leaves() if snap.nodes[leaf].pending > 0]
        return self.ledger.class_heads(active, 4)

    def cycle(self) -> Plan:
        snap = self.ledger.snapshot()
        heads = self.heads(snap)

        def still_head(r: Reservation) -> bool:
            first = leaf_head(heads.get(r.leaf, []))
            return first is not None and first.job == r.job

        # A starving head that is no longer its leaf's head (a job of higher priority came) holds
        # nothing; nominations hold until they end.
        current = self.planner.reservations(self.now)
        reservations = [r for r in current if r.why == "nominated" or still_head(r)]
        plan = self.planner.plan(snap.copy(), heads, self.now)
        for pick in plan.picks:
            for held in reservations:
                # A holder's own leaf keeps first come, first served behind it (other leaves
                # that the fair order serves first may go before it).
                if held.job == pick.job or held.leaf != pick.leaf:
                    continue
                asks = {r for r, a in pick.request.items() if a > 0} | {MAX_JOBS}
                if not asks & held.resources:
                    continue
                own = next((r for r in reservations if r.job == pick.job), None)
                submitted = pick.head.submitted
                rank = own.rank if own is not None else None if submitted is None else (True, submitted)
                older = rank is None or held.rank < rank
                # (its own leaf's jobs within the guarantee pass a head that can only borrow)
                guaranteed = held.borrows and fits_within_min(snap, pick.leaf, pick.request)
                assert not older or guaranteed, f"{pick.job} passed {held}"
        decisions = self.ledger.admit_pending_many([p.job for p in plan.picks])
        assert all(d.admitted for d in decisions), [d for d in decisions if not d.admitted]
        self.planner.admitted(p.job for p in plan.picks)
        return plan

    def preempt(self, plan: Plan) -> bool:
        """Victims for refused leaf heads, evicted at once (their quota back, the job queued)."""
        any_taken = False
        for r in plan.refused:
            if not r.leaf_head or r.never is not None or self.planner.nominated(r.job):
                continue
            snap = self.ledger.snapshot()
            running = self.ledger.running_jobs(snap.leaves())
            request = self.request_of(r.job)
            found = self.planner.victims(snap, r.leaf, request, r.head.priority, running)
            if found is None:
                continue
            kind, victims = found
            asks = {x for x, a in request.items() if a > 0}
            for victim in victims:
                if kind is PreemptionKind.PRIORITY:
                    assert victim.leaf == r.leaf and victim.priority < r.head.priority, (victim, r)
                else:
                    assert fits_within_min(snap, r.leaf, request), r
                    assert victim.leaf in borrowing_tops(snap, r.leaf, asks), (victim, r)
            for victim in victims:
                assert self.ledger.requeue(victim.job)
            self.planner.nominate(r.job, r.leaf, snap, r.refusal, request, until=self.now + 1000)
            self.planner.victims_gone(r.job)  # evicted at once here
            any_taken = True
        return any_taken

    def request_of(self, job: str) -> dict[str, int]:
        record = self.ledger.pending.record(job) or self.ledger.record(job)
        assert record is not None
        return record.request

    # ---- the properties -----------------------------------------------------------------------

    def held_back(self, job: str, leaf: str, reservations: list[Reservation]) -> bool:
        """Whether another job holds a reservation that may apply to ``job``."""
        return any(r.job != job for r in reservations)

    def check_no_one_waits_for_nothing(self) -> None:
        snap = self.ledger.snapshot()
        heads = self.heads(snap)
        running = self.ledger.running_jobs(snap.leaves())
        reservations = self.planner.reservations(self.now)
        for leaf, classes in heads.items():
            head = leaf_head(classes)
            if head is None or self.planner.nominated(head.job) or head.job in self.blocked:
                continue
            if self.held_back(head.job, leaf, reservations):
                continue
            request = self.request_of(head.job)
            if snap.check(leaf, request) is None or snap.never_fits(leaf, request) is not None:
                continue  # it fits (capacity or its turn decides) or never can
            asks = {r for r, a in request.items() if a > 0}
            tops = borrowing_tops(snap, leaf, asks) if fits_within_min(snap, leaf, request) else {}
            for victim in [j for jobs in running.values() for j in jobs]:
                reclaimable = victim.leaf in tops and any(victim.request.get(r, 0) > 0 for r in asks)
                lower = victim.leaf == leaf and victim.priority < head.priority
                if not (reclaimable or lower):
                    continue
                model = snap.copy()
                model.release(victim.leaf, victim.request, to_queue=True)
                assert model.check(leaf, request) is not None, (
                    f"{head.job} waits while evicting {victim.job} would let it in"
                )

    @invariant()
    def ledger_invariants(self) -> None:
        assert_invariants(self.ledger)
        assert self.ledger.rebuild() == []


def run(machine: type[RuleBasedStateMachine], examples: int) -> None:
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=30,
            deadline=None,
            phases=[Phase.explicit, Phase.reuse, Phase.generate],
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


def test_the_cycle_keeps_every_rule_at_every_step(redis_client: redis.Redis) -> None:
    CycleMachine.client = redis_client
    run(CycleMachine, 40)
