"""The shape of a fleet job's ``status`` and its readers: each field is named here once.

:class:`FleetStatus` types what Fleet writes (the layout is documented in
:mod:`fleet.jobs.status`); writers index it by its typed keys, so mypy checks each spelling
against this one declaration. Readers go through the ``*_of`` functions below, which take the
stored object (a Kubernetes object as the store returns it) and say what a field that is absent
or malformed (written around the API, or by an older Fleet) reads as, instead of each caller
guessing with ``(obj.get("status") or {}).get(...)``.

The JSON is unchanged: a :class:`FleetStatus` is a plain ``dict``.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any, Final, TypedDict, cast

from fleet.timestamps import epoch_of

__all__ = [
    "WAITING_FIELDS",
    "FleetStatus",
    "JobCondition",
    "WaitingFields",
    "attempt_of",
    "cluster_of",
    "conditions_of",
    "exclusions_of",
    "failures_of",
    "job_queue_of",
    "last_cluster_of",
    "member_failures_of",
    "not_before_of",
    "preempted_by_of",
    "refused_of",
    "status_for_update",
    "status_of",
]


class JobCondition(TypedDict, total=False):
    """One entry of ``status.conditions``: Fleet's own, or the member's mirrored after them
    (whose conditions may carry further fields, kept as the member wrote them)."""

    type: str
    status: str
    reason: str
    message: str
    lastUpdateTime: str
    lastTransitionTime: str


class WaitingFields(TypedDict, total=False):
    """What a ``Queued`` job's status says of its wait when it is read by name: computed then,
    never stored (:mod:`fleet.endpoint.computed`)."""

    #: Where it waits (``3rd of 7 in root-team-a``).
    position: str
    #: What it waits for, in words.
    blocker: str


#: The names of :class:`WaitingFields`, for what strips them before a write.
WAITING_FIELDS: Final = tuple(WaitingFields.__annotations__)


class FleetStatus(WaitingFields, total=False):
    """A fleet job's ``status`` (:mod:`fleet.jobs.status` says what each field means), with the
    :class:`WaitingFields` of a ``Queued`` job read by name."""

    conditions: list[JobCondition]
    #: The quota queue it waits or runs in.
    queue: str
    #: The member of the current attempt (absent while not placed), and of the last one.
    cluster: str
    lastCluster: str
    #: The capacity hold of the current attempt (:mod:`fleet.placement.reservations`).
    reservation: str
    attempt: int
    failures: int
    #: Member -> until when (RFC 3339, to the microsecond) it is avoided, giving way / never
    #: giving way.
    excluded: dict[str, str]
    excludedFirmly: dict[str, str]
    memberFailures: dict[str, int]
    #: Member -> what it said when it refused the job for a reason of its own.
    refused: dict[str, str]
    #: Backoff: not placed again before then (RFC 3339, to the microsecond).
    notBefore: str
    #: The job key of the preemptor that evicted it last (:mod:`fleet.dispatch.preemption`).
    preemptedBy: str
    #: The policy that governed its placement: apiVersion, kind, name (and namespace of a
    #: PropagationPolicy), :func:`fleet.policy.policy_ref`.
    propagationPolicy: dict[str, str]
    #: Resolved at submission (:mod:`fleet.jobs.priority`).
    priority: int
    priorityClassName: str
    preemptionPolicy: str
    #: Mirrored from the member copy, as the member wrote them.
    replicaStatuses: dict[str, Any]
    startTime: str
    completionTime: str
    phase: object
    tasks: object
    aggregate: object


def status_of(obj: Mapping[str, object]) -> FleetStatus:
    """The ``status`` of a stored fleet job, to read; empty when it has none (or not a map)."""
    status = obj.get("status")
    return cast(FleetStatus, status) if isinstance(status, Mapping) else {}


def status_for_update(obj: MutableMapping[str, object]) -> FleetStatus:
    """The ``status`` of a fleet job being changed (inside a mutation), made when missing."""
    return cast(FleetStatus, obj.setdefault("status", {}))


def conditions_of(obj: Mapping[str, object]) -> list[JobCondition]:
    """``status.conditions``, oldest first (the last is the job's state)."""
    conditions = status_of(obj).get("conditions")
    return conditions if isinstance(conditions, list) else []


def job_queue_of(obj: Mapping[str, object]) -> str | None:
    """The quota queue the job waits or runs in; None when none is recorded."""
    queue = status_of(obj).get("queue")
    return str(queue) if queue else None


def cluster_of(obj: Mapping[str, object]) -> str | None:
    """The member of the current attempt; None while the job is not placed."""
    cluster = status_of(obj).get("cluster")
    return str(cluster) if cluster else None


def last_cluster_of(obj: Mapping[str, object]) -> str | None:
    """The member of the attempt that ended last; None when no attempt ended on a member."""
    cluster = status_of(obj).get("lastCluster")
    return str(cluster) if cluster else None


def attempt_of(obj: Mapping[str, object]) -> int:
    """Placements so far (0: never placed)."""
    return int(status_of(obj).get("attempt") or 0)


def failures_of(obj: Mapping[str, object]) -> int:
    """Attempts that ended in failover."""
    return int(status_of(obj).get("failures") or 0)


def not_before_of(obj: Mapping[str, object]) -> float:
    """When the job may be placed again after a failure, in epoch seconds (0: at once)."""
    return epoch_of(status_of(obj).get("notBefore")) or 0.0


def preempted_by_of(obj: Mapping[str, object]) -> str:
    """The preemptor that evicted the job last; empty when none did."""
    return str(status_of(obj).get("preemptedBy") or "")


def exclusions_of(obj: Mapping[str, object], *, firm: bool = False) -> dict[str, float]:
    """Member -> until when (epoch seconds) the job avoids it: the exclusions that give way, or the
    ``firm`` ones. Every entry written (those already over included; one unreadable is left
    out); empty when the field is not a map."""
    status = status_of(obj)
    excluded = status.get("excludedFirmly") if firm else status.get("excluded")
    if not isinstance(excluded, Mapping):
        return {}
    out = {str(m): epoch_of(until) for m, until in excluded.items()}
    return {m: t for m, t in out.items() if t is not None}


def member_failures_of(obj: Mapping[str, object]) -> dict[str, int]:
    """Member -> failures of the job counted there."""
    counts = status_of(obj).get("memberFailures")
    return {str(m): int(n) for m, n in counts.items()} if isinstance(counts, Mapping) else {}


def refused_of(obj: Mapping[str, object]) -> dict[str, str]:
    """Member -> what it said, for the members that refused the job for a reason of their own."""
    refused = status_of(obj).get("refused")
    return {str(m): str(why) for m, why in refused.items()} if isinstance(refused, Mapping) else {}
