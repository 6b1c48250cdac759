"""The dispatcher: the one leader that turns queued jobs into placed ones.

See the package docstring for the round. A round is one *cycle* of :class:`queues.Planner`:

* It reads the tree in one round trip (:meth:`queues.Ledger.snapshot`) and, for every leaf with
  waiting jobs, the first few jobs of each request class (:meth:`queues.Ledger.class_heads`), so
  a million waiting jobs cost what a hundred do. Nothing changed since the last cycle that found
  nothing to do (the ledger's epoch, the members' capacity, their health, no timer due): the
  cycle stops there.
* The planner picks the jobs to admit in fair order (leaves below their ``min`` first, then the
  lowest share of quota), parks each class whose head the quota refuses until something that
  could change the answer happens, bounds how long a leaf's head may be passed, and keeps
  reservations for starving heads and preemptors. See :mod:`queues.planner`.
* The picks' fleet objects are read in one round trip and checked against member capacity
  (node by node, :class:`fleet.placement.Placer`); a job that fits nowhere remembers why, in
  memory, and is not fitted again until some member's capacity (or the holds on it) changed.
  Members the job failed on recently (``status.excluded``) are left out, unless they are the
  only ones where it fits now: then the exclusion gives way and it is placed there (the rule is
  in :mod:`fleet.dispatch.handback`). NotReady members, those that refused it and its firm
  exclusions (``status.excludedFirmly``) never give way.
* The fitting ones are admitted through the ledger in one batch (the scripts stay the authority)
  and placed: one pipeline of holds, one of ``Admitted`` writes, one of Events, one RQ job per
  member.
* Pending reasons are written only when they change (one per refused class head, the exact
  refusal), with Kubernetes-style aggregated Events; ``kubectl describe`` of any waiting job
  computes its position and blocker when asked (:mod:`fleet.endpoint.computed`).
* A refused leaf head that may preempt (its PriorityClass and its node's policy allow) gets the
  fewest victims the simulation needs; they are marked and evicted by the workers, requeued once
  their copies are gone (:mod:`fleet.dispatch.preemption`), at a bounded rate.

Every write it makes carries the lease's fencing token: the ledger's scripts and the fleet
object store refuse a stale one, so a leader that lost its lease without noticing writes
nothing. After taking the lease it reconciles, a slice of the stored jobs per round between its
cycles, and again a minute after each reconcile ends (see :meth:`Dispatcher.reconcile`).
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections import Counter as Tally
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from prometheus_client import Counter, Gauge, Histogram
from rq import Queue, Retry

from fleet.apiserver import ResourceType
from fleet.dispatch import degraded
from fleet.dispatch.context import Context, policy_for
from fleet.dispatch.handback import (
    COMPONENT,
    every_refusal,
    excluded_now,
    exclusion_ends,
    inflight_entry,
    members_left,
)
from fleet.dispatch.lease import LEASE_SECONDS, STANDBY_POLL_SECONDS, Lease, Renewer
from fleet.dispatch.preemption import PREEMPTIONS, RUNNING_STATES, mark_victims
from fleet.dispatch.sweep import Step, Sweep
from fleet.dispatch.tasks import Propagation, propagate_batch
from fleet.jobs import (
    FINISHED,
    HELD,
    FleetReason,
    Phase,
    attempt_of,
    cluster_of,
    conditions_of,
    converge,
    current_state,
    enqueue,
    get_jobs,
    job_key,
    job_priority,
    job_queue_of,
    mutate_job,
    mutate_jobs,
    not_before_of,
    preempted_by_of,
    refused_of,
    set_state,
    status_for_update,
    status_of,
    switch_out_of_step,
)
from fleet.kinds import FLEET_JOB_KINDS
from fleet.placement import Demand, Placer, PlaceRequest, job_pod_key, never_fits
from fleet.policy import PropagationPolicy
from fleet.state import read_health, record_event, record_events
from fleet.timestamps import parse_rfc3339
from fleet.workloads import KINDS, InvalidWorkload, JobRef, UnknownKind, adapter_for, job_ref
from queues import (
    Blocked,
    ClassHeads,
    Fence,
    Fenced,
    HeadCache,
    JobState,
    LedgerError,
    Pick,
    Plan,
    Planner,
    PlannerSettings,
    PreemptionKind,
    Refused,
    RunningJob,
    Snapshot,
    class_request,
    preemption_policy,
    queue_name,
)

__all__ = ["Dispatcher", "DispatcherSettings"]

log = logging.getLogger("fleet.dispatch.dispatcher")

ADMITTED_JOBS = Counter(
    "fleet_jobs_admitted_total", "Jobs admitted and placed on a member, by job kind.", ["job_kind"]
)
DECISIONS = Counter("fleet_dispatch_decisions_total", "Dispatch decisions by outcome.", ["outcome"])
REFUSALS = Counter(
    "fleet_quota_refusals_total",
    "Class heads refused for quota (each counted once per park), by kind: max, min (a sibling's "
    "guarantee), order (strict queue), reserved (held for a starving head or a preemptor).",
    ["kind"],
)
ROUND_SECONDS = Histogram(
    "fleet_dispatch_round_seconds",
    "Duration of one dispatch round.",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
LEADER = Gauge("fleet_dispatcher_leader", "1 while this dispatcher holds the lease.")
#: By the job's PriorityClass (``none`` without one): the classes are the admin's, a few, where a
#: raw priority value is whatever a job writes and would grow the series without bound.
ADMISSION_WAIT = Histogram(
    "fleet_admission_wait_seconds",
    "Time from submission to admission, by queue and priority class.",
    ["queue", "priority_class"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 1800, 3600),
)

_MEMORY: Final = 100_000  # jobs whose last miss (or last pending message) is remembered
#: A job preempted by another records it; the reason a job holds back others says this.
QUOTA_RESERVED: Final = "QuotaReserved"


@dataclass(frozen=True)
class DispatcherSettings:
    #: Jobs read per request class per cycle (the planner picks at most this many per class).
    heads_per_class: int = 8
    max_batch: int = 512
    idle_wait: float = 0.02
    #: A round that placed fewer than ``heads_per_class`` jobs starts the next this long after
    #: it started: under a trickle of submissions, rounds (and the one RQ job per member each
    #: sends) carry a few jobs each rather than one, for at most this much latency.
    round_interval: float = 0.01
    #: The leader lease (fleet.dispatch.lease): a leader that dies uncleanly stops admissions
    #: for about this long, a standby polling every min(0.5 s, TTL/6) takes over after it.
    lease_ttl: float = LEASE_SECONDS
    #: Seconds a propagation may wait in the queue, untaken by any worker, before it is enqueued
    #: again (the task was lost). Once a worker takes it, the worker's claim governs instead: it
    #: lasts fleet.dispatch.tasks.CLAIM_SECONDS and is renewed while the worker lives, so a killed
    #: worker's propagations are enqueued again within that (see fleet.dispatch.tasks.Claim).
    inflight_timeout: float = 30.0
    #: Pin member copies to the planned nodes (no false dispatch from a scheduler race).
    pin: bool = True
    policy_refresh: float = 2.0
    #: A reconcile starts this long after the last one ended (and at every takeover).
    reconcile_every: float = 60.0
    #: Jobs a round's slice of the reconcile reads at most: one round is held back by about
    #: this many jobs' decoding, never by all of them.
    reconcile_slice: int = 500
    #: How long a leaf's head that fits its quota may be passed by later jobs (queues.planner).
    starvation_seconds: float = 30.0
    #: A refused head waiting longer than this and ``wait_ratio`` times a job's wait is not
    #: passed by that job (queues.planner).
    grace_seconds: float = 5.0
    wait_ratio: float = 1.0
    #: A pending reason that changed only in its numbers is rewritten at most this often.
    reason_refresh: float = 10.0
    #: Victims taken per minute at most (no preemption storms).
    preemptions_per_minute: int = 60
    #: How long a preemptor keeps the quota its victims free for itself.
    nomination_seconds: float = 120.0


@dataclass
class _Miss:
    reason: str
    epoch: int  # capacity epoch when it missed (no fit); -1: time based
    until: float  # do not try again before this time
    #: A no-fit is tried again at this time even if no capacity changed: an exclusion ends.
    wake: float = math.inf


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


#: Who records the binding Event (the scheduler's name in ACK One's, as the seed shows it).
BINDING_COMPONENT: Final = "default-scheduler"


def binding_message(plan: _Plan) -> str:
    """``Binding has been scheduled successfully. Result: {member-1:0,[{master 1} {worker 2}]}``:
    the member and the replicas of each type, worded as ACK One's binding Event (the seed)."""
    replicas = " ".join(
        f"{{{shape.replica_type.lower()} {shape.count}}}" for shape in plan.candidate.demand.shapes
    )
    return f"Binding has been scheduled successfully. Result: {{{plan.member}:0,[{replicas}]}}"


