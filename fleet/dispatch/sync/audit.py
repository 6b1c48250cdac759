"""Level, not edge: each member's copies checked against what it really holds.

Fleet records every copy that may exist (:mod:`fleet.state.copies`, written when an attempt is
sent). A syncer lists each member it owns (on its probe thread, while the member is Ready) at
once after every list its watches make (their start, a takeover, a watch that expired) and every
``audit_every`` seconds, and compares. An expected copy that is absent is acted on by what its
fleet job is now:

* the job's current attempt, its copy created (``Dispatched`` or later) before the list began
  by more than ``copy_grace`` (which covers a create still in flight, with its in-flight mark):
  the attempt ends with reason ``CopyLost`` (:class:`fleet.jobs.EndAttempt`, with an Event
  saying what was missing where): its quota and capacity hold are released and it is queued
  again as after a cluster failover, the attempt not counted as a failure and the member not
  excluded for it (the member holds nothing of it; it may well be the best place again);
* a victim being evicted: its eviction is done (:func:`fleet.dispatch.preemption.requeued`);
* a job being deleted that waited for this copy: its deletion completes;
* anything else (an older attempt, a finished job, a job that is gone): the record goes.

A copy seen to go (a watch's DELETED, or a relist that no longer has it) is the same news, known
for certain: :meth:`CopyAudit.vanished` acts at once. This covers a Fleet restarted with its
state kept, a member rebuilt or restored empty (whose watches may say nothing at all), and a copy
deleted at the member while no syncer watched. Copies present that no job expects are the
observer's (:mod:`fleet.dispatch.sync.observer`): purged by their policy's ``purgeMode``. Every
copy a list finds goes to the observer too (``on_listed``), which mirrors it onto a job that shows
nothing of its member yet (it reads only the jobs the ledger holds admitted, and passes over a copy
at the version it last mirrored from it, for ``RECHECK_SECONDS``: a member's history and its long
jobs are not read again at every list): a first status a watch missed is mirrored at the next list
rather than never (a copy Running at its member while its job showed Dispatched was seen in the
suite, with no later change to carry it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fleet.dispatch.deletion import is_deleting
from fleet.dispatch.handback import give_back, inflight_entry
from fleet.dispatch.preemption import is_being_preempted, requeued
from fleet.dispatch.purging import DRAIN_EXCLUDE_SECONDS
from fleet.dispatch.sync.copies import MemberCopy
from fleet.dispatch.sync.failover import FAILOVERS
from fleet.dispatch.sync.finalizers import Finalizers
from fleet.dispatch.sync.shared import Shared, log
from fleet.jobs import (
    FINISHED,
    HELD,
    Attempt,
    Ending,
    FleetReason,
    Phase,
    attempt_of,
    cluster_of,
    condition,
    current_state,
    get_jobs,
)
from fleet.labels import ATTEMPT_LABEL, JOB_UID_LABEL
from fleet.members import Member, MemberError, redact
from fleet.state import NO_EXECUTE, CopyEntry, read_taints
from fleet.timestamps import epoch_of
from fleet.workloads import job_ref, member_resource

__all__ = ["CopyAudit"]


class CopyAudit:
    """When each owned member is listed next; its table under ``shared.lock``."""

    def __init__(self, shared: Shared, finalizers: Finalizers) -> None:
        self.shared = shared
        self.ctx = shared.ctx
        self.finalizers = finalizers
        #: Member -> when (monotonic) it is listed next; absent: at once.
        self._next: dict[str, float] = {}
        #: Given every copy a list found (the syncer's observer): what a watch missed of a copy
        #: that is there (its status) is mirrored at the next list, as what it missed of one
        #: that is gone is acted on here.
        self.on_listed: Callable[[str, list[Mapping[str, Any]]], None] | None = None

    def soon(self, member: str) -> None:
        """List ``member`` at its next chance: a watch of it has just listed it (it started, took
        the member over, or its watch expired), and what it holds may differ from the record."""
        with self.shared.lock:
            self._next.pop(member, None)

    def forget_member(self, member: str) -> None:
        """Forget ``member`` (let go). Called with the lock held."""
        self._next.pop(member, None)

    def maybe(self, name: str, member: Member) -> None:
        """List ``name`` and act on what it lacks, when its turn has come (its probe thread)."""
        now = time.monotonic()
        with self.shared.lock:
            if self.shared.not_ready(name) or now < self._next.get(name, 0.0):
                return
            self._next[name] = now + self.shared.settings.audit_every
        try:
            self.audit(name, member)
        except MemberError as error:  # slow or away: the next turn lists it again
            log.info("event=audit_not_listed member=%s error=%s", name, redact(str(error)))
            with self.shared.lock:
                self._next[name] = now + 1.0

    def audit(self, name: str, member: Member) -> int:
        """List ``name``'s copies of every kind Fleet expects there and act on the absent
        ones; how many were acted on."""
        expected = self.ctx.copies.on(name)
        if not expected:
            return 0
        listed_at = time.time()
        present: set[tuple[str, str, str]] = set()
        listed: list[Mapping[str, Any]] = []
        for resource in {member_resource(job_ref(e.key).adapter.resource) for e in expected}:
            listing = member.list_objects(resource, label_selector=JOB_UID_LABEL, retry=False)
            listed.extend(listing.items)
            for item in listing.items:
                labels = (item.get("metadata") or {}).get("labels") or {}
                present.add((resource.name, str(labels.get(JOB_UID_LABEL)), str(labels.get(ATTEMPT_LABEL))))
        if self.on_listed is not None:
            self.on_listed(name, listed)
        absent = [
            e
            for e in expected
            if (member_resource(job_ref(e.key).adapter.resource).name, e.uid, str(e.attempt)) not in present
        ]
        return self._settle(absent, listed_at=listed_at)

    def vanished(self, ident: MemberCopy) -> None:
        """``ident`` is gone from its member, for certain (its DELETED, or a relist without it)."""
        self._settle([CopyEntry(ident.member, ident.key, ident.uid, ident.attempt)], listed_at=None)

    def _settle(self, entries: Sequence[CopyEntry], *, listed_at: float | None) -> int:
        """Act on copies found absent (see the module docstring); ``listed_at``: when the list
        that lacked them began (None: each is known gone). The records of those settled go."""
        if not entries:
            return 0
        ctx = self.ctx
        marks = [inflight_entry(e.key, e.uid, e.attempt) for e in entries]
        flying = ctx.client.zmscore(ctx.keys.inflight, marks)
        objs = get_jobs(ctx.objects, [e.key for e in entries])
        settled: list[CopyEntry] = []
        acted = 0
        for entry, obj, score in zip(entries, objs, flying, strict=True):
            verdict = self._verdict(entry, obj, in_flight=score is not None, listed_at=listed_at)
            if verdict == "wait":
                continue
            settled.append(entry)
            if verdict == "lost" and obj is not None:
                acted += self._lost(entry, obj)
        ctx.copies.gone(settled)
        return acted

    def _verdict(
        self, entry: CopyEntry, obj: dict[str, Any] | None, *, in_flight: bool, listed_at: float | None
    ) -> str:
        """What an absent copy means: ``lost`` (its job's attempt ends), ``gone`` (nothing to
        do but drop the record), ``wait`` (it may be in the making: look again later)."""
        meta = (obj or {}).get("metadata") or {}
        if obj is None or meta.get("uid") != entry.uid:
            return "gone"
        current = attempt_of(obj) == entry.attempt and cluster_of(obj) == entry.member
        if is_deleting(obj, entry.uid):
            if current:
                ident = MemberCopy.of_job(entry.member, obj)
                self.finalizers.copy_gone(ident)  # the copy its deletion waited for is gone
            return "gone"
        state = current_state(obj)
        if not current or state in FINISHED or state == Phase.QUEUED or state in HELD:
            return "gone"
        if state == Phase.ADMITTED or in_flight:
            return "wait"  # its create is under way, or will be sent again (its in-flight mark)
        if listed_at is not None:
            made = epoch_of((condition(obj, Phase.DISPATCHED) or {}).get("lastTransitionTime"))
            if made is None or listed_at - made < self.shared.settings.copy_grace:
                return "wait"  # made about when the list began: it may simply not be in it
        return "lost"

    def _lost(self, entry: CopyEntry, obj: dict[str, Any]) -> int:
        ctx = self.ctx
        if is_being_preempted(obj):  # evicted already: its eviction is done
            return int(requeued(ctx, entry.key, entry.uid, entry.attempt, member=entry.member))
        state = current_state(obj)
        taints = read_taints(ctx.client, ctx.keys, [entry.member]).get(entry.member, [])
        if any(t.get("effect") == NO_EXECUTE for t in taints):
            # The member is being drained (fleet member drain): its copy was deleted on purpose,
            # and the job moves as the drain moves it, whichever of the two sees it first.
            return int(
                give_back(
                    ctx,
                    entry.key,
                    Attempt(entry.uid, entry.attempt, entry.member),
                    reason=FleetReason.CLUSTER_FAILOVER,
                    message=f"{entry.member} is being drained (fleet member drain): moved to another member",
                    ending=Ending(exclude_for=DRAIN_EXCLUDE_SECONDS, gives_way=False),
                ).changed
            )
        outcome = give_back(
            ctx,
            entry.key,
            Attempt(entry.uid, entry.attempt, entry.member),
            reason=FleetReason.COPY_LOST,
            message=(
                f"the copy of attempt {entry.attempt} is missing from {entry.member} (the job was "
                f"{state} there): the member no longer has it; queued again"
            ),
        )
        if outcome.changed:
            FAILOVERS.labels("copy_lost", entry.member, job_ref(entry.key).adapter.kind).inc()
            log.warning(
                "event=copy_lost job=%s member=%s attempt=%d state=%s",
                entry.key, entry.member, entry.attempt, state,
            )  # fmt: skip
        return int(outcome.changed)
