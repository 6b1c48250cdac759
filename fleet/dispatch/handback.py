"""Giving a job back to its queue, and finishing it: the two ways an attempt ends.

Workers (member refused the copy), syncers (failover, a vanished copy) and the dispatcher (a hold
lost to a race) all end attempts here, so the rules live in one place:

* The fleet object is changed first, by compare-and-set on the attempt: only the caller that
  moves *this* attempt out of its running states goes on to touch the ledger, so a late or
  repeated hand-back of an old attempt changes nothing.
* When the attempt counts as a failure the job waits ``backoffSeconds * 2**(failures-1)``
  (``status.notBefore``) before it is placed again. Past the policy's ``backoffLimit`` the job is
  ``Failed`` for good with a reason that says the retries ran out, and its quota is released.
* The member may be excluded for the job for a while (``status.excluded``, by the rule below).
* The capacity hold of the attempt is dropped and its in-flight mark removed.

Exclusion after a failure is proportionate to what the failure says about the member
(:class:`Blame`, :func:`exclusion_seconds`):

* A failure of the job's own (:attr:`Blame.JOB`: its copy ran and ended ``Failed``, its pods'
  exit codes) says nothing about the member: the first one there excludes nothing. A user error
  (``JobValidFailed``) is not retried at all (:mod:`fleet.dispatch.sync.mirror`).
* A failure that says the member could not run the job (:attr:`Blame.MEMBER`: its pods sat in
  ``PodGroupPending`` past the toleration) excludes it from the first time.
* Repeated failures back off exponentially: the *n*-th failure on one member (counted per member
  in ``status.memberFailures``) excludes that member for ``exclusionSeconds * 2**(k-1)``, capped
  at ``exclusionLimitSeconds`` (10 s doubling to 300 s by default), where ``k`` is ``n - 1`` for
  :attr:`Blame.JOB` and ``n`` for :attr:`Blame.MEMBER`. The exclusion runs from when the job may
  be placed again (its ``notBefore``), so it is never swallowed by the retry backoff.
* An exclusion gives way: when every member where the job fits now is excluded, the dispatcher
  places it on one of them at once rather than waiting the exclusion out (the Admitted message
  says so). Exclusions steer a job to another member; they never keep it off the only one that
  can run it. A NotReady member and one that refused the job (below) are not exclusions: they
  never give way.

The reference is Karmada's application failover (``failover.application``:
``decisionConditions.tolerationSeconds``, ``purgeMode``, ``gracePeriodSeconds``, which Fleet reads
as written) and its scheduler's ``ClusterEviction`` filter plugin, which takes a cluster out of
the candidates while the binding has a graceful eviction task for it (and, with failover
history, the clusters of the last failover). Karmada's exclusion lasts as long as the eviction,
whatever the cause, and never gives way: a workload with no other cluster stays unscheduled.
Fleet sizes it by the failure and lets it give way, because an NPU job that fits one member
only would otherwise wait with its quota held while that member sits idle.

Exclusions that are not failures of the attempt keep their fixed lengths (``exclude_for``). A
member NotReady past the toleration (:mod:`fleet.dispatch.sync.failover`) is excluded in
``status.excluded`` and gives way like the others once it is Ready again. A member that could
not be reached or refused the job for now (:mod:`fleet.dispatch.tasks`) is excluded *firmly*
(``status.excludedFirmly``, ``gives_way=False``): such an attempt never ran and counts no
failure, so no retry backoff paces it, and giving way would send the job straight back to be
refused again, in a loop.

A member that refused the job for a reason of its own (:data:`fleet.members.Scope.MEMBER`) is
recorded in ``status.refused`` with what it said, and never tried again for this job; when no
member the job may use is left (:func:`members_left`), the job is ``Failed`` (``AllMembersRefused``)
with every member's reason. :func:`fail` ends an attempt with a terminal failure (a member
refused the job itself, or its copy could not be built), with the same releases.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from fleet.dispatch.context import Context, policy_for
from fleet.jobs import (
    FINISHED,
    FleetReason,
    FleetStatus,
    Phase,
    attempt_of,
    cluster_of,
    conditions_of,
    current_state,
    exclusions_of,
    failures_of,
    member_failures_of,
    mirror,
    mutate_job,
    refused_of,
    set_state,
    status_for_update,
)
from fleet.placement import job_pod_key
from fleet.policy import Failover, PropagationPolicy
from fleet.state import Objects, record_event
from fleet.workloads import WorkloadStatus

__all__ = [
    "Blame",
    "Outcome",
    "clear_inflight",
    "every_refusal",
    "excluded_now",
    "exclusion_ends",
    "exclusion_seconds",
    "fail",
    "finish",
    "give_back",
    "inflight_entry",
    "members_left",
]

log = logging.getLogger("fleet.dispatch.handback")

COMPONENT = "fleet"


@dataclass(frozen=True)
class Outcome:
    """What a hand-back did: ``changed`` False when another caller had already ended the attempt."""

    changed: bool
    requeued: bool = False
    failed: bool = False


class Blame(StrEnum):
    """What a failure says about the member it happened on."""

    #: Nothing: the job ran there and failed by itself (its own exit code).
    JOB = "Job"
    #: That the member could not run it (its pods never all fitted there).
    MEMBER = "Member"


def exclusion_seconds(blame: Blame, failures_here: int, failover: Failover) -> float:
    """How long the member is avoided after the ``failures_here``-th failure of the job on it
    (this one counted): 0 after the first failure of the job's own, else ``exclusionSeconds``
    doubling with each further failure there, at most ``exclusionLimitSeconds``."""
    steps = failures_here - 1 if blame is Blame.JOB else failures_here
    if steps <= 0 or failover.exclusion_seconds <= 0:
        return 0.0
    # The exponent is bounded so that a job that fails on a member very often cannot overflow.
    seconds = failover.exclusion_seconds * 2.0 ** min(steps - 1, 62)
    return float(min(seconds, failover.exclusion_limit_seconds))


def excluded_now(obj: Mapping[str, object], now: float, *, firm: bool = False) -> frozenset[str]:
    """The members job ``obj``'s exclusions (``status.excluded``, or the ``firm`` ones in
    ``status.excludedFirmly``) still keep it off at ``now``."""
    return frozenset(m for m, until in exclusions_of(obj, firm=firm).items() if float(until) > now)


def exclusion_ends(obj: Mapping[str, object], now: float) -> list[float]:
    """When job ``obj``'s exclusions still in force end, firm or not."""
    return [
        float(until)
        for firm in (False, True)
        for until in exclusions_of(obj, firm=firm).values()
        if float(until) > now
    ]


