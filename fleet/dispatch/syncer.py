"""The syncer: what the members say, brought back to the fleet, and what Fleet does about it.

One process watches every member (a :class:`fleet.members.Watcher` per job kind on the jobs
Fleet propagated, selected by their ``fleet.io/job-uid`` label, resuming from its
resourceVersion after any disconnect), probes each one's health, and follows the fleet jobs'
deletions. As Karmada gives each concern its own controller (status, failover, eviction, cluster
health), each concern here is its own module under :mod:`fleet.dispatch.sync`, and this module
only composes them:

=============================================  ==============================================
:mod:`~fleet.dispatch.sync.observer`           which concern each reported copy is for
:mod:`~fleet.dispatch.sync.mirror`             the current copy's status onto the fleet object
:mod:`~fleet.dispatch.sync.gangs`              copies whose gang waits: since when, and why
:mod:`~fleet.dispatch.sync.failover`           application and cluster failover
:mod:`~fleet.dispatch.sync.audit`              each member's copies against the record: lost ones
:mod:`~fleet.dispatch.sync.stale`              purging the copies jobs left behind, and held ones
:mod:`~fleet.dispatch.sync.probes`             member health: probes and their records
:mod:`~fleet.dispatch.sync.finalizers`         deletions: the finalizer held until the copy goes
:mod:`~fleet.dispatch.sync.companion_changes`  companion objects' edits sent to the members
=============================================  ==============================================

Threads
    * **The run loop** (the caller's thread): the *round* every ``tick`` (below), and every
      ``resync_every`` a read of every fleet job for deletions the stream may have missed.
    * **Watch threads**, one per watched member and job kind (the watchers' own): every copy
      they report goes through the observer, which mirrors, fails over, purges or sends a
      delete at once. They run the most: all status traffic is theirs.
    * **A probe thread per watched member** (``probe-<member>``): probes, writes the health
      record, looks at every copy again when the member comes back, and reads the pods of the
      copies whose gang waits.
    * **deletions**: the fleet jobs' change stream; a job marked for deletion gets its delete.
    * **holds**: writes the versions of copies that said only that they were starting, held a
      batch period for a later one (:mod:`~fleet.dispatch.sync.holds`), once they are due.
    * **companions**: the companion objects' change stream.
    * **ownership**: its own thread, as the dispatcher's lease renewer, so a long round never
      lets the leases lapse; it follows the members' kubeconfig (a member added, removed or
      given new credentials, :meth:`~fleet.dispatch.context.Context.refresh_members`) and, for
      sharded syncers, the leases; it adopts and lets go members.

Shared state (:class:`~fleet.dispatch.sync.shared.Shared`, made here)
    One lock guards every concern's tables and the members' health. It is one lock, not one
    per concern, because several sections span concerns: a vanished copy is forgotten by the
    gangs, the stale copies and the finalizers in one section; a member let go by all of them
    and its health; the round reads the waiting gangs and the stale copies in one section. No
    member call and no Redis call is made with it held, so a slow member only holds its own
    threads. The health (:attr:`Shared.health`, written only by the probes) is read by the pods
    reader (not while NotReady), the delete retries (slower while NotReady) and the cluster
    failover. The watchers (:attr:`Shared.watchers`) are changed only by this module, on the run
    and ownership threads; a late event of a member let go is dropped
    (:meth:`Shared.watching`). The policies are cached for ``policy_refresh`` (a tuple replaced
    whole: a race reads them twice, never half).

A round, in order
    1. one section of the lock: the waiting gangs and the stale copies of the owned members;
    2. gangs waiting past their toleration: application failover (``Blame.MEMBER``);
    3. stale copies whose grace passed (or whose job went): purged;
    4. deletes not confirmed after their wait: sent again;
    5. copies of jobs held (paused, suspended) while placed: purged, their holds dropped;
    6. members NotReady past a job's toleration: cluster failover.

Ownership: with :class:`~fleet.dispatch.ownership.Shards`, this syncer watches, probes and decides
only for the members it holds a lease on; letting one go stops its watches and probe thread and
forgets all that was pending for it (its new owner lists the member afresh and continues its
health record from Redis). A member removed from the kubeconfig is let go the same way, and one
whose credentials changed is let go and adopted again with its new client.

Everything here may run twice (after a restart, or two syncers at once): every write to the fleet
object is a compare-and-set on the uid and attempt, and the ledger and purges are idempotent.
"""

from __future__ import annotations

import logging
import threading
import time
from functools import partial
from typing import Any

from fleet.dispatch.context import MEMBERS_EVERY, Context
from fleet.dispatch.ownership import Shards
from fleet.dispatch.sync import (
    EXCLUDE_DOWN_SECONDS,
    CopyAudit,
    CopyObserver,
    Failover,
    Finalizers,
    GangWaits,
    Probes,
    Shared,
    StaleCopies,
    StatusMirror,
    SyncerSettings,
    follow_companions,
)
from fleet.labels import JOB_UID_LABEL
from fleet.members import MemberChanges
from fleet.workloads import KINDS, member_resource

__all__ = ["EXCLUDE_DOWN_SECONDS", "Syncer", "SyncerSettings"]

log = logging.getLogger("fleet.dispatch.syncer")


