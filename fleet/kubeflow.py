"""The Kubeflow training vocabulary: the names Kubeflow's training operator and MPI operator use.

One home below every layer that speaks them: Fleet's Kubeflow adapters (:mod:`fleet.workloads.kubeflow_jobs`)
and the member simulator's Kubeflow controllers (:mod:`fleet.sim.kinds`, :mod:`fleet.sim.operator`),
beside the other upstream vocabularies (:mod:`fleet.ascend`, :mod:`fleet.t9k`). Names only: nothing
here imports the rest of Fleet. Sources: kubeflow/training-operator v1.9.0 (``pkg/apis/kubeflow.org/v1``:
``JobNameLabel``, ``ReplicaTypeLabel``, ``ReplicaIndexLabel``, ``CleanPodPolicy``, ``JobSuspended``,
``SuccessPolicy``) and kubeflow/mpi-operator (``pkg/apis/kubeflow/v2beta1``: ``types.go``, and
``validation.go`` for the enums; ``defaultLabels`` in ``mpi_job_controller.go``).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CLEAN_POD_POLICIES",
    "GROUP",
    "JOB_NAME_LABEL",
    "JOB_ROLE_LABEL",
    "LAUNCHER_CREATION_POLICIES",
    "MPI_IMPLEMENTATIONS",
    "MPI_OPERATOR",
    "MPI_RESTART_POLICIES",
    "OPERATOR_NAME_LABEL",
    "REPLICA_INDEX_LABEL",
    "REPLICA_TYPE_LABEL",
    "SUSPENDED",
    "SUSPEND_FIELD",
    "TF_SUCCESS_POLICIES",
]

GROUP: Final = "kubeflow.org"
#: The labels the Kubeflow operators put on every pod of a job (``kubeflowv1.JobNameLabel``, ...).
JOB_NAME_LABEL: Final = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL: Final = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL: Final = "training.kubeflow.org/replica-index"
#: The MPI operator's pod labels besides the job name (``defaultLabels``): the role (``launcher``,
#: ``worker``) and the operator's name.
JOB_ROLE_LABEL: Final = "training.kubeflow.org/job-role"
OPERATOR_NAME_LABEL: Final = "training.kubeflow.org/operator-name"
MPI_OPERATOR: Final = "mpi-operator"
CLEAN_POD_POLICIES: Final = ("All", "Running", "None")
#: ``spec.runPolicy.suspend`` and the condition type a suspended job shows (``JobSuspended``).
SUSPEND_FIELD: Final = "spec.runPolicy.suspend"
SUSPENDED: Final = "Suspended"
#: TFJob's ``successPolicy`` values (``SuccessPolicyDefault``, ``SuccessPolicyAllWorkers``).
TF_SUCCESS_POLICIES: Final = ("", "AllWorkers")
#: The MPI operator's enums (``validation.go``, ``types.go``).
MPI_RESTART_POLICIES: Final = ("Never", "OnFailure")
MPI_IMPLEMENTATIONS: Final = ("OpenMPI", "Intel", "MPICH")
LAUNCHER_CREATION_POLICIES: Final = ("AtStartup", "WaitForWorkersReady")