def inflight_entry(key: str, uid: str, attempt: int) -> str:
    """The member of the in-flight set that stands for one attempt's propagation."""
    return f"{key}|{uid}|{attempt}"


def clear_inflight(ctx: Context, key: str, uid: str, attempt: int) -> None:
    ctx.client.zrem(ctx.keys.inflight, inflight_entry(key, uid, attempt))


def _event(objects: Objects, obj: dict[str, Any], reason: str, message: str, warning: bool = False) -> None:
    record_event(
        objects,
        obj,
        type="Warning" if warning else "Normal",
        reason=reason,
        message=message,
        component=COMPONENT,
    )


def members_left(
    refused: Mapping[str, str], members: Mapping[str, Mapping[str, str]], policy: PropagationPolicy
) -> list[str]:
    """The members (name -> labels) the job may still be placed on: those its policy's cluster
    affinity allows that have not refused it."""
    affinity = policy.spec.placement.cluster_affinity
    return [
        name
        for name, labels in members.items()
        if name not in refused and (affinity is None or affinity.allows(name, labels))
    ]


def every_refusal(refused: Mapping[str, str]) -> str:
    """The message of a job every member refused: each member's reason, in member order."""
    return "every member refused the job: " + "; ".join(f"{m}: {why}" for m, why in sorted(refused.items()))