class Syncer:
    """Watches, probes and acts for every member of ``ctx``; :meth:`run` until ``stop`` is set."""

    def __init__(
        self, ctx: Context, settings: SyncerSettings | None = None, shards: Shards | None = None
    ) -> None:
        self.ctx = ctx
        self.settings = settings or SyncerSettings()
        #: With shards, this syncer acts on the members it owns (:mod:`fleet.dispatch.ownership`);
        #: without, on every member.
        self.shards = shards
        self.shared = shared = Shared(ctx, self.settings, shards)
        self.stale = StaleCopies(shared)
        self.gangs = GangWaits(shared)
        self.finalizers = Finalizers(shared, self.stale)
        self.failover = Failover(shared, self.gangs, self.stale)
        self.audit = CopyAudit(shared, self.finalizers)
        self.observer = CopyObserver(
            shared,
            mirror=StatusMirror(shared),
            gangs=self.gangs,
            failover=self.failover,
            stale=self.stale,
            finalizers=self.finalizers,
            audit=self.audit,
        )
        self.audit.on_listed = partial(self.observer.observe, unmirrored_only=True)
        self.probes = Probes(shared, self.observer, self.gangs, self.audit)
        #: Owned member -> the event that stops its probe loop.
        self._probing: dict[str, threading.Event] = {}
        self._threads: list[threading.Thread] = []

    # -- lifecycle ------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        members = self.ctx.members
        owned = list(members) if self.shards is None else sorted(self.shards.balance(list(members)))
        self.probes.load(owned)
        for name in owned:
            self._adopt(name)
        self._spawn("deletions", self.finalizers.follow, stop)
        # Its own thread, as the dispatcher's lease renewer: a long tick must not let the leases
        # lapse (nor delay a member added to the kubeconfig).
        self._spawn("ownership", self._keep_ownership, stop)
        self._spawn("companions", follow_companions, self.ctx, stop)
        self._spawn("holds", self.observer.flush_held, stop)
        log.info("event=syncer_started members=%d owned=%d", len(members), len(owned))
        last_resync = time.monotonic()
        watchers = self.shared.watchers
        try:
            while not stop.wait(self.settings.tick):
                try:
                    self._tick()
                    if time.monotonic() - last_resync > self.settings.resync_every:
                        self.finalizers.resync()
                        last_resync = time.monotonic()
                except Exception:  # Redis away: log, keep going, the next tick tries again
                    log.exception("event=tick_failed")
        finally:
            for each in list(watchers.values()):
                for watcher in each:
                    watcher.stop()
            for probing in list(self._probing.values()):
                probing.set()
            for thread in list(self._threads):
                thread.join(5)
            for each in list(watchers.values()):  # adopted by a last round meanwhile
                for watcher in each:
                    watcher.stop()
            if self.shards is not None:
                self.shards.release()
            log.info("event=syncer_stopped")

    def _tick(self) -> None:
        """One round of the time-based rules, in the order the module docstring gives."""
        now = time.monotonic()
        with self.shared.lock:
            pending = self.gangs.waiting()
            stale = self.stale.waiting()
        self.failover.gangs_overdue(pending, now)
        self.stale.recheck(stale)
        self.finalizers.retry(now)
        self.stale.purge_held()
        self.failover.cluster()

    def _spawn(self, name: str, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        watchers = [w for ws in list(self.shared.watchers.values()) for w in ws]
        return all(w.wait_synced(max(0.0, deadline - time.monotonic())) for w in watchers)

    # -- ownership (sharded syncers) ------------------------------------------------------------

    def _keep_ownership(self, stop: threading.Event) -> None:
        """Follow the kubeconfig's members and, sharded, this syncer's leases: a member added
        is adopted (if it is this syncer's), one removed let go, one whose credentials changed
        let go and adopted again with its new client."""
        shards = self.shards
        while not stop.wait(MEMBERS_EVERY if shards is None else min(MEMBERS_EVERY, shards.interval)):
            try:
                self.ctx.refresh_members(self._on_members_changed)
                members = list(self.ctx.members)
                self._rebalance(frozenset(members) if shards is None else shards.balance(members))
            except Exception:  # a member's watch failing to start: the next round tries again
                log.exception("event=rebalance_failed")

    def _on_members_changed(self, change: MemberChanges) -> None:
        """Before their old clients are closed: stop using the members removed or changed."""
        for name in (*change.removed, *change.changed):
            if name in self.shared.watchers:
                self._let_go(name)

    def _adopt(self, name: str) -> None:
        """Start watching and probing ``name`` (its watch lists every copy first).

        The member is this syncer's (:meth:`Shared.watching`) before its first watch starts: a
        watch lists on its own thread, at once, and a list that arrived before the member was
        registered would be dropped as a late event of a member let go. A copy that finished
        before the takeover sends no later change, so its job would never be mirrored."""
        self._probing[name] = probing = threading.Event()
        member = self.ctx.members[name]
        self.shared.watchers[name] = watchers = []
        for adapter in KINDS:
            watchers.append(
                member.watch_jobs(
                    member_resource(adapter.resource),
                    self.observer.on_event,
                    label_selector=JOB_UID_LABEL,
                    on_batch=self.observer.on_batch,
                )
            )
        self._spawn(f"probe-{name}", self.probes.loop, name, self.ctx.members[name], probing)

    def _let_go(self, name: str) -> None:
        """Stop watching and probing ``name`` and forget what was pending for it: its new owner
        reads the member afresh and continues its health record from Redis."""
        for watcher in self.shared.watchers.pop(name, []):
            watcher.stop()
        probing = self._probing.pop(name, None)
        if probing is not None:
            probing.set()
        with self.shared.lock:
            self.probes.forget(name)
            self.gangs.forget_member(name)
            self.stale.forget_member(name)
            self.finalizers.forget_member(name)
            self.audit.forget_member(name)
            self.observer.forget_member(name)
        self.probes.unexport(name)
        self._threads = [t for t in self._threads if t.is_alive()]

    def _rebalance(self, owned: frozenset[str]) -> None:
        watchers = self.shared.watchers
        for name in sorted(set(watchers) - owned):
            self._let_go(name)
        gained = sorted(owned - set(watchers))
        if gained:
            self.probes.load(gained)
        for name in gained:
            self._adopt(name)
