"""A fleet job's life: every state, every transition between them, and the one guard on them.

Every role writes a job's state through this module: the API when it accepts, holds or resumes
a job, the dispatcher when it admits one or says why one waits, the workers when a copy is made
or refused, the syncers when a member says something or goes away, deletion. Each transition is
a pure function of the stored job and an event (:func:`step`), so the rules, and the guard that
keeps a late or repeated writer from touching a job that moved on, are written once, here, the
way Kueue keeps a workload's lifecycle in ``pkg/workload`` apart from its scheduler.

The guard (:class:`Attempt`)
    A writer that acts on what it saw of one attempt (a copy it created, a failure it observed)
    names it: the job's uid, the attempt, and the member when it knows it. The transition
    applies only while the stored job is still that attempt on that member; a job being deleted
    is the deletion's alone (its attempt ends with it, never by going back to its queue).

States and transitions
    The table is generated from :data:`TRANSITIONS` into ``docs/lifecycle.md`` (``make docs``;
    ``tests/fleet/jobs/test_lifecycle.py`` checks it is current). A job's state is its last
    condition (:func:`fleet.jobs.conditions.current_state`).
    Fleet's own states are ``Queued``, ``Admitted``, ``Dispatched``, ``Rescheduling`` (an
    eviction under way), ``Failed`` (terminal, when Fleet decides it), ``Terminating``,
    ``Paused`` and ``Suspended``; once a copy runs, its member's states follow (``Created``,
    ``Running``, ``Restarting``, ``Succeeded``, ``Failed``, or a kind's own).

Conditions (:mod:`fleet.jobs.conditions`)
    One per type, the current truth, so ``kubectl wait --for=condition=Running`` (or
    ``=Queued=False``) answers what is: entering a state turns its condition True and last, and
    turns False those of the states it excludes (admitted, a job is no longer ``Queued``; queued
    again, it is neither ``Admitted`` nor ``Dispatched``). The member's conditions, its
    ``replicaStatuses`` and the other fields mirrored from the copy describe the current attempt
    only: they are cleared when the attempt ends. What happened before is in the job's Events.

Times (``excluded``, ``excludedFirmly``, ``notBefore``) are RFC 3339 with microseconds, as
``metav1.MicroTime``; readers accept the epoch seconds an older Fleet wrote.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Final, cast

from fleet.jobs.conditions import FALSE, TRUE, current_state, normalized, put
from fleet.jobs.fleet_status import (
    FleetStatus,
    JobCondition,
    attempt_of,
    cluster_of,
    exclusions_of,
    failures_of,
    member_failures_of,
    refused_of,
    status_of,
)
from fleet.jobs.phases import FINISHED, HELD, FleetReason, Phase
from fleet.policy import Failover
from fleet.timestamps import now_rfc3339, rfc3339_micro
from fleet.workloads import MIRRORED_FIELDS, WorkloadStatus

__all__ = [
    "FLEET_STATES",
    "PLACED",
    "TRANSITIONS",
    "Admit",
    "Attempt",
    "Blame",
    "Dispatch",
    "EndAttempt",
    "Ending",
    "Fail",
    "Hold",
    "Mirror",
    "Preempt",
    "Resume",
    "Submit",
    "Terminate",
    "Transition",
    "Wait",
    "every_refusal",
    "exclusion_seconds",
    "is_placed",
    "step",
    "table",
    "transition",
]

#: The states Fleet itself writes (the rest are its members' own, mirrored).
FLEET_STATES: Final = frozenset(
    {
        Phase.QUEUED,
        Phase.ADMITTED,
        Phase.DISPATCHED,
        Phase.RESCHEDULING,
        Phase.FAILED,
        Phase.TERMINATING,
        Phase.PAUSED,
        Phase.SUSPENDED,
    }
)
#: Fleet's conditions that a member's conditions never overwrite when mirrored.
_FLEET_ONLY: Final = FLEET_STATES - {Phase.FAILED}
#: States in which the job is on no member and holds no quota (or has none yet).
_UNPLACED: Final = frozenset({None, Phase.QUEUED, Phase.TERMINATING, *HELD, *FINISHED})
#: Placed: Admitted, Dispatched, Rescheduling, or any state of its member's that is not an end.
PLACED: Final = "placed"


def is_placed(state: str | None) -> bool:
    """Whether a job in ``state`` has an attempt under way on a member (admitted, its copy
    being made, running there, or being evicted)."""
    return state not in _UNPLACED


@dataclass(frozen=True)
class Attempt:
    """The guard: the attempt a writer acts on. ``member``, when given, must be the job's
    member; ``state``, when given, its state (a writer that acts only before the copy is seen)."""

    uid: str
    attempt: int
    member: str | None = None
    state: str | None = None

    def holds(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        if meta.get("uid") != self.uid or attempt_of(obj) != self.attempt:
            return False
        if self.state is not None and current_state(obj) != self.state:
            return False
        return self.member is None or cluster_of(obj) == self.member


# ---- transitions --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Transition:
    """An event in a job's life. ``sources``: the states it applies in (:data:`PLACED` stands for
    every placed state, ``None`` for a job with no state yet); ``targets``: where it leads."""

    sources: ClassVar[tuple[str | None, ...]]
    targets: ClassVar[tuple[str, ...]]
    #: Whether it applies to a job being deleted (only the deletion's own do, and only then).
    while_deleting: ClassVar[bool] = False
    #: What it is, for the table.
    summary: ClassVar[str] = ""

    def allowed(self, state: str | None) -> bool:
        if state in self.sources:
            return True
        return PLACED in self.sources and is_placed(state)

    def apply(self, status: FleetStatus, obj: Mapping[str, Any], now: float) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class Submit(Transition):
    """Accepted and queued on ``queue``."""

    queue: str
    sources = (None,)
    targets = (Phase.QUEUED,)
    summary = "accepted at the API and queued on its leaf"

    def apply(self, status: FleetStatus, obj: Mapping[str, Any], now: float) -> None:
        status["queue"] = self.queue
        status.setdefault("attempt", 0)
        _enter(status, Phase.QUEUED, FleetReason.SUBMITTED, f"waiting in queue {self.queue}")


@dataclass(frozen=True)
class Wait(Transition):
    """Still queued, for the reason given (the pending reason changed)."""

    reason: str
    message: str
    sources = (Phase.QUEUED,)
    targets = (Phase.QUEUED,)
    summary = "the reason it waits changed (quota, capacity, a policy)"

    def apply(self, status: FleetStatus, obj: Mapping[str, Any], now: float) -> None:
        _enter(status, Phase.QUEUED, self.reason, self.message)


@dataclass(frozen=True)
class Admit(Transition):
    """Admitted by the quota and placed on ``member`` as attempt ``attempt``; guarded by the
    attempt before it."""

    member: str
    attempt: int
    reservation: str
    message: str
    #: The policy that governs the job (:func:`fleet.policy.policy_ref`), kept in its status.
    policy: Mapping[str, str] | None = None
    sources = (Phase.QUEUED,)
    targets = (Phase.ADMITTED,)
    summary = "admitted by its quota and placed on a member (a new attempt)"

    def apply(self, status: FleetStatus, obj: Mapping[str, Any], now: float) -> None:
        if self.policy is not None:
            status["propagationPolicy"] = dict(self.policy)
        status["attempt"] = self.attempt
        status["cluster"] = self.member
        status["reservation"] = self.reservation
        status.pop("notBefore", None)
        _enter(status, Phase.ADMITTED, FleetReason.ADMITTED, self.message)


@dataclass(frozen=True)
class Dispatch(Transition):
    """Its member copy was created (or an existing one of this attempt adopted)."""

    reason: str
    message: str
    sources = (Phase.ADMITTED,)
    targets = (Phase.DISPATCHED,)
    summary = "its member copy was created (or adopted)"

    def apply(self, status: FleetStatus, obj: Mapping[str, Any], now: float) -> None:
        _enter(status, Phase.DISPATCHED, self.reason, self.message)


@dataclass(frozen=True)
class Mirror(Transition):
    """What the current attempt's copy says of itself, laid over the job (the member's
    conditions after Fleet's, its replicaStatuses and the kind's mirrored fields)."""

    seen: WorkloadStatus
    member: str
    attempt: int
    sources = (PLACED,)
    targets = ("the member's state",)
    summary = "its member copy's status, mirrored (an eviction under way takes only an end)"

    def allowed(self, state: str | None) -> bool:
        if state == Phase.RESCHEDULING:
            return self.seen.state in FINISHED  # being evicted: only an end it reached first
        return super().allowed(state)

    def apply(self, status: FleetStatus, obj: Mapping[str, Any], now: float) -> None:
        stamp = now_rfc3339()
        fleet = [c for c in _conditions(status) if c.get("type") in _FLEET_ONLY]
        put(fleet, Phase.RESCHEDULING, FALSE, "Finished", "it ended before its eviction", now=stamp)
        if not any(c.get("type") == Phase.DISPATCHED and c.get("status") == TRUE for c in fleet):
            message = f"created in {self.member} (attempt {self.attempt})"
            put(fleet, Phase.DISPATCHED, TRUE, FleetReason.DISPATCHED, message, now=stamp)
        # Fleet's conditions first, Dispatched last of them, then the member's, its last last.
        fleet.sort(key=lambda c: c.get("status") == TRUE and c.get("type") == Phase.DISPATCHED)
        own = [
            cast(JobCondition, dict(c))
            for c in normalized(cast(list[JobCondition], self.seen.conditions))
            if c.get("type") not in _FLEET_ONLY
        ]
        true = [i for i, c in enumerate(own) if c.get("status", TRUE) == TRUE]
        if true and true[-1] != len(own) - 1:
            own.append(own.pop(true[-1]))  # the member's current state goes last, whatever its order
        status["conditions"] = [*fleet, *own]
        status["replicaStatuses"] = self.seen.replica_statuses
        fields = cast(dict[str, Any], status)
        times = (("startTime", self.seen.start_time), ("completionTime", self.seen.completion_time))
        for key, value in times:
            if value:
                fields[key] = value
            else:
                fields.pop(key, None)
        for key in MIRRORED_FIELDS:
            if key in self.seen.extra:
                fields[key] = self.seen.extra[key]
            else:
                fields.pop(key, None)


class Blame(StrEnum):
    """What a failure says about the member it happened on (:mod:`fleet.dispatch.handback` has
    the rule and its upstream reference)."""

    #: Nothing: the job ran there and failed by itself (its own exit code).
    JOB = "Job"
    #: That the member could not run it (its pods never all fitted there).
    MEMBER = "Member"


def exclusion_seconds(blame: Blame, failures_here: int, failover: Failover) -> float:
    """How long the member is avoided after the ``failures_here``-th failure of the job on it
    (this one counted): 0 after the first failure of the job's own, else ``exclusionSeconds``
    doubling with each further failure there, at most ``exclusionLimitSeconds``."""
    steps = failures_here - 1 if blame is Blame.JOB else failures_here
    if steps <= 0 or failover.exclusion_seconds <= 0:
        return 0.0
    # The exponent is bounded so that a job that fails on a member very often cannot overflow.
    seconds = failover.exclusion_seconds * 2.0 ** min(steps - 1, 62)
    return float(min(seconds, failover.exclusion_limit_seconds))


@dataclass(frozen=True)
class Ending:
    """How an attempt ends, besides its reason: what it says of the member and of the job.

    ``blame`` (a failure of the attempt) sizes the member's exclusion by
    :func:`exclusion_seconds`; without it the member is excluded ``exclude_for`` seconds (0: not
    at all), firmly unless ``gives_way``. ``count_failure``: the attempt counts against the
    policy's ``backoffLimit`` and the job waits its backoff. ``refused``: what the member said
    when it refused the job for a reason of its own (never tried again for it; ``members`` are
    the members its policy allows: when every one has refused, it fails). ``terminal``: the job
    fails for good with the attempt (a member rejected the job itself, its copy could not be
    made)."""

    count_failure: bool = False
    exclude_for: float = 0.0
    gives_way: bool = True
    blame: Blame | None = None
    refused: str | None = None
    members: tuple[str, ...] = ()
    terminal: bool = False


@dataclass(frozen=True)
class EndAttempt(Transition):
    """The attempt on ``member`` ended (failover, a refusal, a lost copy, an eviction done): the
    job is queued again, or failed when its retries ran out, every member refused it, or
    ``ending.terminal``."""

    member: str
    reason: str
    message: str
    failover: Failover
    ending: Ending = Ending()
    #: The copy's last status (a failure it reported), kept in the Event, not the conditions.
    last_seen: WorkloadStatus | None = None
    sources = (PLACED,)
    targets = (Phase.QUEUED, Phase.FAILED)
    summary = "its attempt ended: queued again (backoff, exclusions), or failed for good"

    def apply(self, status: FleetStatus, obj: Mapping[str, Any], now: float) -> None:
        ending, policy, member = self.ending, self.failover, self.member
        excluded = {m: t for m, t in exclusions_of(obj).items() if t > now}
        firmly = {m: t for m, t in exclusions_of(obj, firm=True).items() if t > now}
        if ending.exclude_for > 0 and ending.blame is None:
            (excluded if ending.gives_way else firmly)[member] = now + ending.exclude_for
        _leave(status, member)
        failures = failures_of(obj) + (1 if ending.count_failure else 0)
        status["failures"] = failures
        here: dict[str, int] = {}
        avoid_for = 0.0
        if ending.blame is not None:
            here = member_failures_of(obj)
            here[member] = here.get(member, 0) + 1
            status["memberFailures"] = here
            avoid_for = exclusion_seconds(ending.blame, here[member], policy)
        if ending.refused is not None:
            refusals = {**refused_of(obj), member: ending.refused}
            status["refused"] = refusals
            if not [m for m in ending.members if m not in refusals]:
                _times(status, excluded, firmly)
                _fail(status, FleetReason.ALL_MEMBERS_REFUSED, every_refusal(refusals))
                return
        if ending.terminal:
            _times(status, excluded, firmly)
            _fail(status, self.reason, self.message)
            return
        if ending.count_failure and failures > policy.backoff_limit:
            _times(status, excluded, firmly)
            _fail(
                status,
                FleetReason.BACKOFF_LIMIT_EXCEEDED,
                f"retries ran out: failed {failures} times, backoffLimit is {policy.backoff_limit}; "
                f"last: {self.message}",
            )
            return
        ready = now
        wait = ""
        if ending.count_failure:
            delay = policy.backoff_seconds * 2 ** (failures - 1)
            ready = now + delay
            status["notBefore"] = rfc3339_micro(ready)
            wait = f"; next attempt in {delay:g}s"
        if avoid_for > 0:
            # From when the job may go again: an exclusion shorter than the backoff still counts.
            excluded[member] = ready + avoid_for
            wait += f"; {member} avoided for {avoid_for:g}s more"
        elif ending.blame is Blame.JOB and here.get(member) == 1:
            wait += f"; {member} not avoided (the job's own failure, its first there)"
        _times(status, excluded, firmly)
        _enter(status, Phase.QUEUED, self.reason, f"{self.message}{wait}")


def every_refusal(refused: Mapping[str, str]) -> str:
    """The message of a job every member refused: each member's reason, in member order."""
    return "every member refused the job: " + "; ".join(f"{m}: {why}" for m, why in sorted(refused.items()))


