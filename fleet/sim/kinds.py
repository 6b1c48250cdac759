"""The job kinds a simulated member serves, and how each kind's operator speaks and decides.

Every kind Fleet propagates is served as its CRD describes it (the workload adapters own those
descriptions; only names, columns and shape are shared, never Fleet's placement rules). The
simulated operator (:mod:`fleet.sim.operator`) runs every replica-spec kind through the Kubeflow
job controller's lifecycle (pods, gang, Created, Running, Restarting, Succeeded, Failed), which
the ascend-operator copies. What differs per kind:

* where the replica specs sit, the labels it puts on pods, its component name, its condition
  reasons (``JobCreated`` for the ascend-operator; ``<Kind>Created`` for Kubeflow's operators,
  ``commonutil.NewReason``, and the MPI operator's ``mpiJobCreatedReason`` ...);
* whether it says on the job that the gang waits (the ascend-operator's ``PodGroupPending``):
  Kubeflow's operators never do, only the pods' ``PodScheduled`` condition says it;
* which pod decides the job and what a failure does (:class:`Rules`): the ascend-operator and
  the PyTorchJob controller end every pod and restart the whole job; the TFJob controller's chief
  (else worker 0) decides, a parameter server serves on until cleaned up, a failed pod is
  restarted or fails the job by its replica's restart policy and exit code; the MPI operator's
  launcher (a batch Job) decides, retried up to its backoff limit, while the workers serve on.

Sources: MindCluster ascend-operator; kubeflow/training-operator v1.9.0
(``pkg/controller.v1/common/{job,pod}.go``, ``pkg/core/job.go``, ``tensorflow/tfjob_controller.go``,
``pytorch/pytorchjob_controller.go``); kubeflow/mpi-operator (``pkg/controller/mpi_job_controller.go``,
``mpi_job_controller_status.go``, ``pkg/apis/kubeflow/v2beta1/default.go``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from fleet import kubeflow
from fleet.apiserver import COMPANION_KINDS, EVENT, NAMESPACE, NODE, POD, Registry, ResourceType, with_reviews
from fleet.ascend import JOB_NAME_LABEL, REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL, Reason
from fleet.workloads import ASCENDJOB, KINDS, MPIJOB, PYTORCHJOB, RUNTIME_KINDS, TFJOB

__all__ = [
    "SERVED",
    "SIM_KINDS",
    "Rules",
    "SimKind",
    "member_registry",
    "sim_kind",
]

#: The job kinds' resources, served by every simulated member.
SERVED: Final[tuple[ResourceType, ...]] = (
    *(adapter.resource for adapter in KINDS),
    *RUNTIME_KINDS,  # Kubeflow Trainer's runtimes, which its TrainJobs name
)

_KUBEFLOW_LABELS: Final = (kubeflow.JOB_NAME_LABEL, kubeflow.REPLICA_TYPE_LABEL, kubeflow.REPLICA_INDEX_LABEL)
#: The MPI operator labels pods by role (``launcher``, ``worker``), not by replica type.
_MPI_LABELS: Final = (kubeflow.JOB_NAME_LABEL, kubeflow.JOB_ROLE_LABEL, kubeflow.REPLICA_INDEX_LABEL)
#: The ascend-operator's reasons -> the suffix Kubeflow's operators write after the kind.
_KUBEFLOW_REASONS: Final = {
    Reason.JOB_CREATED: "Created",
    Reason.JOB_RUNNING: "Running",
    Reason.JOB_SUCCEEDED: "Succeeded",
    Reason.JOB_FAILED: "Failed",
    Reason.JOB_RESTARTING: "Restarting",
    Reason.JOB_VALID_FAILED: "FailedValidation",
}


class Rules(enum.Enum):
    """Which controller's success and failure rules a kind follows (see the module doc)."""

    #: Every pod ends together; a failure restarts the whole job (ascend-operator, PyTorchJob).
    JOB = "job"
    #: The TFJob controller: chief (else worker 0 / every worker) decides, PS serve on.
    TENSORFLOW = "tensorflow"
    #: The MPI operator: the launcher decides, retried as a batch Job; workers serve on.
    MPI = "mpi"


@dataclass(frozen=True)
class SimKind:
    """How one kind's simulated operator names things and decides."""

    resource: ResourceType
    specs_field: str
    leaders: tuple[str, ...]
    component: str
    #: Pod label keys: job name, replica type or role (lower case), replica index.
    labels: tuple[str, str, str]
    kubeflow: bool
    #: Whether the operator writes ``PodGroupPending`` on the job while its gang waits.
    pending_on_job: bool = False
    rules: Rules = Rules.JOB

    def reason(self, reason: str) -> str:
        """The kind's spelling of an ascend-operator reason (``JobCreated`` -> ``PyTorchJobCreated``)."""
        if not self.kubeflow or reason not in _KUBEFLOW_REASONS:
            return reason
        return f"{self.resource.kind}{_KUBEFLOW_REASONS[reason]}"

    def specs(self, job: Mapping[str, Any]) -> Mapping[str, Any]:
        """Replica type -> its spec. A map as AscendJob and Kubeflow write it, or a list of specs
        each naming its ``type`` (T9k's shape), read into the same map; anything else: empty."""
        specs = (job.get("spec") or {}).get(self.specs_field)
        if isinstance(specs, list):
            return {
                str(s["type"]): s for s in specs if isinstance(s, Mapping) and isinstance(s.get("type"), str)
            }
        return specs if isinstance(specs, Mapping) else {}


SIM_KINDS: Final = (
    SimKind(
        ASCENDJOB,
        "replicaSpecs",
        ("Master", "Chief", "Scheduler"),
        "ascend-operator",
        (JOB_NAME_LABEL, REPLICA_TYPE_LABEL, REPLICA_INDEX_LABEL),
        kubeflow=False,
        pending_on_job=True,
    ),
    SimKind(PYTORCHJOB, "pytorchReplicaSpecs", ("Master",), "pytorchjob-controller", _KUBEFLOW_LABELS, True),
    SimKind(
        TFJOB,
        "tfReplicaSpecs",
        ("Chief", "Master", "PS"),
        "tfjob-controller",
        _KUBEFLOW_LABELS,
        True,
        rules=Rules.TENSORFLOW,
    ),
    SimKind(MPIJOB, "mpiReplicaSpecs", ("Launcher",), "mpi-operator", _MPI_LABELS, True, rules=Rules.MPI),
)
_BY_TYPE: Final = {(k.resource.api_version, k.resource.kind): k for k in SIM_KINDS}


def sim_kind(job: Mapping[str, Any]) -> SimKind:
    """The kind of ``job`` (AscendJob's when it names none the simulator runs)."""
    return _BY_TYPE.get((str(job.get("apiVersion")), str(job.get("kind"))), SIM_KINDS[0])


def member_registry(jobs: Sequence[ResourceType] = SERVED) -> Registry:
    """Every kind a simulated member cluster serves: the core kinds, the companion kinds a job
    references (ConfigMap, Secret, Service), the job kinds (custom resources, as their CRDs
    describe them: the workload adapters own those descriptions), and the self reviews
    (``kubectl auth can-i`` and ``whoami``, which a member without authorization answers yes to
    everything)."""
    return Registry(with_reviews([NAMESPACE, NODE, POD, EVENT, *COMPANION_KINDS, *jobs]))
