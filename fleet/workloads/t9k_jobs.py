"""The T9k adapters: TensorFlowTrainingJob and MPIJob (``batch.tensorstack.dev/v1beta1``).

As the T9k seeds (``t9k-tensorflowtrainingjob.zh.txt``, ``t9k-mpijob.zh.txt``) and T9k's API
reference (``t9k/user-docs``, ``docs/reference/api/build-console/jobs/``) describe them:

* a TensorFlowTrainingJob lists its replicas in ``spec.replicaSpecs`` (``type``: chief, worker,
  ps or evaluator, each once; ``replicas``, default 1; ``restartPolicy``: Never (default),
  OnFailure, Always or ExitCode; a pod ``template``); the chief, else worker 0, decides success;
* an MPIJob is written in one of two shapes, never both (:meth:`MPIJobAdapter._check`):

  - the older: one ``spec.worker`` (``replicas``, ``cmd``, ``extraMPIArgs``, a template with a
    container named ``mpi-worker``; T9k's later documents, ``t9k/user-manuals``
    ``src/modules/workflows/workflowtemplate.md``, write the processes a worker runs as
    ``processesPerWorker`` and in-place process restarts as ``processRecovery: {enable, limit}``
    instead of ``extraMPIArgs`` ``-N`` and ``--enable-recovery --max-restarts``: both are
    accepted and passed to the member as written), plus ``mca``, ``ssh``, ``mpiHome``; its
    controller adds one launcher pod that runs ``mpirun`` (it requests nothing:
    :func:`fleet.t9k.launcher_template`);
  - the current, as T9k's tutorial repository writes every MPIJob since August 2025
    (``t9k/tutorial-examples`` ``job/mpijob/horovod-torch/job.yaml``, ``job_gpu.yaml``;
    ``horovod-keras/job.yaml``, ``job_gpu.yaml``, ``job_gpu_t9ksched.yaml``; commit 3557344):
    ``spec.mpiConfig`` (``mca``, ``home``, ``extraArgs``, ``script``: what ``mpirun`` runs,
    required) and a ``spec.replicaSpecs`` list of ``type: worker`` (required; ``replicas``, a
    template with a container named ``worker``) and ``type: launcher`` (one replica; its
    ``template: {}`` there leaves the launcher to the controller, as in the older shape: it
    requests nothing; a launcher template with a pod spec of its own is counted as written);
* ``spec.runPolicy``: ``backoffLimit`` (restarts shared by all replicas), ``activeDeadlineSeconds``
  and the clean-up policy; ``spec.scheduler.t9kScheduler``: ``queue`` (required) and ``priority``
  (0 to 100); ``spec.runMode``: ``debug`` and ``pause``.

What Fleet makes of them: the priority is the job's own raw value (Fleet's priority, as a
PodGroup's); the queue names the quota leaf the job is charged to, as the quota label does
(:func:`fleet.jobs.submit.quota_labels`: T9k's ``default`` queue leaves that to the namespace); a job
in pause mode holds no quota and no member capacity (:meth:`T9kAdapter.paused`). The member's
``status.phase``, ``conditions``, ``tasks`` and ``aggregate`` are mirrored; the fleet's state is
the phase in Fleet's words (:meth:`T9kAdapter.map_status`), and a failure is the user's (not
retried elsewhere) unless the main replica was killed by its environment
(:data:`fleet.t9k.RETRIABLE_EXIT_CODES`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Annotated, Any, Final

from pydantic import Field, StrictBool, StrictInt, StrictStr, ValidationError

from fleet.apiserver import (
    DNS1035_LABEL_MAX_LENGTH,
    PrinterColumn,
    ResourceType,
    clone,
    dns1035_label,
    validate_pod_template,
)
from fleet.ascend import Condition
from fleet.placement import Demand, DemandError, ReplicaTemplate, build_demand
from fleet.t9k import (
    CHIEF,
    CLEAN_UP_POLICIES,
    LAUNCHER,
    MPI_REPLICA_SPECS_SHAPE_FIELDS,
    MPI_REPLICA_TYPES,
    MPI_WORKER_CONTAINER,
    MPI_WORKER_SHAPE_FIELDS,
    REPLICA_SPECS_WORKER_CONTAINER,
    REPLICA_TYPE_LABEL,
    RESTART_POLICIES,
    T9K_GROUP,
    T9K_JOB_NAME_LABEL,
    T9K_MPIJOB_KIND,
    T9K_MPIJOB_PLURAL,
    T9K_TFJOB_KIND,
    T9K_TFJOB_PLURAL,
    T9K_VERSION,
    TF_REPLICA_TYPES,
    USER_FAILURE_REASONS,
    WORKER,
    T9kCondition,
    T9kPhase,
    launcher_template,
    mode_enabled,
    retriable_exit,
)
from fleet.workloads.base import (
    DEFAULT_QUEUE,
    MIRRORED_FIELDS,
    FieldError,
    InvalidWorkload,
    Outcome,
    PriorityRequest,
    WorkloadStatus,
)
from fleet.workloads.models import Int32, Int64, Open, pydantic_errors
from fleet.workloads.replicas import ReplicaSpecAdapter

__all__ = [
    "DEFAULT_QUEUE",
    "MAX_PRIORITY",
    "PAUSE_FIELD",
    "PRIORITY_FIELD",
    "QUEUE_FIELD",
    "T9K_MPIJOB",
    "T9K_TFJOB",
    "MPIJobAdapter",
    "T9kAdapter",
    "TensorFlowTrainingJobAdapter",
    "t9k_mpijob",
    "t9k_tfjob",
]

PRIORITY_FIELD: Final = "spec.scheduler.t9kScheduler.priority"
PAUSE_FIELD: Final = "spec.runMode.pause.enabled"
QUEUE_FIELD: Final = "spec.scheduler.t9kScheduler.queue"
#: ``t9kScheduler.priority`` lies in 0..100 (T9k's API reference).
MAX_PRIORITY: Final = 100

_COLUMNS: Final = (
    PrinterColumn(
        "Name", "string", ".metadata.name", "Name must be unique within a namespace.", format="name"
    ),
    PrinterColumn("Phase", "string", ".status.phase", "The phase of the job (Pending, Running, ...)."),
    PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since the job was created."),
)

#: The kinds as a member serves them (custom resources of T9k's CRDs: no short names).
T9K_TFJOB: Final = ResourceType(
    group=T9K_GROUP,
    version=T9K_VERSION,
    kind=T9K_TFJOB_KIND,
    plural=T9K_TFJOB_PLURAL,
    singular=T9K_TFJOB_KIND.lower(),
    namespaced=True,
    printer_columns=_COLUMNS,
    has_status=True,
    categories=("all",),
    description="A distributed TensorFlow training job, run by T9k's job controller.",
)
T9K_MPIJOB: Final = ResourceType(
    group=T9K_GROUP,
    version=T9K_VERSION,
    kind=T9K_MPIJOB_KIND,
    plural=T9K_MPIJOB_PLURAL,
    singular=T9K_MPIJOB_KIND.lower(),
    namespaced=True,
    printer_columns=_COLUMNS,
    has_status=True,
    categories=("all",),
    description="A distributed OpenMPI job, run by T9k's job controller.",
)

#: How the fleet's state reads a T9k phase (Fleet's states are AscendJob's conditions; a
#: paused job is ``Paused``, a phase Fleet does not otherwise know).
_STATE_OF_PHASE: Final = {
    T9kPhase.PENDING: Condition.CREATED,
    T9kPhase.RESUMING: Condition.CREATED,
    T9kPhase.RUNNING: Condition.RUNNING,
    T9kPhase.PAUSED: T9kPhase.PAUSED,
    T9kPhase.SUCCEEDED: Condition.SUCCEEDED,
    T9kPhase.FAILED: Condition.FAILED,
    T9kPhase.UNKNOWN: T9kPhase.UNKNOWN,
}

_Open = Open


class _Metadata(_Open):
    name: StrictStr = Field(min_length=1)
    namespace: StrictStr = "default"
    labels: dict[str, StrictStr] = Field(default_factory=dict)
    annotations: dict[str, StrictStr] = Field(default_factory=dict)


class _Template(_Open):
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: dict[str, Any]


class _T9kScheduler(_Open):
    queue: StrictStr = Field(min_length=1)
    priority: Annotated[StrictInt, Field(ge=0, le=MAX_PRIORITY)] = 0


class _Scheduler(_Open):
    t9k_scheduler: _T9kScheduler | None = Field(default=None, alias="t9kScheduler")


class _ReplicaMode(_Open):
    type: StrictStr
    skip_init_container: StrictBool | None = Field(default=None, alias="skipInitContainer")
    command: list[StrictStr] | None = None
    args: list[StrictStr] | None = None


class _Debug(_Open):
    enabled: StrictBool | None = None
    enable: StrictBool | None = None
    replica_specs: list[_ReplicaMode] = Field(default_factory=list, alias="replicaSpecs")


class _Pause(_Open):
    enabled: StrictBool | None = None
    enable: StrictBool | None = None
    resume_specs: list[_ReplicaMode] = Field(default_factory=list, alias="resumeSpecs")


class _RunMode(_Open):
    debug: _Debug | None = None
    pause: _Pause | None = None


class _TfReplica(_Open):
    type: StrictStr
    replicas: Int32 = 1
    restart_policy: StrictStr = Field(default="Never", alias="restartPolicy")
    template: _Template


class _TfRunPolicy(_Open):
    backoff_limit: Int32 | None = Field(default=None, alias="backoffLimit")
    active_deadline_seconds: Int64 | None = Field(default=None, alias="activeDeadlineSeconds")
    clean_up_policy: StrictStr | None = Field(default=None, alias="cleanUpPolicy")


class _TfSpec(_Open):
    replica_specs: list[_TfReplica] = Field(alias="replicaSpecs")
    run_policy: _TfRunPolicy | None = Field(default=None, alias="runPolicy")
    scheduler: _Scheduler | None = None
    run_mode: _RunMode | None = Field(default=None, alias="runMode")


class _TfJob(_Open):
    metadata: _Metadata
    spec: _TfSpec


class _ProcessRecovery(_Open):
    enable: StrictBool | None = None
    limit: Int32 | None = None


class _MpiWorker(_Open):
    replicas: Int32 = 1
    extra_mpi_args: list[StrictStr] = Field(default_factory=list, alias="extraMPIArgs")
    #: The later docs' spelling of ``-N <n>`` and ``--enable-recovery --max-restarts <n>``.
    processes_per_worker: Int32 | None = Field(default=None, alias="processesPerWorker")
    process_recovery: _ProcessRecovery | None = Field(default=None, alias="processRecovery")
    cmd: list[StrictStr] = Field(min_length=1)
    template: _Template


class _Ssh(_Open):
    ssh_auth_mount_path: StrictStr | None = Field(default=None, alias="sshAuthMountPath")
    sshd_path: StrictStr | None = Field(default=None, alias="sshdPath")


class _MpiRunPolicy(_Open):
    backoff_limit: Int32 | None = Field(default=None, alias="backoffLimit")
    active_deadline_seconds: Int64 | None = Field(default=None, alias="activeDeadlineSeconds")
    #: A policy name, or ``true`` as the seed's sample writes it.
    clean_up_workers: StrictBool | StrictStr | None = Field(default=None, alias="cleanUpWorkers")


class _MpiCommon(_Open):
    """What both MPIJob shapes write alike."""

    ssh: _Ssh | None = None
    run_policy: _MpiRunPolicy | None = Field(default=None, alias="runPolicy")
    scheduler: _Scheduler | None = None
    run_mode: _RunMode | None = Field(default=None, alias="runMode")


class _MpiSpec(_MpiCommon):
    worker: _MpiWorker
    mca: dict[str, StrictStr] = Field(default_factory=dict)
    mpi_home: StrictStr | None = Field(default=None, alias="mpiHome")


class _MpiJob(_Open):
    metadata: _Metadata
    spec: _MpiSpec


class _MpiConfig(_Open):
    """``spec.mpiConfig`` of the current shape: what the older one wrote as ``spec.mca``,
    ``spec.mpiHome``, ``worker.extraMPIArgs`` and ``worker.cmd``."""

    mca: dict[str, StrictStr] = Field(default_factory=dict)
    home: StrictStr | None = None
    extra_args: list[StrictStr] = Field(default_factory=list, alias="extraArgs")
    script: list[StrictStr] = Field(min_length=1)


class _MpiReplica(_Open):
    type: StrictStr
    replicas: Int32 = 1
    #: The launcher's is ``{}`` in T9k's tutorials (the controller makes its pod).
    template: dict[str, Any] = Field(default_factory=dict)


class _MpiReplicaSpecsSpec(_MpiCommon):
    replica_specs: list[_MpiReplica] = Field(alias="replicaSpecs")
    mpi_config: _MpiConfig = Field(alias="mpiConfig")


class _MpiReplicaSpecsJob(_Open):
    metadata: _Metadata
    spec: _MpiReplicaSpecsSpec


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _t9k_scheduler(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    scheduler = _spec(obj).get("scheduler")
    t9k = scheduler.get("t9kScheduler") if isinstance(scheduler, Mapping) else None
    return t9k if isinstance(t9k, Mapping) else {}


def _common_errors(
    meta: _Metadata, run: _TfRunPolicy | _MpiRunPolicy | None, run_mode: _RunMode | None, types: Sequence[str]
) -> list[FieldError]:
    """The rules both kinds share: name, run policy, run modes."""
    errors: list[FieldError] = []
    if why := dns1035_label(meta.name):
        errors.append(FieldError("metadata.name", f'Invalid value: "{meta.name}": {why}'))
    if run is not None:
        if run.backoff_limit is not None and run.backoff_limit < 0:
            errors.append(FieldError("spec.runPolicy.backoffLimit", "must not be negative"))
        if run.active_deadline_seconds is not None and run.active_deadline_seconds < 1:
            errors.append(FieldError("spec.runPolicy.activeDeadlineSeconds", "must be a positive integer"))
    for mode, specs, key in (
        ("debug", run_mode.debug.replica_specs if run_mode and run_mode.debug else [], "replicaSpecs"),
        ("pause", run_mode.pause.resume_specs if run_mode and run_mode.pause else [], "resumeSpecs"),
    ):
        for i, item in enumerate(specs):
            if item.type not in types:
                errors.append(
                    FieldError(
                        f"spec.runMode.{mode}.{key}[{i}].type",
                        f"{item.type!r} is not a replica type of this job ({', '.join(types)})",
                        "FieldValueNotSupported",
                    )
                )
    return errors


def _clean_up_error(value: object, path: str) -> list[FieldError]:
    if value is None or value is True or value is False:
        return []
    if isinstance(value, str) and value.lower() in CLEAN_UP_POLICIES:
        return []
    allowed = ", ".join(p.capitalize() for p in CLEAN_UP_POLICIES)
    return [
        FieldError(
            path, f"{value!r} is not a clean-up policy ({allowed}, in any case)", "FieldValueNotSupported"
        )
    ]


def _pod_name_error(name: str, rtype: str, replicas: int, path: str) -> list[FieldError]:
    """The controller names pods ``<job>-<type>-<index>``: a DNS label of at most 63 characters."""
    pod = f"{name}-{rtype}-{max(replicas - 1, 0)}"
    if len(pod) > DNS1035_LABEL_MAX_LENGTH:
        return [
            FieldError(
                "metadata.name",
                f'Invalid value: "{name}": too long: its pod {pod!r} ({path}) would exceed '
                f"{DNS1035_LABEL_MAX_LENGTH} characters",
            )
        ]
    return []


def _template_errors(template: Any, path: str) -> list[FieldError]:
    return [FieldError(c.field, c.message, c.reason) for c in validate_pod_template(template, path)]


class T9kAdapter(ReplicaSpecAdapter):
    """What the two T9k kinds share, on the replica-spec base; a subclass reads its own spec
    shape (:meth:`replica_specs`) and checks its own rules (:meth:`_check`)."""

    pod_job_label = T9K_JOB_NAME_LABEL
    queue_field = QUEUE_FIELD
    #: The switch T9k lets a user flip at any time (``enable`` is the seeds' older spelling).
    pause_field = PAUSE_FIELD
    #: A paused job shows T9k's own phase, ``Paused``.
    held_state = T9kPhase.PAUSED
    held_reason = T9kPhase.PAUSED

    # -- per kind -------------------------------------------------------------------------------

    def _check(self, obj: Mapping[str, Any]) -> tuple[list[ReplicaTemplate], list[FieldError]]:
        raise NotImplementedError

    def main_replica(self, types: Sequence[str]) -> str:
        """Of a job's replica types, the one whose pod 0 decides success and failure."""
        raise NotImplementedError

    # -- the adapter interface ------------------------------------------------------------------

    def validate(self, obj: Mapping[str, Any]) -> list[FieldError]:
        return self._demand(obj)[1]

    def _demand(self, obj: Mapping[str, Any]) -> tuple[Demand | None, list[FieldError]]:
        errors: list[FieldError] = []
        if obj.get("apiVersion") != self.api_version:
            errors.append(FieldError("apiVersion", f"must be {self.api_version}"))
        if obj.get("kind") != self.kind:
            errors.append(FieldError("kind", f"must be {self.kind}"))
        replicas, found = self._check(obj)
        errors += found
        if errors:
            return None, errors
        meta = obj.get("metadata") or {}
        name = str(meta.get("name"))
        labelled = [replace(r, pod_labels=self.pod_labels(name, r.name)) for r in replicas]
        try:
            demand = build_demand(labelled, annotations=meta.get("annotations") or {})
        except DemandError as exc:
            return None, [FieldError(exc.path, exc.message)]
        return demand, []

    def demand(self, obj: Mapping[str, Any]) -> Demand:
        """Every pod at once (T9k's PodGroup holds the whole job), the main replica first."""
        demand, errors = self._demand(obj)
        if errors or demand is None:
            raise InvalidWorkload(errors)
        return demand

    def pod_labels(self, name: str, rtype: str) -> dict[str, str]:
        return {T9K_JOB_NAME_LABEL: name, REPLICA_TYPE_LABEL: rtype}

    def priority_request(self, obj: Mapping[str, Any]) -> PriorityRequest:
        """``spec.scheduler.t9kScheduler.priority``: a raw value (0..100, default 0), as the
        PodGroup T9k's scheduler makes of it carries; none without ``t9kScheduler``."""
        t9k = _t9k_scheduler(obj)
        if not t9k:
            return PriorityRequest()
        value = t9k.get("priority", 0)
        if not isinstance(value, int) or isinstance(value, bool):
            return PriorityRequest()
        return PriorityRequest(value=value, field=PRIORITY_FIELD)

    def queue(self, obj: Mapping[str, Any]) -> str | None:
        """``spec.scheduler.t9kScheduler.queue``, unless it is T9k's ``default`` queue (then the
        namespace's leaf, as for any job: :data:`~fleet.workloads.base.DEFAULT_QUEUE`)."""
        value = _t9k_scheduler(obj).get("queue")
        return value if isinstance(value, str) and value and value != DEFAULT_QUEUE else None

    def paused(self, obj: Mapping[str, Any]) -> bool:
        """Whether the job is in pause mode: no replicas, so no capacity and no quota held."""
        return mode_enabled(obj, "pause")

    def without_pause_switch(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """The spec without ``runMode.pause.enabled`` (``enable``): T9k lets a user flip it at any
        time, and nothing else (not even ``resumeSpecs``)."""
        spec = clone(dict(_spec(obj)))
        run_mode = spec.get("runMode")
        pause = run_mode.get("pause") if isinstance(run_mode, dict) else None
        if isinstance(run_mode, dict) and isinstance(pause, dict):
            pause.pop("enabled", None)
            pause.pop("enable", None)
            if not pause:  # a switch added where there was none changes nothing else
                del run_mode["pause"]
            if not run_mode:
                del spec["runMode"]
        return spec

    def map_status(self, member_obj: Mapping[str, Any]) -> WorkloadStatus:
        """T9k's conditions, and the member's phase in Fleet's words as the state: the last
        condition (T9k's own of that type when true, else one Fleet writes); ``phase``,
        ``tasks``, ``aggregate`` carried over."""
        status = member_obj.get("status")
        status = status if isinstance(status, Mapping) else {}
        native = [dict(c) for c in status.get("conditions") or [] if isinstance(c, Mapping)]
        phase = status.get("phase") if isinstance(status.get("phase"), str) else None
        state = _STATE_OF_PHASE.get(phase) if phase else None
        conditions = list(native)
        reason: str | None = None
        message: str | None = None
        if state is not None and phase is not None:
            reason, message = _reason(phase, native)
            # T9k's own condition of the state's type (Running, Failed, Paused) goes last when
            # true; otherwise one in Fleet's words stands for the phase (Created, Succeeded).
            same = next((c for c in native if c.get("type") == state and c.get("status") == "True"), None)
            stamp = max((str(c.get("lastTransitionTime") or "") for c in native), default="")
            last = same or {
                "type": state,
                "status": "True",
                "reason": reason,
                "message": message,
                **({"lastTransitionTime": stamp} if stamp else {}),
            }
            conditions = [c for c in native if c.get("type") != state] + [last]
        extra = {k: clone(status[k]) for k in MIRRORED_FIELDS if k in status}
        return WorkloadStatus(
            state=state,
            reason=reason,
            message=message,
            conditions=conditions,
            replica_statuses={},
            start_time=status.get("startTime"),
            completion_time=status.get("completionTime"),
            extra=extra,
        )

    def classify(self, status: WorkloadStatus) -> Outcome:
        """A failed job is the user's fault (not retried elsewhere) unless the main replica's last
        exit was one the seed calls the environment's (130, 137, 138, 143: killed, interrupted,
        or asking for a restart) and not a deadline's. A job whose pods all exist and none is
        bound waits for its gang (stuck pending, failed over past the policy's toleration)."""
        phase = status.extra.get("phase")
        if phase == T9kPhase.SUCCEEDED:
            return Outcome.SUCCEEDED
        if phase == T9kPhase.RUNNING:
            return Outcome.RUNNING
        if phase == T9kPhase.FAILED:
            failed = [c for c in status.conditions if c.get("type") == T9kCondition.FAILED]
            if any(c.get("status") == "True" and c.get("reason") in USER_FAILURE_REASONS for c in failed):
                return Outcome.USER_ERROR
            code = self.main_exit_code(status)
            return Outcome.RETRIABLE if code is not None and retriable_exit(code) else Outcome.USER_ERROR
        aggregate = status.extra.get("aggregate")
        if phase == T9kPhase.PENDING and isinstance(aggregate, Mapping):
            waiting = aggregate.get("pending", 0)
            others = sum(v for k, v in aggregate.items() if k != "pending" and isinstance(v, int))
            if isinstance(waiting, int) and waiting > 0 and others == 0:
                return Outcome.STUCK_PENDING
        return Outcome.STARTING

    def main_exit_code(self, status: WorkloadStatus) -> int | None:
        """The exit code in ``status.tasks`` of the main replica's pod 0, when it exited."""
        tasks = status.extra.get("tasks")
        tasks = [t for t in tasks if isinstance(t, Mapping)] if isinstance(tasks, list) else []
        main = self.main_replica([str(t.get("type")) for t in tasks])
        for task in tasks:
            if task.get("type") != main:
                continue
            replicas = task.get("replicas") or task.get("status") or []
            first = replicas[0] if isinstance(replicas, list) and replicas else None
            containers = first.get("containers") if isinstance(first, Mapping) else None
            for container in containers if isinstance(containers, list) else []:
                code = container.get("exitCode") if isinstance(container, Mapping) else None
                if isinstance(code, int) and not isinstance(code, bool):
                    return code
        return None


def _reason(phase: str, native: list[dict[str, Any]]) -> tuple[str, str]:
    """The reason and message of the fleet state: the true native condition that says it."""
    wanted = {
        T9kPhase.SUCCEEDED: T9kCondition.COMPLETED,
        T9kPhase.FAILED: T9kCondition.FAILED,
        T9kPhase.PAUSED: T9kCondition.PAUSED,
        T9kPhase.RUNNING: T9kCondition.RUNNING,
    }.get(phase)
    found = next((c for c in native if c.get("type") == wanted and c.get("status") == "True"), None)
    reason = str(found.get("reason") or phase) if found else phase
    if reason in ("", "-"):
        reason = phase
    message = str(found.get("message") or "") if found else ""
    return reason, message or f"phase {phase}"


class TensorFlowTrainingJobAdapter(T9kAdapter):
    resource = T9K_TFJOB

    def replica_specs(self, spec: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """``spec.replicaSpecs`` is a list; each entry names its ``type``."""
        specs = spec.get("replicaSpecs")
        if not isinstance(specs, list):
            return []
        return [(str(s.get("type")), s) for s in specs if isinstance(s, Mapping)]

    def replica_path(self, rtype: str) -> str:
        return f"spec.replicaSpecs[type={rtype}]"

    def _check(self, obj: Mapping[str, Any]) -> tuple[list[ReplicaTemplate], list[FieldError]]:
        try:
            job = _TfJob.model_validate(obj)
        except ValidationError as exc:
            return [], pydantic_errors(exc)
        spec = job.spec
        errors = _common_errors(
            job.metadata, spec.run_policy, spec.run_mode, [r.type for r in spec.replica_specs]
        )
        if spec.run_policy is not None:
            errors += _clean_up_error(spec.run_policy.clean_up_policy, "spec.runPolicy.cleanUpPolicy")
        if not spec.replica_specs:
            errors.append(
                FieldError("spec.replicaSpecs", "must list at least one replica", "FieldValueRequired")
            )
        seen: set[str] = set()
        raw = obj["spec"]["replicaSpecs"]
        replicas: list[ReplicaTemplate] = []
        for i, replica in enumerate(spec.replica_specs):
            path = f"spec.replicaSpecs[{i}]"
            if replica.type not in TF_REPLICA_TYPES:
                errors.append(
                    FieldError(
                        f"{path}.type",
                        f"{replica.type!r} is not a replica type ({', '.join(TF_REPLICA_TYPES)})",
                        "FieldValueNotSupported",
                    )
                )
            elif replica.type in seen:
                errors.append(
                    FieldError(f"{path}.type", f"{replica.type!r} is listed twice", "FieldValueDuplicate")
                )
            seen.add(replica.type)
            if replica.replicas < 0:
                errors.append(FieldError(f"{path}.replicas", "must not be negative"))
            elif replica.type == CHIEF and replica.replicas > 1:
                errors.append(FieldError(f"{path}.replicas", "a job has at most one chief"))
            if replica.restart_policy not in RESTART_POLICIES:
                errors.append(
                    FieldError(
                        f"{path}.restartPolicy",
                        f"{replica.restart_policy!r} is not a restart policy ({', '.join(RESTART_POLICIES)})",
                        "FieldValueNotSupported",
                    )
                )
            errors += _pod_name_error(job.metadata.name, replica.type, replica.replicas, path)
            errors += _template_errors(raw[i]["template"], f"{path}.template")
            replicas.append(
                ReplicaTemplate(
                    replica.type, max(replica.replicas, 0), raw[i]["template"], f"{path}.template"
                )
            )
        counts = {r.type: r.replicas for r in spec.replica_specs}
        if spec.replica_specs and counts.get(CHIEF, 0) < 1 and counts.get(WORKER, 0) < 1:
            errors.append(
                FieldError(
                    "spec.replicaSpecs",
                    "must have a chief or at least one worker: the chief, else worker 0, decides the job",
                )
            )
        order = {t: n for n, t in enumerate(TF_REPLICA_TYPES)}
        replicas.sort(key=lambda r: order.get(r.name, len(order)))
        return replicas, errors

    def main_replica(self, types: Sequence[str]) -> str:
        return CHIEF if CHIEF in types else WORKER


class MPIJobAdapter(T9kAdapter):
    """T9k's MPIJob in either of its shapes (the module's docstring): ``spec.worker`` or
    ``spec.mpiConfig`` with ``spec.replicaSpecs``. Both make the same pods: one launcher (the
    main replica) and the workers, placed as one gang."""

    resource = T9K_MPIJOB

    def replica_specs(self, spec: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """The older shape: one ``spec.worker`` (the launcher is the controller's, not written).
        The current: the ``spec.replicaSpecs`` entries by ``type``; a launcher whose template has
        no pod spec (``template: {}``) is left out, as the controller makes that pod from the
        worker's template (labels and node affinity included)."""
        if _is_replica_specs_shape(spec):
            out = []
            for entry in spec.get("replicaSpecs") or []:
                if not isinstance(entry, Mapping):
                    continue
                rtype = str(entry.get("type"))
                if rtype == LAUNCHER and not _has_pod_spec(entry.get("template")):
                    continue
                out.append((rtype, entry))
            return out
        worker = spec.get("worker")
        return [(WORKER, worker)] if isinstance(worker, Mapping) else []

    def replica_path(self, rtype: str) -> str:
        return "spec.worker" if rtype == WORKER else f"spec.replicaSpecs[type={rtype}]"

    def _check(self, obj: Mapping[str, Any]) -> tuple[list[ReplicaTemplate], list[FieldError]]:
        spec = obj.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        older = [f for f in MPI_WORKER_SHAPE_FIELDS if f in spec]
        current = [f for f in MPI_REPLICA_SPECS_SHAPE_FIELDS if f in spec]
        if older and current:
            return [], [
                FieldError(
                    f"spec.{field}",
                    f"may not be set with spec.{older[0]}: an MPIJob is written either with "
                    "spec.worker (and spec.mca, spec.mpiHome) or with spec.replicaSpecs and "
                    "spec.mpiConfig (T9k's current shape), not both",
                    "FieldValueForbidden",
                )
                for field in current
            ]
        # The older shape's rules where only its fields are written; the current shape's
        # otherwise (with neither written, what the user is told is required is today's shape).
        return self._check_worker(obj) if older else self._check_replica_specs(obj)

    def _check_worker(self, obj: Mapping[str, Any]) -> tuple[list[ReplicaTemplate], list[FieldError]]:
        """The older shape: ``spec.worker``."""
        try:
            job = _MpiJob.model_validate(obj)
        except ValidationError as exc:
            return [], pydantic_errors(exc)
        spec = job.spec
        errors = _common_errors(job.metadata, spec.run_policy, spec.run_mode, [LAUNCHER, WORKER])
        if spec.run_policy is not None:
            errors += _clean_up_error(spec.run_policy.clean_up_workers, "spec.runPolicy.cleanUpWorkers")
        worker = spec.worker
        if worker.replicas < 1:
            errors.append(FieldError("spec.worker.replicas", "must be at least 1"))
        if worker.processes_per_worker is not None and worker.processes_per_worker < 1:
            errors.append(FieldError("spec.worker.processesPerWorker", "must be at least 1"))
        recovery = worker.process_recovery
        if recovery is not None and recovery.limit is not None and recovery.limit < 0:
            errors.append(FieldError("spec.worker.processRecovery.limit", "must be non-negative"))
        errors += _container_error(worker.template.spec, MPI_WORKER_CONTAINER, "spec.worker.template")
        errors += _absolute_path_errors(
            (spec.ssh.sshd_path if spec.ssh else None, "spec.ssh.sshdPath"), (spec.mpi_home, "spec.mpiHome")
        )
        errors += _pod_name_error(job.metadata.name, WORKER, worker.replicas, "spec.worker")
        raw = obj["spec"]["worker"]["template"]
        errors += _template_errors(raw, "spec.worker.template")
        launcher = ReplicaTemplate(LAUNCHER, 1, launcher_template(raw), "spec.worker.template")
        workers = ReplicaTemplate(WORKER, max(worker.replicas, 0), raw, "spec.worker.template")
        return [launcher, workers], errors

    def _check_replica_specs(self, obj: Mapping[str, Any]) -> tuple[list[ReplicaTemplate], list[FieldError]]:
        """The current shape (``t9k/tutorial-examples`` ``job/mpijob/horovod-torch/job.yaml``...):
        ``spec.mpiConfig`` and ``spec.replicaSpecs``. A worker entry is required (at least one
        replica, a pod template with a container named ``worker``); a launcher entry may be
        left out (the controller makes it either way) and has exactly one replica. The demand:
        the launcher (nothing but a pod slot unless its template has a pod spec of its own,
        then that pod's requests), then every worker by its template."""
        try:
            job = _MpiReplicaSpecsJob.model_validate(obj)
        except ValidationError as exc:
            return [], pydantic_errors(exc)
        spec = job.spec
        errors = _common_errors(job.metadata, spec.run_policy, spec.run_mode, [LAUNCHER, WORKER])
        if spec.run_policy is not None:
            errors += _clean_up_error(spec.run_policy.clean_up_workers, "spec.runPolicy.cleanUpWorkers")
        errors += _absolute_path_errors(
            (spec.ssh.sshd_path if spec.ssh else None, "spec.ssh.sshdPath"),
            (spec.mpi_config.home, "spec.mpiConfig.home"),
        )
        raw = obj["spec"]["replicaSpecs"]
        found: dict[str, int] = {}
        for i, replica in enumerate(spec.replica_specs):
            path = f"spec.replicaSpecs[{i}]"
            if replica.type not in MPI_REPLICA_TYPES:
                errors.append(
                    FieldError(
                        f"{path}.type",
                        f"{replica.type!r} is not a replica type of an MPIJob "
                        f"({', '.join(MPI_REPLICA_TYPES)})",
                        "FieldValueNotSupported",
                    )
                )
                continue
            if replica.type in found:
                errors.append(
                    FieldError(f"{path}.type", f"{replica.type!r} is listed twice", "FieldValueDuplicate")
                )
                continue
            found[replica.type] = i
            if replica.type == WORKER:
                if replica.replicas < 1:
                    errors.append(FieldError(f"{path}.replicas", "must be at least 1"))
                if not _has_pod_spec(replica.template):
                    errors.append(
                        FieldError(
                            f"{path}.template.spec",
                            "is required: the workers' pod template runs the MPI processes",
                            "FieldValueRequired",
                        )
                    )
                    continue
                errors += _container_error(
                    replica.template["spec"], REPLICA_SPECS_WORKER_CONTAINER, f"{path}.template"
                )
                errors += _pod_name_error(job.metadata.name, WORKER, replica.replicas, path)
            elif replica.replicas != 1:
                errors.append(
                    FieldError(f"{path}.replicas", "must be 1: an MPIJob has one launcher, which runs mpirun")
                )
            if _has_pod_spec(replica.template):
                errors += _template_errors(raw[i]["template"], f"{path}.template")
        if WORKER not in found:
            errors.append(
                FieldError(
                    "spec.replicaSpecs",
                    "must list the workers (an entry of type: worker): they run the MPI processes",
                    "FieldValueRequired",
                )
            )
            return [], errors
        w = found[WORKER]
        worker_path = f"spec.replicaSpecs[{w}].template"
        worker_raw = raw[w].get("template") or {}
        at = found.get(LAUNCHER)
        if at is not None and _has_pod_spec(raw[at].get("template")):
            launcher = ReplicaTemplate(LAUNCHER, 1, raw[at]["template"], f"spec.replicaSpecs[{at}].template")
        else:
            launcher = ReplicaTemplate(LAUNCHER, 1, launcher_template(worker_raw), worker_path)
        count = max(spec.replica_specs[w].replicas, 0)
        return [launcher, ReplicaTemplate(WORKER, count, worker_raw, worker_path)], errors

    def main_replica(self, types: Sequence[str]) -> str:
        return LAUNCHER


def _is_replica_specs_shape(spec: Mapping[str, Any]) -> bool:
    return any(f in spec for f in MPI_REPLICA_SPECS_SHAPE_FIELDS) and "worker" not in spec


def _has_pod_spec(template: object) -> bool:
    """Whether a replica's template writes a pod spec (T9k's tutorials give the launcher ``{}``)."""
    return isinstance(template, Mapping) and isinstance(template.get("spec"), Mapping)


def _container_error(pod_spec: Mapping[str, Any], name: str, template_path: str) -> list[FieldError]:
    """The worker's MPI container, found by its name."""
    containers = pod_spec.get("containers")
    names = (
        [c.get("name") for c in containers if isinstance(c, Mapping)] if isinstance(containers, list) else []
    )
    if name in names:
        return []
    return [
        FieldError(
            f"{template_path}.spec.containers",
            f"must have a container named {name}: it runs the MPI processes",
            "FieldValueRequired",
        )
    ]


def _absolute_path_errors(*paths: tuple[str | None, str]) -> list[FieldError]:
    return [
        FieldError(path, f"{value!r} must be an absolute path")
        for value, path in paths
        if value is not None and not value.startswith("/")
    ]


#: The T9k adapters (listed in :mod:`fleet.workloads.registry`).
t9k_tfjob = TensorFlowTrainingJobAdapter()
t9k_mpijob = MPIJobAdapter()
