"""Workload adapters: one per job kind, listed in :mod:`fleet.workloads.registry`; see
:mod:`fleet.workloads.base` for the interface and :mod:`fleet.workloads.replicas` for the base
the replica-spec kinds share."""

from fleet.workloads.ascendjob import ASCENDJOB, AscendJobAdapter, ascendjob
from fleet.workloads.base import (
    MIRRORED_FIELDS,
    FieldError,
    InvalidWorkload,
    Outcome,
    Pausable,
    PodEvidence,
    QueueNaming,
    UnknownKind,
    WorkloadAdapter,
    WorkloadStatus,
    fleet_label_errors,
    member_resource,
    unschedulable,
)
from fleet.workloads.kubeflow import JOB_NAME_LABEL as KUBEFLOW_JOB_NAME_LABEL
from fleet.workloads.kubeflow import JOB_ROLE_LABEL as KUBEFLOW_JOB_ROLE_LABEL
from fleet.workloads.kubeflow import MPIJOB, PYTORCHJOB, TFJOB
from fleet.workloads.kubeflow import OPERATOR_NAME_LABEL as KUBEFLOW_OPERATOR_NAME_LABEL
from fleet.workloads.kubeflow import REPLICA_INDEX_LABEL as KUBEFLOW_REPLICA_INDEX_LABEL
from fleet.workloads.kubeflow import REPLICA_TYPE_LABEL as KUBEFLOW_REPLICA_TYPE_LABEL
from fleet.workloads.registry import (
    KINDS,
    JobRef,
    adapter_by_resource,
    adapter_for,
    job_key,
    job_ref,
    kind_tag,
    ref_for,
)
from fleet.workloads.t9k_vocabulary import CHIEF as T9K_CHIEF
from fleet.workloads.t9k_vocabulary import DEADLINE_EXCEEDED as T9K_DEADLINE_EXCEEDED
from fleet.workloads.t9k_vocabulary import INVALID_SPEC as T9K_INVALID_SPEC
from fleet.workloads.t9k_vocabulary import LAUNCHER as T9K_LAUNCHER
from fleet.workloads.t9k_vocabulary import REPLICA_INDEX_LABEL as T9K_REPLICA_INDEX_LABEL
from fleet.workloads.t9k_vocabulary import REPLICA_TYPE_LABEL as T9K_REPLICA_TYPE_LABEL
from fleet.workloads.t9k_vocabulary import T9K_JOB_NAME_LABEL, T9K_MPIJOB, T9K_TFJOB, T9kCondition, T9kPhase
from fleet.workloads.t9k_vocabulary import WORKER as T9K_WORKER
from fleet.workloads.t9k_vocabulary import clean_up_policy as t9k_clean_up_policy
from fleet.workloads.t9k_vocabulary import launcher_template as t9k_launcher_template
from fleet.workloads.t9k_vocabulary import mode_enabled as t9k_mode_enabled
from fleet.workloads.t9k_vocabulary import retriable_exit as t9k_retriable_exit

__all__ = [
    "ASCENDJOB",
    "KINDS",
    "KUBEFLOW_JOB_NAME_LABEL",
    "KUBEFLOW_JOB_ROLE_LABEL",
    "KUBEFLOW_OPERATOR_NAME_LABEL",
    "KUBEFLOW_REPLICA_INDEX_LABEL",
    "KUBEFLOW_REPLICA_TYPE_LABEL",
    "MIRRORED_FIELDS",
    "MPIJOB",
    "PYTORCHJOB",
    "T9K_CHIEF",
    "T9K_DEADLINE_EXCEEDED",
    "T9K_INVALID_SPEC",
    "T9K_JOB_NAME_LABEL",
    "T9K_LAUNCHER",
    "T9K_MPIJOB",
    "T9K_REPLICA_INDEX_LABEL",
    "T9K_REPLICA_TYPE_LABEL",
    "T9K_TFJOB",
    "T9K_WORKER",
    "TFJOB",
    "AscendJobAdapter",
    "FieldError",
    "InvalidWorkload",
    "JobRef",
    "Outcome",
    "Pausable",
    "PodEvidence",
    "QueueNaming",
    "T9kCondition",
    "T9kPhase",
    "UnknownKind",
    "WorkloadAdapter",
    "WorkloadStatus",
    "adapter_by_resource",
    "adapter_for",
    "ascendjob",
    "fleet_label_errors",
    "job_key",
    "job_ref",
    "kind_tag",
    "member_resource",
    "ref_for",
    "t9k_clean_up_policy",
    "t9k_launcher_template",
    "t9k_mode_enabled",
    "t9k_retriable_exit",
    "unschedulable",
]
