"""The syncer: what the members say, brought back to the fleet, and what Fleet does about it.

One process watches every member (a :class:`fleet.members.Watcher` on the jobs Fleet
propagated, selected by their ``fleet.io/job-uid`` label, resuming from its resourceVersion after
any disconnect) and probes each one's health. Per observed member copy it decides by the copy's
labels (fleet job, uid, attempt) against the fleet object:

* **The current attempt, on its member**: its conditions and replicaStatuses are mirrored onto
  the fleet object (:func:`fleet.jobs.status.mirror`). ``Succeeded`` finishes the job (quota and
  hold released, exactly once: the ledger's release is idempotent). ``Failed`` with a user error
  (``JobValidFailed``) finishes it as failed; any other failure is an *application failover*:
  the copy is purged by the policy's ``purgeMode`` and the job handed back
  (:func:`fleet.dispatch.handback.give_back`, counted against its backoffLimit). A copy that
  ran and failed is the job's own failure (``Blame.JOB``): its first on a member does not keep
  the job off that member, repeated ones do, for exponentially longer. A copy that sits in
  ``PodGroupPending`` longer than the policy's toleration is failed over the same way, but the
  member could not really run it (``Blame.MEMBER``): it is avoided from the first time. The rule,
  and how an exclusion gives way when no other member fits, is in :mod:`fleet.dispatch.handback`.
* **A stale copy** (an older attempt, another member than the fleet's, a fleet job that is gone
  or being deleted): purged by the RQ worker (``purge``, which never touches a successor). For a
  failover the policy's ``purgeMode`` decides when: ``Immediately`` at once (or as soon as the
  member answers again), ``Gracefully`` once the new attempt runs or the grace period passed,
  ``Never`` not at all (an event says so). Orphans (no fleet job) always go.
* **The current attempt vanished** (deleted in the member by someone else): handed back.

Health: each member is probed every ``probe_interval``; it turns NotReady after
``failure_threshold`` failures in a row and Ready after ``success_threshold`` successes. The state
is a :class:`fleet.dispatch.health.MemberHealth` record in the health hash, written after every
probe and read back when the syncer starts (or first probes a member it did not have): a restart
continues the NotReady clock and the failure count where they were (a member is failed over
only once a probe of this syncer confirmed the record: it may have come back meanwhile). A member
NotReady longer than a job's ``tolerationSeconds`` (counted from the record's ``since``) loses
that job: *cluster failover*, handed back without counting as a failure, and its copy purged when the member
returns.

Deletions (:mod:`fleet.dispatch.deletion`): the syncer follows the fleet jobs' change stream; a
job marked for deletion shows ``Terminating`` and its member copy is deleted by the RQ task
``delete_copy``, which completes the deletion (quota and hold released, then the finalizer
removed) once the member confirms the copy gone. While the member cannot be reached the delete
is sent again with exponential backoff (``delete_retry_*``; only every ``delete_retry_max``
while the member is NotReady), and at once when the copy is seen again (the member is back);
the watch seeing the copy go completes the deletion too. A job never placed, one whose member
left the fleet, and one whose policy's ``purgeMode`` is ``Never`` are completed at once, the
last two with a ``MemberCopyLeft`` Event.

Everything here may run twice (after a restart, or two syncers at once): every write to the fleet
object is a compare-and-set on the uid and attempt, and the ledger and purges are idempotent.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from prometheus_client import Counter, Gauge, Histogram
from rq import Retry

from fleet.api.kinds import FLEET_JOB_KINDS
from fleet.apiserver.companions import COMPANION_KINDS
from fleet.apiserver.errors import Gone
from fleet.apiserver.resources import ResourceType
from fleet.ascend import Condition
from fleet.dispatch.context import Context, policy_for
from fleet.dispatch.deletion import complete, is_deleting, left_entry, terminating
from fleet.dispatch.handback import COMPONENT, Blame, clear_inflight, finish, give_back
from fleet.dispatch.health import MemberHealth, read_health, write_health
from fleet.dispatch.ownership import Shards
from fleet.dispatch.preemption import is_being_preempted, requeued
from fleet.jobs.pause import parse_held_entry
from fleet.jobs.phases import FINISHED, HELD, FleetReason, Phase
from fleet.jobs.status import attempt_of, cluster_of, current_state, mirror
from fleet.jobs.store import get_jobs, mutate_jobs, try_get_job, walk_jobs
from fleet.jobs.submit import job_key
from fleet.members import DELETED, SYNC, Member, Watcher, WatchEvent
from fleet.members.errors import redact
from fleet.placement import job_pod_key
from fleet.policy import ApplicationFailover, PropagationPolicy, PurgeMode
from fleet.state import record_event, record_events
from fleet.workloads import (
    KINDS,
    JobRef,
    Outcome,
    UnknownKind,
    WorkloadStatus,
    adapter_for,
    job_ref,
    member_resource,
    ref_for,
)
from fleet.workloads.base import PodEvidence, unschedulable
from fleet.workloads.labels import ATTEMPT_LABEL, JOB_NAME_LABEL, JOB_NAMESPACE_LABEL, JOB_UID_LABEL

__all__ = ["Syncer", "SyncerSettings"]

log = logging.getLogger("fleet.dispatch.syncer")

SYNC_SECONDS = Histogram(
    "fleet_sync_seconds",
    "Time to bring one member copy's change to the fleet object.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
)
FINISHED_JOBS = Counter(
    "fleet_jobs_finished_total",
    "Jobs that finished, by state, reason and job kind.",
    ["state", "reason", "job_kind"],
)
FAILOVERS = Counter(
    "fleet_failovers_total",
    "Attempts ended by failover, by kind of failover, member and job kind.",
    ["kind", "member", "job_kind"],
)
PURGES = Counter("fleet_purges_enqueued_total", "Member copies sent to be purged, by why.", ["why"])
MEMBER_READY = Gauge("fleet_member_ready", "1 while the member answers its health probes.", ["member"])

#: How long a member that was NotReady past the toleration is avoided by the jobs it lost.
EXCLUDE_DOWN_SECONDS: Final = 120.0


@dataclass(frozen=True)
class SyncerSettings:
    probe_interval: float = 1.0
    failure_threshold: int = 3
    success_threshold: int = 1
    #: How often the time-based rules (tolerations, grace periods) are checked.
    tick: float = 0.5
    #: A purge sent for a copy that is still there after this long is sent again.
    purge_again_after: float = 30.0
    #: How often every fleet job is read again (a safety net under the change stream).
    resync_every: float = 60.0
    #: While the fleet's jobs change, the deletion follower reads their change stream at most
    #: this often: one wake-up for the changes of many jobs rather than one per change (it
    #: reads them all to find the few deletions), for at most this much delay on a deletion.
    deletions_every: float = 0.25
    policy_refresh: float = 2.0
    #: A deleted job's copy not yet confirmed gone: the delete is sent again after this long,
    #: doubling up to ``delete_retry_max`` (and at once when the copy is seen again).
    delete_retry_initial: float = 1.0
    delete_retry_max: float = 30.0
    #: How often the pods waiting in a member are read (one list), while copies of kinds whose
    #: operator never says on the job that its gang waits (Kubeflow's: ``reads_pods``) wait to
    #: run there; from the member's probe thread, only while the member is Ready.
    pod_check_every: float = 2.0


@dataclass(frozen=True)
class _Copy:
    """The fleet identity a member copy carries in its labels, and its kind (its own)."""

    member: str
    namespace: str
    name: str
    uid: str
    attempt: int
    #: The kind as job keys write it (:attr:`fleet.workloads.JobRef.tag`).
    kind: str = ""

    @property
    def ref(self) -> JobRef:
        return ref_for(self.kind, self.namespace, self.name)

    @property
    def key(self) -> str:
        return self.ref.key

    @classmethod
    def of(cls, member: str, obj: Mapping[str, Any]) -> _Copy | None:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        try:
            meta = obj.get("metadata") or {}
            kind = JobRef(adapter_for(obj), str(meta.get("namespace")), str(meta.get("name"))).tag
            return cls(
                member,
                str(labels[JOB_NAMESPACE_LABEL]),
                str(labels[JOB_NAME_LABEL]),
                str(labels[JOB_UID_LABEL]),
                int(labels[ATTEMPT_LABEL]),
                kind,
            )
        except (KeyError, ValueError, UnknownKind):
            return None

    @classmethod
    def of_job(cls, member: str, obj: Mapping[str, Any]) -> _Copy:
        """The copy the fleet job ``obj``'s current attempt has (or should have) in ``member``."""
        meta = obj.get("metadata") or {}
        ref = job_ref(job_key(obj))
        return cls(member, ref.namespace, ref.name, str(meta.get("uid")), attempt_of(obj), ref.tag)