@dataclass
class _Plan:
    """An admitted, placed candidate on its way to being recorded and sent."""

    candidate: _Candidate
    attempt: int
    member: str
    reservation: str
    message: str
    pin: dict[str, list[str]] | None

    def change(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """The fleet object's status, Admitted to ``member``, if it is still the one decided on."""
        uid = self.candidate.obj["metadata"]["uid"]
        if obj["metadata"].get("uid") != uid or attempt_of(obj) != self.attempt - 1:
            return None
        if obj["metadata"].get("deletionTimestamp") or current_state(obj) != Phase.QUEUED:
            return None
        status = status_for_update(obj)
        status["attempt"] = self.attempt
        status["cluster"] = self.member
        status["reservation"] = self.reservation
        status.pop("notBefore", None)
        set_state(status, Phase.ADMITTED, FleetReason.ADMITTED, self.message)
        return obj


class Dispatcher:
    def __init__(
        self,
        ctx: Context,
        placer: Placer,
        *,
        holder: str,
        lock: threading.RLock | None = None,
        settings: DispatcherSettings | None = None,
        member_labels: Callable[[], Mapping[str, Mapping[str, str]]] | None = None,
    ) -> None:
        self.ctx = ctx
        self.placer = placer
        self.settings = settings or DispatcherSettings()
        self.lock = lock or threading.RLock()
        self.lease = Lease(ctx.client, ctx.keys.lease, holder, ttl=self.settings.lease_ttl)
        self.planner = Planner(
            PlannerSettings(
                starvation_seconds=self.settings.starvation_seconds,
                grace_seconds=self.settings.grace_seconds,
                wait_ratio=self.settings.wait_ratio,
                max_picks=self.settings.max_batch,
                nomination_seconds=self.settings.nomination_seconds,
            )
        )
        self._member_labels = member_labels or (lambda: {})
        #: The leaves' class heads, read again only where a queue changed.
        self._heads = HeadCache()
        self._misses: OrderedDict[str, _Miss] = OrderedDict()
        self._demands: OrderedDict[tuple[str, str], Demand] = OrderedDict()
        #: Job -> the pending message last written on it, its shape (digits blurred), when.
        self._said: OrderedDict[str, tuple[str, str, float]] = OrderedDict()
        self._policies: list[PropagationPolicy] = []
        self._policies_at = 0.0
        self._down: frozenset[str] = frozenset()
        #: Members whose calls keep timing out (:mod:`fleet.dispatch.degraded`), avoided as NotReady ones.
        self._degraded: frozenset[str] = frozenset()
        self._reconciled_at = 0.0
        #: The reconcile under way, a slice per round (None between two).
        self._sweep: _Reconcile | None = None
        #: What the last cycle that found nothing to do saw; a cycle seeing the same is skipped.
        self._idle: tuple[int, int, frozenset[str]] | None = None
        #: The earliest time a timer (backoff, exclusion, starvation bound, nomination) is due.
        self._wake = math.inf
        self._victims_at: deque[float] = deque()
        #: Picks that fit no member, this cycle (for the debug line).
        self._nofits = 0
        #: Leaf -> (its usage when read, the lowest priority running in it).
        self._lowest: dict[str, tuple[dict[str, int] | None, int | None]] = {}
        #: Preemptor -> its victims, while they still hold quota (see Planner.victims_gone).
        self._nominees: dict[str, list[str]] = {}

    # ---- the loop ---------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Lead when possible and dispatch until ``stop`` is set; then give the lease up."""
        poll = min(STANDBY_POLL_SECONDS, self.settings.lease_ttl / 6)
        try:
            with Renewer(self.lease):
                self._loop(stop, poll)
        finally:
            self.lease.release()
            LEADER.set(0)

    def _loop(self, stop: threading.Event, poll: float) -> None:
        while not stop.is_set():
            if not self.lease.held and not self._lead():
                stop.wait(poll)
                continue
            try:
                began = time.monotonic()
                made = self.step()
            except Fenced:  # the ledger's and the objects' alike (queues.fencing)
                log.warning("event=fenced holder=%s: another dispatcher leads", self.lease.holder)
                self.lease.forfeit()
                LEADER.set(0)
                continue
            except Exception:
                log.exception("event=round_failed")
                stop.wait(0.5)
                continue
            if made == 0 and self._sweep is None:
                stop.wait(self.settings.idle_wait)
            elif made < self.settings.heads_per_class:
                stop.wait(max(0.0, began + self.settings.round_interval - time.monotonic()))

    def _lead(self) -> bool:
        if not self.lease.acquire():
            LEADER.set(0)
            return False
        LEADER.set(1)
        self._misses.clear()
        self._said.clear()
        self.planner.forget()
        self._heads.clear()
        self._nominees.clear()
        self._idle = None
        self._begin_reconcile()  # walked a slice per round, the first cycle not held back
        return True

    @property
    def _fence(self) -> Fence:
        if self.lease.token is None:
            raise Fenced("not leading")
        return Fence(self.lease.key, self.lease.token)

    def step(self) -> int:
        """One round; returns how many jobs were admitted and placed."""
        started = time.perf_counter()
        now = time.time()
        if not self.lease.renew():
            return 0
        if self._sweep is None and now - self._reconciled_at > self.settings.reconcile_every:
            self._begin_reconcile()
        self._reconcile_some()
        self._retry_inflight(now)
        with self.lock:
            self.placer.sync()
            epoch = max((c.version for c in self.placer.members()), default=0)
        self._policy_list(now)
        snap = self.ctx.ledger.snapshot()
        seen = (snap.epoch, epoch, self._down)
        if seen == self._idle and now < self._wake:
            return 0
        self._wake = math.inf
        placed, busy = self._cycle(snap, now, epoch)
        self._idle = None if busy else seen
        ROUND_SECONDS.observe(time.perf_counter() - started)
        return placed

    # ---- the cycle ----------------------------------------------------------------------------

    def _cycle(self, snap: Snapshot, now: float, epoch: int) -> tuple[int, bool]:
        """Plan, admit and place; preempt for refused heads. Returns (placed, whether anything
        happened that may let the next cycle do more)."""
        active = snap.queues()
        if not active:
            return 0, False
        heads = self._heads.heads(
            active,
            snap.queue_versions,
            lambda stale: self.ctx.ledger.class_heads(stale, self.settings.heads_per_class),
        )
        self._check_nominees()
        plan = self.planner.plan(snap.copy(), heads, now, skip=lambda job: self._skip(job, now, epoch))
        for reservation in self.planner.reservations(now):
            if reservation.why == "nominated":
                self._wake = min(self._wake, reservation.until)
        for leaf in active:
            started = self.planner.starving_since(leaf)
            if started is not None and now - started[1] < self.settings.starvation_seconds:
                self._wake = min(self._wake, started[1] + self.settings.starvation_seconds)
        self._say_refused(plan.refused, plan.blocked, snap)
        self._nofits = 0
        placed = self._admit(plan.picks, now, epoch) if plan.picks else 0
        preempted = self._preempt([r for r in plan.refused if r.leaf_head and r.never is None], snap, now)
        if log.isEnabledFor(logging.DEBUG):
            held = self.planner.reservations(now)
            why = Tally(f"{r.refusal.kind.value}@{r.refusal.node}" for r in plan.refused)
            why.update(f"held:{b.holder.why}@{b.holder.node}" for b in plan.blocked)
            log.debug(
                "event=cycle seconds=%.3f root=%s picks=%d placed=%d nofit=%d refused=%d blocked=%d "
                "why=%s held=%s preempted=%d leaves=%s",
                time.time() - now,
                dict(snap.root.used),
                len(plan.picks),
                placed,
                self._nofits,
                len(plan.refused),
                len(plan.blocked),
                ",".join(f"{k}:{n}" for k, n in why.most_common()) or "-",
                ",".join(f"{r.why}:{r.job}@{r.node}" for r in held) or "-",
                preempted,
                _leaf_states(plan, heads, self.planner),
            )
        return placed, bool(plan.picks) or preempted > 0 or plan.changed

    # ---- choosing what to look at ------------------------------------------------------------

    def _skip(self, key: str, now: float, epoch: int) -> bool:
        """Whether a job's last miss still stands; a skipped job's wake-up time is a timer of
        the cycle (it runs then even if nothing else changed)."""
        miss = self._misses.get(key)
        if miss is None:
            return False
        if now < miss.until:
            self._wake = min(self._wake, miss.until)
            return True
        if miss.epoch >= 0 and miss.epoch == epoch and now < miss.wake:
            self._wake = min(self._wake, miss.wake)
            return True
        return False

    def _remember(self, key: str, miss: _Miss) -> None:
        self._misses[key] = miss
        self._misses.move_to_end(key)
        while len(self._misses) > _MEMORY:
            self._misses.popitem(last=False)
        self._wake = min(self._wake, miss.until if miss.epoch < 0 else miss.wake)

    def _policy_list(self, now: float) -> list[PropagationPolicy]:
        if now - self._policies_at > self.settings.policy_refresh:
            self._policies = self.ctx.policies()
            self._degraded = degraded.active(self.ctx.client, self.ctx.keys, now)
            down = self._not_ready() | self._degraded
            if down != self._down:
                # A member went down or came back: what fit nowhere may fit now (and the other
                # way round), though no capacity changed.
                self._misses = OrderedDict((k, m) for k, m in self._misses.items() if m.reason != "nofit")
            self._down = down
            self._policies_at = now
        return self._policies

    def _not_ready(self) -> frozenset[str]:
        """Members the syncer's probes call NotReady: nothing new is sent there meanwhile."""
        health = read_health(self.ctx.client, self.ctx.keys)
        return frozenset(member for member, record in health.items() if record.not_ready)

    def _demand(self, obj: dict[str, Any]) -> Demand:
        uid = str(obj["metadata"].get("uid"))
        key = (uid, str(obj["metadata"].get("generation", 1)))
        demand = self._demands.get(key)
        if demand is None:
            demand = adapter_for(obj).demand(obj)
            self._demands[key] = demand
            while len(self._demands) > _MEMORY:
                self._demands.popitem(last=False)
        return demand

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
        policies = self._policies
        fitting: list[_Candidate] = []
        objs = get_jobs(self.ctx.objects, [p.job for p in picks])
        namesakes = self._namesakes([p.job for p in picks])
        names: set[tuple[str, str]] = set()
        for pick, obj in zip(picks, objs, strict=True):
            key = pick.job
            name = job_ref(key).names
            if name in names:  # its namesake of another kind is placed first: it knows where then
                self._remember(key, _Miss("namesake", -1, now + 0.5))
                continue
            names.add(name)
            if obj is None or obj["metadata"].get("deletionTimestamp"):
                # Deleted: the syncer releases it; until then it is not ours to place.
                self._remember(key, _Miss("deleted", -1, now + 1.0))
                continue
            if current_state(obj) != Phase.QUEUED:
                # Pending in the ledger but not Queued on the object: a hand-back half done.
                self._remember(key, _Miss("not queued", -1, now + 1.0))
                continue
            not_before = not_before_of(obj)
            if not_before > now:
                self._remember(key, _Miss("backoff", -1, not_before))
                continue
            try:
                demand = self._demand(obj)
            except (InvalidWorkload, UnknownKind) as error:
                self._fail_invalid(key, obj, str(error))
                continue
            policy = policy_for(obj, policies)
            if policy.spec.suspension.dispatching:
                self._remember(key, _Miss("suspended", -1, now + self.settings.policy_refresh))
                self._say(
                    key,
                    FleetReason.DISPATCHING_SUSPENDED,
                    f"{policy.kind} {policy.metadata.name} suspends dispatching "
                    "(spec.suspension.dispatching)",
                )
                continue
            refused = refused_of(obj)
            if refused and not members_left(refused, self._members_known(), policy):
                # Refused by every member it may use (the worker that recorded the last refusal
                # knew fewer members, or members left the fleet since): it would wait forever.
                self._fail(key, obj, FleetReason.ALL_MEMBERS_REFUSED, every_refusal(refused))
                continue
            excluded = excluded_now(obj, now)
            never = (
                self._down
                | set(refused)
                | excluded_now(obj, now, firm=True)
                | set(policy.spec.suspension.dispatching_on_clusters.cluster_names)
                | namesakes.get(key, frozenset())
            )
            avoid = never | excluded
            affinity = policy.spec.placement.cluster_affinity
            gave_way: frozenset[str] = frozenset()
            with self.lock:
                fits = self.placer.candidates(demand, affinity=affinity, avoid=avoid)
                if not fits and excluded:
                    # Every member where it fits now is one it is excluded from: the exclusion
                    # gives way rather than keep the job waiting beside an idle member.
                    fits = self.placer.candidates(demand, affinity=affinity, avoid=never)
                    if fits:
                        gave_way = frozenset(m for m, _ in fits) & excluded
                        avoid = frozenset(never)
            if not fits:
                self._no_fit(key, obj, demand, policy=policy, avoid=avoid, epoch=epoch, now=now)
                continue
            fitting.append(_Candidate(key, obj, demand, policy, avoid, pick, gave_way))
        if not fitting:
            return 0
        decisions = self.ctx.ledger.admit_pending_many([c.key for c in fitting], fence=self._fence)
        admitted: list[_Candidate] = []
        for candidate, decision in zip(fitting, decisions, strict=True):
            if decision.admitted:
                admitted.append(candidate)
            elif decision.refusal is not None:
                # The model and the ledger disagree (the tree changed meanwhile): say so; the
                # next cycle reads the ledger again.
                DECISIONS.labels("quota").inc()
                self._say(candidate.key, FleetReason.QUOTA_EXCEEDED, str(decision.refusal))
        self.planner.admitted(c.key for c in admitted)
        return self._place(admitted, now, epoch)

    def _place(self, admitted: list[_Candidate], now: float, epoch: int) -> int:
        """Place the admitted jobs and record it: one pipeline of fleet-object writes, one of
        Events, one propagation per member for the whole round."""
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
        with self.lock:  # synced at the start of this round; all holds in one exchange
            decisions = self.placer.place_many(requests)
        for c, attempt, request, decision in zip(admitted, attempts, requests, decisions, strict=True):
            if decision is None:
                self.ctx.ledger.requeue(c.key, fence=self._fence)
                self._no_fit(c.key, c.obj, c.demand, policy=c.policy, avoid=c.avoid, epoch=epoch, now=now)
                continue
            placement = decision.placement
            queue = job_queue_of(c.obj) or ""
            message = (
                f"admitted in queue {queue}; placed on {decision.member} "
                f"({c.policy.spec.placement.strategy}): {placement.pods} pods on {len(placement.takes)} nodes"
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
        changes = [(p.candidate.key, p.change) for p in plans]
        written = mutate_jobs(self.ctx.objects, changes, fence=self._fence)
        sent: list[tuple[_Plan, dict[str, Any]]] = []
        for plan, stored in zip(plans, written, strict=True):
            if stored is None or attempt_of(stored) != plan.attempt or not _admitted(stored):
                self._undo(plan, stored)
                continue
            self._misses.pop(plan.candidate.key, None)
            self._said.pop(plan.candidate.key, None)
            DECISIONS.labels("placed").inc()
            ADMITTED_JOBS.labels(job_ref(plan.candidate.key).adapter.kind).inc()
            created = _queued_at(stored)
            if created is not None:
                queue = job_queue_of(stored) or ""
                priority_class = str(status_of(stored).get("priorityClassName") or "none")
                ADMISSION_WAIT.labels(queue, priority_class).observe(max(0.0, now - created))
            sent.append((plan, stored))
        self._send(
            [(p.candidate.key, str(obj["metadata"]["uid"]), p.attempt, p.member, p.pin) for p, obj in sent],
            now=now,
        )
        record_events(
            self.ctx.objects,
            [(obj, str(FleetReason.ADMITTED), p.message) for p, obj in sent],
            component=COMPONENT,
        )
        record_events(
            self.ctx.objects,
            [(obj, str(FleetReason.SCHEDULE_BINDING_SUCCEED), binding_message(p)) for p, obj in sent],
            component=BINDING_COMPONENT,
        )
        return len(sent)

    def _undo(self, plan: _Plan, stored: dict[str, Any] | None) -> None:
        """Deleted or changed while we decided: the job is someone else's business now."""
        with self.lock:
            self.placer.release(plan.member, plan.reservation)
        key = plan.candidate.key
        if stored is not None and current_state(stored) == Phase.QUEUED:
            self.ctx.ledger.requeue(key, fence=self._fence)
        else:
            self.ctx.ledger.release(key, fence=self._fence)

    def _send(self, items: list[Propagation], *, now: float) -> None:
        """Mark the attempts in flight and enqueue their propagation, one RQ job per member
        (both repeatable: a propagation checks the attempt is still current)."""
        if not items:
            return
        deadline = now + self.settings.inflight_timeout
        entries = {inflight_entry(i[0], i[1], i[2]): deadline for i in items}
        by_member: dict[str, list[Propagation]] = {}
        for item in items:
            by_member.setdefault(item[3], []).append(item)
        jobs = [
            Queue.prepare_data(
                propagate_batch,
                args=(batch,),
                job_id=f"propagate-{member}-{batch[0][1]}-{batch[0][2]}-{int(now * 1000)}",
                result_ttl=60,
                failure_ttl=3600,
                description=(
                    f"propagate {len(batch)} jobs to {member} (first {batch[0][0]} attempt {batch[0][2]})"
                ),
            )
            for member, batch in by_member.items()
        ]
        with self.ctx.client.pipeline(transaction=True) as pipe:  # one round trip for the round
            pipe.zadd(self.ctx.keys.inflight, entries)
            self.ctx.queue.enqueue_many(jobs, pipeline=pipe)
            pipe.execute()

    # ---- preemption ---------------------------------------------------------------------------

    def _check_nominees(self) -> None:
        """Tell the planner which preemptors' victims no longer hold quota (evicted and
        requeued, or ended on their own): one pipeline, only while preemptions are under way."""
        for job in [j for j in self._nominees if self.planner.nominated(j) is None]:
            del self._nominees[job]
        if not self._nominees:
            return
        pipe = self.ctx.client.pipeline(transaction=False)
        for victims in self._nominees.values():
            pipe.hmget(self.ctx.ledger.keys.admitted, victims)
        for (job, _), held in zip(list(self._nominees.items()), pipe.execute(), strict=True):
            if all(raw is None for raw in held):
                self.planner.victims_gone(job)
                del self._nominees[job]

    def _lowest_running(self, snap: Snapshot, leaves: set[str]) -> dict[str, int | None]:
        """The lowest priority running in each leaf (None: none runs), cached until the leaf's
        usage changes; one pipeline for the leaves whose cache is stale."""
        stale = [leaf for leaf in leaves if self._lowest.get(leaf, (None,))[0] != snap.nodes[leaf].used]
        if stale:
            for leaf, jobs in self.ctx.ledger.running_jobs(stale).items():
                lowest = min((j.priority for j in jobs), default=None)
                self._lowest[leaf] = (dict(snap.nodes[leaf].used), lowest)
        return {leaf: self._lowest[leaf][1] for leaf in leaves}

    def _preempt(self, refused: list[Refused], snap: Snapshot, now: float) -> int:
        """Find victims for refused leaf heads that may preempt, mark them and send their
        evictions; returns how many were marked. See :mod:`queues.planner` for whom it takes."""
        while self._victims_at and self._victims_at[0] < now - 60:
            self._victims_at.popleft()
        candidates = [r for r in refused if self.planner.nominated(r.job) is None]
        if not candidates or len(self._victims_at) >= self.settings.preemptions_per_minute:
            return 0
        lowest = self._lowest_running(snap, {r.leaf for r in candidates})
        candidates = [
            r
            for r in candidates
            if self.planner.may_preempt(snap, r.leaf, class_request(r.cls), r.head.priority, lowest[r.leaf])
        ]
        if not candidates:
            return 0
        tree = self.ctx.ledger.tree()
        objs = get_jobs(self.ctx.objects, [r.job for r in candidates])
        fresh: Snapshot | None = None
        running: dict[str, list[RunningJob]] | None = None
        taken: set[str] = set()
        marked_total = 0
        for r, obj in zip(candidates, objs, strict=True):
            if obj is None or current_state(obj) != Phase.QUEUED or obj["metadata"].get("deletionTimestamp"):
                continue
            if not job_priority(obj).may_preempt:
                continue
            node_policy = preemption_policy(tree, r.leaf)
            kinds = [
                kind
                for kind in self.planner.may_preempt(
                    snap, r.leaf, class_request(r.cls), r.head.priority, lowest[r.leaf]
                )
                if (node_policy.within if kind is PreemptionKind.PRIORITY else node_policy.reclaim) != "Never"
            ]
            if not kinds:
                continue
            if fresh is None:
                fresh = self.ctx.ledger.snapshot()
                running = self.ctx.ledger.running_jobs(fresh.leaves())
            assert running is not None
            pool = running
            if node_policy.reclaim == "LowerPriority":
                pool = {
                    leaf: [j for j in jobs if leaf == r.leaf or j.priority < r.head.priority]
                    for leaf, jobs in running.items()
                }
            request = class_request(r.cls)
            exclude = set(taken)
            preemptor = preempted_by_of(obj)
            if preemptor:
                exclude.add(preemptor)
            for _ in range(3):  # victims not running yet are left out and the choice made again
                found = self.planner.victims(
                    fresh, r.leaf, request, r.head.priority, pool, kinds=kinds, exclude=exclude
                )
                if found is None:
                    break
                kind, victims = found
                if len(self._victims_at) + len(victims) > self.settings.preemptions_per_minute:
                    found = None
                    break
                vobjs = get_jobs(self.ctx.objects, [v.job for v in victims])
                idle = [
                    v.job
                    for v, o in zip(victims, vobjs, strict=True)
                    if o is None
                    or current_state(o) not in RUNNING_STATES
                    or o["metadata"].get("deletionTimestamp")
                ]
                if not idle:
                    break
                exclude.update(idle)
                found = None
            if found is None:
                continue
            queue = queue_name(fresh.nodes[r.leaf].path)
            why = (
                f"priority {r.head.priority} over lower-priority jobs of {queue}"
                if kind is PreemptionKind.PRIORITY
                else f"reclaiming the guaranteed quota of {queue}"
            )
            marked = mark_victims(
                self.ctx, obj, list(zip(victims, [o for o in vobjs if o is not None], strict=True)),
                why=why, fence=self._fence,
            )  # fmt: skip
            if not marked:
                continue
            for victim, vobj in marked:
                taken.add(victim.job)
                self._victims_at.append(now)
                fresh.release(victim.leaf, victim.request, to_queue=True)
                self.ctx.evict_queue.enqueue(
                    "fleet.dispatch.tasks.evict",
                    str(cluster_of(vobj)),
                    vobj["metadata"].get("namespace"),
                    vobj["metadata"]["name"],
                    str(vobj["metadata"]["uid"]),
                    attempt_of(vobj),
                    kind=job_ref(victim.job).tag,
                    retry=Retry(max=8, interval=[1, 2, 4, 8, 15, 30, 60, 60]),
                    job_timeout=60,
                    failure_ttl=3600,
                )
            PREEMPTIONS.labels(kind.value).inc(len(marked))
            fresh.admit(r.leaf, request)
            held = self.planner.nominate(
                r.job, r.leaf, fresh, r.refusal, request, until=now + self.settings.nomination_seconds
            )
            self._nominees[r.job] = [victim.job for victim, _ in marked]
            self._wake = min(self._wake, held.until)
            marked_total += len(marked)
        return marked_total

    # ---- misses -------------------------------------------------------------------------------

    def _say(self, key: str, reason: str, message: str) -> None:
        """Make the job's ``Queued`` condition say ``message`` (written only when it changed)."""
        self._say_many([(key, reason, message)])

    def _say_many(self, items: Sequence[tuple[str, str, str] | tuple[str, str, str, str]]) -> None:
        """:meth:`_say` for many jobs: one read, one pipeline of the writes that change
        something, one of their Events (aggregated per object and reason, as Kubernetes does).

        A reason that says the same thing with other numbers (``8 used`` then ``9 used``), or
        (an item's fourth element, its *shape*) the same thing about another job, is written
        again at most every ``reason_refresh`` seconds: under contention usage moves with every
        admission, and rewriting every waiting head each time would cost a write per head per
        change. The numbers a user reads in ``describe`` are computed when asked."""
        now = time.monotonic()
        todo = []
        shapes: dict[str, str] = {}
        for item in items:
            key, reason, message = item[0], item[1], item[2]
            shape = item[3] if len(item) > 3 else _shape(message)
            said = self._said.get(key)
            if said is not None:
                if said[0] == message:
                    continue
                if said[1] == shape and now - said[2] < self.settings.reason_refresh:
                    continue
            todo.append((key, reason, message))
            shapes[key] = shape
        if not todo:
            return

        wrote: set[str] = set()

        def change_for(key: str, reason: str, message: str) -> Callable[[dict[str, Any]], Any]:
            def change(current: dict[str, Any]) -> dict[str, Any] | None:
                if current_state(current) != Phase.QUEUED:
                    return None
                status = status_for_update(current)
                if not set_state(status, Phase.QUEUED, reason, message):
                    return None
                wrote.add(key)
                return current

            return change

        changes = [(key, change_for(key, reason, message)) for key, reason, message in todo]
        stored = mutate_jobs(self.ctx.objects, changes, fence=self._fence)
        events: list[tuple[dict[str, Any], str, str]] = []
        for (key, reason, message), obj in zip(todo, stored, strict=True):
            self._said[key] = (message, shapes[key], now)
            self._said.move_to_end(key)
            if obj is not None and key in wrote and current_state(obj) == Phase.QUEUED:
                events.append((obj, reason, message))
        while len(self._said) > _MEMORY:
            self._said.popitem(last=False)
        if events:
            record_events(self.ctx.objects, events, component=COMPONENT, fence=self._fence)

    def _say_refused(self, refused: Sequence[Refused], blocked: Sequence[Blocked], snap: Snapshot) -> None:
        """The pending reasons of this cycle's refused and held-back class heads."""
        items: list[tuple[str, str, str] | tuple[str, str, str, str]] = []
        for r in refused:
            REFUSALS.labels(r.refusal.kind.value).inc()
            if r.never is not None:
                message = f"{r.never}: larger than its quota can ever admit; it waits for the tree to change"
            else:
                message = str(r.refusal)
            items.append((r.job, FleetReason.QUOTA_EXCEEDED, message))
        for b in blocked:
            holder = b.holder
            path = snap.nodes[holder.node].path if holder.node in snap.nodes else holder.node
            if holder.why == "nominated":
                why = f"{holder.job} preempted jobs to start and holds the quota of {path} until it does"
            elif holder.why == "older":
                since = time.strftime("%H:%M:%S", time.gmtime(holder.since))
                longer = (
                    "since before this job was submitted"
                    if self.settings.wait_ratio <= 1
                    else f"more than {self.settings.wait_ratio:g} times as long as this job"
                )
                why = f"{holder.job} has waited for the quota of {path} since {since}Z, {longer}"
                why += ": it goes first"
            else:
                why = (
                    f"{holder.job} has waited at the head of its queue since "
                    f"{time.strftime('%H:%M:%S', time.gmtime(holder.since))}Z and holds the quota of "
                    f"{path} until it starts (starvation bound {self.settings.starvation_seconds:g}s)"
                )
            if (self._said.get(b.job) or ("",))[0] != why:
                REFUSALS.labels("reserved").inc()
            items.append((b.job, QUOTA_RESERVED, why, QUOTA_RESERVED))
        self._say_many(items)

    def _no_fit(
        self,
        key: str,
        obj: dict[str, Any],
        demand: Demand,
        *,
        policy: PropagationPolicy,
        avoid: frozenset[str],
        epoch: int,
        now: float,
    ) -> None:
        DECISIONS.labels("nofit").inc()
        self._nofits += 1
        previous = self._misses.get(key)
        if previous is None or previous.reason != "nofit" or previous.epoch != epoch:
            with self.lock:
                lines = self.placer.explain(
                    demand,
                    affinity=policy.spec.placement.cluster_affinity,
                    avoid=avoid,
                    member_labels=self._member_labels(),
                )
            refused = refused_of(obj)
            lines = [_say_avoided(line, self._down, refused, self._degraded) for line in lines]
            if not lines:
                message = "no member cluster is known yet"
            elif never_fits(lines):
                message = "no member cluster can ever fit the whole job as the fleet is: " + "; ".join(lines)
            else:
                message = "no member cluster fits the whole job now: " + "; ".join(lines)
            self._say(key, FleetReason.NO_FIT, message)
        ends = exclusion_ends(obj, now)
        self._remember(key, _Miss("nofit", epoch, now + 0.05, wake=min(ends, default=math.inf)))

    def _fail_invalid(self, key: str, obj: dict[str, Any], message: str) -> None:
        self._fail(key, obj, FleetReason.INVALID, message)

    def _fail(self, key: str, obj: dict[str, Any], reason: str, message: str) -> None:
        """Fail a job that is not placed (queued, or a stored job the ledger lost) for good:
        ``Failed`` with ``reason``, out of its queue."""

        def change(current: dict[str, Any]) -> dict[str, Any] | None:
            status = status_for_update(current)
            return current if set_state(status, Phase.FAILED, reason, message) else None

        mutate_job(self.ctx.objects, key, change, fence=self._fence)
        self.ctx.ledger.release(key, fence=self._fence)
        self._misses.pop(key, None)
        self._said.pop(key, None)
        record_event(
            self.ctx.objects,
            obj,
            type="Warning",
            reason=reason,
            message=message,
            component=COMPONENT,
        )

    def _members_known(self) -> dict[str, Mapping[str, str]]:
        """Every member the placer knows, with the labels a cluster affinity is matched on."""
        labels = self._member_labels()
        with self.lock:
            return {cap.name: labels.get(cap.name, cap.labels) for cap in self.placer.members()}

    # ---- repair -------------------------------------------------------------------------------

    def _retry_inflight(self, now: float) -> None:
        """Enqueue again the propagations whose copy did not appear in time (a worker died)."""
        due = self.ctx.client.zrangebyscore(self.ctx.keys.inflight, "-inf", now, start=0, num=100)
        entries = [raw.decode() if isinstance(raw, bytes) else str(raw) for raw in due]
        parsed = [entry.rsplit("|", 2) for entry in entries]
        objs = get_jobs(self.ctx.objects, [key for key, _, _ in parsed])
        again: list[Propagation] = []
        gone: list[str] = []
        for entry, (key, uid, attempt_text), obj in zip(entries, parsed, objs, strict=True):
            attempt = int(attempt_text)
            if (
                obj is None
                or obj["metadata"].get("uid") != uid
                or attempt_of(obj) != attempt
                or current_state(obj) != Phase.ADMITTED
            ):
                gone.append(entry)
                continue
            member = str(cluster_of(obj))
            log.warning("event=propagation_retried job=%s attempt=%d member=%s", key, attempt, member)
            again.append((key, uid, attempt, member, None))
        if gone:
            self.ctx.client.zrem(self.ctx.keys.inflight, *gone)
        self._send(again, now=now)

    def reconcile(self) -> None:
        """Make the ledger and the fleet objects agree, after a takeover or a crash: a whole
        reconcile, now (a sweep run to its end). The leader runs it a slice per round instead
        (:meth:`_reconcile_some`), so that a deep queue does not hold its first cycle back.

        A stored job the ledger does not know is queued (the API died between storing and
        queueing); a job whose pause or suspend switch and state disagree is held or queued again
        as its switch says (the API died between storing the switch and the state,
        :func:`fleet.jobs.pause.converge`); a held one (``Paused``, ``Suspended``) the ledger
        still holds is released (the API died between holding and releasing); an admitted job
        whose object says ``Queued`` is requeued (a dispatcher died between admitting and
        recording); an ``Admitted`` job whose propagation is not in flight gets it again (a
        dispatcher died before enqueueing it; one in flight is left to its deadline,
        :meth:`_retry_inflight`); a ledger entry whose job is gone is released.

        The walk is not a snapshot: jobs are submitted, admitted and dispatched while it runs. So
        each slice reads its objects and then their ledger state and in-flight marks; an
        ``Admitted`` job found not in flight is read again and sent only if still ``Admitted``
        in the same attempt (its worker marks it ``Dispatched`` before it clears the mark); and a
        ledger entry missing from the objects walked is released only if its object is still
        absent when read again after them: a job created meanwhile keeps its place.
        """
        self._begin_reconcile()
        while self._reconcile_some():
            pass

    def _begin_reconcile(self) -> None:
        """Start a sweep over every stored job, then over the ledger's (:mod:`fleet.dispatch.sweep`)."""
        objects, ledger = self.ctx.objects, self.ctx.ledger

        def kind(rt: ResourceType) -> Step[Any]:
            return lambda cursor, count: objects.scan(rt, cursor, count)

        def held(state: JobState) -> Step[Any]:
            return lambda cursor, count: ledger.scan(state, cursor, count)

        sources: list[tuple[str, Step[Any]]] = [("objects", kind(rt)) for rt in FLEET_JOB_KINDS]
        sources += [("ledger", held(JobState.ADMITTED)), ("ledger", held(JobState.PENDING))]
        self._sweep = _Reconcile(Sweep(sources, self.settings.reconcile_slice), time.monotonic())

    def _reconcile_some(self) -> bool:
        """One slice of the reconcile under way (at most ``reconcile_slice`` jobs); whether more
        remain. The end is logged and timed."""
        sweep = self._sweep
        if sweep is None:
            return False
        source, found = sweep.walk.take()
        if source == "objects":
            sweep.fixed += self._reconcile_objects(found, sweep.known)
        else:
            sweep.fixed += self._reconcile_entries([str(job) for job in found], sweep.known)
        if not sweep.walk.done:
            return True
        self._sweep = None
        self._reconciled_at = time.time()
        log.info(
            "event=reconciled jobs=%d fixed=%d seconds=%.3f",
            len(sweep.known),
            sweep.fixed,
            time.monotonic() - sweep.started,
        )
        return False

    def _reconcile_objects(self, objs: list[dict[str, Any]], known: set[str]) -> int:
        """The rules of :meth:`reconcile` for one slice of stored jobs; how many it fixed."""
        ledger = self.ctx.ledger
        fixed = 0
        todo: list[tuple[str, dict[str, Any]]] = []
        for obj in objs:
            key = job_key(obj)
            known.add(key)
            if obj["metadata"].get("deletionTimestamp") or current_state(obj) in FINISHED:
                continue
            if switch_out_of_step(obj) is not None:
                fixed += 1
                try:
                    converge(self.ctx.objects, ledger, obj)
                except (InvalidWorkload, UnknownKind, LookupError, LedgerError) as error:
                    self._fail_invalid(key, obj, f"cannot be queued: {error}")
                continue
            todo.append((key, obj))
        states = ledger.states([key for key, _ in todo])
        admitted = [(key, obj) for key, obj in todo if current_state(obj) == Phase.ADMITTED]
        entries = [inflight_entry(key, str(obj["metadata"]["uid"]), attempt_of(obj)) for key, obj in admitted]
        flying = self.ctx.client.zmscore(self.ctx.keys.inflight, entries) if entries else []
        for (key, obj), ledger_state in zip(todo, states, strict=True):
            state = current_state(obj)
            if state == Phase.QUEUED and ledger_state is JobState.ABSENT:
                try:
                    enqueue(ledger, obj)
                    fixed += 1
                except (InvalidWorkload, UnknownKind, LookupError, LedgerError) as error:
                    self._fail_invalid(key, obj, f"cannot be queued: {error}")
            elif state == Phase.QUEUED and ledger_state is JobState.ADMITTED:
                ledger.requeue(key, fence=self._fence)
                fixed += 1
            elif state in HELD and ledger_state is not JobState.ABSENT:
                ledger.release(key, fence=self._fence)  # held, then a crash before its release
                fixed += 1
        lost = [item for item, score in zip(admitted, flying, strict=True) if score is None]
        again = get_jobs(self.ctx.objects, [key for key, _ in lost])
        resend: list[Propagation] = []
        for (key, obj), now in zip(lost, again, strict=True):
            uid, attempt = str(obj["metadata"]["uid"]), attempt_of(obj)
            if now is None or now["metadata"].get("uid") != uid or attempt_of(now) != attempt:
                continue
            if current_state(now) != Phase.ADMITTED:
                continue  # dispatched (or given back) since it was read
            resend.append((key, uid, attempt, str(cluster_of(now)), None))
        self._send(resend, now=time.time())
        return fixed + len(resend)

    def _reconcile_entries(self, jobs: list[str], known: set[str]) -> int:
        """Release the ledger entries of one slice whose job is gone (absent from the objects
        walked, and still absent when read now); how many."""
        unknown = [job for job in jobs if job not in known]
        gone = [
            job
            for job, found in zip(unknown, get_jobs(self.ctx.objects, unknown), strict=True)
            if found is None
        ]
        for job in gone:
            self.ctx.ledger.release(job, fence=self._fence)
        return len(gone)


@dataclass
class _Reconcile:
    """A reconcile under way: its walk, the jobs it found stored, what it fixed, its start."""

    walk: Sweep[Any]
    started: float
    known: set[str] = field(default_factory=set)
    fixed: int = 0


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


def _admitted(obj: Mapping[str, object]) -> bool:
    return current_state(obj) == Phase.ADMITTED


def _say_avoided(
    line: str, down: frozenset[str], refused: Mapping[str, str], slow: frozenset[str] = frozenset()
) -> str:
    """A member avoided because it is NotReady or degraded, or because it refused the job, says
    so, not that the job failed there."""
    member = line.split(":", 1)[0]
    if member in refused:
        return f"{member}: refused the job ({refused[member]})"
    if member in slow:
        return f"{member}: degraded (its calls keep timing out)"
    return f"{member}: NotReady (failing its health probes)" if member in down else line


_DIGITS: Final = re.compile(r"\d+")


def _shape(message: str) -> str:
    """A pending message with its numbers blurred: what it says, not how much."""
    return _DIGITS.sub("#", message)


def _queued_at(obj: Mapping[str, Any]) -> float | None:
    """When the job last entered its queue (its last ``Queued`` condition's transition; a job
    queued again after a failover or a preemption waits from then, not from its creation)."""
    queued = [c for c in conditions_of(obj) if c.get("type") == Phase.QUEUED]
    stamp = (queued[-1].get("lastTransitionTime") if queued else None) or (obj.get("metadata") or {}).get(
        "creationTimestamp"
    )
    if not stamp:
        return None
    then = parse_rfc3339(str(stamp))
    return then.timestamp() if then is not None else None
