"""The leader's reconcile: the ledger and the stored jobs made to agree, a slice per round.

After a takeover or a crash the ledger and the fleet objects may disagree: a process died
between two of its writes. The reconcile walks every stored job, then the ledger's entries, a
bounded slice per round between the scheduling cycles (:mod:`fleet.dispatch.sweep`), so however
deep the queue, the new leader's first cycle comes at once; it runs again a minute after each
walk ends (``reconcile_every``). Its rules:

* a stored job the ledger does not know is queued (the API died between storing and queueing);
* a job whose pause or suspend switch and state disagree is held or queued again as its switch
  says (:func:`fleet.jobs.pause.converge`); a held one the ledger still holds is released;
* an admitted job whose object says ``Queued`` is requeued (a dispatcher died between admitting
  and recording);
* an ``Admitted`` job whose propagation is not in flight gets it again (one in flight is left to
  its deadline, :meth:`fleet.dispatch.lead.propagations.Propagations.retry`);
* a placed job whose copy is not recorded as one that may exist (a job placed by an older
  Fleet) is recorded (:mod:`fleet.state.copies`), so the syncers check its member for it;
* a ledger entry whose job is gone is released, unless a copy of the job may still run on a
  member (recorded as one that may exist): the copy is sent to be purged as an orphan, and the
  quota stays counted until it is gone (its record drops then, and the next walk releases it).

The walk is not a snapshot: jobs are submitted, admitted and dispatched while it runs. So each
slice reads its objects and then their ledger state and in-flight marks; an ``Admitted`` job
found not in flight is read again and sent only if still ``Admitted`` in the same attempt (its
worker marks it ``Dispatched`` before it clears the mark); and a ledger entry missing from the
objects walked is released only if its object is still absent when read again after them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from fleet.apiserver import ResourceType
from fleet.dispatch.handback import inflight_entry
from fleet.dispatch.lead.propagations import Propagations
from fleet.dispatch.lead.shared import Leading, log
from fleet.dispatch.lead.waiting import Waiting
from fleet.dispatch.sweep import Step, Sweep
from fleet.dispatch.tasks import Propagation, purge
from fleet.jobs import (
    FINISHED,
    HELD,
    FleetReason,
    Phase,
    attempt_of,
    cluster_of,
    converge,
    current_state,
    enqueue,
    get_jobs,
    is_placed,
    job_key,
    switch_out_of_step,
)
from fleet.kinds import FLEET_JOB_KINDS
from fleet.state import CopyEntry
from fleet.workloads import InvalidWorkload, UnknownKind, job_ref
from queues import JobState, LedgerError

__all__ = ["Reconcile"]


@dataclass
class _Walk:
    """A reconcile under way: its walk, the jobs it found stored, what it fixed, its start."""

    walk: Sweep[Any]
    started: float
    known: set[str] = field(default_factory=set)
    fixed: int = 0


class Reconcile:
    """The reconcile of the ledger against the stored jobs (see the module docstring)."""

    def __init__(self, leading: Leading, waiting: Waiting, propagations: Propagations) -> None:
        self.leading = leading
        self.ctx = leading.ctx
        self.waiting = waiting
        self.propagations = propagations
        #: The walk under way, a slice per round (None between two).
        self.walk: _Walk | None = None
        self.reconciled_at = 0.0

    def run(self) -> None:
        """A whole reconcile, now (a walk run to its end)."""
        self.begin()
        while self.some():
            pass

    def due(self, now: float) -> None:
        """Begin a walk when the last one ended long enough ago."""
        if self.walk is None and now - self.reconciled_at > self.leading.settings.reconcile_every:
            self.begin()

    def begin(self) -> None:
        """Start a walk over every stored job, then over the ledger's entries."""
        objects, ledger = self.ctx.objects, self.ctx.ledger

        def kind(rt: ResourceType) -> Step[Any]:
            return lambda cursor, count: objects.scan(rt, cursor, count)

        def held(state: JobState) -> Step[Any]:
            return lambda cursor, count: ledger.scan(state, cursor, count)

        sources: list[tuple[str, Step[Any]]] = [("objects", kind(rt)) for rt in FLEET_JOB_KINDS]
        sources += [("ledger", held(JobState.ADMITTED)), ("ledger", held(JobState.PENDING))]
        self.walk = _Walk(Sweep(sources, self.leading.settings.reconcile_slice), time.monotonic())

    def some(self) -> bool:
        """One slice of the walk under way (at most ``reconcile_slice`` jobs); whether more
        remain. The end is logged and timed."""
        walk = self.walk
        if walk is None:
            return False
        source, found = walk.walk.take()
        if source == "objects":
            walk.fixed += self._objects(found, walk.known)
        else:
            walk.fixed += self._entries([str(job) for job in found], walk.known)
        if not walk.walk.done:
            return True
        self.walk = None
        self.reconciled_at = time.time()
        log.info(
            "event=reconciled jobs=%d fixed=%d seconds=%.3f",
            len(walk.known),
            walk.fixed,
            time.monotonic() - walk.started,
        )
        return False

    def _objects(self, objs: list[dict[str, Any]], known: set[str]) -> int:
        """The rules for one slice of stored jobs; how many it fixed."""
        ledger = self.ctx.ledger
        fence = self.leading.fence
        fixed = 0
        todo: list[tuple[str, dict[str, Any]]] = []
        for obj in objs:
            key = job_key(obj)
            known.add(key)
            if obj["metadata"].get("deletionTimestamp") or current_state(obj) in FINISHED:
                continue
            if switch_out_of_step(obj) is not None:
                fixed += 1
                try:
                    converge(self.ctx.objects, ledger, obj)
                except (InvalidWorkload, UnknownKind, LookupError, LedgerError) as error:
                    self.waiting.fail(key, obj, FleetReason.INVALID, f"cannot be queued: {error}")
                continue
            todo.append((key, obj))
        states = ledger.states([key for key, _ in todo])
        admitted = [(key, obj) for key, obj in todo if current_state(obj) == Phase.ADMITTED]
        entries = [inflight_entry(key, str(obj["metadata"]["uid"]), attempt_of(obj)) for key, obj in admitted]
        flying = self.ctx.client.zmscore(self.ctx.keys.inflight, entries) if entries else []
        for (key, obj), ledger_state in zip(todo, states, strict=True):
            state = current_state(obj)
            if state == Phase.QUEUED and ledger_state is JobState.ABSENT:
                try:
                    enqueue(ledger, obj)
                    fixed += 1
                except (InvalidWorkload, UnknownKind, LookupError, LedgerError) as error:
                    self.waiting.fail(key, obj, FleetReason.INVALID, f"cannot be queued: {error}")
            elif state == Phase.QUEUED and ledger_state is JobState.ADMITTED:
                ledger.requeue(key, fence=fence)
                fixed += 1
            elif state in HELD and ledger_state is not JobState.ABSENT:
                ledger.release(key, fence=fence)  # held, then a crash before its release
                fixed += 1
        self._record_copies(todo)
        lost = [item for item, score in zip(admitted, flying, strict=True) if score is None]
        again = get_jobs(self.ctx.objects, [key for key, _ in lost])
        resend: list[Propagation] = []
        for (key, obj), now in zip(lost, again, strict=True):
            uid, attempt = str(obj["metadata"]["uid"]), attempt_of(obj)
            if now is None or now["metadata"].get("uid") != uid or attempt_of(now) != attempt:
                continue
            if current_state(now) != Phase.ADMITTED:
                continue  # dispatched (or given back) since it was read
            resend.append((key, uid, attempt, str(cluster_of(now)), None))
        self.propagations.send(resend, now=time.time())
        return fixed + len(resend)

    def _record_copies(self, jobs: list[tuple[str, dict[str, Any]]]) -> None:
        """Record the copies of the placed jobs of a slice that are not recorded yet."""
        entries = [
            CopyEntry(member, key, str(obj["metadata"]["uid"]), attempt_of(obj))
            for key, obj in jobs
            if is_placed(current_state(obj)) and (member := cluster_of(obj)) is not None
        ]
        recorded = self.ctx.copies.recorded(entries)
        missing = [e for e, found in zip(entries, recorded, strict=True) if not found]
        if missing:
            self.ctx.copies.expect(missing)
            log.info("event=copies_recorded jobs=%d first=%s", len(missing), missing[0].key)

    def _entries(self, jobs: list[str], known: set[str]) -> int:
        """Release the ledger entries of one slice whose job is gone (absent from the objects
        walked, and still absent when read now) and of which no copy may still run; how many."""
        unknown = [job for job in jobs if job not in known]
        gone = [
            job
            for job, found in zip(unknown, get_jobs(self.ctx.objects, unknown), strict=True)
            if found is None
        ]
        running = self.ctx.copies.of_jobs(gone) if gone else {}
        for job in gone:
            if job in running:  # purged as an orphan; its quota goes with the copy's record
                for entry in running[job]:
                    self.ctx.purge_queue.enqueue(
                        purge, entry.member, *job_ref(job).names, entry.uid, entry.attempt,
                        kind=job_ref(job).tag, job_timeout=60, failure_ttl=3600,
                    )  # fmt: skip
                where = ", ".join(sorted({e.member for e in running[job]}))
                log.warning("event=quota_kept job=%s why=a copy may still run on %s", job, where)
                continue
            self.ctx.ledger.release(job, fence=self.leading.fence)
        return len(gone) - len(running)
