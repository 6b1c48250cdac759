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
from fleet.workloads.kubeflow_jobs import MPIJOB, PYTORCHJOB, TFJOB
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
from fleet.workloads.t9k_jobs import T9K_MPIJOB, T9K_TFJOB

__all__ = [
    "ASCENDJOB",
    "KINDS",
    "MIRRORED_FIELDS",
    "MPIJOB",
    "PYTORCHJOB",
    "T9K_MPIJOB",
    "T9K_TFJOB",
    "TFJOB",
    "AscendJobAdapter",
    "FieldError",
    "InvalidWorkload",
    "JobRef",
    "Outcome",
    "Pausable",
    "PodEvidence",
    "QueueNaming",
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
    "unschedulable",
]