@dataclass(frozen=True)
class Fail(Transition):
    """Failed for good before any attempt runs (an invalid job, one every member refused, one
    that cannot be queued again when its switch is turned off)."""

    reason: str
    message: str
    sources = (Phase.QUEUED, *sorted(HELD))
    targets = (Phase.FAILED,)
    summary = "failed for good while queued (invalid, refused everywhere)"

    def apply(self, status: FleetStatus, obj: Mapping[str, Any], now: float) -> None:
        _fail(status, self.reason, self.message)


@dataclass(frozen=True)
class Preempt(Transition):
    """Marked for eviction by ``preemptor``: its copy is being deleted; its quota stays charged
    until the copy is gone, then :class:`EndAttempt` queues it again."""

    preemptor: str
    message: str
    sources = (PLACED,)
    targets = (Phase.RESCHEDULING,)
    summary = "evicted for a preemptor (not while Admitted): its copy is being deleted"

    def allowed(self, state: str | None) -> bool:
        return state not in (Phase.ADMITTED, Phase.RESCHEDULING) and super().allowed(state)

    def apply(self, status: FleetStatus, obj: Mapping[str, Any], now: float) -> None:
        status["preemptedBy"] = self.preemptor
        _enter(status, Phase.RESCHEDULING, FleetReason.PREEMPTED, self.message)


