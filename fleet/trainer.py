"""The Kubeflow Trainer v2 vocabulary (``trainer.kubeflow.org/v1alpha1``): TrainJob and its
runtimes.

One home below every layer that speaks them: Fleet's TrainJob adapter
(:mod:`fleet.workloads.trainjob`) and the member simulator's Trainer controller
(:mod:`fleet.sim.trainer_controller`). Names only. Source: kubeflow/trainer
``pkg/apis/trainer/v1alpha1`` (``trainjob_types.go``: ``TrainJobComplete``, ``TrainJobFailed``,
``TrainJobSuspended``, the reasons; ``trainingruntime_types.go``) and ``pkg/constants``
(``LabelTrainJobAncestor``, ``AncestorTrainer``, ``Node``).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ANCESTOR_LABEL",
    "ANCESTOR_TRAINER",
    "CLUSTER_RUNTIME_KIND",
    "COMPLETE",
    "FAILED",
    "NODE",
    "RUNTIME_ANNOTATION",
    "RUNTIME_KIND",
    "RUNTIME_NOT_SUPPORTED",
    "SUSPENDED",
    "TRAINER_GROUP",
    "TRAINER_VERSION",
    "TRAINJOB_KIND",
]

TRAINER_GROUP: Final = "trainer.kubeflow.org"
TRAINER_VERSION: Final = "v1alpha1"
TRAINJOB_KIND: Final = "TrainJob"
RUNTIME_KIND: Final = "TrainingRuntime"
CLUSTER_RUNTIME_KIND: Final = "ClusterTrainingRuntime"

#: The label on a runtime's replicated job template naming what of the TrainJob it runs
#: (``trainer``: ``spec.trainer``; ``dataset-initializer``, ``model-initializer``).
ANCESTOR_LABEL: Final = "trainer.kubeflow.org/trainjob-ancestor-step"
ANCESTOR_TRAINER: Final = "trainer"
#: The trainer's container (and, by convention, its replicated job): ``constants.Node``.
NODE: Final = "node"

#: TrainJob's condition types.
COMPLETE: Final = "Complete"
FAILED: Final = "Failed"
SUSPENDED: Final = "Suspended"
#: The ``Failed`` reason for a runtime the controller cannot use.
RUNTIME_NOT_SUPPORTED: Final = "TrainingRuntimeNotSupported"

#: Fleet's annotation on a TrainJob: the runtime it referred to when it was submitted
#: (``{"kind", "name", "spec"}`` as JSON), what its demand and member copy are made from.
RUNTIME_ANNOTATION: Final = "trainer.fleet.io/runtime"
