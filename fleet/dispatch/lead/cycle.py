"""One scheduling cycle: plan, admit, place.

* The tree is read in one round trip (:meth:`queues.Ledger.snapshot`) and, for every leaf with
  waiting jobs, the first few jobs of each request class (:meth:`queues.Ledger.class_heads`,
  re-read only where a queue changed: :class:`queues.HeadCache`), so a million waiting jobs cost
  what a hundred do.
* The planner picks the jobs to admit in fair order (leaves below their ``min`` first, then the
  lowest share of quota), parks each class whose head the quota refuses until something that
  could change the answer happens, bounds how long a leaf's head may be passed, and keeps
  reservations for starving heads and preemptors (:mod:`queues.planner`). Jobs whose last miss
  still stands are skipped before the quota is asked (:meth:`Leading.skip`): one that can never
  fit as the fleet is, or never be admitted by its quota, holds no head position and no
  reservation until the fleet or the tree changes.
* The picks' fleet objects are read in one round trip and checked against member capacity (node
  by node, :class:`fleet.placement.Placer`). Members the job failed on recently
  (``status.excluded``) are left out, unless they are the only ones where it fits now: then the
  exclusion gives way (the rule is in :mod:`fleet.dispatch.handback`). NotReady and degraded
  members, those that refused it and its firm exclusions never give way.
* The fitting ones are admitted through the ledger in one batch (the scripts stay the authority)
  and placed: one pipeline of holds, one of ``Admitted`` writes (:class:`fleet.jobs.Admit`), one
  of binding Events (``ScheduleBindingSucceed``), one RQ job per member
  (:mod:`~fleet.dispatch.lead.propagations`).
"""

from __future__ import annotations

import logging
import time
from collections import Counter as Tally
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from prometheus_client import Counter, Histogram

from fleet.dispatch.context import policy_for
from fleet.dispatch.handback import members_left
from fleet.dispatch.lead.propagations import Propagations
from fleet.dispatch.lead.shared import MEMORY, Leading, Miss, log
from fleet.dispatch.lead.victims import Victims
from fleet.dispatch.lead.waiting import DECISIONS, Waiting
from fleet.jobs import (
    Admit,
    Attempt,
    FleetReason,
    Phase,
    attempt_of,
    avoidance_of,
    cluster_of,
    condition,
    current_state,
    every_refusal,
    get_jobs,
    job_queue_of,
    mutate_jobs,
    not_before_of,
    refused_of,
    status_of,
    transition,
)
from fleet.placement import Demand, Placer, PlaceRequest, job_pod_key
from fleet.policy import ClusterAffinity, PropagationPolicy, describe_policy, policy_ref
from fleet.state import record_events
from fleet.timestamps import parse_rfc3339
from fleet.workloads import KINDS, InvalidWorkload, JobRef, UnknownKind, job_ref
from queues import ClassHeads, HeadCache, Pick, Plan, Planner, Snapshot

__all__ = ["ADMISSION_WAIT", "ADMITTED_JOBS", "BINDING_COMPONENT", "Cycle", "binding_message"]

ADMITTED_JOBS = Counter(
    "fleet_jobs_admitted_total", "Jobs admitted and placed on a member, by job kind.", ["job_kind"]
)
#: By the job's PriorityClass (``none`` without one): the classes are the admin's, a few, where a
#: raw priority value is whatever a job writes and would grow the series without bound.
ADMISSION_WAIT = Histogram(
    "fleet_admission_wait_seconds",
    "Time from submission to admission, by queue and priority class.",
    ["queue", "priority_class"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800, 3600),
)

#: Who records the binding Event (the scheduler's name in ACK One's, as the seed shows it).
BINDING_COMPONENT: Final = "default-scheduler"


def _candidates(
    placer: Placer, demand: Demand, affinity: ClusterAffinity | None, avoid: frozenset[str]
) -> list[tuple[str, int]]:
    return placer.candidates(demand, affinity=affinity, avoid=avoid)


@dataclass
class _Candidate:
    key: str
    obj: dict[str, Any]
    demand: Demand
    policy: PropagationPolicy
    avoid: frozenset[str]
    pick: Pick
    #: Members it is excluded from that it is placed among anyway: no other member fits now.
    gave_way: frozenset[str] = frozenset()


