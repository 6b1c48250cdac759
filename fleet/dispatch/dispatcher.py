"""The dispatcher: the one leader that turns queued jobs into placed ones.

As Kueue keeps its scheduler apart from the workload's lifecycle and Karmada runs one
controller per concern, the leader is composed of concerns, one module each under
:mod:`fleet.dispatch.lead`, sharing one :class:`~fleet.dispatch.lead.shared.Leading`:

==============================================  ==============================================
:mod:`~fleet.dispatch.lead.cycle`               one scheduling cycle: plan, admit, place
:mod:`~fleet.dispatch.lead.waiting`             why each waiting job waits, written when it changes
:mod:`~fleet.dispatch.lead.victims`             whom to preempt for a refused head, and evicting them
:mod:`~fleet.dispatch.lead.propagations`        admitted attempts sent to the workers, lost ones again
:mod:`~fleet.dispatch.lead.reconcile`           the ledger and the stored jobs made to agree
==============================================  ==============================================

This module is the leader loop: it takes the lease (:mod:`fleet.dispatch.lease`) or waits as a
standby, and each round renews it, walks a slice of the reconcile, resends lost propagations,
reads the members' capacity and health and the policies, and runs a cycle unless nothing
changed since the last one found nothing to do (the ledger's epoch, the members' capacity, their
health, no timer due). When what the fleet could ever hold changes (:meth:`fleet.placement.Placer.shape`,
the policies), the jobs parked because they could never fit it come back in line.

A round that found nothing to do is not followed by another until something moves, as a
controller waits on its informers rather than polling: the ledger's scripts leave a mark in a
wake list at every change (a job queued, admitted, released), which a follower thread blocks on
only while the loop waits, and the capacity feeder calls :meth:`Dispatcher.wake` when a member's
capacity changes. What neither signals (a member's health or taints, the policies, a
propagation to resend) is read at least every ``idle_cap`` (0.25 s), and a backoff's end starts
a round when it falls due; so an idle dispatcher reads a few times a second, not fifty.

Every write it makes carries the lease's fencing token: the ledger's scripts and the fleet object
store refuse a stale one, so a leader that lost its lease without noticing writes nothing.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Final

from prometheus_client import Gauge, Histogram

from fleet.dispatch import degraded
from fleet.dispatch.context import Context
from fleet.dispatch.draining import drain_member
from fleet.dispatch.lead.cycle import Cycle
from fleet.dispatch.lead.propagations import Propagations
from fleet.dispatch.lead.reconcile import Reconcile
from fleet.dispatch.lead.shared import DispatcherSettings, Leading, log
from fleet.dispatch.lead.victims import Victims
from fleet.dispatch.lead.waiting import Waiting
from fleet.dispatch.lease import STANDBY_POLL_SECONDS, Lease, Renewer
from fleet.jobs import FINISHED, Phase, attempt_of, cluster_of, current_state, list_jobs
from fleet.placement import Placer
from fleet.state import NO_EXECUTE, read_health, read_taints, unschedulable
from fleet.workloads import job_key
from queues import Fenced, Planner

__all__ = ["Dispatcher", "DispatcherSettings"]

ROUND_SECONDS = Histogram(
    "fleet_dispatch_round_seconds",
    "Duration of one dispatch round.",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
LEADER = Gauge("fleet_dispatcher_leader", "1 while this dispatcher holds the lease.")
#: How long one read of the ledger's wake list blocks: under the Redis client's socket timeout
#: (2 s), whatever ``idle_cap`` is; the follower reads again while the loop still waits.
WAKE_BLOCK_SECONDS: Final = 1.0


class Dispatcher:
    """One dispatcher process's leader loop (see the module docstring)."""

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
        self.settings = settings = settings or DispatcherSettings()
        self.lease = Lease(ctx.client, ctx.keys.lease, holder, ttl=settings.lease_ttl)
        self.leading = leading = Leading(
            ctx, placer, settings, self.lease, lock or threading.RLock(), member_labels or (lambda: {})
        )
        self.waiting = Waiting(leading)
        self.propagations = Propagations(leading)
        self.victims = Victims(leading)
        self.cycle = Cycle(leading, self.waiting, self.propagations, self.victims)
        self.reconciler = Reconcile(leading, self.waiting, self.propagations)
        #: What the last cycle that found nothing to do saw; a cycle seeing the same is skipped.
        self._idle: tuple[int, int, frozenset[str], frozenset[str]] | None = None
        #: What the fleet could ever hold when the jobs parked for it were last put back
        #: (None: not since this term began, so they are put back at once).
        self._shape: int | None = None
        self._policies_digest = 0
        #: Members with a NoExecute taint whose jobs this dispatcher has sent away (drained).
        self._draining: frozenset[str] = frozenset()
        #: Set when something a round decides on moved (see :meth:`wake`); cleared as a round starts.
        self._wake = threading.Event()
        #: Set while the loop waits after an idle round: only then does the ledger follower block
        #: on the ledger's wake list (under load it never reads it).
        self._waiting = threading.Event()

    @property
    def planner(self) -> Planner:
        return self.leading.planner

    # ---- the loop ---------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Lead when possible and dispatch until ``stop`` is set; then give the lease up."""
        poll = min(STANDBY_POLL_SECONDS, self.settings.lease_ttl / 6)
        done = threading.Event()
        follower = threading.Thread(
            target=self._follow_ledger, args=(stop, done), name="ledger-wake", daemon=True
        )
        follower.start()
        try:
            with Renewer(self.lease):
                self._loop(stop, poll)
        finally:
            done.set()
            self._waiting.set()  # the follower sees ``done`` now, not after its next second
            follower.join(2.0)
            self._waiting.clear()
            self.lease.release()
            LEADER.set(0)

    def wake(self) -> None:
        """Start the next round now if the loop is waiting after an idle one (a member's capacity
        changed: the capacity feeder calls this)."""
        self._wake.set()

    def _follow_ledger(self, stop: threading.Event, done: threading.Event) -> None:
        """While the loop waits after an idle round, block on the ledger's wake list and wake the
        loop when the epoch moves: a job queued to an idle fleet is admitted at once, though an
        idle loop reads nothing for up to ``idle_cap``."""
        while not (stop.is_set() or done.is_set()):
            if not self._waiting.wait(1.0) or stop.is_set() or done.is_set():
                continue
            try:
                if self.ctx.ledger.wait_for_change(WAKE_BLOCK_SECONDS):
                    self._wake.set()
            except Exception as error:  # Redis away: the loop's own rounds notice and wait
                log.debug("event=ledger_wake_failed error=%r", error)
                stop.wait(0.5)

    def _loop(self, stop: threading.Event, poll: float) -> None:
        while not stop.is_set():
            if not self.lease.held and not self._lead():
                stop.wait(poll)
                continue
            try:
                began = time.monotonic()
                self._wake.clear()  # before the round reads: what moves from now on wakes the next
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
            if made == 0 and self.reconciler.walk is None:
                self._idle_wait(stop, began)
            elif made < self.settings.heads_per_class:
                stop.wait(max(0.0, began + self.settings.round_interval - time.monotonic()))

    def _idle_wait(self, stop: threading.Event, began: float) -> None:
        """After a round with nothing to do: the next starts when something moves, after at least
        ``idle_wait`` and at most ``idle_cap`` (sooner when a backoff ends)."""
        settings = self.settings
        stop.wait(max(0.0, began + settings.idle_wait - time.monotonic()))
        until = min(began + settings.idle_cap, time.monotonic() + max(0.0, self.leading.wake - time.time()))
        self._waiting.set()
        try:
            while not stop.is_set() and not self._wake.is_set():
                left = until - time.monotonic()
                if left <= 0:
                    return
                self._wake.wait(min(left, 0.05))  # stop is looked at every 50 ms
        finally:
            self._waiting.clear()

    def _lead(self) -> bool:
        if not self.lease.acquire():
            LEADER.set(0)
            return False
        LEADER.set(1)
        self.leading.forget()
        self.waiting.forget()
        self.cycle.forget()
        self.victims.forget()
        self._idle = None
        self._shape = None
        self.reconciler.begin()  # walked a slice per round, the first cycle not held back
        return True

    def step(self) -> int:
        """One round; returns how many jobs were admitted and placed."""
        started = time.perf_counter()
        now = time.time()
        if not self.lease.renew():
            return 0
        self.reconciler.due(now)
        self.reconciler.some()
        self.propagations.retry(now)
        self._refresh(now)
        with self.leading.lock:
            self.placer.sync()
            epoch = max((c.version for c in self.placer.members()), default=0)
            shape = hash((self.placer.shape(), self._policies_digest, self.leading.cordoned))
        if shape != self._shape:
            back = self.ctx.ledger.unpark("fleet", fence=self.leading.fence)
            if back:
                log.info("event=unparked why=fleet jobs=%d", back)
            self._shape = shape
        # Nothing changed since a cycle that could do nothing: one field read, not the tree's
        # every node (a snapshot is a few dozen hashes, and most rounds under load are these).
        seen = (self.ctx.ledger.epoch(), epoch, self.leading.down, self.leading.cordoned)
        if seen == self._idle and now < self.leading.wake:
            return 0
        snap = self.ctx.ledger.snapshot()
        seen = (snap.epoch, *seen[1:])
        self.leading.wake = math.inf
        placed, busy = self.cycle.run(snap, now, epoch, shape)
        self._idle = None if busy else seen
        ROUND_SECONDS.observe(time.perf_counter() - started)
        return placed

    def reconcile(self) -> None:
        """Make the ledger and the fleet objects agree, now (:mod:`fleet.dispatch.lead.reconcile`)."""
        self.reconciler.run()

    # ---- what the cycle decides on ------------------------------------------------------------

    def _refresh(self, now: float) -> None:
        """Read the policies and the members' health again, every ``policy_refresh``."""
        leading = self.leading
        if now - leading.policies_at <= self.settings.policy_refresh:
            return
        policies = self.ctx.policies()
        if policies != leading.policies:
            self._policies_digest += 1  # what a job may go to may have changed
        leading.policies = policies
        leading.degraded = degraded.active(self.ctx.client, self.ctx.keys, now)
        down = self._not_ready() | leading.degraded
        taints = read_taints(self.ctx.client, self.ctx.keys)
        cordoned = unschedulable(taints)
        draining = frozenset(
            m for m, found in taints.items() if any(t.get("effect") == NO_EXECUTE for t in found)
        )
        if cordoned != leading.cordoned:
            for key in [k for k, m in leading.misses.items() if m.reason == "nofit"]:
                del leading.misses[key]
        leading.cordoned = cordoned
        for member in sorted(draining - self._draining):
            self._drain(member)
        self._draining = draining
        if down != leading.down:
            # A member went down or came back: what fit nowhere may fit now (and the other
            # way round), though no capacity changed.
            for key in [k for k, m in leading.misses.items() if m.reason == "nofit"]:
                del leading.misses[key]
        leading.down = down
        leading.policies_at = now

    def _drain(self, member: str) -> None:
        """A member newly tainted NoExecute (``fleet member drain``, or its MemberCluster's
        ``spec.taints`` through the API), as Karmada's taint manager evicts from one: each job
        placed there is moved by :func:`fleet.dispatch.purging.drain_copy` (its copy deleted,
        then the job queued again, the member avoided). Nothing new goes there meanwhile: the
        member is in ``cordoned`` from this same refresh on."""
        items, _ = list_jobs(self.ctx.objects)
        placed = [
            (job_key(obj), str(obj["metadata"]["uid"]), attempt_of(obj))
            for obj in items
            if cluster_of(obj) == member and current_state(obj) not in (Phase.QUEUED, *FINISHED)
        ]
        sent = drain_member(self.ctx, member, placed)
        log.info("event=draining member=%s jobs=%d", member, sent)

    def _not_ready(self) -> frozenset[str]:
        """Members the syncer's probes call NotReady: nothing new is sent there meanwhile."""
        health = read_health(self.ctx.client, self.ctx.keys)
        return frozenset(member for member, record in health.items() if record.not_ready)
