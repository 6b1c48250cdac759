"""Failover: attempts ended because their copy failed, waited too long, went, or their member is down.

As Karmada's failover controllers (``ApplicationFailoverBehavior`` and taint-based cluster
failover), each ends the attempt and hands the job back to be placed again
(:func:`fleet.dispatch.handback.give_back`, which also says how long the member is avoided):

* **Application failover**: a copy that ran and failed (``Blame.JOB``, counted against the
  backoffLimit: its first failure on a member does not keep the job off it, repeated ones do,
  for exponentially longer), or whose gang waited in ``PodGroupPending`` longer than the policy's
  toleration (``Blame.MEMBER``: the member could not really run it, avoided from the first
  time). Its copy is purged by the policy's ``purgeMode`` (:mod:`fleet.dispatch.sync.stale`).
* **The copy vanished** (deleted in the member by someone else): handed back, counted as a
  failure (an evicted job's is requeued instead).
* **Cluster failover**: a member NotReady longer than a job's ``tolerationSeconds`` (counted
  from its health record's ``since``, and only once a probe of this syncer confirmed the
  record) loses that job, handed back without counting as a failure; its copy is purged when the
  member answers again (the probes look at every copy again then).
"""

from __future__ import annotations

import time
from typing import Any, Final

from prometheus_client import Counter

from fleet.dispatch.context import policy_for
from fleet.dispatch.handback import Blame, give_back
from fleet.dispatch.preemption import is_being_preempted, requeued
from fleet.dispatch.sync.copies import MemberCopy
from fleet.dispatch.sync.gangs import GangWaits
from fleet.dispatch.sync.shared import Shared, log
from fleet.dispatch.sync.stale import StaleCopies
from fleet.jobs import (
    FINISHED,
    FleetReason,
    Phase,
    attempt_of,
    cluster_of,
    current_state,
    job_key,
    try_get_job,
    walk_jobs,
)
from fleet.policy import PurgeMode
from fleet.workloads import WorkloadStatus, adapter_for

__all__ = ["EXCLUDE_DOWN_SECONDS", "FAILOVERS", "Failover"]

FAILOVERS = Counter(
    "fleet_failovers_total",
    "Attempts ended by failover, by kind of failover, member and job kind.",
    ["kind", "member", "job_kind"],
)

#: How long a member that was NotReady past the toleration is avoided by the jobs it lost.
EXCLUDE_DOWN_SECONDS: Final = 120.0


class Failover:
    """Ends attempts and hands their jobs back; keeps no table of its own."""

    def __init__(self, shared: Shared, gangs: GangWaits, stale: StaleCopies) -> None:
        self.shared = shared
        self.ctx = shared.ctx
        self.gangs = gangs
        self.stale = stale

    def application(
        self,
        ident: MemberCopy,
        obj: dict[str, Any],
        seen: WorkloadStatus | None,
        message: str,
        *,
        blame: Blame,
    ) -> None:
        policy = self.shared.failover_policy(obj)
        outcome = give_back(
            self.ctx,
            ident.key,
            ident.uid,
            ident.attempt,
            member=ident.member,
            reason=FleetReason.APPLICATION_FAILOVER,
            message=message,
            count_failure=True,
            blame=blame,
            last_seen=seen,
        )
        with self.shared.lock:
            self.gangs.forget(ident)
        if outcome.changed:
            FAILOVERS.labels("application", ident.member, ident.ref.adapter.kind).inc()
            log.info(
                "event=application_failover job=%s member=%s attempt=%d failed=%s",
                ident.key,
                ident.member,
                ident.attempt,
                outcome.failed,
            )
        if policy.purge_mode == PurgeMode.IMMEDIATELY or outcome.failed:
            self.stale.purge(ident, "failover")
        else:
            self.stale.stale_copy(ident, obj)

    def gangs_overdue(self, pending: list[tuple[MemberCopy, float, str]], now: float) -> None:
        """Fail over the copies :meth:`GangWaits.waiting` returned whose wait passed their
        policy's toleration."""
        for ident, since, why in pending:
            obj = try_get_job(self.ctx.objects, ident.key)
            if obj is None or is_being_preempted(obj):
                self.gangs.stop_waiting(ident)
                continue
            toleration = self.shared.failover_policy(obj).decision_conditions.toleration_seconds
            if now - since > toleration:
                self.application(
                    ident,
                    obj,
                    None,
                    f"its pods waited in {ident.member} for {toleration}s without all fitting ({why})",
                    blame=Blame.MEMBER,
                )

    def vanished(self, ident: MemberCopy, obj: dict[str, Any] | None) -> None:
        """The copy ``ident`` went from its member (``obj``: its fleet job, read after): hand the
        job back if that was its current attempt, running there."""
        member = ident.member
        if obj is None or obj["metadata"].get("uid") != ident.uid or obj["metadata"].get("deletionTimestamp"):
            return
        if attempt_of(obj) != ident.attempt or cluster_of(obj) != member or current_state(obj) in FINISHED:
            return
        if current_state(obj) == Phase.ADMITTED:
            return  # an older copy of this attempt's name went; the worker is creating ours
        if is_being_preempted(obj):
            requeued(self.ctx, ident.key, ident.uid, ident.attempt, member=member)
            return
        give_back(
            self.ctx,
            ident.key,
            ident.uid,
            ident.attempt,
            member=member,
            reason=FleetReason.APPLICATION_FAILOVER,
            message=f"the copy in {member} was deleted there",
            exclude_for=0.0,
            count_failure=True,
        )
        FAILOVERS.labels("vanished", member, ident.ref.adapter.kind).inc()

    def cluster(self) -> None:
        """Hand back the jobs of the owned members NotReady past each job's toleration."""
        wall = time.time()
        shared = self.shared
        with shared.lock:
            down = {
                name: seconds
                for name, h in shared.health.items()
                if name in shared.probed
                and shared.mine(name)
                and (seconds := h.not_ready_for(wall)) is not None
            }
        if not down:
            return
        for obj in walk_jobs(self.ctx.objects):
            member = cluster_of(obj)
            if (
                member not in down
                or obj["metadata"].get("deletionTimestamp")
                or current_state(obj) in FINISHED
            ):
                continue
            if current_state(obj) == Phase.QUEUED:
                continue
            toleration = policy_for(obj, shared.policy_list()).spec.cluster_failover_seconds()
            if down[member] <= toleration:
                continue
            attempt = attempt_of(obj)
            outcome = give_back(
                self.ctx,
                job_key(obj),
                str(obj["metadata"]["uid"]),
                attempt,
                member=member,
                reason=FleetReason.CLUSTER_FAILOVER,
                message=f"{member} has been NotReady for {down[member]:.0f}s (toleration {toleration:g}s)",
                exclude_for=EXCLUDE_DOWN_SECONDS,
                count_failure=False,
            )
            if outcome.changed:
                FAILOVERS.labels("cluster", member, adapter_for(obj).kind).inc()
                log.warning(
                    "event=cluster_failover job=%s member=%s attempt=%d", job_key(obj), member, attempt
                )
                # Its copy is purged once the member answers again (:meth:`Probes.record`): a
                # purge sent now would only hold a worker in retries against a member that is down.
