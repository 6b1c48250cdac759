"""The fleet job: its states and reasons, how its status is written, how it is accepted.

:mod:`~fleet.jobs.phases` names the states (one home), :mod:`~fleet.jobs.status` writes them
(the AscendJob convention: the last condition is the current state, with the member's conditions
mirrored after Fleet's own), :mod:`~fleet.jobs.submit` accepts a job (validate, store, queue),
:mod:`~fleet.jobs.priority` resolves its priority at submission and reads back what was recorded
(:func:`job_priority`).
"""

from fleet.jobs.phases import FINISHED, HELD, MEMBER_STATES, FleetReason, Phase
from fleet.jobs.priority import JobPriority, PriorityClasses, PriorityClassNotFound, job_priority
from fleet.jobs.status import attempt_of, cluster_of, current_state, is_finished, mirror, set_state
from fleet.jobs.submit import FINALIZER, Prepared, enqueue, job_key, prepare, quota_request, split_key, submit

__all__ = [
    "FINALIZER",
    "FINISHED",
    "HELD",
    "MEMBER_STATES",
    "FleetReason",
    "JobPriority",
    "Phase",
    "Prepared",
    "PriorityClassNotFound",
    "PriorityClasses",
    "attempt_of",
    "cluster_of",
    "current_state",
    "enqueue",
    "is_finished",
    "job_key",
    "job_priority",
    "mirror",
    "prepare",
    "quota_request",
    "set_state",
    "split_key",
    "submit",
]
