"""Deleting member copies: the purge, eviction and deletion tasks RQ workers run.

Each re-reads what it needs and acts only on the copy of the uid and attempt it names, never on a
successor: ``purge`` a copy a job left behind (or one no job expects), ``evict`` a preempted
attempt's copy and requeue its job once the copy is gone (:mod:`fleet.dispatch.preemption`),
``delete_copy`` the copy of a job deleted at the fleet, then complete its deletion
(:mod:`fleet.dispatch.deletion`), ``drain_copy`` a copy on a member being drained and, once it is
gone, send its job back to its queue as a cluster failover does (``fleet member drain``: the
job never runs twice). A copy confirmed gone leaves the record of the copies that may
exist (:mod:`fleet.state.copies`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, Final

from fleet.dispatch import companions
from fleet.dispatch.context import current
from fleet.dispatch.degraded import adopt
from fleet.dispatch.deletion import complete, is_deleting, terminating
from fleet.dispatch.handback import COMPONENT, give_back, inflight_entry
from fleet.dispatch.preemption import requeued
from fleet.jobs import Attempt, Ending, FleetReason, attempt_of, cluster_of, try_get_job
from fleet.labels import ATTEMPT_LABEL, JOB_UID_LABEL
from fleet.members import Conflict, MemberError, MemberUnavailable, NotFound, safe_message
from fleet.state import record_event
from fleet.workloads import member_resource, ref_for

__all__ = ["DRAIN_EXCLUDE_SECONDS", "EVICT_WAIT_SECONDS", "delete_copy", "drain_copy", "evict", "purge"]

log = logging.getLogger("fleet.dispatch.tasks")

#: How long an eviction waits for the member to finish deleting a copy before it is retried
#: (later, by RQ's scheduler: a worker is not held while a member takes its time).
EVICT_WAIT_SECONDS: Final = 3.0
#: How long a drained job avoids the member it was moved from (as a cluster failover does).
DRAIN_EXCLUDE_SECONDS: Final = 120.0


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def purge(member: str, namespace: str, name: str, uid: str, attempt: int, *, kind: str = "") -> str:
    """Delete the copy of fleet job uid ``uid``, attempt ``attempt``, from ``member``, if it is there.
    ``kind``: the job's kind as its key writes it (:attr:`fleet.workloads.JobRef.tag`; empty, as
    tasks sent before Fleet served other kinds say: the first kind).

    A copy of another attempt or job is never touched. Raises ``MemberUnavailable`` (RQ retries)
    when the member cannot be reached: a stale copy is also purged when its member returns.
    """
    ctx = current()
    client = ctx.member(member)
    adopt(ctx.degraded.current(), {member: client.breaker})  # a degraded member: retried later, at once
    ref = ref_for(kind, namespace, name)
    resource = member_resource(ref.adapter.resource)
    try:
        existing = client.get_job(resource, namespace, name)
    except NotFound:
        return "absent"
    labels = _labels(existing)
    if labels.get(JOB_UID_LABEL) != uid or labels.get(ATTEMPT_LABEL) != str(attempt):
        return "not ours"
    try:
        client.delete_job(resource, namespace, name, uid=existing["metadata"]["uid"])
    except Conflict:
        return "replaced"
    log.info("event=purged member=%s job=%s attempt=%d", member, ref.key, attempt)
    obj = try_get_job(ctx.objects, ref.key)
    meta = (obj or {}).get("metadata") or {}
    # A job being deleted gets no Event: its Events go with it, and its deletion may complete
    # the moment its copy is gone (an Event written after that would outlive it).
    if obj is not None and meta.get("uid") == uid and not meta.get("deletionTimestamp"):
        record_event(
            ctx.objects,
            obj,
            reason=FleetReason.PURGED,
            message=f"deleted the copy of attempt {attempt} from {member}",
            component=COMPONENT,
        )
    _drop_companions(client, ref.namespace, existing, obj, attempt)
    return "purged"


def _drop_companions(
    client: Any, namespace: str, copy: Mapping[str, Any], job: Mapping[str, Any] | None, attempt: int
) -> None:
    """After a copy is deleted, the objects Fleet made for it go too, unless the job's newer
    attempt runs in the same member (it uses them). Best effort: a member that cannot be
    reached now keeps them (they are inert without the job)."""
    if job is not None and cluster_of(job) == client.name and attempt_of(job) != attempt:
        return
    try:
        dropped = companions.drop(client, namespace, copy)
    except MemberError as error:
        log.warning("event=companions_kept member=%s namespace=%s error=%r", client.name, namespace,
                    safe_message(error))  # fmt: skip
        return
    if dropped:
        log.info("event=companions_dropped member=%s namespace=%s %s", client.name, namespace,
                 ",".join(dropped))  # fmt: skip


def _delete_and_wait(
    member: str, namespace: str, name: str, uid: str, attempt: int, *, kind: str, why: str
) -> None:
    """Purge the copy and wait until the member no longer has it; ``MemberUnavailable`` (RQ
    retries) while the member cannot be reached or the copy is still there after
    :data:`EVICT_WAIT_SECONDS`."""
    ctx = current()
    client = ctx.member(member)
    ref = ref_for(kind, namespace, name)
    outcome = purge(member, namespace, name, uid, attempt, kind=kind)
    deadline = time.monotonic() + EVICT_WAIT_SECONDS
    while outcome in ("purged", "replaced"):
        try:
            existing = client.get_job(member_resource(ref.adapter.resource), namespace, name)
        except NotFound:
            break
        labels = _labels(existing)
        if labels.get(JOB_UID_LABEL) != uid or labels.get(ATTEMPT_LABEL) != str(attempt):
            break
        if time.monotonic() > deadline:
            raise MemberUnavailable(member, why, f"the copy of attempt {attempt} is still being deleted")
        time.sleep(0.05)


def evict(member: str, namespace: str, name: str, uid: str, attempt: int, *, kind: str = "") -> str:
    """Evict a preempted attempt (:mod:`fleet.dispatch.preemption`, step 2): delete its copy in
    ``member``, wait until the member no longer has it, then requeue the job and release its
    quota (step 3). Raises ``MemberUnavailable`` (RQ retries) while the member cannot be reached
    or the copy is still there after :data:`EVICT_WAIT_SECONDS`."""
    _delete_and_wait(member, namespace, name, uid, attempt, kind=kind, why="evict")
    requeued(current(), ref_for(kind, namespace, name).key, uid, attempt, member=member)
    return "evicted"


def drain_copy(member: str, namespace: str, name: str, uid: str, attempt: int, *, kind: str = "") -> str:
    """Move a job off a member being drained (``fleet member drain``): delete its copy there,
    wait until it is gone, then end the attempt as a cluster failover ends one
    (``ClusterFailover``, the member avoided for :data:`DRAIN_EXCLUDE_SECONDS`), so the job is
    placed elsewhere and never runs in two members at once. Idempotent: an attempt that moved on
    is left alone (its copy, of that attempt only, is still purged)."""
    _delete_and_wait(member, namespace, name, uid, attempt, kind=kind, why="drain")
    ctx = current()
    outcome = give_back(
        ctx,
        ref_for(kind, namespace, name).key,
        Attempt(uid, attempt, member),
        reason=FleetReason.CLUSTER_FAILOVER,
        message=f"{member} is being drained (fleet member drain): moved to another member",
        ending=Ending(exclude_for=DRAIN_EXCLUDE_SECONDS, gives_way=False),
    )
    return "drained" if outcome.changed else "unchanged"


def delete_copy(member: str, namespace: str, name: str, uid: str, attempt: int, *, kind: str = "") -> str:
    """Delete the member copy of a job deleted at the fleet and, once the copy is confirmed
    gone, complete the deletion (:func:`fleet.dispatch.deletion.complete`: quota released,
    finalizer removed). Returns what it did.

    Never raises for the member: while it cannot be reached (or refuses the delete) the job's
    ``Terminating`` condition says so (``WaitingForMember``) and the syncer sends this task again
    with backoff. A copy the member deletes in the background (still listed after the delete) is
    left to finish: the syncer completes the deletion when its watch sees the copy go, or this
    task, sent again, finds it absent. A copy not there while the attempt's propagation is
    still in flight is not taken for gone: the worker may be creating it.
    """
    ctx = current()
    ref = ref_for(kind, namespace, name)
    key = ref.key
    if not is_deleting(try_get_job(ctx.objects, key), uid):
        return "done"
    try:
        client = ctx.member(member)
        outcome = purge(member, namespace, name, uid, attempt, kind=kind)
        if outcome == "absent" and ctx.client.zscore(ctx.keys.inflight, inflight_entry(key, uid, attempt)):
            # A worker may be creating it right now (it read the job before it was deleted): not
            # gone until that propagation is over (its mark goes then, or at its deadline).
            return "creating"
        if outcome == "purged":
            try:
                labels = _labels(client.get_job(member_resource(ref.adapter.resource), namespace, name))
                if labels.get(JOB_UID_LABEL) == uid and labels.get(ATTEMPT_LABEL) == str(attempt):
                    outcome = "deleting"
            except NotFound:
                pass
    except (LookupError, MemberError) as error:
        said = safe_message(error)
        log.warning("event=delete_copy_waits job=%s member=%s error=%r", key, member, str(error))
        terminating(
            ctx,
            key,
            uid,
            reason=FleetReason.WAITING_FOR_MEMBER,
            message=f"waiting for {member} to confirm that the copy of attempt {attempt} is gone: {said}",
            reword=False,
        )
        return "waiting"
    if outcome == "deleting":
        terminating(
            ctx,
            key,
            uid,
            reason=FleetReason.WAITING_FOR_MEMBER,
            message=f"waiting for {member} to finish deleting the copy of attempt {attempt} "
            "(it still lists it)",
        )
        return "deleting"
    complete(ctx, key, uid, attempt=attempt, member=member, why=f"copy {outcome}")
    return "deleted"
