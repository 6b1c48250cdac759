"""Stale copies: the member copies a fleet job has left behind, purged when its policy says.

A copy of an older attempt, on another member than the fleet's, or of a fleet job that is gone
or being deleted is purged by the RQ worker (``fleet.dispatch.tasks.purge``, which never touches
a successor). For a failover the policy's ``purgeMode`` decides when (Karmada's
``ApplicationFailoverBehavior.purgeMode``): ``Immediately`` at once (or as soon as the member
answers again), ``Gracefully`` once the new attempt runs or the grace period passed, ``Never``
not at all (an Event says so). Orphans (no fleet job) always go. The copies of jobs held while
placed (paused, suspended) are purged at once, whatever the policy.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import Counter
from rq import Retry

from fleet.ascend import Condition
from fleet.dispatch.handback import COMPONENT, clear_inflight, finish
from fleet.dispatch.sync.copies import MemberCopy
from fleet.dispatch.sync.shared import Shared, log
from fleet.dispatch.tasks import purge as purge_task
from fleet.jobs import FINISHED, HELD, FleetReason, attempt_of, current_state, parse_held_entry, try_get_job
from fleet.placement import job_pod_key
from fleet.policy import PurgeMode
from fleet.state import record_event
from fleet.workloads import job_ref

__all__ = ["PURGES", "StaleCopies"]

PURGES = Counter("fleet_purges_enqueued_total", "Member copies sent to be purged, by why.", ["why"])


class StaleCopies:
    """The purges sent and the stale copies waiting for theirs; tables under ``shared.lock``."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.ctx = shared.ctx
        #: Stale copies waiting for their purge time (Gracefully) -> first seen stale (monotonic).
        self._stale: dict[MemberCopy, float] = {}
        #: Purges sent -> when (monotonic), so a copy seen again is not purged twice at once.
        self._purged: dict[MemberCopy, float] = {}
        #: Copies left in place by purgeMode Never, their Event recorded.
        self._kept: set[MemberCopy] = set()

    def stale_copy(self, ident: MemberCopy, obj: dict[str, Any]) -> None:
        """A copy of an attempt the fleet job has left behind: purge it when its policy says
        (a held job's at once, whatever the policy: pausing or suspending is removing its replicas)."""
        if current_state(obj) in HELD and attempt_of(obj) == ident.attempt:
            finish(self.ctx, ident.key, ident.uid, ident.attempt, member=ident.member)
            self.purge(ident, "paused")  # the metric label of every held job
            return
        policy = self.shared.failover_policy(obj)
        if policy.purge_mode == PurgeMode.IMMEDIATELY or attempt_of(obj) < ident.attempt:
            self.purge(ident, "stale")  # newer than the fleet knows: Redis lost it, never keep
            return
        if policy.purge_mode == PurgeMode.NEVER:
            self._keep(ident, obj)
            return
        with self.shared.lock:
            first = self._stale.setdefault(ident, time.monotonic())
        successor_runs = current_state(obj) in (Condition.RUNNING, *FINISHED)
        if successor_runs or time.monotonic() - first > policy.grace_period_seconds:
            with self.shared.lock:
                self._stale.pop(ident, None)
            self.purge(ident, "graceful")

    def _keep(self, ident: MemberCopy, obj: dict[str, Any]) -> None:
        with self.shared.lock:
            if ident in self._kept:
                return
            self._kept.add(ident)
        record_event(
            self.ctx.objects,
            obj,
            type="Warning",
            reason=FleetReason.STALE_COPY_KEPT,
            message=f"the copy of attempt {ident.attempt} is still in {ident.member}; purgeMode Never "
            "leaves it to you",
            component=COMPONENT,
        )

    def purge(self, ident: MemberCopy, why: str) -> None:
        """Send ``ident`` to be purged, unless that was done less than ``purge_again_after`` ago."""
        now = time.monotonic()
        with self.shared.lock:
            sent = self._purged.get(ident)
            if sent is not None and now - sent < self.shared.settings.purge_again_after:
                return
            self._purged[ident] = now
        self.ctx.purge_queue.enqueue(
            purge_task,
            ident.member,
            ident.namespace,
            ident.name,
            ident.uid,
            ident.attempt,
            kind=ident.kind,
            retry=Retry(max=8, interval=[1, 2, 4, 8, 15, 30, 60, 60]),
            job_timeout=60,
            failure_ttl=3600,
        )
        PURGES.labels(why).inc()
        log.info(
            "event=purge_sent why=%s job=%s member=%s attempt=%d", why, ident.key, ident.member, ident.attempt
        )

    def waiting(self) -> list[MemberCopy]:
        """The stale copies on owned members still waiting for their purge time. Called with
        the lock held."""
        return [i for i in self._stale if self.shared.mine(i.member)]

    def recheck(self, idents: list[MemberCopy]) -> None:
        """Decide again on copies :meth:`waiting` returned: their grace may have passed."""
        for ident in idents:
            obj = try_get_job(self.ctx.objects, ident.key)
            if obj is None or obj["metadata"].get("uid") != ident.uid:
                self.purge(ident, "orphan")
            else:
                self.stale_copy(ident, obj)

    def purge_held(self) -> None:
        """Purge the copies of the jobs held (paused, suspended) while placed (their records in
        :attr:`~fleet.state.dispatch_keys.DispatchKeys.held`, written by :mod:`fleet.jobs.pause`), on
        the members this syncer owns, and drop their capacity holds. The ledger is left alone:
        the hold gave the quota back, and the job may be queued again already. The purge task
        never touches a successor (another uid or attempt)."""
        for raw in self.ctx.client.smembers(self.ctx.keys.held):
            parsed = parse_held_entry(raw)
            if parsed is None:
                self.ctx.client.srem(self.ctx.keys.held, raw)
                continue
            member, key, uid, attempt = parsed
            if member in self.ctx.members and not self.shared.mine(member):
                continue  # its owner purges it
            if member in self.ctx.members:
                ref = job_ref(key)
                ident = MemberCopy(member, ref.namespace, ref.name, uid, attempt, ref.tag)
                self.ctx.reservations.release(member, job_pod_key(uid, attempt))
                clear_inflight(self.ctx, key, uid, attempt)
                self.purge(ident, "paused")
            self.ctx.client.srem(self.ctx.keys.held, raw)

    def forget(self, ident: MemberCopy) -> None:
        """Forget ``ident`` (it vanished from its member). Called with the lock held."""
        self._stale.pop(ident, None)
        self._purged.pop(ident, None)
        self._kept.discard(ident)

    def forget_member(self, member: str) -> None:
        """Forget every copy of ``member`` (let go). Called with the lock held."""
        for table in (self._stale, self._purged):
            for ident in [i for i in table if i.member == member]:
                del table[ident]
        self._kept = {i for i in self._kept if i.member != member}
