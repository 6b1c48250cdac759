"""Giving a job back to its queue, and finishing it: the two ways an attempt ends.

Workers (member refused the copy), syncers (failover, a lost copy) and the dispatcher (a hold
lost to a race) all end attempts here, so the side effects live in one place; the status change
itself is the state machine's (:class:`fleet.jobs.EndAttempt`, guarded by the attempt):

* The fleet object is changed first, by compare-and-set on the attempt: only the caller that
  moves *this* attempt out of its running states goes on to touch the ledger, so a late or
  repeated hand-back of an old attempt changes nothing.
* When the attempt counts as a failure the job waits ``backoffSeconds * 2**(failures-1)``
  (``status.notBefore``) before it is placed again. Past the policy's ``backoffLimit`` the job is
  ``Failed`` for good with a reason that says the retries ran out, and its quota is released.
* The member may be excluded for the job for a while (``status.excluded``, by the rule below).
* The capacity hold of the attempt is dropped and its in-flight mark removed.

Exclusion after a failure is proportionate to what the failure says about the member
(:class:`fleet.jobs.Blame`, :func:`fleet.jobs.exclusion_seconds`):

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

Exclusions that are not failures of the attempt keep their fixed lengths (``Ending.exclude_for``). A
member NotReady past the toleration (:mod:`fleet.dispatch.sync.failover`) is excluded in
``status.excluded`` and gives way like the others once it is Ready again. A member that could
not be reached or refused the job for now (:mod:`fleet.dispatch.tasks`) is excluded *firmly*
(``status.excludedFirmly``, ``Ending.gives_way`` False): such an attempt never ran and counts no
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fleet.connections import run_scripts
from fleet.dispatch.context import Context, policy_for
from fleet.jobs import (
    Attempt,
    EndAttempt,
    Ending,
    Phase,
    condition,
    current_state,
    exclusions_of,
    mutate_job,
    step,
)
from fleet.placement import job_pod_key
from fleet.policy import PropagationPolicy
from fleet.state import Objects, record_event
from fleet.workloads import WorkloadStatus

__all__ = [
    "Finished",
    "Outcome",
    "clear_inflight",
    "excluded_now",
    "exclusion_ends",
    "finish",
    "finish_many",
    "give_back",
    "inflight_entry",
    "members_left",
]

log = logging.getLogger("fleet.dispatch.handback")

COMPONENT = "fleet"

#: An attempt that ends without saying anything of the member or the job: queued again at once.
_SIMPLE = Ending()


@dataclass(frozen=True)
class Outcome:
    """What a hand-back did: ``changed`` False when another caller had already ended the attempt."""

    changed: bool
    requeued: bool = False
    failed: bool = False


def excluded_now(obj: Mapping[str, object], now: float, *, firm: bool = False) -> frozenset[str]:
    """The members job ``obj``'s exclusions (``status.excluded``, or the ``firm`` ones in
    ``status.excludedFirmly``) still keep it off at ``now``."""
    return frozenset(m for m, until in exclusions_of(obj, firm=firm).items() if until > now)


def exclusion_ends(obj: Mapping[str, object], now: float) -> list[float]:
    """When job ``obj``'s exclusions still in force end, firm or not."""
    return [
        until for firm in (False, True) for until in exclusions_of(obj, firm=firm).values() if until > now
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


def _settle(ctx: Context, key: str, uid: str, attempt: int, member: str, *, failed: bool) -> None:
    """After an attempt ended: its hold and in-flight mark dropped, then its quota released
    (failed) or the job queued again: the ledger last, as in :func:`finish_many`."""
    if failed:
        finish(ctx, key, uid, attempt, member=member)
        return
    ctx.reservations.release(member, job_pod_key(uid, attempt))
    clear_inflight(ctx, key, uid, attempt)
    ctx.ledger.requeue(key)


def give_back(
    ctx: Context,
    key: str,
    attempt: Attempt,
    *,
    reason: str,
    message: str,
    ending: Ending = _SIMPLE,
    last_seen: WorkloadStatus | None = None,
) -> Outcome:
    """End ``attempt`` of the job (on ``attempt.member``, which must be named) and queue the job
    again, or fail it for good, as ``ending`` says (:class:`fleet.jobs.EndAttempt`); then release
    what the attempt held and record the Events. ``last_seen``, the member copy's final status
    (a failure it reported), goes into the Event: the job's conditions describe its current
    attempt only."""
    member = attempt.member
    assert member is not None, "an attempt is given back by the member it ran on"
    policies = ctx.policies()
    now = time.time()
    wrote: dict[str, Any] = {}

    def change(obj: dict[str, Any]) -> dict[str, Any] | None:
        wrote.clear()
        policy = policy_for(obj, policies)
        how = ending
        if ending.refused is not None:  # the members its policy allows, for what is left
            how = replace(ending, members=tuple(members_left({}, {m: {} for m in ctx.members}, policy)))
        event = EndAttempt(member, reason, message, policy.spec.failover, how)
        status = step(obj, event, attempt, now=now)
        if status is None:
            return None
        obj["status"] = status
        wrote["status"] = status
        return obj

    stored = mutate_job(ctx.objects, key, change)
    if stored is None or not wrote:
        return Outcome(changed=False)
    failed = current_state(stored) == Phase.FAILED
    _settle(ctx, key, attempt.uid, attempt.attempt, member, failed=failed)
    log.info(
        "event=%s job=%s attempt=%d member=%s reason=%s",
        "failed" if failed else "requeued",
        key,
        attempt.attempt,
        member,
        reason,
    )
    if last_seen is not None:  # what the member said first, in its words (the job's history)
        said = f"{last_seen.state} in {member}: {last_seen.message or ''}".rstrip(": ")
        _event(ctx.objects, stored, str(last_seen.reason or last_seen.state), said, warning=True)
    # Requeued, the Event says what the Queued condition says (the backoff, what is avoided).
    queued = None if failed else condition(stored, Phase.QUEUED)
    _event(ctx.objects, stored, reason, str((queued or {}).get("message") or message), warning=True)
    if failed:
        end = condition(stored, Phase.FAILED) or {}
        if end.get("reason") != reason:
            _event(ctx.objects, stored, str(end.get("reason")), str(end.get("message")), True)
    return Outcome(changed=True, requeued=not failed, failed=failed)


def fail(ctx: Context, key: str, attempt: Attempt, *, reason: str, message: str) -> Outcome:
    """End ``attempt`` of the job with a terminal failure: ``Failed`` with ``reason`` and
    ``message``, its quota, capacity hold and in-flight mark released. Changes nothing (and
    says so) when the attempt was ended already."""
    return give_back(ctx, key, attempt, reason=reason, message=message, ending=Ending(terminal=True))


#: One finished attempt: (fleet job key, uid, attempt, the member it ran on).
Finished = tuple[str, str, int, str]


def finish(ctx: Context, key: str, uid: str, attempt: int, *, member: str) -> None:
    """The job ended in its member (Succeeded, or Failed for good): return its quota and hold.

    Idempotent: the ledger's release is, and so are the others.
    """
    finish_many(ctx, [(key, uid, attempt, member)])


def finish_many(ctx: Context, items: Sequence[Finished]) -> None:
    """:func:`finish` of many attempts (a syncer's read of a member holds many ends) in a few
    round trips: the holds in one per member, the in-flight marks in one ZREM, the ledger's
    releases in one pipeline, where one at a time took three round trips a job. Each step is
    idempotent and independent of the others; a ledger error is raised once all have run.

    The quota goes last: whoever sees a job's quota back (the dispatcher deciding where the next
    job fits, a user's ``fleet describe``) also sees its hold gone, never free quota over a
    capacity still held for a job that ended."""
    if not items:
        return
    holds: dict[str, list[str]] = {}
    for _, uid, attempt, member in items:
        holds.setdefault(member, []).append(job_pod_key(uid, attempt))
    for member, ids in holds.items():
        ctx.reservations.release_many(member, ids)
    ctx.client.zrem(ctx.keys.inflight, *(inflight_entry(key, uid, attempt) for key, uid, attempt, _ in items))
    replies = run_scripts(ctx.client, [ctx.ledger.release_call(key) for key, _, _, _ in items])
    for reply in replies:
        ctx.ledger.release_reply(reply)  # raises what one release alone raised
