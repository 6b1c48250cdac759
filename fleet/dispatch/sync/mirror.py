"""Status mirroring: a current copy's conditions and replicaStatuses, brought to its fleet object.

The current attempt's copy, on its member, is mirrored onto the fleet object
(:func:`fleet.jobs.status.mirror`, as Karmada's status controller aggregates the members' status
onto the resource template), with a Warning Event for each failure and restart it reports.
``Succeeded`` finishes the job, as does ``Failed`` with a user error (``JobValidFailed``): quota
and hold released, every time the finished copy is seen (the ledger's release is idempotent, so a
syncer that died between the write and the release still releases). Every write is a
compare-and-set on the uid and attempt, so a second syncer, or the same one after a restart,
writes nothing twice.
"""

from __future__ import annotations

from typing import Any, Final

from prometheus_client import Counter, Histogram

from fleet.ascend import Condition
from fleet.dispatch.handback import COMPONENT, Finished, finish_many
from fleet.dispatch.sync.copies import Seen
from fleet.dispatch.sync.shared import Shared, log
from fleet.jobs import (
    FINISHED,
    Attempt,
    Change,
    Mirror,
    attempt_of,
    cluster_of,
    current_state,
    mutate_jobs,
    transition,
)
from fleet.state import record_events

__all__ = ["FINISHED_JOBS", "SYNC_SECONDS", "StatusMirror"]

#: The member's states that the fleet object's Events record: its failures and restarts. Running
#: and Succeeded are conditions only (with their times and the member's reason): a job's happy
#: path records three Events, all the fleet's own acts (Submitted, ScheduleBindingSucceed,
#: Dispatched; issue 30, goal 7), as DESIGN.md has ``kubectl describe`` tell the fleet's story.
_WARNED: Final = frozenset({Condition.FAILED, Condition.RESTARTING})

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


def _mirror_change(item: Seen, before: dict[str, str | None]) -> Change:
    """The status change that mirrors ``item`` (:class:`fleet.jobs.Mirror`, guarded by its
    uid, attempt and member); notes the state it changed from in ``before``."""
    ident, seen = item.ident, item.seen
    mirror = transition(
        Mirror(seen, ident.member, ident.attempt), Attempt(ident.uid, ident.attempt, ident.member)
    )

    def change(obj: dict[str, Any]) -> dict[str, Any] | None:
        state = current_state(obj)
        out = mirror(obj)
        if out is not None:
            before["state"] = state
        return out

    return change


class StatusMirror:
    """Writes what current copies say onto their fleet objects; keeps no table of its own."""

    def __init__(self, shared: Shared) -> None:
        self.ctx = shared.ctx

    def mirror(self, items: list[Seen]) -> None:
        """Mirror the copies' status onto their fleet objects; Events for the states reached;
        the quota of the finished released (after their Events)."""
        if not items:
            return
        befores: list[dict[str, str | None]] = [{} for _ in items]
        changes = [(i.ident.key, _mirror_change(i, b)) for i, b in zip(items, befores, strict=True)]
        stored_all = mutate_jobs(self.ctx.objects, changes, currents=[i.obj for i in items])
        events: list[tuple[dict[str, Any], str, str]] = []
        finished: list[Finished] = []
        for item, before, stored in zip(items, befores, stored_all, strict=True):
            ident, seen = item.ident, item.seen
            if stored is None or stored["metadata"].get("uid") != ident.uid:
                continue
            if attempt_of(stored) != ident.attempt:
                continue
            state = current_state(stored)
            if "state" in before and state != before["state"] and state in (Condition.RESTARTING, *FINISHED):
                if state in _WARNED:
                    message = f"{state} in {ident.member}: {seen.message or ''}".rstrip(": ")
                    events.append((stored, str(seen.reason or state), message))
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
                finished.append((ident.key, ident.uid, ident.attempt, ident.member))
        if events:
            record_events(self.ctx.objects, events, type="Warning", component=COMPONENT)
        finish_many(self.ctx, finished)
