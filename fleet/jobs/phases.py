"""The fleet-side states of a job and the reasons Fleet gives: one home for their names.

A fleet job's ``status.conditions`` has one condition per type, and its last one is the current
state (:mod:`fleet.jobs.conditions`). Fleet writes its own states while the job is on the fleet
side (``Queued``, ``Admitted``, ``Dispatched``, ``Rescheduling``, and a terminal ``Failed`` when
retries run out) and mirrors the current copy's conditions (``Created``, ``Running``,
``Restarting``, ``Succeeded``, ``Failed``, see :class:`fleet.ascend.Condition`) after them. A job
deleted at the fleet while it has a member copy is ``Terminating`` until the copy is confirmed
gone (:mod:`fleet.dispatch.deletion`). The transitions are :mod:`fleet.jobs.lifecycle`'s.
"""

from __future__ import annotations

from typing import Final

from fleet.ascend import Condition

__all__ = ["FINISHED", "HELD", "MEMBER_STATES", "FleetReason", "Phase"]


class Phase:
    """Condition types Fleet itself writes on the fleet object."""

    QUEUED: Final = "Queued"
    ADMITTED: Final = "Admitted"
    DISPATCHED: Final = "Dispatched"
    RESCHEDULING: Final = "Rescheduling"
    FAILED: Final = Condition.FAILED
    #: Deleted at the fleet, waiting for its member copy to be confirmed gone (the finalizer holds).
    TERMINATING: Final = "Terminating"
    #: Its kind's pause mode is on (T9k ``spec.runMode.pause``): no member copy, no quota, not
    #: queued; turning it off queues the job again (:mod:`fleet.jobs.pause`).
    PAUSED: Final = "Paused"
    #: Its kind's suspend switch is on (Kubeflow ``spec.runPolicy.suspend``): held like a paused
    #: job (no member copy, no quota, not queued) under the state its kind's operator writes
    #: (the training operator's ``Suspended`` condition); turning it off queues the job again.
    SUSPENDED: Final = "Suspended"


#: States of a job its owner holds back with its kind's switch (:mod:`fleet.jobs.pause`): one
#: per kind's word for it (:attr:`fleet.workloads.base.Pausable.held_state` names which).
HELD: Final = frozenset({Phase.PAUSED, Phase.SUSPENDED})

#: Condition types that come from the member copy.
MEMBER_STATES: Final = frozenset(
    {Condition.CREATED, Condition.RUNNING, Condition.RESTARTING, Condition.SUCCEEDED, Condition.FAILED}
)

#: States after which nothing more happens to a job.
FINISHED: Final = frozenset({Condition.SUCCEEDED, Condition.FAILED})


class FleetReason:
    """Reasons on Fleet's own conditions and events (CamelCase, as Kubernetes reasons are)."""

    SUBMITTED: Final = "Submitted"
    QUOTA_EXCEEDED: Final = "QuotaExceeded"
    NO_FIT: Final = "NoFittingCluster"
    #: Held: its policy suspends dispatching (Karmada's ``suspension.dispatching``).
    DISPATCHING_SUSPENDED: Final = "DispatchingSuspended"
    #: A ConfigMap, Secret or Service the job requires is not at the fleet: not sent with it.
    COMPANION_MISSING: Final = "CompanionMissing"
    ADMITTED: Final = "Admitted"
    #: The binding Event of a placement, as ACK One's (Karmada's) scheduler words it.
    SCHEDULE_BINDING_SUCCEED: Final = "ScheduleBindingSucceed"
    DISPATCHED: Final = "Dispatched"
    ADOPTED: Final = "Adopted"
    MEMBER_REFUSED: Final = "MemberRefused"
    #: Terminal: a member refused the job itself (its API server's validation), as every member would.
    MEMBER_REJECTED: Final = "MemberRejected"
    #: Terminal: every member the job may use refused it, each for a reason of its own.
    ALL_MEMBERS_REFUSED: Final = "AllMembersRefused"
    #: Terminal: the member copy could not be built or sent (an error in Fleet for this job).
    PROPAGATION_FAILED: Final = "PropagationFailed"
    MEMBER_UNAVAILABLE: Final = "MemberUnavailable"
    CLUSTER_FAILOVER: Final = "ClusterFailover"
    #: Its member no longer has the copy of the current attempt (rebuilt empty, restored from a
    #: backup, the copy deleted while no syncer watched): queued again, the member not excluded.
    COPY_LOST: Final = "CopyLost"
    #: A pending create handed back: its member's calls kept timing out past the toleration.
    MEMBER_DEGRADED: Final = "MemberDegraded"
    APPLICATION_FAILOVER: Final = "ApplicationFailover"
    BACKOFF_LIMIT_EXCEEDED: Final = "BackoffLimitExceeded"
    INVALID: Final = "InvalidJob"
    PURGED: Final = "Purged"
    STALE_COPY_KEPT: Final = "StaleCopyKept"
    #: Evicted to let a job of higher priority start, or to give a leaf its guaranteed quota.
    PREEMPTED: Final = "Preempted"
    #: Its pause mode was turned on (``Paused``), or off again (``Queued``).
    PAUSED: Final = "Paused"
    RESUMED: Final = "Resumed"
    #: Its suspend switch was turned on (``Suspended``); turned off again it is ``Resumed``.
    SUSPENDED: Final = "Suspended"
    #: Terminating: the delete of the member copy was sent; the finalizer holds until it is gone.
    DELETING_COPY: Final = "DeletingMemberCopy"
    #: Terminating: the member could not be reached (or refused the delete); retried with backoff.
    WAITING_FOR_MEMBER: Final = "WaitingForMember"
    #: A deleted job's member copy left in place: its policy's purgeMode is Never, or its member
    #: is no longer in the fleet. The finalizer goes at once; the Event says where the copy is.
    MEMBER_COPY_LEFT: Final = "MemberCopyLeft"
