"""What every concern of the leading dispatcher shares: its settings, the lease it writes under,
the planner's memory, the jobs it remembers not placing, the members it avoids, its timer.

The composer (:class:`fleet.dispatch.dispatcher.Dispatcher`) makes one :class:`Leading` and hands
it to each concern (:mod:`~fleet.dispatch.lead.cycle`, :mod:`~fleet.dispatch.lead.waiting`,
:mod:`~fleet.dispatch.lead.victims`, :mod:`~fleet.dispatch.lead.reconcile`,
:mod:`~fleet.dispatch.lead.propagations`), as the syncer's composer hands its concerns a
:class:`fleet.dispatch.sync.shared.Shared`. Everything here is the leader's memory, rebuilt when
it takes the lease (:meth:`Leading.forget`): nothing in it is needed for correctness, only to
keep the next cycle cheap.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from fleet.dispatch.context import Context
from fleet.dispatch.lease import LEASE_SECONDS, Lease
from fleet.placement import Demand, Placer
from fleet.policy import PropagationPolicy
from fleet.workloads import stored_demand
from queues import Fence, Fenced, Planner, PlannerSettings

__all__ = ["COMPONENT", "MEMORY", "DispatcherSettings", "Leading", "Miss", "log"]

#: Every concern logs as the dispatcher: one logger for the role.
log = logging.getLogger("fleet.dispatch.dispatcher")

#: Who records the dispatcher's Events.
COMPONENT: Final = "fleet"

#: Jobs whose last miss (or last pending message, or demand) is remembered.
MEMORY: Final = 100_000


@dataclass(frozen=True)
class DispatcherSettings:
    #: Jobs read per request class per cycle (the planner picks at most this many per class).
    heads_per_class: int = 8
    max_batch: int = 512
    #: A round that found nothing to do is followed by one after at least this long...
    idle_wait: float = 0.02
    #: ...and at most this long: in between it starts as soon as the ledger moves (a job queued,
    #: admitted or released: :meth:`queues.Ledger.wait_for_change`) or a member's capacity does.
    #: What neither signals (a member's health, taints, policies, a propagation to resend) is
    #: seen within this; a backoff's end starts a round when it falls due. Idle, a round costs a
    #: few round trips plus one per member.
    idle_cap: float = 0.25
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

    def planner(self) -> PlannerSettings:
        return PlannerSettings(
            starvation_seconds=self.starvation_seconds,
            grace_seconds=self.grace_seconds,
            wait_ratio=self.wait_ratio,
            max_picks=self.max_batch,
            nomination_seconds=self.nomination_seconds,
        )


@dataclass
class Miss:
    """Why a job was not placed, and until when that answer stands."""

    reason: str
    #: The capacity epoch when it missed (no fit now); -1: time based.
    epoch: int
    until: float  # do not try again before this time
    #: A no-fit is tried again at this time even if no capacity changed: an exclusion ends.
    wake: float = math.inf


@dataclass
class Leading:
    """The state the leader's concerns share; see the module docstring."""

    ctx: Context
    placer: Placer
    settings: DispatcherSettings
    lease: Lease
    #: Guards the placer (its capacity is fed from other threads).
    lock: threading.RLock
    member_labels: Callable[[], Mapping[str, Mapping[str, str]]]
    planner: Planner = field(init=False)
    #: Job -> its last miss (see :meth:`skip`), oldest first.
    misses: OrderedDict[str, Miss] = field(default_factory=OrderedDict)
    #: (uid, generation) -> the job's demand, read once.
    demands: OrderedDict[tuple[str, str], Demand] = field(default_factory=OrderedDict)
    policies: list[PropagationPolicy] = field(default_factory=list)
    policies_at: float = 0.0
    #: Members the probes call NotReady, and those whose calls keep timing out: nothing is sent
    #: to either (:mod:`fleet.dispatch.degraded`).
    down: frozenset[str] = frozenset()
    degraded: frozenset[str] = frozenset()
    #: Members cordoned or drained (a NoSchedule or NoExecute taint): no new job goes there.
    cordoned: frozenset[str] = frozenset()
    #: The earliest time a timer (backoff, exclusion, starvation bound, nomination) is due.
    wake: float = math.inf

    def __post_init__(self) -> None:
        self.planner = Planner(self.settings.planner())

    @property
    def fence(self) -> Fence:
        if self.lease.token is None:
            raise Fenced("not leading")
        return Fence(self.lease.key, self.lease.token)

    def forget(self) -> None:
        """A new term: what the last leader (or this one, before) remembered may be wrong."""
        self.misses.clear()
        self.planner.forget()
        self.wake = math.inf

    def timer(self, at: float) -> None:
        """Run a cycle at ``at`` even if nothing else changes."""
        self.wake = min(self.wake, at)

    def skip(self, key: str, now: float, epoch: int) -> bool:
        """Whether a job's last miss still stands (``epoch``: the members' capacity version);
        a skipped job's wake-up time is a timer of the cycle (it runs then even if nothing else
        changed)."""
        miss = self.misses.get(key)
        if miss is None:
            return False
        if now < miss.until:
            self.timer(miss.until)
            return True
        if miss.epoch >= 0 and miss.epoch == epoch and now < miss.wake:
            self.timer(miss.wake)
            return True
        return False

    def remember(self, key: str, miss: Miss) -> None:
        self.misses[key] = miss
        self.misses.move_to_end(key)
        while len(self.misses) > MEMORY:
            self.misses.popitem(last=False)
        self.timer(miss.until if miss.epoch < 0 else miss.wake)

    def demand(self, obj: dict[str, Any]) -> Demand:
        uid = str(obj["metadata"].get("uid"))
        key = (uid, str(obj["metadata"].get("generation", 1)))
        found = self.demands.get(key)
        if found is None:
            found = stored_demand(obj)
            self.demands[key] = found
            while len(self.demands) > MEMORY:
                self.demands.popitem(last=False)
        return found

    def members_known(self) -> dict[str, Mapping[str, str]]:
        """Every member the placer knows, with the labels a cluster affinity is matched on."""
        labels = self.member_labels()
        with self.lock:
            return {cap.name: labels.get(cap.name, cap.labels) for cap in self.placer.members()}
