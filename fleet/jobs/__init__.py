"""The fleet job: its states and reasons, how its status is written, how it is accepted.

:mod:`~fleet.jobs.phases` names the states (one home), :mod:`~fleet.jobs.status` writes them
(the AscendJob convention: the last condition is the current state, with the member's conditions
mirrored after Fleet's own), :mod:`~fleet.jobs.submit` accepts a job (validate, store, queue),
:mod:`~fleet.jobs.priority` resolves its priority at submission and reads back what was recorded
(:func:`job_priority`).
"""

from fleet.jobs.durability import Durability, DurabilityUnavailable, NotDurable, check_server
from fleet.jobs.pause import (
    SpecChanged,
    converge,
    mark_paused,
    metadata_changed,
    parse_held_entry,
    pausable,
    pause_field,
    paused_at_submission,
    switch_out_of_step,
    switched,
)
from fleet.jobs.pause import apply as apply_pause
from fleet.jobs.phases import FINISHED, HELD, MEMBER_STATES, FleetReason, Phase
from fleet.jobs.priority import (
    HIGHEST_USER_DEFINABLE_PRIORITY,
    PREEMPT_LOWER_PRIORITY,
    PREEMPTION_POLICIES,
    PRIORITY_ANNOTATION,
    STATUS_PRIORITY_CLASS,
    SYSTEM_PRIORITY_CLASS_PREFIX,
    SYSTEM_PRIORITY_CLASSES,
    ClassInfo,
    JobPriority,
    PriorityClasses,
    PriorityClassNotFound,
    global_default,
    job_priority,
    priority_classes,
)
from fleet.jobs.status import (
    attempt_of,
    cluster_of,
    current_state,
    is_finished,
    last_condition,
    mirror,
    set_state,
)
from fleet.jobs.store import get_jobs, list_jobs, mutate_job, mutate_jobs, try_get_job
from fleet.jobs.submit import (
    FINALIZER,
    Prepared,
    enqueue,
    job_key,
    prepare,
    queue_accepted,
    quota_request,
    split_key,
    submit,
)

__all__ = [
    "FINALIZER",
    "FINISHED",
    "HELD",
    "HIGHEST_USER_DEFINABLE_PRIORITY",
    "MEMBER_STATES",
    "PREEMPTION_POLICIES",
    "PREEMPT_LOWER_PRIORITY",
    "PRIORITY_ANNOTATION",
    "STATUS_PRIORITY_CLASS",
    "SYSTEM_PRIORITY_CLASSES",
    "SYSTEM_PRIORITY_CLASS_PREFIX",
    "ClassInfo",
    "Durability",
    "DurabilityUnavailable",
    "FleetReason",
    "JobPriority",
    "NotDurable",
    "Phase",
    "Prepared",
    "PriorityClassNotFound",
    "PriorityClasses",
    "SpecChanged",
    "apply_pause",
    "attempt_of",
    "check_server",
    "cluster_of",
    "converge",
    "current_state",
    "enqueue",
    "get_jobs",
    "global_default",
    "is_finished",
    "job_key",
    "job_priority",
    "last_condition",
    "list_jobs",
    "mark_paused",
    "metadata_changed",
    "mirror",
    "mutate_job",
    "mutate_jobs",
    "parse_held_entry",
    "pausable",
    "pause_field",
    "paused_at_submission",
    "prepare",
    "priority_classes",
    "queue_accepted",
    "quota_request",
    "set_state",
    "split_key",
    "submit",
    "switch_out_of_step",
    "switched",
    "try_get_job",
]