@dataclass
class _Plan:
    """An admitted, placed candidate on its way to being recorded and sent."""

    candidate: _Candidate
    attempt: int
    member: str
    reservation: str
    message: str
    pin: dict[str, list[str]] | None


def binding_message(plan: _Plan) -> str:
    """``Binding has been scheduled successfully. Result: {member-1:0,[{master 1} {worker 2}]}``:
    the member and the replicas of each type, worded as ACK One's binding Event (the seed)."""
    replicas = " ".join(
        f"{{{shape.replica_type.lower()} {shape.count}}}" for shape in plan.candidate.demand.shapes
    )
    return f"Binding has been scheduled successfully. Result: {{{plan.member}:0,[{replicas}]}}"


class Cycle:
    """Plan, admit and place; preempt for refused heads (see the module docstring)."""

    def __init__(
        self, leading: Leading, waiting: Waiting, propagations: Propagations, victims: Victims
    ) -> None:
        self.leading = leading
        self.ctx = leading.ctx
        self.settings = leading.settings
        self.waiting = waiting
        self.propagations = propagations
        self.victims = victims
        #: The leaves' class heads, read again only where a queue changed.
        self.heads = HeadCache()
        #: Refused or held-back heads -> the fleet shape they were found able to fit.
        self._shape_seen: OrderedDict[str, int] = OrderedDict()

    def forget(self) -> None:
        self.heads.clear()
        self._shape_seen.clear()

    def run(self, snap: Snapshot, now: float, epoch: int, shape: int) -> tuple[int, bool]:
        """One cycle. Returns (placed, whether anything happened that may let the next cycle do
        more)."""
        leading = self.leading
        active = snap.queues()
        if not active:
            return 0, False
        heads = self.heads.heads(
            active,
            snap.queue_versions,
            lambda stale: self.ctx.ledger.class_heads(stale, self.settings.heads_per_class),
        )
        self.victims.check_nominees()
        planner = leading.planner
        plan = planner.plan(snap.copy(), heads, now, skip=lambda job: leading.skip(job, now, epoch))
        for reservation in planner.reservations(now):
            if reservation.why == "nominated":
                leading.timer(reservation.until)
        for leaf in active:
            started = planner.starving_since(leaf)
            if started is not None and now - started[1] < self.settings.starvation_seconds:
                leading.timer(started[1] + self.settings.starvation_seconds)
        self.waiting.refused(plan.refused, plan.blocked, snap)
        # Never admitted as the tree is: out of line until it changes (every tree change puts
        # parked jobs back); never fitting the fleet as it is: out of line until that changes.
        self._park([r.job for r in plan.refused if r.never is not None], "quota")
        self._park(self._never_fitting(plan, shape), "fleet")
        self.waiting.nofits = 0
        placed = self._admit(plan.picks, now, epoch) if plan.picks else 0
        preempted = self.victims.preempt(
            [r for r in plan.refused if r.leaf_head and r.never is None], snap, now
        )
        if log.isEnabledFor(logging.DEBUG):
            held = planner.reservations(now)
            why = Tally(f"{r.refusal.kind.value}@{r.refusal.node}" for r in plan.refused)
            why.update(f"held:{b.holder.why}@{b.holder.node}" for b in plan.blocked)
            log.debug(
                "event=cycle seconds=%.3f root=%s picks=%d placed=%d nofit=%d refused=%d blocked=%d "
                "why=%s held=%s preempted=%d leaves=%s",
                time.time() - now,
                dict(snap.root.used),
                len(plan.picks),
                placed,
                self.waiting.nofits,
                len(plan.refused),
                len(plan.blocked),
                ",".join(f"{k}:{n}" for k, n in why.most_common()) or "-",
                ",".join(f"{r.why}:{r.job}@{r.node}" for r in held) or "-",
                preempted,
                _leaf_states(plan, heads, planner),
            )
        return placed, bool(plan.picks) or preempted > 0 or plan.changed

    # ---- out of line --------------------------------------------------------------------------

    def _park(self, jobs: list[str], why: str) -> None:
        """Take ``jobs`` out of line in the ledger (:meth:`queues.Ledger.park`) for ``why``."""
        if jobs:
            parked = self.ctx.ledger.park(jobs, why, fence=self.leading.fence)
            if parked:
                log.info("event=parked why=%s jobs=%d first=%s", why, parked, jobs[0])

    def _never_fitting(self, plan: Plan, shape: int) -> list[str]:
        """The heads refused by the quota or held back by another's reservation that can never
        fit the fleet as it is: capacity is asked only for the planner's picks, so a head the
        quota refuses would otherwise keep its place (and, refused long enough, hold a
        reservation) for a job that no wait lets run. Each is looked at once per fleet shape."""
        leading = self.leading
        asked = [r.job for r in plan.refused if r.never is None] + [b.job for b in plan.blocked]
        todo = [job for job in asked if self._shape_seen.get(job) != shape]
        if not todo:
            return []
        never: list[str] = []
        for key, obj in zip(todo, get_jobs(self.ctx.objects, todo), strict=True):
            self._shape_seen[key] = shape
            self._shape_seen.move_to_end(key)
            if obj is None or current_state(obj) != Phase.QUEUED:
                continue
            try:
                demand = leading.demand(obj)
            except (InvalidWorkload, UnknownKind):
                continue  # failed when it is picked
            policy = policy_for(obj, leading.policies)
            with leading.lock:
                fits = leading.placer.could_ever_fit(
                    demand,
                    affinity=policy.spec.placement.cluster_affinity,
                    member_labels=leading.member_labels(),
                )
            if not fits:
                message = self.waiting.no_fit_message(obj, demand, policy, frozenset(), never=True)
                self.waiting.say(key, FleetReason.NO_FIT, message)
                never.append(key)
        while len(self._shape_seen) > MEMORY:
            self._shape_seen.popitem(last=False)
        return never

    # ---- deciding -----------------------------------------------------------------------------

    def _namesakes(self, keys: list[str]) -> dict[str, frozenset[str]]:
        """Job key -> the members holding a job of another kind with its namespace and name.

        Two operators name their pods alike (``<name>-master-0``), so such a pair cannot run on
        one member; each is kept off the other's member (one read per other kind)."""
        refs = [job_ref(key) for key in keys]
        others = [
            (i, JobRef(a, r.namespace, r.name))
            for i, r in enumerate(refs)
            for a in KINDS
            if a is not r.adapter
        ]
        found = get_jobs(self.ctx.objects, [ref.key for _, ref in others])
        out: dict[str, set[str]] = {}
        for (i, _), obj in zip(others, found, strict=True):
            member = cluster_of(obj) if obj is not None else None
            if member is not None:
                out.setdefault(keys[i], set()).add(member)
        return {key: frozenset(members) for key, members in out.items()}

    def _admit(self, picks: list[Pick], now: float, epoch: int) -> int:
        """Check the planner's picks against capacity, admit the fitting ones in one batch
        through the ledger (the authority), and place them."""
        leading = self.leading
        policies = leading.policies
        fitting: list[_Candidate] = []
        out_of_line: list[str] = []
        objs = get_jobs(self.ctx.objects, [p.job for p in picks])
        namesakes = self._namesakes([p.job for p in picks])
        names: set[tuple[str, str]] = set()
        for pick, obj in zip(picks, objs, strict=True):
            key = pick.job
            name = job_ref(key).names
            if name in names:  # its namesake of another kind is placed first: it knows where then
                leading.remember(key, Miss("namesake", -1, now + 0.5))
                continue
            names.add(name)
            if obj is None or obj["metadata"].get("deletionTimestamp"):
                # Deleted: the syncer releases it; until then it is not ours to place.
                leading.remember(key, Miss("deleted", -1, now + 1.0))
                continue
            if current_state(obj) != Phase.QUEUED:
                # Pending in the ledger but not Queued on the object: a hand-back half done.
                leading.remember(key, Miss("not queued", -1, now + 1.0))
                continue
            not_before = not_before_of(obj)
            if not_before > now:
                leading.remember(key, Miss("backoff", -1, not_before))
                continue
            try:
                demand = leading.demand(obj)
            except (InvalidWorkload, UnknownKind) as error:
                self.waiting.fail(key, obj, FleetReason.INVALID, str(error))
                continue
            policy = policy_for(obj, policies)
            if policy.spec.suspension.dispatching:
                leading.remember(key, Miss("suspended", -1, now + self.settings.policy_refresh))
                self.waiting.say(
                    key,
                    FleetReason.DISPATCHING_SUSPENDED,
                    f"{policy.kind} {policy.metadata.name} suspends dispatching "
                    "(spec.suspension.dispatching)",
                )
                continue
            refused = refused_of(obj)
            if refused and not members_left(refused, leading.members_known(), policy):
                # Refused by every member it may use (the worker that recorded the last refusal
                # knew fewer members, or members left the fleet since): it would wait forever.
                self.waiting.fail(key, obj, FleetReason.ALL_MEMBERS_REFUSED, every_refusal(refused))
                continue
            kept_off = avoidance_of(
                obj,
                policy,
                now=now,
                unusable=leading.down | leading.degraded | leading.cordoned | namesakes.get(key, frozenset()),
            )
            affinity = policy.spec.placement.cluster_affinity
            with leading.lock:
                fits, avoid = kept_off.place(partial(_candidates, leading.placer, demand, affinity))
            # Every member where it fits now is one it is excluded from: the exclusion gave way
            # rather than keep the job waiting beside an idle member.
            gave_way = (
                frozenset(m for m, _ in fits) & kept_off.excluded if avoid == kept_off.never else frozenset()
            )
            if not fits:
                if self.waiting.no_fit(key, obj, demand, policy=policy, avoid=avoid, epoch=epoch, now=now):
                    out_of_line.append(key)
                continue
            fitting.append(_Candidate(key, obj, demand, policy, avoid, pick, gave_way))
        self._park(out_of_line, "fleet")
        if not fitting:
            return 0
        decisions = self.ctx.ledger.admit_pending_many([c.key for c in fitting], fence=leading.fence)
        admitted: list[_Candidate] = []
        for candidate, decision in zip(fitting, decisions, strict=True):
            if decision.admitted:
                admitted.append(candidate)
            elif decision.refusal is not None:
                # The model and the ledger disagree (the tree changed meanwhile): say so; the
                # next cycle reads the ledger again.
                DECISIONS.labels("quota").inc()
                self.waiting.say(candidate.key, FleetReason.QUOTA_EXCEEDED, str(decision.refusal))
        leading.planner.admitted(c.key for c in admitted)
        return self._place(admitted, now, epoch)

    def _place(self, admitted: list[_Candidate], now: float, epoch: int) -> int:
        """Place the admitted jobs and record it: one pipeline of fleet-object writes, one of
        Events, one propagation per member for the whole round."""
        leading = self.leading
        plans: list[_Plan] = []
        attempts = [attempt_of(c.obj) + 1 for c in admitted]
        requests = [
            PlaceRequest(
                c.demand,
                reservation_id=job_pod_key(str(c.obj["metadata"]["uid"]), attempt),
                job=c.key,
                strategy=c.policy.spec.placement.strategy,
                affinity=c.policy.spec.placement.cluster_affinity,
                avoid=c.avoid,
            )
            for c, attempt in zip(admitted, attempts, strict=True)
        ]
        with leading.lock:  # synced at the start of this round; all holds in one exchange
            decisions = leading.placer.place_many(requests)
        for c, attempt, request, decision in zip(admitted, attempts, requests, decisions, strict=True):
            if decision is None:  # the holds of this round took what it fitted
                self.ctx.ledger.requeue(c.key, fence=leading.fence)
                self.waiting.no_fit(
                    c.key, c.obj, c.demand, policy=c.policy, avoid=c.avoid, epoch=epoch, now=now
                )
                continue
            placement = decision.placement
            queue = job_queue_of(c.obj) or ""
            message = (
                f"admitted in queue {queue}; placed on {decision.member} "
                f"({c.policy.spec.placement.strategy}): {placement.pods} pods on "
                f"{len(placement.takes)} nodes; policy: {describe_policy(policy_ref(c.policy))}"
            )
            if decision.member in c.gave_way:
                DECISIONS.labels("exclusion_gave_way").inc()
                message += (
                    f"; its exclusion from {decision.member} gave way: no member it is not excluded "
                    "from fits now"
                )
            pin = placement.nodes_by_replica_type() if self.settings.pin else None
            rid = request.reservation_id
            plans.append(_Plan(c, attempt, decision.member, rid, message, dict(pin) if pin else None))
        if not plans:
            return 0
        changes = [
            (
                p.candidate.key,
                transition(
                    Admit(p.member, p.attempt, p.reservation, p.message, policy_ref(p.candidate.policy)),
                    Attempt(str(p.candidate.obj["metadata"]["uid"]), p.attempt - 1),
                ),
            )
            for p in plans
        ]
        # The jobs as this cycle read them (a write finding one changed since reads it again).
        currents = [p.candidate.obj for p in plans]
        written = mutate_jobs(self.ctx.objects, changes, fence=leading.fence, currents=currents)
        sent: list[tuple[_Plan, dict[str, Any]]] = []
        for plan, stored in zip(plans, written, strict=True):
            ours = stored is not None and current_state(stored) == Phase.ADMITTED
            if stored is None or not ours or attempt_of(stored) != plan.attempt:
                self._undo(plan, stored)
                continue
            leading.misses.pop(plan.candidate.key, None)
            self.waiting.forget(plan.candidate.key)
            DECISIONS.labels("placed").inc()
            ADMITTED_JOBS.labels(job_ref(plan.candidate.key).adapter.kind).inc()
            queued = _queued_at(plan.candidate.obj)
            if queued is not None:
                queue = job_queue_of(stored) or ""
                priority_class = str(status_of(stored).get("priorityClassName") or "none")
                ADMISSION_WAIT.labels(queue, priority_class).observe(max(0.0, now - queued))
            sent.append((plan, stored))
        self.propagations.send(
            [(p.candidate.key, str(obj["metadata"]["uid"]), p.attempt, p.member, p.pin) for p, obj in sent],
            now=now,
        )
        # One Event for the decision, worded as ACK One's scheduler words it (the seed): the
        # Admitted condition just written holds the admission's own message (issue 30, goal 7).
        record_events(
            self.ctx.objects,
            [(obj, str(FleetReason.SCHEDULE_BINDING_SUCCEED), binding_message(p)) for p, obj in sent],
            component=BINDING_COMPONENT,
        )
        return len(sent)

    def _undo(self, plan: _Plan, stored: dict[str, Any] | None) -> None:
        """Deleted or changed while we decided: the job is someone else's business now."""
        leading = self.leading
        with leading.lock:
            leading.placer.release(plan.member, plan.reservation)
        key = plan.candidate.key
        if stored is not None and current_state(stored) == Phase.QUEUED:
            self.ctx.ledger.requeue(key, fence=leading.fence)
        else:
            self.ctx.ledger.release(key, fence=leading.fence)


