"""What is done with each member copy the watches report: which concern it is for.

Per observed copy, by its labels (fleet job, uid, attempt) against the fleet object:

* **a deleted job's copy, seen again** (its member is back): its delete is sent again at once
  (:mod:`~fleet.dispatch.sync.finalizers`);
* **an orphan** (no fleet job, another uid, a job being deleted) unless a deleted job left it
  in place: purged; **a stale copy** (an older attempt, another member than the fleet's):
  purged when its policy says (:mod:`~fleet.dispatch.sync.stale`);
* **the current attempt, failed and retriable**: application failover
  (:mod:`~fleet.dispatch.sync.failover`), unless it fails because it is being evicted;
* **the current attempt otherwise**: mirrored (:mod:`~fleet.dispatch.sync.mirror`), then timed
  if its gang waits (:mod:`~fleet.dispatch.sync.gangs`); a version that says only that the copy
  is starting waits a batch period first, for a later one (:mod:`~fleet.dispatch.sync.holds`).

A copy that **vanished** is forgotten by every concern at once; a deleted job that waited for it
completes, a current attempt that went ends with ``CopyLost`` (:mod:`~fleet.dispatch.sync.audit`),
and every list a watch makes has the member checked against the record of its copies.

Runs on the watch threads (one per member and job kind), on the holds' thread
(:meth:`CopyObserver.flush_held`) and, for a member back from an outage, on its probe thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

from fleet.ascend import Condition
from fleet.dispatch.deletion import is_deleting
from fleet.dispatch.preemption import is_being_preempted
from fleet.dispatch.sync.audit import CopyAudit
from fleet.dispatch.sync.copies import MemberCopy, Seen
from fleet.dispatch.sync.failover import Failover
from fleet.dispatch.sync.finalizers import Finalizers
from fleet.dispatch.sync.gangs import GangWaits
from fleet.dispatch.sync.holds import CopyName, StartingHolds
from fleet.dispatch.sync.mirror import SYNC_SECONDS, StatusMirror
from fleet.dispatch.sync.shared import Shared, log
from fleet.dispatch.sync.stale import StaleCopies
from fleet.jobs import Blame, Phase, attempt_of, cluster_of, current_state, get_jobs
from fleet.members import DELETED, SYNC, WatchEvent
from fleet.workloads import Outcome
from queues import JobState

__all__ = ["CopyObserver"]

#: The states of a job that shows nothing of its member copy yet.
_UNMIRRORED: Final = frozenset({Phase.ADMITTED, Phase.DISPATCHED})


def _name(obj: Mapping[str, Any]) -> CopyName:
    meta = obj.get("metadata") or {}
    return (str(obj.get("kind")), str(meta.get("namespace")), str(meta.get("name")))


def _superseded(member: str, events: Sequence[WatchEvent]) -> set[int]:
    """The indexes of the versions in ``events`` that a later version of the same copy follows
    (no delete between) and that only say it is starting or running."""
    out: set[int] = set()
    after: dict[tuple[str, str, str], str] = {}  # the type of the next event of each copy
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.object is None:
            continue
        name = _name(event.object)
        later = after.get(name)
        if event.type != DELETED and later not in (None, DELETED) and _passing(member, event.object):
            out.add(index)
        after[name] = event.type
    return out


def _passing(member: str, copy: Mapping[str, Any]) -> bool:
    """Whether a version of a copy says only that it is being created, starting or running:
    nothing that is acted on (a failover, a finish) or recorded (a Warning Event) by itself."""
    return _says(member, copy, _PASSING_STATES, _PASSING_OUTCOMES)


def _starting(member: str, copy: Mapping[str, Any]) -> bool:
    """Whether a version of a copy says only that it is being created or starting: held for a
    batch period, for a later version (:mod:`~fleet.dispatch.sync.holds`)."""
    return _says(member, copy, _STARTING_STATES, _STARTING_OUTCOMES)


def _says(member: str, copy: Mapping[str, Any], states: frozenset[Any], outcomes: frozenset[Outcome]) -> bool:
    ident = MemberCopy.of(member, copy)
    if ident is None:
        return False
    adapter = ident.ref.adapter
    try:
        seen = adapter.map_status(copy)
        return seen.state in states and adapter.classify(seen) in outcomes
    except Exception:  # a status its kind cannot read: kept, for the path that handles every copy
        return False


#: The most copies :class:`CopyObserver` remembers the mirrored version of (about 200 bytes each).
ACTED_CAP: Final = 200_000
#: How long the audit's list passes over a copy at the version last mirrored from it.
RECHECK_SECONDS: Final = 300.0


def _version(copy: Mapping[str, Any]) -> str | None:
    version = (copy.get("metadata") or {}).get("resourceVersion")
    return None if version is None else str(version)


#: A copy's states and outcomes that a later version of it may supersede (:func:`_superseded`).
_PASSING_STATES: Final = frozenset({None, Condition.CREATED, Condition.RUNNING})
_PASSING_OUTCOMES: Final = frozenset({Outcome.STARTING, Outcome.RUNNING})
#: A copy's states and outcomes that are held for a later version (:func:`_starting`).
_STARTING_STATES: Final = frozenset({None, Condition.CREATED})
_STARTING_OUTCOMES: Final = frozenset({Outcome.STARTING})


class CopyObserver:
    """Routes the copies the watches report to the concerns; keeps no table of its own."""

    def __init__(
        self,
        shared: Shared,
        *,
        mirror: StatusMirror,
        gangs: GangWaits,
        failover: Failover,
        stale: StaleCopies,
        finalizers: Finalizers,
        audit: CopyAudit,
    ) -> None:
        self.shared = shared
        self.ctx = shared.ctx
        self.mirror = mirror
        self.gangs = gangs
        self.failover = failover
        self.stale = stale
        self.finalizers = finalizers
        self.audit = audit
        #: Per copy still running, the resourceVersion last mirrored from it and when
        #: (monotonic): the audit's list passes over a copy at that very version for
        #: :data:`RECHECK_SECONDS` (nothing in it is news), then reads its job again (a write
        #: Redis lost since is repaired then). A copy that finishes or vanishes, or whose member
        #: is let go, is dropped; past :data:`ACTED_CAP` copies the table starts again.
        self._acted: dict[MemberCopy, tuple[str, float]] = {}
        #: The versions that say only that a copy is starting, waiting for a later one.
        self.holds = StartingHolds(shared.settings.starting_batch)

    def on_event(self, event: WatchEvent) -> None:
        if not self.shared.watching(event.member):
            return  # a late event of a member let go: its new owner has seen it in its list
        if event.type == SYNC:
            with self.holds.serial(event.member, event.resource):
                for obj in (*event.objects, *event.vanished):  # the list holds what is newest
                    self.holds.drop(event.member, _name(obj))
                self.observe(event.member, list(event.objects))
                for obj in event.vanished:
                    self.vanished(event.member, obj)
            self.audit.soon(event.member)  # a list: check it against the record at once
        else:
            self.on_batch([event])

    def on_batch(self, events: list[WatchEvent]) -> None:
        """The changes of one read of a member's stream, in order; runs of copies seen once
        each are observed together (a copy seen twice starts a new run, so none is skipped).

        Level, not edge: a version that a later one of the same copy in the same read supersedes
        is passed over when it only says the copy is starting or running (:func:`_passing`), as
        an informer's work queue hands a controller the latest state of a key once. A syncer
        that fell behind (the read holds a burst) then writes each job once, not once per step;
        a failure or a restart in between is still acted on and recorded in its turn.

        Batched: the newest version of a copy that says only that it is starting is held
        (:mod:`~fleet.dispatch.sync.holds`); a later version replaces it, and the holds' thread
        acts on it once it is due."""
        member = events[0].member
        if not self.shared.watching(member):
            return
        with self.holds.serial(member, events[0].resource):
            self._on_read(member, events[0].resource, events)

    def _on_read(self, member: str, resource: str, events: list[WatchEvent]) -> None:
        run: list[Mapping[str, Any]] = []
        names: set[CopyName] = set()
        superseded = _superseded(member, events)
        holds, now = self.holds, time.monotonic()
        for index, event in enumerate(events):
            if event.object is None or index in superseded:
                continue
            name = _name(event.object)
            if event.type != DELETED and holds.period > 0 and _starting(member, event.object):
                holds.hold(member, resource, name, event.object, now)  # replaces what was held
                continue
            holds.drop(member, name)
            if event.type == DELETED or name in names:
                self.observe(member, run)
                run, names = [], set()
            if event.type == DELETED:
                self.vanished(member, event.object)
                continue
            run.append(event.object)
            names.add(name)
        self.observe(member, run)

    def flush_held(self, stop: threading.Event) -> None:
        """The holds' thread: each held version is acted on once it is due, until ``stop``."""
        period = self.holds.period
        if period <= 0:
            return
        while True:
            due = self.holds.next_due()
            wait = period if due is None else min(period, max(0.005, due - time.monotonic()))
            if stop.wait(wait):
                return
            try:
                self.flush(time.monotonic())
            except Exception:  # Redis away: what was held is mirrored from the next read or audit
                log.exception("event=held_flush_failed")

    def flush(self, now: float) -> None:
        """Act on the held versions due by ``now``, each under its watch's order."""
        for member, resource in sorted(self.holds.due(now)):
            with self.holds.serial(member, resource):
                copies = self.holds.take_due(member, resource, now)
                if copies and self.shared.watching(member):
                    self.observe(member, copies)

    def observe(
        self, member: str, copies: Sequence[Mapping[str, Any]], *, unmirrored_only: bool = False
    ) -> None:
        """Act on member copies (distinct ones): their fleet objects read in one round trip, the
        mirrored statuses written in one pipeline. ``unmirrored_only``: only the copies whose job
        shows nothing of its member yet (Admitted or Dispatched), as the copy audit's list gives
        them: a list read beside the watches may be older than what they delivered since, and
        must not set a job back; a job that never showed its member's state has nothing to lose."""
        found = [(ident, copy) for copy in copies if (ident := MemberCopy.of(member, copy)) is not None]
        if unmirrored_only:  # a copy held is acted on when it is due, or at its next version
            found = [
                (i, c)
                for i, c in found
                if not self._acted_on(i, c) and not self.holds.holding(member, _name(c))
            ]
            found = self._holding_quota(found)
        if not found:
            return
        started = time.perf_counter()
        objs = get_jobs(self.ctx.objects, [i.key for i, _ in found])
        mirrored: list[Seen] = []
        for (ident, copy), obj in zip(found, objs, strict=True):
            if unmirrored_only and (obj is None or current_state(obj) not in _UNMIRRORED):
                continue
            meta = (obj or {}).get("metadata") or {}
            if (
                obj is not None
                and is_deleting(obj, ident.uid)
                and self.finalizers.is_deleted_copy(ident, obj)
            ):
                self.finalizers.maybe_delete(obj, soon=True)  # seen again (its member is back): at once
                continue
            if obj is None or meta.get("uid") != ident.uid or meta.get("deletionTimestamp"):
                if not self.finalizers.left_in_place(ident):
                    self.stale.purge(ident, "orphan")
                continue
            if attempt_of(obj) != ident.attempt or cluster_of(obj) != member:
                self.stale.stale_copy(ident, obj)
                continue
            adapter = ident.ref.adapter
            seen = adapter.map_status(copy)
            outcome = adapter.classify(seen)
            if is_being_preempted(obj) and outcome in (Outcome.USER_ERROR, Outcome.RETRIABLE):
                continue  # its pods go because it is being evicted: not a failure of the job
            if outcome is Outcome.RETRIABLE:
                message = f"failed in {member}: {seen.reason}: {seen.message}"
                self.failover.application(ident, obj, seen, message, blame=Blame.JOB)
                continue
            mirrored.append(Seen(ident, seen, obj))
        self.mirror.mirror(mirrored)
        self._note_acted(mirrored, found)
        elapsed = time.perf_counter() - started
        for item in mirrored:
            self.gangs.track(item.ident, item.seen)
            SYNC_SECONDS.observe(elapsed)

    def _note_acted(self, mirrored: list[Seen], found: list[tuple[MemberCopy, Mapping[str, Any]]]) -> None:
        """Remember the versions just mirrored (the copies still running), forget the finished."""
        if not mirrored:
            return
        if len(self._acted) > ACTED_CAP:
            self._acted.clear()
        copies = dict(found)
        now = time.monotonic()
        for item in mirrored:
            version = _version(copies[item.ident])
            if item.seen.finished or version is None:
                self._acted.pop(item.ident, None)
            else:
                self._acted[item.ident] = (version, now)

    def _acted_on(self, ident: MemberCopy, copy: Mapping[str, Any]) -> bool:
        """Whether ``copy`` is at the version last mirrored from it, within the recheck time."""
        acted = self._acted.get(ident)
        return (
            acted is not None and acted[0] == _version(copy) and time.monotonic() - acted[1] < RECHECK_SECONDS
        )

    def forget_member(self, member: str) -> None:
        """Forget what was mirrored from ``member``'s copies (let go: its next owner reads them)."""
        for ident in [i for i in list(self._acted) if i.member == member]:
            self._acted.pop(ident, None)
        self.holds.forget_member(member)

    def _holding_quota(
        self, found: list[tuple[MemberCopy, Mapping[str, Any]]]
    ) -> list[tuple[MemberCopy, Mapping[str, Any]]]:
        """Those of ``found`` whose job the ledger holds admitted: a job Admitted or Dispatched
        holds its quota until it finishes or is queued again, so no other can be unmirrored.
        A member keeps its finished copies (thousands, after a day), and the audit lists them
        all every ``audit_every``: this reads two hash fields a copy instead of every job."""
        if not found:
            return found
        states = self.ctx.ledger.states([ident.key for ident, _ in found])
        return [item for item, state in zip(found, states, strict=True) if state == JobState.ADMITTED]

    def vanished(self, member: str, copy: Mapping[str, Any]) -> None:
        self.holds.drop(member, _name(copy))
        ident = MemberCopy.of(member, copy)
        if ident is None:
            return
        self._acted.pop(ident, None)
        with self.shared.lock:
            self.gangs.forget(ident)
            self.stale.forget(ident)
            self.finalizers.forget(ident)
        self.finalizers.copy_gone(ident)
        self.audit.vanished(ident)
