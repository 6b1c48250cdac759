"""The T9k job vocabulary (TensorFlowTrainingJob, MPIJob of ``batch.tensorstack.dev/v1beta1``).

T9k's own names, in one home below every layer that speaks them: Fleet's T9k adapters
(:mod:`fleet.workloads.t9k_jobs`, which also hold the kinds as a member serves them) and the member
simulator's T9k controller (:mod:`fleet.sim.t9k_controller`), beside the other upstream vocabularies
(:mod:`fleet.ascend`, :mod:`fleet.kubeflow`). Names and pure rules on plain JSON only: nothing
here imports the rest of Fleet. They come from the T9k documents in
``shared/seeds`` (``t9k-tensorflowtrainingjob.zh.txt``, ``t9k-mpijob.zh.txt``) and T9k's API
reference (``t9k/user-docs``: ``docs/reference/api/build-console/jobs/{tensorflowtrainingjob,
mpijob}.md``): replica types, restart and clean-up policies, the exit codes ``ExitCode`` retries,
run modes, condition types and phases. The MPIJob's current shape (``spec.mpiConfig`` and a
``spec.replicaSpecs`` list of ``worker`` and ``launcher``) comes from T9k's tutorial repository,
``t9k/tutorial-examples`` ``job/mpijob/horovod-torch/job.yaml``, ``job_gpu.yaml`` and
``horovod-keras/job.yaml``, ``job_gpu.yaml``, ``job_gpu_t9ksched.yaml`` (switched to it in commit
3557344, August 2025; ``horovod-torch/job_gpu_t9ksched.yaml`` kept the older shape).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "CHIEF",
    "CLEAN_UP_POLICIES",
    "DEADLINE_EXCEEDED",
    "INVALID_SPEC",
    "LAUNCHER",
    "MPI_REPLICA_SPECS_SHAPE_FIELDS",
    "MPI_REPLICA_TYPES",
    "MPI_WORKER_CONTAINER",
    "MPI_WORKER_SHAPE_FIELDS",
    "REPLICA_INDEX_LABEL",
    "REPLICA_SPECS_WORKER_CONTAINER",
    "REPLICA_TYPE_LABEL",
    "RESTART_POLICIES",
    "RETRIABLE_EXIT_CODES",
    "T9K_GROUP",
    "T9K_JOB_NAME_LABEL",
    "T9K_MPIJOB_KIND",
    "T9K_MPIJOB_PLURAL",
    "T9K_TFJOB_KIND",
    "T9K_TFJOB_PLURAL",
    "T9K_VERSION",
    "TF_REPLICA_TYPES",
    "USER_FAILURE_REASONS",
    "WORKER",
    "T9kCondition",
    "T9kPhase",
    "clean_up_policy",
    "launcher_template",
    "mode_enabled",
    "retriable_exit",
]

T9K_GROUP: Final = "batch.tensorstack.dev"
T9K_VERSION: Final = "v1beta1"
T9K_TFJOB_KIND: Final = "TensorFlowTrainingJob"
T9K_TFJOB_PLURAL: Final = "tensorflowtrainingjobs"
#: T9k's MPIJob: the same kind name as Kubeflow's (``kubeflow.org``); the group tells them apart.
T9K_MPIJOB_KIND: Final = "MPIJob"
T9K_MPIJOB_PLURAL: Final = "mpijobs"

#: ``spec.replicaSpecs[*].type`` of a TensorFlowTrainingJob, lower case as T9k writes them. The
#: chief leads; without one, worker 0 does (the success rule).
TF_REPLICA_TYPES: Final = ("chief", "worker", "ps", "evaluator")
CHIEF: Final = "chief"
WORKER: Final = "worker"
#: The MPIJob's launcher replica (``mpirun``): made by the controller in the older shape, listed
#: (``type: launcher``, mostly with an empty template) in the current one.
LAUNCHER: Final = "launcher"
#: The container of an MPIJob worker that runs the MPI processes (the seed: it must exist).
MPI_WORKER_CONTAINER: Final = "mpi-worker"

# An MPIJob is written in one of two shapes. The older (the seed, T9k's API reference, and
# ``t9k/examples`` mlperf/ and nccl-tests/): ``spec.worker`` (replicas, cmd, extraMPIArgs, a
# template with a container named ``mpi-worker``) beside ``spec.mca`` and ``spec.mpiHome``; the
# launcher is the controller's. The current (``t9k/tutorial-examples``
# ``job/mpijob/horovod-torch/job.yaml``, ``job_gpu.yaml``; ``horovod-keras/job.yaml``,
# ``job_gpu.yaml``, ``job_gpu_t9ksched.yaml``): ``spec.mpiConfig`` (mca, home, extraArgs, script) and a
# ``spec.replicaSpecs`` list with a ``type`` each, whose worker template names its MPI container
# ``worker``, as the ColossalAIJob beside it in the same repository does.
#: The fields of ``spec`` only the older shape writes.
MPI_WORKER_SHAPE_FIELDS: Final = ("worker", "mca", "mpiHome")
#: The fields of ``spec`` only the current shape writes.
MPI_REPLICA_SPECS_SHAPE_FIELDS: Final = ("replicaSpecs", "mpiConfig")
#: ``spec.replicaSpecs[*].type`` of an MPIJob in the current shape: the workers (the MPI
#: processes) and the one launcher (``mpirun``), each listed once.
MPI_REPLICA_TYPES: Final = ("worker", "launcher")
#: The container of a worker that runs the MPI processes, in the current shape.
REPLICA_SPECS_WORKER_CONTAINER: Final = "worker"

#: ``spec.replicaSpecs[*].restartPolicy``; T9k's default is ``Never``.
RESTART_POLICIES: Final = ("Never", "OnFailure", "Always", "ExitCode")
#: Exit codes ``ExitCode`` restarts: the environment's or the user's doing, cured by a restart
#: (130 Control+C, 137 SIGKILL, 143 SIGTERM, and 138, which a script may exit with to ask for
#: one). Any other code is the code's own fault and ends the replica.
RETRIABLE_EXIT_CODES: Final = frozenset({130, 137, 138, 143})
#: Clean-up policies (``runPolicy.cleanUpPolicy``; MPIJob: ``runPolicy.cleanUpWorkers``). The
#: seed writes ``None``/``All``/``Unfinished``, the API reference ``none``/``all``/``unfinished``:
#: both are read, in any case.
CLEAN_UP_POLICIES: Final = ("none", "all", "unfinished")

#: Reasons of a ``Failed`` condition that no other member would cure: the job ran past its
#: ``activeDeadlineSeconds``, or its spec cannot run (Fleet's simulated controller's words).
DEADLINE_EXCEEDED: Final = "DeadlineExceeded"
INVALID_SPEC: Final = "InvalidSpec"
USER_FAILURE_REASONS: Final = frozenset({DEADLINE_EXCEEDED, INVALID_SPEC})

# Labels the simulated T9k controller puts on the pods it makes (Fleet's own choice of names:
# T9k's documents do not list its pod labels).
T9K_JOB_NAME_LABEL: Final = "batch.tensorstack.dev/job-name"
REPLICA_TYPE_LABEL: Final = "batch.tensorstack.dev/replica-type"
REPLICA_INDEX_LABEL: Final = "batch.tensorstack.dev/replica-index"


class T9kPhase:
    """``status.phase`` of a T9k job."""

    PENDING: Final = "Pending"
    RUNNING: Final = "Running"
    PAUSED: Final = "Paused"
    RESUMING: Final = "Resuming"
    SUCCEEDED: Final = "Succeeded"
    FAILED: Final = "Failed"
    UNKNOWN: Final = "Unknown"


class T9kCondition:
    """``status.conditions[*].type`` of a T9k job (each kept once, ``True`` or ``False``)."""

    INITIALIZED: Final = "Initialized"
    RUNNING: Final = "Running"
    REPLICA_FAILURE: Final = "ReplicaFailure"
    COMPLETED: Final = "Completed"
    FAILED: Final = "Failed"
    PAUSED: Final = "Paused"


def retriable_exit(code: int) -> bool:
    """Whether ``ExitCode`` restarts a replica that exited with ``code``."""
    return code in RETRIABLE_EXIT_CODES


def mode_enabled(obj: Mapping[str, Any], mode: str) -> bool:
    """Whether ``spec.runMode.<mode>`` (``debug`` or ``pause``) is on. The seed writes
    ``enabled``, T9k's API reference ``enable``: either turns it on."""
    spec = obj.get("spec")
    run_mode = spec.get("runMode") if isinstance(spec, Mapping) else None
    settings = run_mode.get(mode) if isinstance(run_mode, Mapping) else None
    if not isinstance(settings, Mapping):
        return False
    return settings.get("enabled") is True or settings.get("enable") is True