def _leaf_states(plan: Plan, heads: Mapping[str, Sequence[ClassHeads]], planner: Planner) -> str:
    """For the debug line: what each leaf with waiting jobs got this cycle, per class head:
    ``p`` picked, ``b<leaf@node`` held by that leaf's head at that node, ``r:kind@node`` refused
    now, ``z:kind@node`` parked since an earlier refusal."""
    picked = Tally(p.leaf for p in plan.picks)
    blocked = {b.job: b.holder for b in plan.blocked}
    refused = {r.job: r.refusal for r in plan.refused}
    out = []
    for leaf, classes in heads.items():
        marks = [f"p{picked[leaf]}"] if picked[leaf] else []
        for c in classes:
            if not c.heads:
                continue
            job = c.heads[0].job
            if job in blocked:
                marks.append(f"b<{blocked[job].leaf}@{blocked[job].node}")
            elif job in refused:
                marks.append(f"r:{refused[job].kind.value}@{refused[job].node}")
            elif (parked := planner.parked(leaf, c.cls)) is not None:
                marks.append(f"z:{parked.kind.value}@{parked.node}")
        out.append(f"{leaf}[{' '.join(marks)}]")
    return ";".join(out)


def _queued_at(obj: Mapping[str, Any]) -> float | None:
    """When the job last entered its queue (its ``Queued`` condition's last transition to True; a
    job queued again after a failover or a preemption waits from then, not from its creation)."""
    queued = condition(obj, Phase.QUEUED)
    stamp = (queued or {}).get("lastTransitionTime") or (obj.get("metadata") or {}).get("creationTimestamp")
    if not stamp:
        return None
    then = parse_rfc3339(str(stamp))
    return then.timestamp() if then is not None else None
