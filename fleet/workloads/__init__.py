"""Workload adapters: one per job kind; see :mod:`fleet.workloads.base` for the interface."""

from fleet.workloads.ascendjob import AscendJobAdapter, ascendjob
from fleet.workloads.base import (
    FieldError,
    InvalidWorkload,
    UnknownKind,
    WorkloadAdapter,
    WorkloadStatus,
    adapter_for,
    register,
)
from fleet.workloads.labels import ATTEMPT_LABEL, JOB_NAME_LABEL, JOB_NAMESPACE_LABEL, JOB_UID_LABEL
from fleet.workloads.t9k import MPIJobAdapter, TensorFlowTrainingJobAdapter, t9k_mpijob, t9k_tfjob

__all__ = [
    "ATTEMPT_LABEL",
    "JOB_NAMESPACE_LABEL",
    "JOB_NAME_LABEL",
    "JOB_UID_LABEL",
    "AscendJobAdapter",
    "FieldError",
    "InvalidWorkload",
    "MPIJobAdapter",
    "TensorFlowTrainingJobAdapter",
    "UnknownKind",
    "WorkloadAdapter",
    "WorkloadStatus",
    "adapter_for",
    "ascendjob",
    "register",
    "t9k_mpijob",
    "t9k_tfjob",
]
