"""The job kinds a simulated member serves, and how each kind's operator speaks.

Every kind Fleet propagates is served as its CRD describes it (the workload adapters own those
descriptions; only names, columns and shape are shared, never Fleet's placement rules). The
simulated operator (:mod:`fleet.sim.operator`) runs every replica-spec kind by one state machine,
the Kubeflow job controller's, which the ascend-operator copies: what differs per kind is where
the replica specs sit, the labels it puts on pods, its component name and its condition reasons
(``JobCreated`` for the ascend-operator; ``<Kind>Created`` for Kubeflow's operators,
``commonutil.NewReason``). Sources: MindCluster ascend-operator, kubeflow/training-operator,
kubeflow/mpi-operator.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from fleet.apiserver.resources import ResourceType
from fleet.ascend import JOB_NAME_LABEL, REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL, Reason
from fleet.workloads import KINDS
from fleet.workloads.ascendjob import ASCENDJOB
from fleet.workloads.kubeflow import MPIJOB, PYTORCHJOB, TFJOB

__all__ = ["SERVED", "SIM_KINDS", "SimKind", "sim_kind"]

#: The job kinds' resources, served by every simulated member.
SERVED: Final[tuple[ResourceType, ...]] = tuple(adapter.resource for adapter in KINDS)

_KUBEFLOW_LABELS: Final = (
    "training.kubeflow.org/job-name",
    "training.kubeflow.org/replica-type",
    "training.kubeflow.org/replica-index",
)
#: The ascend-operator's reasons -> the suffix Kubeflow's operators write after the kind.
_KUBEFLOW_REASONS: Final = {
    Reason.JOB_CREATED: "Created",
    Reason.JOB_RUNNING: "Running",
    Reason.JOB_SUCCEEDED: "Succeeded",
    Reason.JOB_FAILED: "Failed",
    Reason.JOB_RESTARTING: "Restarting",
    Reason.JOB_VALID_FAILED: "FailedValidation",
}


@dataclass(frozen=True)
class SimKind:
    """How one kind's simulated operator names things."""

    resource: ResourceType
    specs_field: str
    leaders: tuple[str, ...]
    component: str
    #: Pod label keys: job name, replica type (lower case), replica index.
    labels: tuple[str, str, str]
    kubeflow: bool

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
    ),
    SimKind(PYTORCHJOB, "pytorchReplicaSpecs", ("Master",), "pytorchjob-controller", _KUBEFLOW_LABELS, True),
    SimKind(TFJOB, "tfReplicaSpecs", ("Chief", "Master", "PS"), "tfjob-controller", _KUBEFLOW_LABELS, True),
    SimKind(MPIJOB, "mpiReplicaSpecs", ("Launcher",), "mpi-operator", _KUBEFLOW_LABELS, True),
)
_BY_TYPE: Final = {(k.resource.api_version, k.resource.kind): k for k in SIM_KINDS}


def sim_kind(job: Mapping[str, Any]) -> SimKind:
    """The kind of ``job`` (AscendJob's when it names none the simulator runs)."""
    return _BY_TYPE.get((str(job.get("apiVersion")), str(job.get("kind"))), SIM_KINDS[0])