def clean_up_policy(obj: Mapping[str, Any]) -> str:
    """The job's clean-up policy, lower case: TensorFlowTrainingJob ``runPolicy.cleanUpPolicy``
    (default ``none``); MPIJob ``runPolicy.cleanUpWorkers`` (a policy name, or ``true`` as the
    seed's sample writes it, read as ``all``; default ``none``)."""
    spec = obj.get("spec")
    run = spec.get("runPolicy") if isinstance(spec, Mapping) else None
    if not isinstance(run, Mapping):
        return "none"
    value = run.get("cleanUpPolicy", run.get("cleanUpWorkers"))
    if value is True:
        return "all"
    if isinstance(value, str) and value.lower() in CLEAN_UP_POLICIES:
        return value.lower()
    return "none"


def launcher_template(worker_template: Mapping[str, Any]) -> dict[str, Any]:
    """The pod template of an MPIJob's launcher: it runs ``mpirun`` and no MPI process, so it
    requests nothing; it goes where the workers may go (their node selector, affinity and
    tolerations, and node affinity: not their pod anti-affinity), with the worker's image."""
    spec = worker_template.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    containers = spec.get("containers")
    first = containers[0] if isinstance(containers, list) and containers else {}
    image = first.get("image") if isinstance(first, Mapping) else None
    container: dict[str, Any] = {"name": LAUNCHER}
    if isinstance(image, str):
        container["image"] = image
    out: dict[str, Any] = {"containers": [container]}
    for key in ("nodeSelector", "tolerations"):
        if spec.get(key) is not None:
            out[key] = spec[key]
    affinity = spec.get("affinity")
    if isinstance(affinity, Mapping) and affinity.get("nodeAffinity") is not None:
        out["affinity"] = {"nodeAffinity": affinity["nodeAffinity"]}
    meta = worker_template.get("metadata")
    return {"metadata": dict(meta) if isinstance(meta, Mapping) else {}, "spec": out}
