"""The Volcano vocabulary: the names Volcano's Job (``batch.volcano.sh/v1alpha1``, ``vcjob``) uses.

One home below every layer that speaks them: Fleet's Volcano adapter
(:mod:`fleet.workloads.volcano_jobs`) and the member simulator's Volcano job controller
(:mod:`fleet.sim.volcano_controller`), beside the other upstream vocabularies (:mod:`fleet.ascend`,
:mod:`fleet.kubeflow`, :mod:`fleet.t9k`). Names only: nothing here imports the rest of Fleet.

Sources: volcano-sh/apis ``pkg/apis/batch/v1alpha1/job.go`` (``JobSpec``, ``TaskSpec``,
``LifecyclePolicy``, ``JobPhase``, ``JobStatus``, the ``volcano.sh/job-name`` and
``volcano.sh/task-spec`` keys of ``labels.go``), ``pkg/apis/bus/v1alpha1/{actions,events}.go``;
volcano-sh/volcano ``pkg/webhooks/admission/jobs/validate/util.go`` (the events and actions a user
may write: ``policyEventMap``, ``policyActionMap``), ``pkg/webhooks/admission/jobs/mutate``
(defaults: queue ``default``, scheduler ``volcano``, ``maxRetry`` 3) and
``pkg/controllers/job/plugins`` (the plugin names).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ACTIONS",
    "DEFAULT_MAX_RETRY",
    "DEFAULT_SCHEDULER",
    "EVENTS",
    "FINAL_PHASES",
    "JOB_NAMESPACE_LABEL",
    "JOB_NAME_LABEL",
    "PLUGINS",
    "QUEUE_NAME_LABEL",
    "TASK_INDEX_LABEL",
    "TASK_SPEC_LABEL",
    "VOLCANO_GROUP",
    "VOLCANO_JOB_KIND",
    "VOLCANO_JOB_PLURAL",
    "VOLCANO_VERSION",
    "Action",
    "Event",
    "JobPhase",
]

VOLCANO_GROUP: Final = "batch.volcano.sh"
VOLCANO_VERSION: Final = "v1alpha1"
VOLCANO_JOB_KIND: Final = "Job"
VOLCANO_JOB_PLURAL: Final = "jobs"

#: What the job controller labels each pod with (``JobNameKey``, ``JobNamespaceKey``,
#: ``QueueNameKey``, ``TaskSpecKey``, ``TaskIndex`` in volcano-sh/apis ``batch/v1alpha1/labels.go``).
JOB_NAME_LABEL: Final = "volcano.sh/job-name"
JOB_NAMESPACE_LABEL: Final = "volcano.sh/job-namespace"
QUEUE_NAME_LABEL: Final = "volcano.sh/queue-name"
TASK_SPEC_LABEL: Final = "volcano.sh/task-spec"
TASK_INDEX_LABEL: Final = "volcano.sh/task-index"

#: The admission webhook's defaults (``mutate``): the scheduler and the retry budget.
DEFAULT_SCHEDULER: Final = "volcano"
DEFAULT_MAX_RETRY: Final = 3

#: The controller's plugins a job may name in ``spec.plugins`` (``plugins/factory.go``).
PLUGINS: Final = ("env", "ssh", "svc", "mpi", "pytorch", "tensorflow", "ray", "hcclrank")


class JobPhase:
    """``status.state.phase`` (``JobPhase``)."""

    PENDING: Final = "Pending"
    ABORTING: Final = "Aborting"
    ABORTED: Final = "Aborted"
    RUNNING: Final = "Running"
    RESTARTING: Final = "Restarting"
    COMPLETING: Final = "Completing"
    COMPLETED: Final = "Completed"
    TERMINATING: Final = "Terminating"
    TERMINATED: Final = "Terminated"
    FAILED: Final = "Failed"


#: Phases after which the controller does nothing more (``Aborted`` only resumes by a command).
FINAL_PHASES: Final = frozenset({JobPhase.COMPLETED, JobPhase.FAILED, JobPhase.ABORTED, JobPhase.TERMINATED})


class Event:
    """The events a lifecycle policy may name (``bus/v1alpha1/events.go``)."""

    ANY: Final = "*"
    POD_FAILED: Final = "PodFailed"
    POD_EVICTED: Final = "PodEvicted"
    JOB_UNKNOWN: Final = "Unknown"
    TASK_COMPLETED: Final = "TaskCompleted"
    TASK_FAILED: Final = "TaskFailed"
    JOB_UPDATED: Final = "JobUpdated"


class Action:
    """The actions a lifecycle policy may take (``bus/v1alpha1/actions.go``)."""

    ABORT_JOB: Final = "AbortJob"
    RESTART_JOB: Final = "RestartJob"
    RESTART_TASK: Final = "RestartTask"
    RESTART_POD: Final = "RestartPod"
    RESTART_PARTITION: Final = "RestartPartition"
    TERMINATE_JOB: Final = "TerminateJob"
    COMPLETE_JOB: Final = "CompleteJob"
    RESUME_JOB: Final = "ResumeJob"
    #: Not Volcano's: MindCluster's documents have a vcjob under its fault rescheduling say
    #: ``PodFailed`` -> ``Ignore`` (the failed pod is MindCluster's to reschedule, not the job
    #: controller's to act on), so Fleet accepts it as the members that run such jobs do.
    IGNORE: Final = "Ignore"


#: What a user may write (``policyEventMap``, ``policyActionMap``: the ones allowed externally;
#: and MindCluster's ``Ignore``).
EVENTS: Final = (
    Event.ANY,
    Event.POD_FAILED,
    Event.POD_EVICTED,
    Event.JOB_UNKNOWN,
    Event.TASK_COMPLETED,
    Event.TASK_FAILED,
    Event.JOB_UPDATED,
)
ACTIONS: Final = (
    Action.ABORT_JOB,
    Action.RESTART_JOB,
    Action.RESTART_TASK,
    Action.RESTART_POD,
    Action.RESTART_PARTITION,
    Action.TERMINATE_JOB,
    Action.COMPLETE_JOB,
    Action.RESUME_JOB,
    Action.IGNORE,
)