@dataclass(frozen=True)
class Terminate(Transition):
    """Deleted at the fleet: waiting for its member copy to go (the finalizer holds)."""

    reason: str
    message: str
    sources = (None, Phase.QUEUED, PLACED, Phase.TERMINATING, *sorted(HELD), *sorted(FINISHED))
    targets = (Phase.TERMINATING,)
    while_deleting = True
    summary = "deleted at the fleet: its copy is being deleted (the finalizer holds)"
    #: Only for a job marked for deletion; no other transition applies to one.

    def apply(self, status: FleetStatus, obj: Mapping[str, Any], now: float) -> None:
        _enter(status, Phase.TERMINATING, self.reason, self.message)


@dataclass(frozen=True)
class Hold(Transition):
    """Held by its kind's switch (T9k's pause, Kubeflow's suspend): out of its queue, no quota,
    no copy; ``state`` is its kind's word (``Paused``, ``Suspended``)."""

    state: str
    reason: str
    message: str
    sources = (None, Phase.QUEUED, PLACED)
    targets = (Phase.PAUSED, Phase.SUSPENDED)
    summary = "held by its kind's switch: out of its queue, its copy deleted"

    def apply(self, status: FleetStatus, obj: Mapping[str, Any], now: float) -> None:
        member = status.get("cluster")
        if member:
            _leave(status, member)
        status.pop("reservation", None)
        _enter(status, self.state, self.reason, self.message)