@dataclass(frozen=True)
class _Seen:
    """A current copy as observed, with the fleet object it was read against."""

    ident: _Copy
    seen: WorkloadStatus
    obj: dict[str, Any]


def _mirror_change(item: _Seen, before: dict[str, str | None]) -> Any:
    """The status change that mirrors ``item``; notes the state it changed from in ``before``."""
    ident, seen = item.ident, item.seen

    def change(obj: dict[str, Any]) -> dict[str, Any] | None:
        if obj["metadata"].get("uid") != ident.uid or attempt_of(obj) != ident.attempt:
            return None
        if cluster_of(obj) != ident.member or current_state(obj) in (Phase.QUEUED, *FINISHED):
            return None
        if obj["metadata"].get("deletionTimestamp"):
            return None  # Terminating: its state is the deletion's until the copy is gone
        if is_being_preempted(obj) and seen.state not in FINISHED:
            return None  # being evicted: only an end it reached first is news
        before["state"] = current_state(obj)
        status = obj.setdefault("status", {})
        message = f"created in {ident.member} (attempt {ident.attempt})"
        return obj if mirror(status, seen, dispatched_message=message) else None

    return change


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
        #: Owned member -> the event that stops its probe loop.
        self._probing: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        #: Member -> its health record, as last written (or read back when first needed).
        self._health: dict[str, MemberHealth] = {}
        #: Members this syncer has probed itself: a record read back fails a member over only
        #: once a probe here confirmed it (it may have come back while no syncer looked).
        self._probed: set[str] = set()
        #: Member -> its watchers, one per job kind.
        self._watchers: dict[str, list[Watcher]] = {}
        #: (member, uid, attempt) -> when the copy was first seen waiting for its gang (monotonic).
        self._pending_since: dict[_Copy, float] = {}
        #: The same copies -> what says they wait (the member's reason, or their pods').
        self._pending_why: dict[_Copy, str] = {}
        #: Copies of kinds whose pods tell that the gang waits, not running yet -> their status
        #: as last seen.
        self._starting: dict[_Copy, WorkloadStatus] = {}
        #: Member -> when the pods waiting in it were last read (monotonic).
        self._pods_read: dict[str, float] = {}
        #: What the pods of such a copy said when last read (:func:`fleet.workloads.base.unschedulable`).
        self._evidence: dict[_Copy, str] = {}
        #: Stale copies waiting for their purge time (Gracefully) -> first seen stale (monotonic).
        self._stale: dict[_Copy, float] = {}
        #: Purges sent -> when (monotonic), so a copy seen again is not purged twice at once.
        self._purged: dict[_Copy, float] = {}
        self._kept: set[_Copy] = set()
        #: Copies of deleted jobs not yet confirmed gone -> (last delete sent, wait before the next).
        self._deleting: dict[_Copy, tuple[float, float]] = {}
        self._policies: tuple[float, list[PropagationPolicy]] = (0.0, [])
        self._threads: list[threading.Thread] = []

    # -- lifecycle ------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        members = self.ctx.members
        owned = list(members) if self.shards is None else sorted(self.shards.balance(list(members)))
        self._load_health(owned)
        for name in owned:
            self._adopt(name)
        self._spawn("deletions", self._follow_deletions, stop)
        if self.shards is not None:
            # Its own thread, as the dispatcher's lease renewer: a long tick must not let the
            # leases lapse.
            self._spawn("ownership", self._keep_ownership, self.shards, list(members), stop)
        self._spawn("companions", self._follow_companions, stop)
        log.info("event=syncer_started members=%d owned=%d", len(members), len(owned))
        last_resync = time.monotonic()
        try:
            while not stop.wait(self.settings.tick):
                try:
                    self._tick()
                    if time.monotonic() - last_resync > self.settings.resync_every:
                        self._resync()
                        last_resync = time.monotonic()
                except Exception:  # Redis away: log, keep going, the next tick tries again
                    log.exception("event=tick_failed")
        finally:
            for watchers in list(self._watchers.values()):
                for watcher in watchers:
                    watcher.stop()
            for probing in list(self._probing.values()):
                probing.set()
            for thread in list(self._threads):
                thread.join(5)
            for watchers in list(self._watchers.values()):  # adopted by a last round meanwhile
                for watcher in watchers:
                    watcher.stop()
            if self.shards is not None:
                self.shards.release()
            log.info("event=syncer_stopped")

    # -- ownership (sharded syncers) ------------------------------------------------------------

    def _mine(self, member: str) -> bool:
        """Whether this syncer may decide for ``member`` now (its lease held and fresh)."""
        return self.shards is None or self.shards.owns(member)

    def _watching(self, member: str) -> bool:
        """Whether events of ``member`` are still this syncer's to apply: until it lets the member
        go (a write from a lease about to lapse is a compare-and-set its successor repeats)."""
        return self.shards is None or member in self._watchers

    def _keep_ownership(self, shards: Shards, members: list[str], stop: threading.Event) -> None:
        while not stop.wait(shards.interval):
            try:
                self._rebalance(shards.balance(members))
            except Exception:  # a member's watch failing to start: the next round tries again
                log.exception("event=rebalance_failed")

    def _adopt(self, name: str) -> None:
        """Start watching and probing ``name`` (its watch lists every copy first)."""
        self._probing[name] = probing = threading.Event()
        member = self.ctx.members[name]
        self._watchers[name] = [
            member.watch_jobs(
                member_resource(adapter.resource),
                self._on_event,
                label_selector=JOB_UID_LABEL,
                on_batch=self._on_batch,
            )
            for adapter in KINDS
        ]
        self._spawn(f"probe-{name}", self._probe_loop, name, self.ctx.members[name], probing)

    def _let_go(self, name: str) -> None:
        """Stop watching and probing ``name`` and forget what was pending for it: its new owner
        reads the member afresh and continues its health record from Redis."""
        for watcher in self._watchers.pop(name, []):
            watcher.stop()
        probing = self._probing.pop(name, None)
        if probing is not None:
            probing.set()
        with self._lock:
            self._health.pop(name, None)
            self._probed.discard(name)
            self._pods_read.pop(name, None)
            tables: tuple[dict[_Copy, Any], ...] = (
                self._pending_since,
                self._pending_why,
                self._starting,
                self._evidence,
                self._stale,
                self._purged,
                self._deleting,
            )
            for table in tables:
                for ident in [i for i in table if i.member == name]:
                    del table[ident]
            self._kept = {i for i in self._kept if i.member != name}
        with contextlib.suppress(KeyError):  # not probed yet: no series to remove
            MEMBER_READY.remove(name)
        self._threads = [t for t in self._threads if t.is_alive()]

    def _rebalance(self, owned: frozenset[str]) -> None:
        for name in sorted(set(self._watchers) - owned):
            self._let_go(name)
        gained = sorted(owned - set(self._watchers))
        if gained:
            self._load_health(gained)
        for name in gained:
            self._adopt(name)

    def _spawn(self, name: str, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        watchers = [w for ws in list(self._watchers.values()) for w in ws]
        return all(w.wait_synced(max(0.0, deadline - time.monotonic())) for w in watchers)

    def _policy_list(self) -> list[PropagationPolicy]:
        at, policies = self._policies
        if time.monotonic() - at > self.settings.policy_refresh:
            policies = self.ctx.policies()
            self._policies = (time.monotonic(), policies)
        return policies

    def _failover_policy(self, obj: Mapping[str, Any]) -> ApplicationFailover:
        return policy_for(obj, self._policy_list()).spec.failover.application

    # -- member copies --------------------------------------------------------------------------

    def _on_event(self, event: WatchEvent) -> None:
        if not self._watching(event.member):
            return  # a late event of a member let go: its new owner has seen it in its list
        if event.type == SYNC:
            self._observe(event.member, list(event.objects))
            for obj in event.vanished:
                self._vanished(event.member, obj)
        else:
            self._on_batch([event])

    def _on_batch(self, events: list[WatchEvent]) -> None:
        """The changes of one read of a member's stream, in order; runs of copies seen once
        each are observed together (a copy seen twice starts a new run, so none is skipped)."""
        run: list[Mapping[str, Any]] = []
        names: set[tuple[str, str, str]] = set()
        member = events[0].member
        if not self._watching(member):
            return
        for event in events:
            if event.object is None:
                continue
            meta = event.object.get("metadata") or {}
            name = (str(event.object.get("kind")), str(meta.get("namespace")), str(meta.get("name")))
            if event.type == DELETED or name in names:
                self._observe(member, run)
                run, names = [], set()
            if event.type == DELETED:
                self._vanished(member, event.object)
                continue
            run.append(event.object)
            names.add(name)
        self._observe(member, run)

    def _observe(self, member: str, copies: Sequence[Mapping[str, Any]]) -> None:
        """Act on member copies (distinct ones): their fleet objects read in one round trip, the
        mirrored statuses written in one pipeline."""
        found = [(ident, copy) for copy in copies if (ident := _Copy.of(member, copy)) is not None]
        if not found:
            return
        started = time.perf_counter()
        objs = get_jobs(self.ctx.objects, [i.key for i, _ in found])
        mirrored: list[_Seen] = []
        for (ident, copy), obj in zip(found, objs, strict=True):
            meta = (obj or {}).get("metadata") or {}
            if obj is not None and is_deleting(obj, ident.uid) and self._is_deleted_copy(ident, obj):
                self._maybe_delete(obj, soon=True)  # seen again (its member is back): at once
                continue
            if obj is None or meta.get("uid") != ident.uid or meta.get("deletionTimestamp"):
                if not self._left_in_place(ident):
                    self._purge(ident, "orphan")
                continue
            if attempt_of(obj) != ident.attempt or cluster_of(obj) != member:
                self._stale_copy(ident, obj)
                continue
            adapter = ident.ref.adapter
            seen = adapter.map_status(copy)
            outcome = adapter.classify(seen)
            if is_being_preempted(obj) and outcome in (Outcome.USER_ERROR, Outcome.RETRIABLE):
                continue  # its pods go because it is being evicted: not a failure of the job
            if outcome is Outcome.RETRIABLE:
                message = f"failed in {member}: {seen.reason}: {seen.message}"
                self._application_failover(ident, obj, seen, message, blame=Blame.JOB)
                continue
            mirrored.append(_Seen(ident, seen, obj))
        self._mirror(mirrored)
        elapsed = time.perf_counter() - started
        for item in mirrored:
            self._track_pending(item.ident, item.seen)
            SYNC_SECONDS.observe(elapsed)

    def _mirror(self, items: list[_Seen]) -> None:
        """Mirror the copies' status onto their fleet objects; Events for the states reached;
        the quota of the finished released (after their Events)."""
        if not items:
            return
        befores: list[dict[str, str | None]] = [{} for _ in items]
        changes = [(i.ident.key, _mirror_change(i, b)) for i, b in zip(items, befores, strict=True)]
        stored_all = mutate_jobs(self.ctx.objects, changes, currents=[i.obj for i in items])
        events: dict[str, list[tuple[dict[str, Any], str, str]]] = {"Normal": [], "Warning": []}
        finished: list[_Copy] = []
        for item, before, stored in zip(items, befores, stored_all, strict=True):
            ident, seen = item.ident, item.seen
            if stored is None or stored["metadata"].get("uid") != ident.uid:
                continue
            if attempt_of(stored) != ident.attempt:
                continue
            state = current_state(stored)
            if (
                "state" in before
                and state != before["state"]
                and state in (Condition.RUNNING, Condition.RESTARTING, *FINISHED)
            ):
                warning = state in (Condition.FAILED, Condition.RESTARTING)
                message = f"{state} in {ident.member}: {seen.message or ''}".rstrip(": ")
                reason = str(seen.reason or state)
                events["Warning" if warning else "Normal"].append((stored, reason, message))
                if state in FINISHED:
                    FINISHED_JOBS.labels(str(state), str(seen.reason or ""), ident.ref.adapter.kind).inc()
                    log.info(
                        "event=finished job=%s state=%s member=%s attempt=%d",
                        ident.key,
                        state,
                        ident.member,
                        ident.attempt,
                    )
            if state in FINISHED and seen.finished and cluster_of(stored) == ident.member:
                # Every time the finished copy is seen (idempotent): a syncer that died between the
                # status write and the release still releases once it sees the copy again.
                finished.append(ident)
        for type_, entries in events.items():
            if entries:
                record_events(self.ctx.objects, entries, type=type_, component=COMPONENT)
        for ident in finished:
            finish(self.ctx, ident.key, ident.uid, ident.attempt, member=ident.member)

    def _track_pending(self, ident: _Copy, seen: WorkloadStatus) -> None:
        """Note whether the copy waits for its gang, by its adapter's classification: from the
        copy's status, and for a kind whose pods tell it (``reads_pods``) with what its pods said
        when last read (:meth:`_read_pods`, from the member's probe thread)."""
        adapter = ident.ref.adapter
        reads_pods = isinstance(adapter, PodEvidence) and adapter.reads_pods
        with self._lock:
            if reads_pods:
                seen = replace(seen, unschedulable=self._evidence.get(ident))
            outcome = adapter.classify(seen)
            if outcome is Outcome.STUCK_PENDING:
                self._pending_since.setdefault(ident, time.monotonic())
                self._pending_why[ident] = seen.unschedulable or f"{seen.reason}: {seen.message or ''}"
            else:
                self._pending_since.pop(ident, None)
                self._pending_why.pop(ident, None)
            if reads_pods and outcome in (Outcome.STARTING, Outcome.STUCK_PENDING):
                self._starting[ident] = seen
            else:
                self._starting.pop(ident, None)
                self._evidence.pop(ident, None)

    def _read_pods(self, name: str, member: Member) -> None:
        """Read what the pods of ``name``'s copies that wait to run say (for the kinds whose
        operator never says that the gang waits), at most every ``pod_check_every``, and
        classify those copies again with it: a real member's scheduler marks a pod it cannot
        place ``PodScheduled`` False, ``Unschedulable`` (:func:`fleet.workloads.base.unschedulable`).
        One list per member and round, whatever the number of waiting copies: every Pending pod
        that carries a fleet uid, told apart by its uid and attempt labels. Skipped while the
        member is not Ready (its copies are the cluster failover's then)."""
        now = time.monotonic()
        with self._lock:
            health = self._health.get(name)
            if health is not None and health.ready is False:
                return
            waiting = {i: seen for i, seen in self._starting.items() if i.member == name}
            if not waiting or now - self._pods_read.get(name, 0.0) < self.settings.pod_check_every:
                return
            self._pods_read[name] = now
        try:
            pods = member.list_pods(JOB_UID_LABEL, "status.phase=Pending")
        except Exception as exc:  # the member is slow or away: the next round reads again
            log.info("event=pods_not_read member=%s error=%s", name, redact(str(exc)))
            return
        by_copy: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for pod in pods:
            labels = (pod.get("metadata") or {}).get("labels") or {}
            by_copy.setdefault((str(labels.get(JOB_UID_LABEL)), str(labels.get(ATTEMPT_LABEL))), []).append(
                pod
            )
        for ident, seen in waiting.items():
            evidence = unschedulable(by_copy.get((ident.uid, str(ident.attempt)), []))
            with self._lock:
                if ident not in self._starting:
                    continue  # it ran, finished or went meanwhile
                if evidence is None:
                    self._evidence.pop(ident, None)
                else:
                    self._evidence[ident] = evidence
            self._track_pending(ident, seen)

    def _vanished(self, member: str, copy: Mapping[str, Any]) -> None:
        ident = _Copy.of(member, copy)
        if ident is None:
            return
        with self._lock:
            self._pending_since.pop(ident, None)
            self._pending_why.pop(ident, None)
            self._starting.pop(ident, None)
            self._evidence.pop(ident, None)
            self._stale.pop(ident, None)
            self._purged.pop(ident, None)
            self._kept.discard(ident)
            self._deleting.pop(ident, None)
        self.ctx.client.srem(self.ctx.keys.left, left_entry(member, ident.uid, ident.attempt))
        obj = try_get_job(self.ctx.objects, ident.key)
        if obj is not None and is_deleting(obj, ident.uid) and self._is_deleted_copy(ident, obj):
            # The member no longer lists the copy of a deleted job: it is gone, for certain.
            complete(
                self.ctx, ident.key, ident.uid,
                attempt=ident.attempt, member=member, why="copy vanished",
            )  # fmt: skip
            return
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

    def _application_failover(
        self, ident: _Copy, obj: dict[str, Any], seen: WorkloadStatus | None, message: str, *, blame: Blame
    ) -> None:
        policy = self._failover_policy(obj)
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
        with self._lock:
            self._pending_since.pop(ident, None)
            self._pending_why.pop(ident, None)
            self._starting.pop(ident, None)
            self._evidence.pop(ident, None)
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
            self._purge(ident, "failover")
        else:
            self._stale_copy(ident, obj)

    # -- stale copies ---------------------------------------------------------------------------

    def _stale_copy(self, ident: _Copy, obj: dict[str, Any]) -> None:
        """A copy of an attempt the fleet job has left behind: purge it when its policy says
        (a held job's at once, whatever the policy: pausing or suspending is removing its replicas)."""
        if current_state(obj) in HELD and attempt_of(obj) == ident.attempt:
            finish(self.ctx, ident.key, ident.uid, ident.attempt, member=ident.member)
            self._purge(ident, "paused")  # the metric label of every held job
            return
        policy = self._failover_policy(obj)
        if policy.purge_mode == PurgeMode.IMMEDIATELY or attempt_of(obj) < ident.attempt:
            self._purge(ident, "stale")  # newer than the fleet knows: Redis lost it, never keep
            return
        if policy.purge_mode == PurgeMode.NEVER:
            self._keep(ident, obj)
            return
        with self._lock:
            first = self._stale.setdefault(ident, time.monotonic())
        successor_runs = current_state(obj) in (Condition.RUNNING, *FINISHED)
        if successor_runs or time.monotonic() - first > policy.grace_period_seconds:
            with self._lock:
                self._stale.pop(ident, None)
            self._purge(ident, "graceful")

    def _keep(self, ident: _Copy, obj: dict[str, Any]) -> None:
        with self._lock:
            if ident in self._kept:
                return
            self._kept.add(ident)
        record_event(
            self.ctx.objects,
            obj,
            type="Warning",
            reason=FleetReason.STALE_COPY_KEPT,
            message=f"the copy of attempt {ident.attempt} is still in {ident.member}; purgeMode Never "
            "leaves it to you",
            component=COMPONENT,
        )

    def _purge(self, ident: _Copy, why: str) -> None:
        now = time.monotonic()
        with self._lock:
            sent = self._purged.get(ident)
            if sent is not None and now - sent < self.settings.purge_again_after:
                return
            self._purged[ident] = now
        self.ctx.purge_queue.enqueue(
            "fleet.dispatch.tasks.purge",
            ident.member,
            ident.namespace,
            ident.name,
            ident.uid,
            ident.attempt,
            kind=ident.kind,
            retry=Retry(max=8, interval=[1, 2, 4, 8, 15, 30, 60, 60]),
            job_timeout=60,
            failure_ttl=3600,
        )
        PURGES.labels(why).inc()
        log.info(
            "event=purge_sent why=%s job=%s member=%s attempt=%d", why, ident.key, ident.member, ident.attempt
        )

    # -- time-based rules -----------------------------------------------------------------------

    def _tick(self) -> None:
        now = time.monotonic()
        with self._lock:
            pending = [
                (i, since, self._pending_why.get(i, ""))
                for i, since in self._pending_since.items()
                if self._mine(i.member)
            ]
            stale = [i for i in self._stale if self._mine(i.member)]
        for ident, since, why in pending:
            obj = try_get_job(self.ctx.objects, ident.key)
            if obj is None or is_being_preempted(obj):
                with self._lock:
                    self._pending_since.pop(ident, None)
                    self._pending_why.pop(ident, None)
                continue
            toleration = self._failover_policy(obj).decision_conditions.toleration_seconds
            if now - since > toleration:
                self._application_failover(
                    ident,
                    obj,
                    None,
                    f"its pods waited in {ident.member} for {toleration}s without all fitting ({why})",
                    blame=Blame.MEMBER,
                )
        for ident in stale:
            obj = try_get_job(self.ctx.objects, ident.key)
            if obj is None or obj["metadata"].get("uid") != ident.uid:
                self._purge(ident, "orphan")
            else:
                self._stale_copy(ident, obj)
        self._retry_deletions(now)
        self._purge_held()
        self._cluster_failover()

    def _purge_held(self) -> None:
        """Purge the copies of the jobs held (paused, suspended) while placed (their records in
        :attr:`~fleet.dispatch.keys.DispatchKeys.held`, written by :mod:`fleet.jobs.pause`), on
        the members this syncer owns, and drop their capacity holds. The ledger is left alone:
        the hold gave the quota back, and the job may be queued again already. The purge task
        never touches a successor (another uid or attempt)."""
        for raw in self.ctx.client.smembers(self.ctx.keys.held):
            parsed = parse_held_entry(raw)
            if parsed is None:
                self.ctx.client.srem(self.ctx.keys.held, raw)
                continue
            member, key, uid, attempt = parsed
            if member in self.ctx.members and not self._mine(member):
                continue  # its owner purges it
            if member in self.ctx.members:
                ref = job_ref(key)
                ident = _Copy(member, ref.namespace, ref.name, uid, attempt, ref.tag)
                self.ctx.reservations.release(member, job_pod_key(uid, attempt))
                clear_inflight(self.ctx, key, uid, attempt)
                self._purge(ident, "paused")
            self.ctx.client.srem(self.ctx.keys.held, raw)

    def _cluster_failover(self) -> None:
        wall = time.time()
        with self._lock:
            down = {
                name: seconds
                for name, h in self._health.items()
                if name in self._probed
                and self._mine(name)
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
            toleration = policy_for(obj, self._policy_list()).spec.cluster_failover_seconds()
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
                # Its copy is purged once the member answers again (``_record_probe``): a purge
                # sent now would only hold a worker in retries against a member that is down.

    # -- health ---------------------------------------------------------------------------------

    def _probe_loop(self, name: str, member: Member, stop: threading.Event) -> None:
        while not stop.is_set():
            probe = member.probe()
            if stop.is_set():
                break  # let go meanwhile: the member's health is its new owner's to write
            self._record_probe(
                name, healthy=probe.healthy, error=probe.error, latency=probe.seconds, detail=probe.detail
            )
            if probe.healthy and self._mine(name):
                self._read_pods(name, member)
            stop.wait(self.settings.probe_interval)

    def _load_health(self, members: Sequence[str]) -> None:
        """Continue from the records in Redis: a restart must not reset a NotReady member's
        clock (its failover would wait a whole toleration more) nor its failures counted."""
        try:
            stored = read_health(self.ctx.client, self.ctx.keys, members)
        except Exception as exc:  # Redis away: start afresh; each probe tries to read it again
            log.warning("event=health_not_read error=%s", exc)
            return
        with self._lock:
            for name, record in stored.items():
                self._health.setdefault(name, record)
        for name, record in stored.items():
            log.info(
                "event=health_resumed member=%s ready=%s since=%.3f failures=%d",
                name, record.ready, record.since, record.failures,
            )  # fmt: skip

    def _record_probe(
        self, name: str, *, healthy: bool, error: str | None, latency: float, detail: str | None = None
    ) -> None:
        """Count a probe; ``error`` (no address in it) goes into the health every reader sees,
        ``detail`` (the client's own words, host and port included) only into this log."""
        error = redact(error) if error is not None else None
        settings = self.settings
        with self._lock:
            known = name in self._health
        if not known:
            self._load_health([name])  # a member this syncer has not had yet: continue its record
        with self._lock:
            health, turned = self._health.get(name, MemberHealth()).after_probe(
                healthy=healthy,
                error=error,
                latency=latency,
                now=time.time(),
                failure_threshold=settings.failure_threshold,
                success_threshold=settings.success_threshold,
            )
            self._health[name] = health
            self._probed.add(name)
        ready = health.ready
        MEMBER_READY.labels(name).set(1 if ready else 0)
        if turned:
            log.warning(
                "event=member_%s member=%s error=%r",
                "ready" if ready else "not_ready",
                name,
                detail or error,
            )
        watchers = self._watchers.get(name)
        if turned and ready and watchers:
            # Back from an outage: a resumed watch reports only changes, so look again at every
            # copy it knows; those its jobs left meanwhile are stale now and get purged.
            for each in watchers:
                self._observe(name, each.snapshot())
        try:
            write_health(self.ctx.client, self.ctx.keys, name, health)
        except Exception as exc:  # Redis away: the next probe writes again
            log.warning("event=health_not_written member=%s error=%s", name, exc)

    # -- deletions ------------------------------------------------------------------------------

    def _follow_deletions(self, stop: threading.Event) -> None:
        """Follow the change stream of every job kind (each read blocks a share of a second)."""
        since: dict[ResourceType, str] | None = None
        block_ms = max(1, 1000 // len(FLEET_JOB_KINDS))
        while not stop.is_set():
            try:
                if since is None:
                    version = self._resync()
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
                        if event.type != DELETED and event.object is not None:
                            self._maybe_delete(event.object)
                if moved:  # the streams moved: let more changes gather before the next read
                    stop.wait(max(0.0, began + self.settings.deletions_every - time.monotonic()))
            except Gone:
                since = None
            except Exception:  # Redis away or restarted: list again once it answers
                log.exception("event=deletions_follow_failed")
                since = None
                stop.wait(1.0)

    # -- companion objects ----------------------------------------------------------------------

    def _follow_companions(self, stop: threading.Event) -> None:
        """A ConfigMap, Secret or Service written at the fleet: a worker updates it where the jobs
        that reference it run (``fleet.dispatch.tasks.sync_companion``). Followed from the
        moment the syncer starts, when one resync (``fleet.dispatch.tasks.resync_companions``)
        brings up to date what changed while no syncer followed."""
        since: dict[str, str] = {}
        while not stop.is_set():
            try:
                if not since:  # (again) from now: what changed before is brought up to date once
                    self.ctx.queue.enqueue(
                        "fleet.dispatch.tasks.resync_companions", job_timeout=600, failure_ttl=3600
                    )
                for rt in COMPANION_KINDS:
                    if rt.kind not in since:
                        since[rt.kind] = self.ctx.objects.resource_version()
                    events, since[rt.kind] = self.ctx.objects.changes(rt, since[rt.kind], block_ms=300)
                    for event in events:
                        meta = (event.object or {}).get("metadata") or {}
                        if event.type == DELETED or not meta.get("name"):
                            continue
                        self.ctx.queue.enqueue(
                            "fleet.dispatch.tasks.sync_companion",
                            rt.kind,
                            meta.get("namespace"),
                            meta["name"],
                            retry=Retry(max=8, interval=[1, 2, 4, 8, 15, 30, 60, 60]),
                            job_timeout=60,
                            failure_ttl=3600,
                        )
            except Gone:
                since.clear()
            except Exception:  # Redis away: start again from now once it answers
                log.exception("event=companions_follow_failed")
                since.clear()
                stop.wait(1.0)

    def _resync(self) -> str:
        """Act on every job marked for deletion; the resourceVersion to follow the changes from
        (read first: a job marked while the jobs are walked is in the changes)."""
        version = self.ctx.objects.resource_version()
        for obj in walk_jobs(self.ctx.objects):
            self._maybe_delete(obj)
        return version

    def _maybe_delete(self, obj: Mapping[str, Any], *, soon: bool = False) -> None:
        """Act on a job marked for deletion (see the module docstring, Deletions); ``soon``: its
        copy was just seen, so a delete still to be confirmed is sent again at once."""
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
        ident = _Copy.of_job(member, obj)
        if member not in self.ctx.members:
            self._forget_deletion(ident)
            complete(
                self.ctx, key, uid, attempt=attempt, member=member, why="member gone",
                left=f"{member} is no longer a member of the fleet: the copy of attempt {attempt} there, "
                "if any, was not deleted",
            )  # fmt: skip
            return
        if not self._mine(member):
            return  # its owner deletes the copy and completes the deletion
        if self._failover_policy(obj).purge_mode == PurgeMode.NEVER:
            self._forget_deletion(ident)
            complete(
                self.ctx, key, uid, attempt=attempt, member=member, why="purgeMode Never",
                left=f"the copy of attempt {attempt} is left in {member} (purgeMode Never): "
                f"delete {namespace}/{name} there yourself", keep=True,
            )  # fmt: skip
            return
        if current_state(obj) != Phase.TERMINATING:
            terminating(
                self.ctx,
                key,
                uid,
                reason=FleetReason.DELETING_COPY,
                message=f"deleting the copy of attempt {attempt} in {member}; the job goes once it is gone",
            )
        self._send_delete(ident, soon=soon)

    def _left_in_place(self, ident: _Copy) -> bool:
        """Whether ``ident`` is a copy a deleted job left in place (purgeMode Never)."""
        entry = left_entry(ident.member, ident.uid, ident.attempt)
        return bool(self.ctx.client.sismember(self.ctx.keys.left, entry))

    @staticmethod
    def _is_deleted_copy(ident: _Copy, obj: Mapping[str, Any]) -> bool:
        """Whether ``ident`` is the copy a deleted job's finalizer waits for."""
        return attempt_of(obj) == ident.attempt and cluster_of(obj) == ident.member

    def _forget_deletion(self, ident: _Copy) -> None:
        with self._lock:
            self._deleting.pop(ident, None)

    def _delete_due(self, ident: _Copy, sent: float, wait: float, now: float) -> bool:
        """Whether the delete of ``ident`` sent at ``sent`` may be sent again: after ``wait``, or
        only after ``delete_retry_max`` while its member is NotReady (the member turning Ready
        shows the copy again, which sends it at once: no worker waits on a member that is down).
        Called with the lock held."""
        health = self._health.get(ident.member)
        down = health is not None and health.ready is False
        return now - sent >= (self.settings.delete_retry_max if down else wait)

    def _send_delete(self, ident: _Copy, *, soon: bool) -> None:
        """Send the ``delete_copy`` task for ``ident``, unless it was sent too recently: the wait
        doubles from ``delete_retry_initial`` to ``delete_retry_max``; ``soon`` (the copy was
        seen again) starts it over."""
        initial, most = self.settings.delete_retry_initial, self.settings.delete_retry_max
        now = time.monotonic()
        with self._lock:
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
            "fleet.dispatch.tasks.delete_copy",
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

    def _retry_deletions(self, now: float) -> None:
        """Send again the deletes whose copies are not confirmed gone after their wait."""
        with self._lock:
            due = [i for i, (sent, wait) in self._deleting.items() if self._delete_due(i, sent, wait, now)]
        for ident in due:
            obj = try_get_job(self.ctx.objects, ident.key)
            if obj is None or not is_deleting(obj, ident.uid) or not self._is_deleted_copy(ident, obj):
                self._forget_deletion(ident)
                continue
            self._maybe_delete(obj)
