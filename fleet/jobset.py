"""The JobSet vocabulary (``jobset.x-k8s.io/v1alpha2``): the names JobSet's controller uses.

One home below every layer that speaks them: Fleet's JobSet adapter
(:mod:`fleet.workloads.jobset`), Kubeflow Trainer's TrainJob adapter (its runtimes hold a JobSet
template) and the member simulator's JobSet controller (:mod:`fleet.sim.jobset_controller`),
beside the other upstream vocabularies (:mod:`fleet.ascend`, :mod:`fleet.kubeflow`). Names only:
nothing here imports the rest of Fleet. Source: kubernetes-sigs/jobset ``api/jobset/v1alpha2``
(``jobset_types.go``: the labels, ``JobSetConditionType``, ``Operator``, ``FailurePolicyAction``,
``StartupPolicyOptions``; ``jobset_webhook.go`` for the rules).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "COMPLETED",
    "FAILED",
    "FAILURE_ACTIONS",
    "JOBSET_GROUP",
    "JOBSET_KIND",
    "JOBSET_NAME_LABEL",
    "JOBSET_PLURAL",
    "JOBSET_STATUS_FIELDS",
    "JOBSET_VERSION",
    "JOB_INDEX_LABEL",
    "REPLICATED_JOB_LABEL",
    "RESTART_STRATEGIES",
    "STARTUP_ORDERS",
    "SUCCESS_OPERATORS",
    "SUSPENDED",
]

JOBSET_GROUP: Final = "jobset.x-k8s.io"
JOBSET_VERSION: Final = "v1alpha2"
JOBSET_KIND: Final = "JobSet"
JOBSET_PLURAL: Final = "jobsets"

#: The labels JobSet's controller puts on every Job and pod it makes (``JobSetNameKey``,
#: ``ReplicatedJobNameKey``, ``JobIndexKey``).
JOBSET_NAME_LABEL: Final = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL: Final = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL: Final = "jobset.sigs.k8s.io/job-index"

#: ``JobSetConditionType``: the JobSet's terminal and suspended conditions.
COMPLETED: Final = "Completed"
FAILED: Final = "Failed"
SUSPENDED: Final = "Suspended"

#: ``successPolicy.operator``: every Job of the target replicated jobs, or any one of them.
SUCCESS_OPERATORS: Final = ("All", "Any")
#: ``failurePolicy.restartStrategy`` and ``failurePolicy.rules[].action``.
RESTART_STRATEGIES: Final = ("Recreate", "BlockingRecreate")
FAILURE_ACTIONS: Final = ("FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts")
#: ``startupPolicy.startupPolicyOrder``.
STARTUP_ORDERS: Final = ("AnyOrder", "InOrder")
#: ``JobSetStatus`` fields besides conditions, as the fleet mirrors them from a member copy.
JOBSET_STATUS_FIELDS: Final = ("restarts", "replicatedJobsStatus", "terminalState")
