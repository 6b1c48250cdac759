"""Failover: attempts ended because their copy failed, waited too long, went, or their member is down.

As Karmada's failover controllers (``ApplicationFailoverBehavior`` and taint-based cluster
failover), each ends the attempt and hands the job back to be placed again
(:func:`fleet.dispatch.handback.give_back`, which also says how long the member is avoided):

* **Application failover**: a copy that ran and failed (``Blame.JOB``, counted against the
  backoffLimit: its first failure on a member does not keep the job off it, repeated ones do,
  for exponentially longer), or whose gang waited in ``PodGroupPending`` longer than the policy's
  toleration (``Blame.MEMBER``: the member could not really run it, avoided from the first
  time). Its copy is purged by the policy's ``purgeMode`` (:mod:`fleet.dispatch.sync.stale`).
* A copy that is gone is not a failure of the job: :mod:`~fleet.dispatch.sync.audit` ends its
  attempt (``CopyLost``).
* **Cluster failover**: a member NotReady longer than a job's ``tolerationSeconds`` (counted
  from its health record's ``since``, and only once a probe of this syncer confirmed the
  record) loses that job, handed back without counting as a failure; its copy is purged when the
  member answers again (the probes look at every copy again then).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator
from typing import Any, Final

from prometheus_client import Counter

from fleet.dispatch.context import DEFAULT_POLICY, policy_for
from fleet.dispatch.handback import give_back
from fleet.dispatch.preemption import is_being_preempted
from fleet.dispatch.sync.copies import MemberCopy
from fleet.dispatch.sync.gangs import GangWaits
from fleet.dispatch.sync.shared import Shared, log
from fleet.dispatch.sync.stale import StaleCopies
from fleet.jobs import (
    FINISHED,
    Attempt,
    Blame,
    Ending,
    FleetReason,
    Phase,
    attempt_of,
    cluster_of,
    current_state,
    iter_jobs,
    job_key,
    try_get_job,
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
            Attempt(ident.uid, ident.attempt, ident.member),
            reason=FleetReason.APPLICATION_FAILOVER,
            message=message,
            ending=Ending(count_failure=True, blame=blame),
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

    def _placed_on(self, members: Collection[str]) -> Iterator[Any]:
        """The jobs whose copies may be on ``members``, from the copies record
        (:mod:`fleet.state.copies`): an attempt's entry is there from the moment it is sent until
        its copy is known gone, after its attempt ended. So a tick reads the jobs of the members
        that are down, not the fleet's (a walk of 100,000 queued jobs was 5 s of CPU), and only
        once one of them is down longer than the shortest toleration any policy gives."""
        keys = sorted({entry.key for member in members for entry in self.ctx.copies.on(member)})
        return iter_jobs(self.ctx.objects, keys)

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
        policies = shared.policy_list()
        if max(down.values()) <= min(p.spec.cluster_failover_seconds() for p in (*policies, DEFAULT_POLICY)):
            return  # no job's toleration can have passed yet: none is read
        for obj in self._placed_on(down):
            member = cluster_of(obj)
            if (
                member not in down
                or obj["metadata"].get("deletionTimestamp")
                or current_state(obj) in FINISHED
            ):
                continue
            if current_state(obj) == Phase.QUEUED:
                continue
            toleration = policy_for(obj, policies).spec.cluster_failover_seconds()
            if down[member] <= toleration:
                continue
            attempt = attempt_of(obj)
            outcome = give_back(
                self.ctx,
                job_key(obj),
                Attempt(str(obj["metadata"]["uid"]), attempt, member),
                reason=FleetReason.CLUSTER_FAILOVER,
                message=f"{member} has been NotReady for {down[member]:.0f}s (toleration {toleration:g}s)",
                ending=Ending(exclude_for=EXCLUDE_DOWN_SECONDS),
            )
            if outcome.changed:
                FAILOVERS.labels("cluster", member, adapter_for(obj).kind).inc()
                log.warning(
                    "event=cluster_failover job=%s member=%s attempt=%d", job_key(obj), member, attempt
                )
                # Its copy is purged once the member answers again (:meth:`Probes.record`): a
                # purge sent now would only hold a worker in retries against a member that is down.
