"""The Kubernetes ``batch/v1`` Job vocabulary, and what Kueue reads of it.

One home below every layer that speaks them: Fleet's batch Job adapter
(:mod:`fleet.workloads.batch_jobs`) and the member simulator's Job controller
(:mod:`fleet.sim.batch_controller`), beside the other upstream vocabularies. Names only.

Sources: kubernetes ``pkg/apis/batch/types.go`` and ``staging/src/k8s.io/api/batch/v1/types.go``
(``JobConditionType``, the reasons ``BackoffLimitExceeded``, ``DeadlineExceeded``,
``PodFailurePolicy``, ``JobSuspended``; the labels ``batch.kubernetes.io/job-name``,
``batch.kubernetes.io/controller-uid`` and their legacy ``job-name``, ``controller-uid``; the
completion index annotation), ``pkg/apis/batch/validation/validation.go`` (the limits), and
kubernetes-sigs/kueue ``pkg/controller/jobs/job/job_controller.go`` (a Job's one pod set, ``main``,
of ``min(parallelism, completions)`` pods; ``suspend`` as the admission gate).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "BACKOFF_LIMIT_EXCEEDED",
    "BATCH_GROUP",
    "BATCH_JOB_KIND",
    "BATCH_JOB_PLURAL",
    "BATCH_VERSION",
    "COMPLETION_INDEX_ANNOTATION",
    "COMPLETION_MODES",
    "CONTROLLER_UID_LABEL",
    "DEADLINE_EXCEEDED",
    "DEFAULT_BACKOFF_LIMIT",
    "JOB_NAME_LABEL",
    "JOB_RESTART_POLICIES",
    "LEGACY_CONTROLLER_UID_LABEL",
    "LEGACY_JOB_NAME_LABEL",
    "MAX_INDEXED_COMPLETIONS",
    "POD_FAILURE_POLICY",
    "POD_FAILURE_POLICY_ACTIONS",
    "POD_SET",
    "SUSPENDED_REASON",
    "JobCondition",
]

BATCH_GROUP: Final = "batch"
BATCH_VERSION: Final = "v1"
BATCH_JOB_KIND: Final = "Job"
BATCH_JOB_PLURAL: Final = "jobs"

#: The job controller's pod labels, and the legacy ones it still writes.
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL: Final = "batch.kubernetes.io/controller-uid"
LEGACY_JOB_NAME_LABEL: Final = "job-name"
LEGACY_CONTROLLER_UID_LABEL: Final = "controller-uid"
COMPLETION_INDEX_ANNOTATION: Final = "batch.kubernetes.io/job-completion-index"

COMPLETION_MODES: Final = ("NonIndexed", "Indexed")
#: A Job's pods may only be restarted in place on failure or never (``ValidateJobSpec``).
JOB_RESTART_POLICIES: Final = ("OnFailure", "Never")
POD_FAILURE_POLICY_ACTIONS: Final = ("FailJob", "FailIndex", "Ignore", "Count")
#: ``spec.backoffLimit`` when unset.
DEFAULT_BACKOFF_LIMIT: Final = 6
#: Indexed jobs: ``completions`` and ``parallelism`` at most this (``maxParallelismForIndexedJob``).
MAX_INDEXED_COMPLETIONS: Final = 100_000

#: Kueue's name for a Job's one pod set.
POD_SET: Final = "main"


class JobCondition:
    """``JobConditionType``."""

    SUSPENDED: Final = "Suspended"
    COMPLETE: Final = "Complete"
    FAILED: Final = "Failed"
    FAILURE_TARGET: Final = "FailureTarget"
    SUCCESS_CRITERIA_MET: Final = "SuccessCriteriaMet"


#: The reasons of a ``Failed`` condition and of a ``Suspended`` one.
BACKOFF_LIMIT_EXCEEDED: Final = "BackoffLimitExceeded"
DEADLINE_EXCEEDED: Final = "DeadlineExceeded"
POD_FAILURE_POLICY: Final = "PodFailurePolicy"
SUSPENDED_REASON: Final = "JobSuspended"
