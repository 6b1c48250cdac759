"""How Fleet writes a fleet job's ``status``: its own states, and the member's mirrored after them.

The shape, on the fleet object::

    status:
      conditions: [...]        # last entry = current state (AscendJob convention)
      queue: root-child-2      # the quota queue it waits or runs in
      cluster: member-2        # the member of the current attempt (absent while never placed)
      attempt: 2               # placements so far; labels the member copy
      failures: 1              # attempts that ended in failover
      excluded: {member-1: 1763900000.0}   # members avoided until that time (epoch seconds);
                               # the rule that sizes them: fleet.dispatch.handback
      excludedFirmly: {member-2: 1763900000.0}   # avoided until then, never giving way (the
                               # member could not be reached, or refused the job for now)
      memberFailures: {member-1: 2}   # failures of the job counted per member (its exclusions double)
      refused: {member-3: "403 Forbidden: ..."}   # members that refused the job for a reason of
                               # their own: never tried again for it; when no member is left, Failed
      notBefore: 1763900010.0  # backoff: not placed again before then
      replicaStatuses, startTime, completionTime   # mirrored from the member copy
      phase, tasks, aggregate  # mirrored too, for the kinds that have them (T9k)

with ``lastCluster``, ``reservation``, ``preemptedBy`` and the priority resolved at submission
beside them. :class:`~fleet.jobs.fleet_status.FleetStatus` types it all: writers index it by its
keys (checked by mypy), readers go through its ``*_of`` functions.

Fleet's conditions (``Queued``, ``Admitted``, ``Dispatched``, ``Rescheduling``, terminal
``Failed``) and the member's (``Created``, ``Running``, ...) share one list: mirroring replaces
whatever follows the last ``Dispatched`` entry with the member's conditions, so the list reads as
the job's history and its last entry is the truth, at the fleet as on the member. A state that
repeats with the same reason and message is not appended again (writes stay idempotent), and the
list is capped so that a job that fails over many times keeps a bounded status.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, cast

from fleet.jobs.fleet_status import FleetStatus, JobCondition, conditions_of
from fleet.jobs.phases import FINISHED, FleetReason, Phase
from fleet.timestamps import now_rfc3339
from fleet.workloads import MIRRORED_FIELDS, WorkloadStatus

__all__ = [
    "MAX_CONDITIONS",
    "current_state",
    "is_finished",
    "last_condition",
    "mirror",
    "set_state",
]

#: Conditions kept on one fleet job; older entries are dropped first.
MAX_CONDITIONS: Final = 32


def last_condition(obj: Mapping[str, object]) -> JobCondition | None:
    conditions = conditions_of(obj)
    return conditions[-1] if conditions else None


def current_state(obj: Mapping[str, object]) -> str | None:
    """The type of the last condition: the job's state as any tool reads it."""
    last = last_condition(obj)
    return None if last is None else str(last.get("type"))


def is_finished(obj: Mapping[str, object]) -> bool:
    return current_state(obj) in FINISHED


def _condition(kind: str, reason: str, message: str, now: str) -> JobCondition:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastUpdateTime": now,
        "lastTransitionTime": now,
    }


def _cap(conditions: list[JobCondition]) -> list[JobCondition]:
    return conditions[-MAX_CONDITIONS:]


def set_state(status: FleetStatus, kind: str, reason: str, message: str) -> bool:
    """Make ``kind`` the current state; False when it already was, with this reason and message.

    The same state with another message (a pending reason that changed) updates the last entry
    in place rather than growing the list.
    """
    conditions = list(status.get("conditions") or [])
    now = now_rfc3339()
    if conditions and conditions[-1].get("type") == kind:
        last = conditions[-1].copy()
        if last.get("reason") == reason and last.get("message") == message:
            return False
        last["reason"], last["message"], last["lastUpdateTime"] = reason, message, now
        conditions[-1] = last
    else:
        conditions.append(_condition(kind, reason, message, now))
    status["conditions"] = _cap(conditions)
    return True


def mirror(status: FleetStatus, member: WorkloadStatus, *, dispatched_message: str) -> bool:
    """Lay the member copy's status over the fleet status; False when nothing changed.

    Everything after this attempt's ``Dispatched`` entry (the last one, when it follows the last
    ``Admitted``) is replaced by the member's conditions; it is added first when the copy was
    seen before the worker wrote it.
    """
    conditions = list(status.get("conditions") or [])
    admitted = max((i for i, c in enumerate(conditions) if c.get("type") == Phase.ADMITTED), default=-1)
    cut = max((i for i, c in enumerate(conditions) if c.get("type") == Phase.DISPATCHED), default=-1)
    if cut < admitted:  # this attempt's Dispatched is not written yet: an older one's must stay
        stamp = now_rfc3339()
        conditions.append(_condition(Phase.DISPATCHED, FleetReason.DISPATCHED, dispatched_message, stamp))
        cut = len(conditions) - 1
    # The member's conditions, in the same convention (with any further fields it wrote).
    new = _cap([*conditions[: cut + 1], *cast(list[JobCondition], member.conditions)])
    before = dict(status)
    status["conditions"] = new
    status["replicaStatuses"] = member.replica_statuses
    # Fields copied by name, as the member copy has them or not (the keys are FleetStatus's).
    fields = cast(dict[str, Any], status)
    for key, value in (("startTime", member.start_time), ("completionTime", member.completion_time)):
        if value:
            fields[key] = value
        else:
            fields.pop(key, None)
    for key in MIRRORED_FIELDS:
        if key in member.extra:
            fields[key] = member.extra[key]
        else:
            fields.pop(key, None)
    return dict(status) != before
