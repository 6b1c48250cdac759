"""Deletions: a job marked for deletion at the fleet is held by its finalizer until its copy goes.

The syncer follows the fleet jobs' change stream (its own thread, :meth:`Finalizers.follow`); a
job marked for deletion shows ``Terminating`` and its member copy is deleted by the RQ task
``delete_copy``, which completes the deletion (:func:`fleet.dispatch.deletion.complete`: quota
and hold released, then the finalizer removed) once the member confirms the copy gone. While the
member cannot be reached the delete is sent again with exponential backoff
(``delete_retry_*``; only every ``delete_retry_max`` while the member is NotReady), and at once
when the copy is seen again (the member is back); the watch seeing the copy go completes the
deletion too. A job never placed, one whose member left the fleet, and one whose policy's
``purgeMode`` is ``Never`` are completed at once, the last two with a ``MemberCopyLeft`` Event
(:mod:`fleet.dispatch.deletion` says why each is safe).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from fleet.apiserver import Gone, ResourceType
from fleet.dispatch.context import policy_for
from fleet.dispatch.deletion import complete, is_deleting, left_entry, terminating
from fleet.dispatch.sync.copies import MemberCopy
from fleet.dispatch.sync.shared import Shared, log
from fleet.dispatch.sync.stale import PURGES, StaleCopies
from fleet.dispatch.tasks import delete_copy
from fleet.jobs import (
    FleetReason,
    Phase,
    attempt_of,
    cluster_of,
    current_state,
    job_key,
    last_cluster_of,
    try_get_job,
    walk_marked_jobs,
)
from fleet.kinds import FLEET_JOB_KINDS
from fleet.members import DELETED
from fleet.policy import PurgeMode
from fleet.state import CopyEntry

__all__ = ["Finalizers"]


class Finalizers:
    """The deletes sent and not yet confirmed; its table under ``shared.lock``."""

    def __init__(self, shared: Shared, stale: StaleCopies) -> None:
        self.shared = shared
        self.ctx = shared.ctx
        self.stale = stale
        #: Copies of deleted jobs not yet confirmed gone -> (last delete sent, wait before the next).
        self._deleting: dict[MemberCopy, tuple[float, float]] = {}

    def follow(self, stop: threading.Event) -> None:
        """Follow the change stream of every job kind (each read blocks a share of a second)."""
        since: dict[ResourceType, str] | None = None
        block_ms = max(1, 1000 // len(FLEET_JOB_KINDS))
        while not stop.is_set():
            try:
                if since is None:
                    version = self.resync()
                    since = dict.fromkeys(FLEET_JOB_KINDS, version)
                began = time.monotonic()
                moved = False
                for rt in FLEET_JOB_KINDS:
                    before = since[rt]
                    events, since[rt] = self.ctx.objects.changes(
                        rt, before, block_ms=block_ms, deleting_only=True
                    )
                    moved = moved or since[rt] != before
                    for event in events:
                        if event.type == DELETED:
                            self.orphaned(event.object)
                        else:
                            self.maybe_delete(event.object)
                if moved:  # the streams moved: let more changes gather before the next read
                    stop.wait(max(0.0, began + self.shared.settings.deletions_every - time.monotonic()))
            except Gone:
                since = None
            except Exception:  # Redis away or restarted: list again once it answers
                log.exception("event=deletions_follow_failed")
                since = None
                stop.wait(1.0)

    def resync(self) -> str:
        """Act on every job marked for deletion; the resourceVersion to follow the changes from
        (read first: a job marked while the jobs are walked is in the changes). Only the jobs
        marked are read, through the store's index of them: a walk of 100,000 queued jobs cost
        each syncer 5 s of CPU at its start and every ``resync_every`` (issue 30)."""
        version = self.ctx.objects.resource_version()
        for obj in walk_marked_jobs(self.ctx.objects):
            self.maybe_delete(obj)
        return version

    def maybe_delete(self, obj: Mapping[str, Any], *, soon: bool = False) -> None:
        """Act on a job marked for deletion (see the module docstring); ``soon``: its copy was
        just seen, so a delete still to be confirmed is sent again at once."""
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid"))
        if not is_deleting(obj, uid):
            return
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        key = job_key(obj)
        member, attempt = cluster_of(obj), attempt_of(obj)
        if member is None:  # never placed, or its last attempt ended: no copy to wait for
            complete(self.ctx, key, uid, attempt=attempt, member=None, why="no copy")
            return
        ident = MemberCopy.of_job(member, obj)
        if member not in self.ctx.members:
            self._forget_deletion(ident)
            complete(
                self.ctx, key, uid, attempt=attempt, member=member, why="member gone",
                left=f"{member} is no longer a member of the fleet: the copy of attempt {attempt} there, "
                "if any, was not deleted",
            )  # fmt: skip
            return
        if not self.shared.mine(member):
            return  # its owner deletes the copy and completes the deletion
        if self.shared.failover_policy(obj).purge_mode == PurgeMode.NEVER:
            self._forget_deletion(ident)
            complete(
                self.ctx, key, uid, attempt=attempt, member=member, why="purgeMode Never",
                left=f"the copy of attempt {attempt} is left in {member} (purgeMode Never): "
                f"delete {namespace}/{name} there yourself", keep=True,
            )  # fmt: skip
            return
        down = self._down_for(member)
        if down is not None:
            toleration = policy_for(obj, self.shared.policy_list()).spec.cluster_failover_seconds()
            if down > toleration:  # declared failed: the deletion goes on without it
                self._forget_deletion(ident)
                complete(
                    self.ctx, key, uid, attempt=attempt, member=member, why="member failed",
                    left=f"{member} has been NotReady for {down:.0f}s (toleration {toleration:g}s): the "
                    f"deletion did not wait for it; the copy of attempt {attempt} there is deleted when "
                    "it answers again", purge_later=True,
                )  # fmt: skip
                return
            terminating(
                self.ctx,
                key,
                uid,
                reason=FleetReason.WAITING_FOR_MEMBER,
                message=f"waiting for {member}, NotReady, to delete the copy of attempt {attempt}; the "
                f"deletion completes without it once it has been NotReady for {toleration:g}s",
            )
        elif current_state(obj) != Phase.TERMINATING:
            terminating(
                self.ctx,
                key,
                uid,
                reason=FleetReason.DELETING_COPY,
                message=f"deleting the copy of attempt {attempt} in {member}; the job goes once it is gone",
            )
        self._send_delete(ident, soon=soon)

    def _down_for(self, member: str) -> float | None:
        """How long ``member`` has been NotReady by a probe of this syncer's (None: it is not)."""
        with self.shared.lock:
            health = self.shared.health.get(member)
            if health is None or member not in self.shared.probed:
                return None
            return health.not_ready_for(time.time())

    def orphaned(self, obj: Mapping[str, Any]) -> None:
        """A fleet job is gone: a copy of it that may still run (recorded as one that may exist:
        its deletion did not confirm it gone, its finalizer was dropped by someone else) no job
        expects any more, so it is purged at once (its quota stays counted until it is gone)."""
        member = cluster_of(obj) or last_cluster_of(obj)
        if member is None or not self.shared.mine(member):
            return
        ident = MemberCopy.of_job(member, obj)
        entry = CopyEntry(member, ident.key, ident.uid, ident.attempt)
        if self.ctx.copies.recorded([entry]) == [True] and not self.left_in_place(ident):
            self.stale.purge(ident, "orphan")

    def left_in_place(self, ident: MemberCopy) -> bool:
        """Whether ``ident`` is a copy a deleted job left in place (purgeMode Never)."""
        entry = left_entry(ident.member, ident.uid, ident.attempt)
        return bool(self.ctx.client.sismember(self.ctx.keys.left, entry))

    @staticmethod
    def is_deleted_copy(ident: MemberCopy, obj: Mapping[str, Any]) -> bool:
        """Whether ``ident`` is the copy a deleted job's finalizer waits for."""
        return attempt_of(obj) == ident.attempt and cluster_of(obj) == ident.member

    def copy_gone(self, ident: MemberCopy) -> dict[str, Any] | None:
        """``ident`` is no longer listed by its member: it is no longer a copy left in place,
        and a deleted job that waited for it is completed. Its fleet job as read after, or
        ``None`` once completed (or absent)."""
        self.ctx.client.srem(self.ctx.keys.left, left_entry(ident.member, ident.uid, ident.attempt))
        obj = try_get_job(self.ctx.objects, ident.key)
        if obj is not None and is_deleting(obj, ident.uid) and self.is_deleted_copy(ident, obj):
            # The member no longer lists the copy of a deleted job: it is gone, for certain.
            complete(
                self.ctx, ident.key, ident.uid,
                attempt=ident.attempt, member=ident.member, why="copy vanished",
            )  # fmt: skip
            return None
        return obj

    def _forget_deletion(self, ident: MemberCopy) -> None:
        with self.shared.lock:
            self._deleting.pop(ident, None)

    def _delete_due(self, ident: MemberCopy, sent: float, wait: float, now: float) -> bool:
        """Whether the delete of ``ident`` sent at ``sent`` may be sent again: after ``wait``, or
        only after ``delete_retry_max`` while its member is NotReady (the member turning Ready
        shows the copy again, which sends it at once: no worker waits on a member that is down).
        Called with the lock held."""
        down = self.shared.not_ready(ident.member)
        return now - sent >= (self.shared.settings.delete_retry_max if down else wait)

    def _send_delete(self, ident: MemberCopy, *, soon: bool) -> None:
        """Send the ``delete_copy`` task for ``ident``, unless it was sent too recently: the wait
        doubles from ``delete_retry_initial`` to ``delete_retry_max``; ``soon`` (the copy was
        seen again) starts it over."""
        initial, most = self.shared.settings.delete_retry_initial, self.shared.settings.delete_retry_max
        now = time.monotonic()
        with self.shared.lock:
            entry = self._deleting.get(ident)
            if entry is None:
                wait = initial
            else:
                sent, wait = entry
                if soon and now - sent < initial:
                    return
                if not soon and not self._delete_due(ident, sent, wait, now):
                    return
                wait = initial if soon else min(wait * 2, most)
            self._deleting[ident] = (now, wait)
        self.ctx.purge_queue.enqueue(
            delete_copy,
            ident.member,
            ident.namespace,
            ident.name,
            ident.uid,
            ident.attempt,
            kind=ident.kind,
            job_timeout=60,
            failure_ttl=3600,
        )
        PURGES.labels("deleted").inc()
        log.info(
            "event=delete_sent job=%s member=%s attempt=%d retry_in=%.1f",
            ident.key, ident.member, ident.attempt, wait,
        )  # fmt: skip

    def retry(self, now: float) -> None:
        """Send again the deletes whose copies are not confirmed gone after their wait; look at
        those waiting for a NotReady member every round (it may be declared failed now)."""
        with self.shared.lock:
            due = [
                i
                for i, (sent, wait) in self._deleting.items()
                if self._delete_due(i, sent, wait, now) or self.shared.not_ready(i.member)
            ]
        for ident in due:
            obj = try_get_job(self.ctx.objects, ident.key)
            if obj is None or not is_deleting(obj, ident.uid) or not self.is_deleted_copy(ident, obj):
                self._forget_deletion(ident)
                continue
            self.maybe_delete(obj)

    def forget(self, ident: MemberCopy) -> None:
        """Forget ``ident`` (it vanished from its member). Called with the lock held."""
        self._deleting.pop(ident, None)

    def forget_member(self, member: str) -> None:
        """Forget every copy of ``member`` (let go). Called with the lock held."""
        for ident in [i for i in self._deleting if i.member == member]:
            del self._deleting[ident]