def _is_current(obj: Mapping[str, Any], uid: str, attempt: int, member: str) -> bool:
    """Whether ``obj`` is still at ``attempt`` of job ``uid`` on ``member``, not yet ended. A job
    being deleted is not: its attempt ends with the deletion (:mod:`fleet.dispatch.deletion`),
    never by going back to its queue."""
    meta = obj.get("metadata") or {}
    if meta.get("uid") != uid or attempt_of(obj) != attempt or meta.get("deletionTimestamp"):
        return False
    state = current_state(obj)
    return cluster_of(obj) == member and state != Phase.QUEUED and state not in FINISHED


def _leave(status: FleetStatus, member: str) -> None:
    status["lastCluster"] = member
    status.pop("cluster", None)
    status.pop("reservation", None)


def _settle(ctx: Context, key: str, uid: str, attempt: int, member: str, *, failed: bool) -> None:
    """After an attempt ended: its quota released (failed) or the job queued again, its hold and
    in-flight mark dropped."""
    if failed:
        ctx.ledger.release(key)
    else:
        ctx.ledger.requeue(key)
    ctx.reservations.release(member, job_pod_key(uid, attempt))
    clear_inflight(ctx, key, uid, attempt)


def give_back(
    ctx: Context,
    key: str,
    uid: str,
    attempt: int,
    *,
    member: str,
    reason: str,
    message: str,
    exclude_for: float = 0.0,
    gives_way: bool = True,
    count_failure: bool,
    blame: Blame | None = None,
    last_seen: WorkloadStatus | None = None,
    refused: str | None = None,
    pending_only: bool = False,
) -> Outcome:
    """End ``attempt`` of the job on ``member`` and queue the job again (or fail it for good).

    ``blame``, for a failure of the attempt, sizes the member's exclusion by the module's rule
    (and counts the failure against the member); without it the member is excluded for
    ``exclude_for`` seconds from now (0: not at all), firmly unless ``gives_way``.

    ``last_seen``, the member copy's final status (a failure), is mirrored first, so the history
    shows what the member said before Fleet's ``Rescheduling``. ``refused``, what the member said
    when it refused the job for a reason of its own, records it among the job's refusals: the job
    fails when that leaves it no member of ``ctx.members`` to go to. ``pending_only`` changes
    nothing unless the attempt is still ``Admitted`` (no copy seen in the member yet).
    """
    policies = ctx.policies()
    members: dict[str, Mapping[str, str]] = {m: {} for m in ctx.members} if refused is not None else {}
    now = time.time()
    verdict: dict[str, bool] = {}

    def change(obj: dict[str, Any]) -> dict[str, Any] | None:
        verdict.clear()
        if not _is_current(obj, uid, attempt, member):
            return None
        if pending_only and current_state(obj) != Phase.ADMITTED:
            return None
        verdict["applied"] = True
        status = status_for_update(obj)
        if last_seen is not None:
            mirror(status, last_seen, dispatched_message=f"created in {member} (attempt {attempt})")
        job_policy = policy_for(obj, policies)
        policy = job_policy.spec.failover
        excluded = {m: t for m, t in exclusions_of(obj).items() if float(t) > now}
        firmly = {m: t for m, t in exclusions_of(obj, firm=True).items() if float(t) > now}
        if exclude_for > 0 and blame is None:
            (excluded if gives_way else firmly)[member] = round(now + exclude_for, 3)
        status["excluded"] = excluded
        if firmly:
            status["excludedFirmly"] = firmly
        else:
            status.pop("excludedFirmly", None)
        _leave(status, member)
        failures = failures_of(obj) + (1 if count_failure else 0)
        status["failures"] = failures
        avoid_for = 0.0
        here: dict[str, int] = {}
        if blame is not None:
            here = member_failures_of(obj)
            here[member] = here.get(member, 0) + 1
            status["memberFailures"] = here
            avoid_for = exclusion_seconds(blame, here[member], policy)
        set_state(status, Phase.RESCHEDULING, reason, message)
        if refused is not None:
            refusals = {**refused_of(obj), member: refused}
            status["refused"] = refusals
            if not members_left(refusals, members, job_policy):
                verdict["failed"] = True
                set_state(status, Phase.FAILED, FleetReason.ALL_MEMBERS_REFUSED, every_refusal(refusals))
                return obj
        if count_failure and failures > policy.backoff_limit:
            verdict["failed"] = True
            set_state(
                status,
                Phase.FAILED,
                FleetReason.BACKOFF_LIMIT_EXCEEDED,
                f"retries ran out: failed {failures} times, backoffLimit is {policy.backoff_limit}; "
                f"last: {message}",
            )
            return obj
        ready = now
        if count_failure:
            delay = policy.backoff_seconds * 2 ** (failures - 1)
            ready = now + delay
            status["notBefore"] = round(ready, 3)
            wait = f"; next attempt in {delay:g}s"
        else:
            wait = ""
        if avoid_for > 0:
            # From when the job may go again: an exclusion shorter than the backoff still counts.
            excluded[member] = round(ready + avoid_for, 3)
            wait += f"; {member} avoided for {avoid_for:g}s more"
        elif blame is Blame.JOB and here[member] == 1:
            wait += f"; {member} not avoided (the job's own failure, its first there)"
        set_state(status, Phase.QUEUED, reason, f"{message}{wait}")
        return obj

    stored = mutate_job(ctx.objects, key, change)
    if stored is None or not verdict.get("applied"):
        return Outcome(changed=False)
    failed = bool(verdict.get("failed"))
    _settle(ctx, key, uid, attempt, member, failed=failed)
    log.info(
        "event=%s job=%s attempt=%d member=%s reason=%s",
        "failed" if failed else "requeued",
        key,
        attempt,
        member,
        reason,
    )
    _event(ctx.objects, stored, reason, message, warning=True)
    if failed:
        last = conditions_of(stored)[-1]
        _event(ctx.objects, stored, str(last["reason"]), str(last["message"]), True)
    return Outcome(changed=True, requeued=not failed, failed=failed)


