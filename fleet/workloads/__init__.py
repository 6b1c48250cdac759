"""Workload adapters: one per job kind, listed in :mod:`fleet.workloads.registry`; see
:mod:`fleet.workloads.base` for the interface and :mod:`fleet.workloads.replicas` for the base
the replica-spec kinds share."""

from typing import TYPE_CHECKING, Final

from fleet.lazy_face import lazy_face

if TYPE_CHECKING:
    from fleet.workloads.ascendjob import ASCENDJOB, AscendJobAdapter, ascendjob
    from fleet.workloads.base import (
        DEFAULT_QUEUE,
        KUEUE_QUEUE_LABEL,
        MIRRORED_FIELDS,
        AcceptedDemand,
        Dependent,
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
        is_dependent,
        is_pausable,
        is_pod_evidence,
        is_queue_naming,
        member_resource,
        unschedulable,
    )
    from fleet.workloads.batch_jobs import BATCH_JOB
    from fleet.workloads.jobset import JOBSET
    from fleet.workloads.kubeflow_jobs import MPIJOB, PYTORCHJOB, TFJOB
    from fleet.workloads.registry import (
        KINDS,
        OTHER_VERSIONS,
        RUNTIME_KINDS,
        JobRef,
        adapter_by_resource,
        adapter_for,
        job_key,
        job_ref,
        kind_tag,
        ref_for,
        stored_demand,
    )
    from fleet.workloads.t9k_jobs import T9K_MPIJOB, T9K_TFJOB
    from fleet.workloads.trainjob import TRAINJOB, with_runtime
    from fleet.workloads.volcano_jobs import VOLCANO_JOB

# The face is lazy (PEP 562): a name is imported from its module when first used, so that
# importing one name does not import the whole package (the CLI starts fast, issue 33).
_FACE: Final[dict[str, tuple[str, str]]] = {
    "ASCENDJOB": ("fleet.workloads.ascendjob", "ASCENDJOB"),
    "AscendJobAdapter": ("fleet.workloads.ascendjob", "AscendJobAdapter"),
    "ascendjob": ("fleet.workloads.ascendjob", "ascendjob"),
    "MIRRORED_FIELDS": ("fleet.workloads.base", "MIRRORED_FIELDS"),
    "AcceptedDemand": ("fleet.workloads.base", "AcceptedDemand"),
    "FieldError": ("fleet.workloads.base", "FieldError"),
    "InvalidWorkload": ("fleet.workloads.base", "InvalidWorkload"),
    "Outcome": ("fleet.workloads.base", "Outcome"),
    "Pausable": ("fleet.workloads.base", "Pausable"),
    "PodEvidence": ("fleet.workloads.base", "PodEvidence"),
    "QueueNaming": ("fleet.workloads.base", "QueueNaming"),
    "UnknownKind": ("fleet.workloads.base", "UnknownKind"),
    "WorkloadAdapter": ("fleet.workloads.base", "WorkloadAdapter"),
    "WorkloadStatus": ("fleet.workloads.base", "WorkloadStatus"),
    "fleet_label_errors": ("fleet.workloads.base", "fleet_label_errors"),
    "is_dependent": ("fleet.workloads.base", "is_dependent"),
    "is_pausable": ("fleet.workloads.base", "is_pausable"),
    "is_pod_evidence": ("fleet.workloads.base", "is_pod_evidence"),
    "is_queue_naming": ("fleet.workloads.base", "is_queue_naming"),
    "member_resource": ("fleet.workloads.base", "member_resource"),
    "unschedulable": ("fleet.workloads.base", "unschedulable"),
    "MPIJOB": ("fleet.workloads.kubeflow_jobs", "MPIJOB"),
    "PYTORCHJOB": ("fleet.workloads.kubeflow_jobs", "PYTORCHJOB"),
    "TFJOB": ("fleet.workloads.kubeflow_jobs", "TFJOB"),
    "KINDS": ("fleet.workloads.registry", "KINDS"),
    "JobRef": ("fleet.workloads.registry", "JobRef"),
    "adapter_by_resource": ("fleet.workloads.registry", "adapter_by_resource"),
    "adapter_for": ("fleet.workloads.registry", "adapter_for"),
    "job_key": ("fleet.workloads.registry", "job_key"),
    "job_ref": ("fleet.workloads.registry", "job_ref"),
    "kind_tag": ("fleet.workloads.registry", "kind_tag"),
    "ref_for": ("fleet.workloads.registry", "ref_for"),
    "stored_demand": ("fleet.workloads.registry", "stored_demand"),
    "T9K_MPIJOB": ("fleet.workloads.t9k_jobs", "T9K_MPIJOB"),
    "T9K_TFJOB": ("fleet.workloads.t9k_jobs", "T9K_TFJOB"),
    "DEFAULT_QUEUE": ("fleet.workloads.base", "DEFAULT_QUEUE"),
    "KUEUE_QUEUE_LABEL": ("fleet.workloads.base", "KUEUE_QUEUE_LABEL"),
    "Dependent": ("fleet.workloads.base", "Dependent"),
    "BATCH_JOB": ("fleet.workloads.batch_jobs", "BATCH_JOB"),
    "JOBSET": ("fleet.workloads.jobset", "JOBSET"),
    "OTHER_VERSIONS": ("fleet.workloads.registry", "OTHER_VERSIONS"),
    "RUNTIME_KINDS": ("fleet.workloads.registry", "RUNTIME_KINDS"),
    "TRAINJOB": ("fleet.workloads.trainjob", "TRAINJOB"),
    "with_runtime": ("fleet.workloads.trainjob", "with_runtime"),
    "VOLCANO_JOB": ("fleet.workloads.volcano_jobs", "VOLCANO_JOB"),
}


lazy_face(__name__, _FACE)


__all__ = [
    "ASCENDJOB",
    "BATCH_JOB",
    "DEFAULT_QUEUE",
    "JOBSET",
    "KINDS",
    "KUEUE_QUEUE_LABEL",
    "MIRRORED_FIELDS",
    "MPIJOB",
    "OTHER_VERSIONS",
    "PYTORCHJOB",
    "RUNTIME_KINDS",
    "T9K_MPIJOB",
    "T9K_TFJOB",
    "TFJOB",
    "TRAINJOB",
    "VOLCANO_JOB",
    "AcceptedDemand",
    "AscendJobAdapter",
    "Dependent",
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
    "is_dependent",
    "is_pausable",
    "is_pod_evidence",
    "is_queue_naming",
    "job_key",
    "job_ref",
    "kind_tag",
    "member_resource",
    "ref_for",
    "stored_demand",
    "unschedulable",
    "with_runtime",
]
