"""Giving a job back to its queue, and finishing it: the two ways an attempt ends.

Workers (member refused the copy), syncers (failover, a vanished copy) and the dispatcher (a hold
lost to a race) all end attempts here, so the rules live in one place:

* The fleet object is changed first, by compare-and-set on the attempt: only the caller that
  moves *this* attempt out of its running states goes on to touch the ledger, so a late or
  repeated hand-back of an old attempt changes nothing.
* The member is excluded for the job for a while (``exclude_for``), and when the attempt counts
  as a failure the job waits ``backoffSeconds * 2**(failures-1)`` before it is placed again.
  Past the policy's ``backoffLimit`` the job is ``Failed`` for good with a reason that says the
  retries ran out, and its quota is released.
* The capacity hold of the attempt is dropped and its in-flight mark removed.

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
from typing import Any

from fleet.api.kinds import FLEET_ASCENDJOB
from fleet.dispatch.context import Context, policy_for
from fleet.jobs.phases import FleetReason, Phase
from fleet.jobs.status import attempt_of, cluster_of, current_state, mirror, set_state
from fleet.jobs.submit import split_key
from fleet.placement import job_pod_key
from fleet.policy import PropagationPolicy
from fleet.state import Objects, record_event
from fleet.workloads import WorkloadStatus

__all__ = [
    "Outcome",
    "clear_inflight",
    "every_refusal",
    "fail",
    "finish",
    "give_back",
    "inflight_entry",
    "members_left",
    "refused_by",
]

log = logging.getLogger("fleet.dispatch.handback")

COMPONENT = "fleet"


@dataclass(frozen=True)
class Outcome:
    """What a hand-back did: ``changed`` False when another caller had already ended the attempt."""

    changed: bool
    requeued: bool = False
    failed: bool = False


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


def refused_by(obj: Mapping[str, Any]) -> dict[str, str]:
    """Member -> what it said, for the members that refused the job for a reason of their own."""
    refused = (obj.get("status") or {}).get("refused")
    return {str(m): str(why) for m, why in refused.items()} if isinstance(refused, Mapping) else {}


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
    """Whether ``obj`` is still at ``attempt`` of job ``uid`` on ``member``, not yet ended."""
    if (obj.get("metadata") or {}).get("uid") != uid or attempt_of(obj) != attempt:
        return False
    return cluster_of(obj) == member and current_state(obj) not in (Phase.QUEUED, Phase.FAILED, "Succeeded")


def _leave(status: dict[str, Any], member: str) -> None:
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
    exclude_for: float,
    count_failure: bool,
    last_seen: WorkloadStatus | None = None,
    refused: str | None = None,
    pending_only: bool = False,
) -> Outcome:
    """End ``attempt`` of the job on ``member`` and queue the job again (or fail it for good).

    ``last_seen``, the member copy's final status (a failure), is mirrored first, so the history
    shows what the member said before Fleet's ``Rescheduling``. ``refused``, what the member said
    when it refused the job for a reason of its own, records it among the job's refusals: the job
    fails when that leaves it no member of ``ctx.members`` to go to. ``pending_only`` changes
    nothing unless the attempt is still ``Admitted`` (no copy seen in the member yet).
    """
    namespace, name = split_key(key)
    policies = ctx.policies()
    members: dict[str, Mapping[str, str]] = {m: {} for m in ctx.members} if refused is not None else {}
    now = time.time()
    verdict: dict[str, Any] = {}

    def change(obj: dict[str, Any]) -> dict[str, Any] | None:
        verdict.clear()
        if not _is_current(obj, uid, attempt, member):
            return None
        if pending_only and current_state(obj) != Phase.ADMITTED:
            return None
        verdict["applied"] = True
        status = obj.setdefault("status", {})
        if last_seen is not None:
            mirror(status, last_seen, dispatched_message=f"created in {member} (attempt {attempt})")
        job_policy = policy_for(obj, policies)
        policy = job_policy.spec.failover
        excluded = {m: t for m, t in (status.get("excluded") or {}).items() if float(t) > now}
        if exclude_for > 0:
            excluded[member] = round(now + exclude_for, 3)
        status["excluded"] = excluded
        _leave(status, member)
        failures = int(status.get("failures") or 0) + (1 if count_failure else 0)
        status["failures"] = failures
        set_state(status, Phase.RESCHEDULING, reason, message)
        if refused is not None:
            status["refused"] = {**refused_by(obj), member: refused}
            if not members_left(status["refused"], members, job_policy):
                verdict["failed"] = True
                set_state(
                    status, Phase.FAILED, FleetReason.ALL_MEMBERS_REFUSED, every_refusal(status["refused"])
                )
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
        if count_failure:
            delay = policy.backoff_seconds * 2 ** (failures - 1)
            status["notBefore"] = round(now + delay, 3)
            wait = f"; next attempt in {delay:g}s"
        else:
            wait = ""
        set_state(status, Phase.QUEUED, reason, f"{message}{wait}")
        return obj

    stored = ctx.objects.mutate(FLEET_ASCENDJOB, namespace, name, change)
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
        last = stored["status"]["conditions"][-1]
        _event(ctx.objects, stored, str(last["reason"]), str(last["message"]), True)
    return Outcome(changed=True, requeued=not failed, failed=failed)


def fail(
    ctx: Context, key: str, uid: str, attempt: int, *, member: str, reason: str, message: str
) -> Outcome:
    """End ``attempt`` of the job on ``member`` with a terminal failure: ``Failed`` with ``reason``
    and ``message``, its quota, capacity hold and in-flight mark released. Changes nothing (and
    says so) when the attempt was ended already."""
    namespace, name = split_key(key)
    applied: list[bool] = []

    def change(obj: dict[str, Any]) -> dict[str, Any] | None:
        applied.clear()
        if not _is_current(obj, uid, attempt, member):
            return None
        applied.append(True)
        status = obj.setdefault("status", {})
        _leave(status, member)
        set_state(status, Phase.FAILED, reason, message)
        return obj

    stored = ctx.objects.mutate(FLEET_ASCENDJOB, namespace, name, change)
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