def fail(
    ctx: Context, key: str, uid: str, attempt: int, *, member: str, reason: str, message: str
) -> Outcome:
    """End ``attempt`` of the job on ``member`` with a terminal failure: ``Failed`` with ``reason``
    and ``message``, its quota, capacity hold and in-flight mark released. Changes nothing (and
    says so) when the attempt was ended already."""
    applied: list[bool] = []

    def change(obj: dict[str, Any]) -> dict[str, Any] | None:
        applied.clear()
        if not _is_current(obj, uid, attempt, member):
            return None
        applied.append(True)
        status = status_for_update(obj)
        _leave(status, member)
        set_state(status, Phase.FAILED, reason, message)
        return obj

    stored = mutate_job(ctx.objects, key, change)
    if stored is None or not applied:
        return Outcome(changed=False)
    _settle(ctx, key, uid, attempt, member, failed=True)
    log.info("event=failed job=%s attempt=%d member=%s reason=%s", key, attempt, member, reason)
    _event(ctx.objects, stored, reason, message, warning=True)
    return Outcome(changed=True, failed=True)


def finish(ctx: Context, key: str, uid: str, attempt: int, *, member: str) -> None:
    """The job ended in its member (Succeeded, or Failed for good): return its quota and hold.

    Idempotent: the ledger's release is, and so are the others.
    """
    ctx.ledger.release(key)
    ctx.reservations.release(member, job_pod_key(uid, attempt))
    clear_inflight(ctx, key, uid, attempt)
