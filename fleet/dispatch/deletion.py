"""Deleting a job at the fleet: its finalizer holds until its member copy is confirmed gone.

``kubectl delete acjob`` marks the fleet object (``deletionTimestamp``); Fleet's finalizer
(:data:`fleet.jobs.submit.FINALIZER`) keeps it until this module's :func:`complete` has run,
which releases the job's quota, capacity hold and in-flight mark, and then removes the finalizer.
:func:`complete` is called only when one of these is true:

* **The copy is confirmed gone**: the member answered the delete (200) or said the copy is not
  there (404, or the name now holds another job's copy), and, when the member deletes in the
  background (the copy still listed, with its own ``deletionTimestamp``), once it is no longer
  listed: the RQ task :func:`fleet.dispatch.tasks.delete_copy` reads it back, and the syncer
  completes the deletion as soon as its watch sees the copy go.
* **The job never had a copy** (it was never placed, or its last attempt ended): at once.
* **The member is no longer in the fleet** (not in the syncer's kubeconfig): at once, with a
  Warning Event (``MemberCopyLeft``) that says its copy, if any, was not deleted.
* **The job's policy says** ``purgeMode: Never``: at once, with a Warning Event
  (``MemberCopyLeft``) that says where the copy is, left to a person. The copy is recorded in
  the left-copies set (``DispatchKeys.left``), so the syncer does not purge it as an orphan.
* **Its member is declared failed**: NotReady longer than the job's cluster-failover toleration,
  as a cluster failover would decide. The deletion does not wait for the member any more: it
  completes, with a Warning Event saying the copy is purged when the member answers again, and
  the copy stays recorded as one that may exist (:mod:`fleet.state.copies`), so that it is
  purged as an orphan then (the rule failover follows for ``purgeMode: Immediately``). So a
  ``kubectl delete`` returns within the toleration and a few seconds, whatever the member does.
  ``kubectl delete --force --grace-period=0`` changes nothing here: as kube-apiserver does, it
  skips no finalizer (it only sets the grace period, which a fleet job does not have).

Until then the job's last condition is ``Terminating``: ``DeletingMemberCopy`` while the delete
is under way, ``WaitingForMember`` with the member's name and what it answered while it cannot
be reached (or refuses the delete), each with an Event. The syncer sends the delete again with
exponential backoff, and at once when the member's copy is seen again (the member is back). Everything here is
idempotent: the ledger's release is, the finalizer is removed by compare-and-set on the uid.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fleet.dispatch.context import Context
from fleet.dispatch.handback import COMPONENT, finish
from fleet.jobs import FINALIZER, FleetReason, Phase, Terminate, condition, mutate_job, step, try_get_job
from fleet.state import CopyEntry, delete_events_for, record_event

__all__ = ["complete", "is_deleting", "left_entry", "terminating"]

log = logging.getLogger("fleet.dispatch.deletion")


def left_entry(member: str, uid: str, attempt: int) -> str:
    """The member of the left-copies set (``DispatchKeys.left``) that stands for one copy."""
    return f"{member}|{uid}|{attempt}"


def is_deleting(obj: Mapping[str, Any] | None, uid: str) -> bool:
    """Whether ``obj`` is job ``uid``, marked for deletion and still held by Fleet's finalizer."""
    meta = (obj or {}).get("metadata") or {}
    return (
        meta.get("uid") == uid
        and bool(meta.get("deletionTimestamp"))
        and FINALIZER in (meta.get("finalizers") or [])
    )


def terminating(ctx: Context, key: str, uid: str, *, reason: str, message: str, reword: bool = True) -> bool:
    """Make ``Terminating`` (``reason``, ``message``) the job's state while its deletion waits;
    False when it already said so (or the job is no longer being deleted). Without ``reword`` a
    job already ``Terminating`` for ``reason`` keeps its words (the syncer's, which know more of
    the member than a worker's failed call)."""
    changed: list[bool] = []

    def change(obj: dict[str, Any]) -> dict[str, Any] | None:
        changed.clear()
        if not is_deleting(obj, uid):
            return None
        said = condition(obj, Phase.TERMINATING)
        if not reword and said is not None and said.get("status") == "True" and said.get("reason") == reason:
            return None
        status = step(obj, Terminate(reason, message))
        if status is None:
            return None  # it says so already
        obj["status"] = status
        changed.append(True)
        return obj

    stored = mutate_job(ctx.objects, key, change)
    if changed and stored is not None:
        warning = reason == FleetReason.WAITING_FOR_MEMBER
        record_event(
            ctx.objects,
            stored,
            type="Warning" if warning else "Normal",
            reason=reason,
            message=message,
            component=COMPONENT,
        )
    return bool(changed)


def complete(
    ctx: Context,
    key: str,
    uid: str,
    *,
    attempt: int,
    member: str | None,
    why: str,
    left: str | None = None,
    keep: bool = False,
    purge_later: bool = False,
) -> bool:
    """Finish the deletion of job ``uid``: its quota, hold and in-flight mark released, then its
    finalizer removed (the object goes with it) and its Events deleted. ``left``, when the copy
    stays in ``member``, is the message of the ``MemberCopyLeft`` Warning recorded first; with
    ``keep`` the copy is also entered in the left-copies set, so that the syncer never purges it
    as an orphan (purgeMode Never: it is a person's to delete). With ``purge_later`` (its member
    was declared failed) the copy stays recorded as one that may exist (:mod:`fleet.state.copies`):
    it is purged as an orphan when its member answers again. Returns False when another caller
    finished it already."""
    obj = try_get_job(ctx.objects, key)
    if not is_deleting(obj, uid):
        return False
    assert obj is not None
    # Released before the finalizer goes: a caller that dies in between leaves the finalizer,
    # and the next one releases again (idempotently) and removes it.
    if member is not None:
        finish(ctx, key, uid, attempt, member=member)
    else:
        ctx.ledger.release(key)
    if keep and member is not None:
        ctx.client.sadd(ctx.keys.left, left_entry(member, uid, attempt))
    if member is not None and not purge_later:  # gone, or a person's now
        ctx.copies.gone([CopyEntry(member, key, uid, attempt)])
    if left is not None:
        record_event(
            ctx.objects,
            obj,
            type="Warning",
            reason=FleetReason.MEMBER_COPY_LEFT,
            message=left,
            component=COMPONENT,
        )

    def change(current: dict[str, Any]) -> dict[str, Any] | None:
        if not is_deleting(current, uid):
            return None
        meta = current["metadata"]
        meta["finalizers"] = [f for f in meta["finalizers"] if f != FINALIZER]
        return current

    mutate_job(ctx.objects, key, change, subresource=None)
    events = delete_events_for(ctx.objects, obj)
    log.info("event=deleted job=%s member=%s attempt=%d why=%s events=%d", key, member, attempt, why, events)
    return True