@dataclass(frozen=True)
class Resume(Transition):
    """Its switch turned off again: queued again (a new attempt comes with its admission)."""

    message: str
    sources = tuple(sorted(HELD))
    targets = (Phase.QUEUED,)
    summary = "its switch turned off: queued again"

    def apply(self, status: FleetStatus, obj: Mapping[str, Any], now: float) -> None:
        _enter(status, Phase.QUEUED, FleetReason.RESUMED, self.message)


#: Every transition, in the order of a job's life (the table in docs/lifecycle.md).
TRANSITIONS: Final[tuple[type[Transition], ...]] = (
    Submit,
    Wait,
    Admit,
    Dispatch,
    Mirror,
    Preempt,
    EndAttempt,
    Fail,
    Hold,
    Resume,
    Terminate,
)

# ---- the machine --------------------------------------------------------------------------------


def step(
    obj: Mapping[str, Any], event: Transition, guard: Attempt | None = None, *, now: float | None = None
) -> FleetStatus | None:
    """The status ``obj`` has after ``event``; None when the event does not apply (the guard
    fails, the job is being deleted, its state is not one the event leaves) or changes nothing.
    ``obj`` is not changed."""
    if guard is not None and not guard.holds(obj):
        return None
    if bool((obj.get("metadata") or {}).get("deletionTimestamp")) != event.while_deleting:
        return None
    if not event.allowed(current_state(obj)):
        return None
    before = status_of(obj)
    status = cast(FleetStatus, dict(before))
    status["conditions"] = normalized([cast(JobCondition, dict(c)) for c in _conditions(before)])
    event.apply(status, obj, time.time() if now is None else now)
    return None if status == before else status


