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
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from fleet.api.kinds import FLEET_ASCENDJOB
from fleet.dispatch.context import Context, policy_for
from fleet.jobs.phases import FleetReason, Phase
from fleet.jobs.status import attempt_of, cluster_of, current_state, mirror, set_state
from fleet.jobs.submit import split_key
from fleet.placement import job_pod_key
from fleet.state import Objects, record_event
from fleet.workloads import WorkloadStatus

__all__ = ["Outcome", "clear_inflight", "finish", "give_back", "inflight_entry"]

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
) -> Outcome:
    """End ``attempt`` of the job on ``member`` and queue the job again (or fail it for good).

    ``last_seen``, the member copy's final status (a failure), is mirrored first, so the history
    shows what the member said before Fleet's ``Rescheduling``.
    """
    namespace, name = split_key(key)
    policies = ctx.policies()
    now = time.time()
    verdict: dict[str, Any] = {}

    def change(obj: dict[str, Any]) -> dict[str, Any] | None:
        verdict.clear()
        if (obj.get("metadata") or {}).get("uid") != uid or attempt_of(obj) != attempt:
            return None
        if cluster_of(obj) != member or current_state(obj) in (Phase.QUEUED, Phase.FAILED, "Succeeded"):
            return None
        verdict["applied"] = True
        status = obj.setdefault("status", {})
        if last_seen is not None:
            mirror(status, last_seen, dispatched_message=f"created in {member} (attempt {attempt})")
        policy = policy_for(obj, policies).spec.failover
        excluded = {m: t for m, t in (status.get("excluded") or {}).items() if float(t) > now}
        if exclude_for > 0:
            excluded[member] = round(now + exclude_for, 3)
        status["excluded"] = excluded
        status["lastCluster"] = member
        status.pop("cluster", None)
        status.pop("reservation", None)
        failures = int(status.get("failures") or 0) + (1 if count_failure else 0)
        status["failures"] = failures
        set_state(status, Phase.RESCHEDULING, reason, message)
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
    if failed:
        ctx.ledger.release(key)
    else:
        ctx.ledger.requeue(key)
    ctx.reservations.release(member, job_pod_key(uid, attempt))
    clear_inflight(ctx, key, uid, attempt)
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
        _event(
            ctx.objects,
            stored,
            FleetReason.BACKOFF_LIMIT_EXCEEDED,
            str(stored["status"]["conditions"][-1]["message"]),
            True,
        )
    return Outcome(changed=True, requeued=not failed, failed=failed)


def finish(ctx: Context, key: str, uid: str, attempt: int, *, member: str) -> None:
    """The job ended in its member (Succeeded, or Failed for good): return its quota and hold.

    Idempotent: the ledger's release is, and so are the others.
    """
    ctx.ledger.release(key)
    ctx.reservations.release(member, job_pod_key(uid, attempt))
    clear_inflight(ctx, key, uid, attempt)
