"""A fleet job's ``status.conditions``, kept as the Kubernetes API conventions say.

At most one condition per type, each ``True``, ``False`` or ``Unknown``; ``lastTransitionTime``
changes only when the status does, ``lastUpdateTime`` whenever the reason or message does
(the API conventions, "Typical status properties"; kubeflow/common's ``setCondition`` keeps both
fields the same way). A condition that turns True moves to the end of the list, as the training
operator's ``setCondition`` does (``filterOutCondition``, then append), so the last condition is
always the job's current state: the printer columns of MindCluster's and Kubeflow's CRDs read
``.status.conditions[-1].type``, and so do Fleet's. What a job went through is in its Events.

This module holds the list mechanics only; which condition a transition sets, and to what, is
the state machine's (:mod:`fleet.jobs.lifecycle`), the one writer of a job's conditions.
"""

from __future__ import annotations

from collections.abc import Mapping

from fleet.jobs.fleet_status import JobCondition, conditions_of
from fleet.jobs.phases import FINISHED

__all__ = [
    "condition",
    "current_state",
    "is_finished",
    "last_condition",
    "normalized",
    "put",
]

TRUE = "True"
FALSE = "False"


def last_condition(obj: Mapping[str, object]) -> JobCondition | None:
    """The condition of the job's current state (the last one)."""
    conditions = conditions_of(obj)
    return conditions[-1] if conditions else None


def current_state(obj: Mapping[str, object]) -> str | None:
    """The job's state as any tool reads it: the type of its last condition that is True (the
    last condition, as this module keeps them)."""
    for entry in reversed(conditions_of(obj)):
        if entry.get("status", TRUE) == TRUE:
            return str(entry.get("type"))
    return None


def is_finished(obj: Mapping[str, object]) -> bool:
    return current_state(obj) in FINISHED


def condition(obj: Mapping[str, object], kind: str) -> JobCondition | None:
    """The job's condition of type ``kind``, if it has one."""
    return next((c for c in conditions_of(obj) if c.get("type") == kind), None)


def normalized(conditions: list[JobCondition]) -> list[JobCondition]:
    """One condition per type: a list written as a history (by an older Fleet, or a member's
    operator that appends) keeps the last entry of each type, in the order of those entries."""
    last: dict[str, int] = {}
    for i, entry in enumerate(conditions):
        last[str(entry.get("type"))] = i
    if len(last) == len(conditions):
        return conditions
    return [entry for i, entry in enumerate(conditions) if last[str(entry.get("type"))] == i]


def put(
    conditions: list[JobCondition], kind: str, status: str, reason: str, message: str, *, now: str
) -> bool:
    """Set the condition of type ``kind`` in ``conditions`` (changed in place); whether anything
    changed. A condition turning (or staying) True goes last; one that is False stays where it
    is; a False condition of a type the job never had is not added (nothing to say)."""
    at = next((i for i, c in enumerate(conditions) if c.get("type") == kind), None)
    if at is None:
        if status != TRUE:
            return False
        conditions.append(
            {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": message,
                "lastUpdateTime": now,
                "lastTransitionTime": now,
            }
        )
        return True
    entry = dict(conditions[at])
    changed = False
    if entry.get("status") != status:
        entry["status"] = status
        entry["lastTransitionTime"] = now
        changed = True
    if entry.get("reason") != reason or entry.get("message") != message:
        entry["reason"], entry["message"] = reason, message
        changed = True
    if changed:
        entry["lastUpdateTime"] = now
    last = at == len(conditions) - 1
    if not changed and (status != TRUE or last):
        return False
    del conditions[at]
    if status == TRUE:
        conditions.append(entry)  # type: ignore[arg-type]
    else:
        conditions.insert(at, entry)  # type: ignore[arg-type]
    return True