def transition(
    event: Transition, guard: Attempt | None = None, *, now: float | None = None
) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """The change :func:`fleet.jobs.mutate_job` takes: ``event`` applied to the stored job."""

    def mutate(obj: dict[str, Any]) -> dict[str, Any] | None:
        status = step(obj, event, guard, now=now)
        if status is None:
            return None
        obj["status"] = status
        return obj

    return mutate


# ---- what entering a state means for the other conditions ---------------------------------------

#: Entering a state turns False the conditions of the states it excludes.
_EXCLUDES: Final[Mapping[str, tuple[str, ...]]] = {
    Phase.QUEUED: (Phase.ADMITTED, Phase.DISPATCHED, Phase.RESCHEDULING, *sorted(HELD)),
    Phase.ADMITTED: (Phase.QUEUED, Phase.DISPATCHED, Phase.RESCHEDULING, *sorted(HELD)),
    Phase.DISPATCHED: (Phase.QUEUED,),
    Phase.RESCHEDULING: (),
    Phase.FAILED: (Phase.QUEUED, Phase.RESCHEDULING),
    Phase.TERMINATING: (),
    Phase.PAUSED: (Phase.QUEUED, Phase.ADMITTED, Phase.DISPATCHED, Phase.RESCHEDULING),
    Phase.SUSPENDED: (Phase.QUEUED, Phase.ADMITTED, Phase.DISPATCHED, Phase.RESCHEDULING),
}
#: States whose entry ends whatever the member said (no copy of the current attempt runs).
_CLEARS_MEMBER: Final = frozenset({Phase.QUEUED, Phase.ADMITTED, *HELD})


