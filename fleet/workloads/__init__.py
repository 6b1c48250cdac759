"""Workload adapters: one per job kind, listed in :mod:`fleet.workloads.registry`; see
:mod:`fleet.workloads.base` for the interface and :mod:`fleet.workloads.replicas` for the base
the replica-spec kinds share."""

from fleet.workloads.ascendjob import AscendJobAdapter, ascendjob
from fleet.workloads.base import (
    FieldError,
    InvalidWorkload,
    Outcome,
    UnknownKind,
    WorkloadAdapter,
    WorkloadStatus,
    member_resource,
)
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

__all__ = [
    "KINDS",
    "AscendJobAdapter",
    "FieldError",
    "InvalidWorkload",
    "JobRef",
    "Outcome",
    "UnknownKind",
    "WorkloadAdapter",
    "WorkloadStatus",
    "adapter_by_resource",
    "adapter_for",
    "ascendjob",
    "job_key",
    "job_ref",
    "kind_tag",
    "member_resource",
    "ref_for",
]
