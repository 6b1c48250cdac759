"""Kubeflow's MPIJob at ``kubeflow.org/v1`` (the training operator 1.x form), served beside
``v2beta1`` as one kind with two versions, as kube-apiserver serves a CRD listing several
``versions``.

Sources: kubeflow/training-operator v1.9.0 ``pkg/apis/kubeflow.org/v1/mpi_types.go``
(``MPIJobSpec``: ``slotsPerWorker``, ``cleanPodPolicy`` (deprecated for ``runPolicy``),
``runPolicy``, ``mpiReplicaSpecs``, ``mainContainer``) and kubeflow/mpi-operator
``pkg/apis/kubeflow/v2beta1/types.go``; the Kubernetes documentation "Versions in
CustomResourceDefinitions" (a CRD with several served versions, one storage version, and the
``None`` conversion strategy, which changes ``apiVersion`` only).

The fleet stores every MPIJob at ``v2beta1`` (the storage version) and runs it in the members as
the MPI operator v2 does (:class:`fleet.workloads.kubeflow_jobs.MPIJobAdapter`): an MPIJob sent at
``v1`` is converted on the way in (:func:`to_v2beta1`), one read at ``v1`` is the stored object
with ``apiVersion: kubeflow.org/v1`` (the two versions spell the rest alike). What ``v1`` spells
differently: ``spec.cleanPodPolicy`` becomes ``spec.runPolicy.cleanPodPolicy`` (unless that is
set, which wins, as the v1 operator reads it); ``spec.mainContainer`` (the container the v1
operator reads as the MPI one) has no ``v2beta1`` field and is dropped: the MPI operator v2 takes
a launcher's first container. The launcher runs as the v2 operator runs it (a batch Job), which
the v1 operator ran as a plain pod: the job succeeds and fails alike.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from fleet.apiserver import Obj
from fleet.workloads.kubeflow_jobs import MPIJOB

__all__ = ["MPIJOB_V1", "to_v2beta1"]


def to_v2beta1(obj: Obj) -> None:
    """``obj`` (an MPIJob sent at ``v1``, its ``apiVersion`` already the storage one) in the
    fields of ``v2beta1``: ``spec.cleanPodPolicy`` moved into ``runPolicy``, ``mainContainer``
    dropped."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.pop("mainContainer", None)
    if "cleanPodPolicy" not in spec:
        return
    policy = spec.pop("cleanPodPolicy")
    run = spec.get("runPolicy")
    if run is None:
        spec["runPolicy"] = run = {}
    if isinstance(run, dict) and run.get("cleanPodPolicy") is None and policy is not None:
        run["cleanPodPolicy"] = policy


#: MPIJob as served at ``kubeflow.org/v1``: stored at ``v2beta1``.
MPIJOB_V1: Final = replace(MPIJOB, version="v1", storage_version=MPIJOB.version, to_storage=to_v2beta1)