def _conditions(status: Mapping[str, Any]) -> list[JobCondition]:
    found = status.get("conditions")
    return list(found) if isinstance(found, list) else []


def _enter(status: FleetStatus, state: str, reason: str, message: str) -> None:
    stamp = now_rfc3339()
    conditions = _conditions(status)
    if state in _CLEARS_MEMBER:
        conditions = [c for c in conditions if c.get("type") in _FLEET_ONLY]
    for other in _EXCLUDES[state]:
        # Only a condition that turns False takes this reason: one already False keeps the reason
        # of its own last transition (why it went False), as the API conventions have it.
        held = next((c for c in conditions if c.get("type") == other), None)
        if held is not None and held.get("status") != FALSE:
            put(conditions, other, FALSE, reason, message, now=stamp)
    put(conditions, state, TRUE, reason, message, now=stamp)
    status["conditions"] = conditions


def _fail(status: FleetStatus, reason: str, message: str) -> None:
    _enter(status, Phase.FAILED, reason, message)


def _leave(status: FleetStatus, member: str) -> None:
    """The attempt on ``member`` is over: the job names it as its last member, and nothing the
    copy said stays (its conditions go when the next state is entered)."""
    status["lastCluster"] = member
    fields = cast(dict[str, Any], status)
    for key in ("cluster", "reservation", "replicaStatuses", "startTime", "completionTime", *MIRRORED_FIELDS):
        fields.pop(key, None)
    status["conditions"] = [c for c in _conditions(status) if c.get("type") in FLEET_STATES]


def _times(status: FleetStatus, excluded: Mapping[str, float], firmly: Mapping[str, float]) -> None:
    status["excluded"] = {m: rfc3339_micro(t) for m, t in excluded.items()}
    if firmly:
        status["excludedFirmly"] = {m: rfc3339_micro(t) for m, t in firmly.items()}
    else:
        status.pop("excludedFirmly", None)


# ---- the table ----------------------------------------------------------------------------------


def _states(states: tuple[str | None, ...]) -> str:
    names = {None: "(new)", PLACED: "placed (Admitted, Dispatched, Rescheduling, a member's state)"}
    return ", ".join(names.get(s, f"`{s}`") for s in states)


def table() -> str:
    """``docs/lifecycle.md``: every transition, from where, to where."""
    lines = [
        "# A fleet job's life",
        "",
        "Generated from `fleet/jobs/lifecycle.py` by `make docs`;",
        "`tests/fleet/jobs/test_lifecycle.py` fails when it is not current. The module's docstring says",
        "what the conditions mean; the roles that send each event are in `docs/architecture.md`.",
        "",
        "| transition | from | to | what happened |",
        "|---|---|---|---|",
    ]
    for kind in TRANSITIONS:
        deleting = " (marked for deletion only)" if kind.while_deleting else ""
        targets = ", ".join(f"`{t}`" if t in FLEET_STATES else t for t in kind.targets)
        sources = _states(kind.sources) + deleting
        lines.append(f"| `{kind.__name__}` | {sources} | {targets} | {kind.summary} |")
    return "\n".join(lines) + "\n"
