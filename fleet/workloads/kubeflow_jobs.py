"""Kubeflow's job kinds: PyTorchJob and TFJob (``kubeflow.org/v1``, the training operator) and
MPIJob (``kubeflow.org/v2beta1``, the MPI operator), on the replica-spec base.

Sources: kubeflow/training-operator ``pkg/apis/kubeflow.org/v1`` (``pytorch_types.go``,
``tensorflow_types.go``, ``common_types.go``: ``RunPolicy``, ``SchedulingPolicy``,
``ReplicaStatus``, ``JobConditionType``), its webhooks (``pytorchjob_webhook.go``,
``tfjob_webhook.go``), controllers (``pkg/controller.v1/common/job.go``, ``pod.go``,
``tensorflow/tfjob_controller.go``) and CRDs (``manifests/base/crds``), tag v1.9.0, the last of
the v1 operator; kubeflow/mpi-operator ``pkg/apis/kubeflow/v2beta1`` (``types.go``,
``default.go``, ``constants.go``), ``pkg/apis/kubeflow/validation/validation.go`` and
``pkg/controller`` (``mpi_job_controller.go``, ``podgroup.go``). What Fleet checks at
submission is what the webhooks and validation refuse:

* the name is a DNS-1035 label (``NameIsDNS1035Label``);
* replica types are the kind's (PyTorchJob: Master, Worker; TFJob: Chief, Master, PS, Worker,
  Evaluator, at most one of Chief and Master; MPIJob: Launcher, Worker); a leader (Master,
  Chief, Launcher) and an Evaluator have exactly one replica; an MPIJob has its Launcher and at
  least one Worker when it has the type;
* every template has the kind's default container (``pytorch``, ``tensorflow``; an MPIJob has
  none) and passes the API server's pod rules;
* ``runPolicy``: ``cleanPodPolicy`` is All, Running or None; ``backoffLimit``,
  ``ttlSecondsAfterFinished`` non-negative int32; ``activeDeadlineSeconds`` a positive int64;
  ``schedulingPolicy.minAvailable`` within the job's pods, ``queue`` and ``priorityClass``
  strings; ``suspend`` a boolean;
* PyTorchJob's ``elasticPolicy`` has ``minReplicas <= maxReplicas`` and does not set
  ``nProcPerNode`` together with ``spec.nprocPerNode`` (the webhook's rule); TFJob's
  ``successPolicy`` is ``""`` or ``AllWorkers``; MPIJob's ``launcherCreationPolicy`` is AtStartup
  or WaitForWorkersReady, ``mpiImplementation`` OpenMPI, Intel or MPICH, ``runLauncherAsWorker``
  a boolean, ``slotsPerWorker`` non-negative;
* ``restartPolicy`` is Always, OnFailure, Never or ExitCode (an MPIJob's: Never or OnFailure).

The gang (``minAvailable`` of the PodGroup the operators make) is
``schedulingPolicy.minAvailable`` when set, else every pod of the job: the training operator's
``ReconcileJobs`` (``minMember := totalReplicas``, replaced by ``MinAvailable``) and the MPI
operator's ``calculateMinAvailable`` (workers + 1, the launcher, whatever
``runLauncherAsWorker`` says). A PyTorchJob's ``elasticPolicy.minReplicas``/``maxReplicas``
changes neither: they only become ``torchrun``'s ``--nnodes=min:max`` (``elastic.go``,
``generateEnvNnodes``) and the HPA's bounds; the PodGroup still waits for all the pods the
replica counts ask for, so Fleet's gang does too.

Conditions are the Kubeflow job controllers' (Created, Running, Restarting, Succeeded, Failed,
Suspended), reasons ``<Kind><Reason>`` (``commonutil.NewReason``: ``PyTorchJobFailed``; the MPI
operator's ``mpiJobCreatedReason`` ... spell the same); a job failed by validation
(``<Kind>FailedValidation``) is the user's error, any other failure is worth another attempt
(the member retried it already under the kind's restart policy and ``backoffLimit``). Setting a
condition drops an older one of its type and appends it, and a finished or suspended job's
``Running`` turns False, so the state is the last *true* condition (:meth:`KubeflowAdapter.map_status`
puts it last on the fleet object). Pods carry ``training.kubeflow.org/job-name``; the training
operator adds ``replica-type`` (lower case) and ``replica-index``, the MPI operator
``job-role`` (launcher, worker) and ``operator-name``.

What Fleet makes of the rest of ``runPolicy``: ``schedulingPolicy.queue`` routes the job to a
leaf of the quota tree as the quota label does (:func:`fleet.jobs.submit.quota_labels`; Volcano's
``default`` queue leaves it to the namespace); ``suspend`` holds the job at the fleet, not
admitted and holding no quota, as Kueue's admission gate does (:mod:`fleet.jobs.pause`). Neither
operator says on the job that its gang cannot be scheduled (no ``PodGroupPending``): the pods
say it (``PodScheduled`` False, reason ``Unschedulable``, written by the scheduler), so a copy
still waiting to run is classified from its pods (:attr:`WorkloadStatus.unschedulable`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar, Final

from pydantic import Field, StrictBool, StrictStr, ValidationError

from fleet.apiserver import PrinterColumn, ResourceType, clone, dns1035_label, validate_pod_template
from fleet.kubeflow import (
    CLEAN_POD_POLICIES,
    GROUP,
    JOB_NAME_LABEL,
    JOB_ROLE_LABEL,
    LAUNCHER_CREATION_POLICIES,
    MPI_IMPLEMENTATIONS,
    MPI_OPERATOR,
    MPI_RESTART_POLICIES,
    OPERATOR_NAME_LABEL,
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
    SUSPEND_FIELD,
    SUSPENDED,
    TF_SUCCESS_POLICIES,
)
from fleet.placement import Demand, build_demand
from fleet.workloads.base import FieldError, InvalidWorkload, Outcome, WorkloadStatus
from fleet.workloads.models import RESTART_POLICIES, Int32, Int64, Open, pydantic_errors
from fleet.workloads.replicas import ReplicaSpecAdapter
from fleet.workloads.verdicts import demand_verdict, remembered

__all__ = [
    "JOB_NAME_LABEL",
    "JOB_ROLE_LABEL",
    "MPIJOB",
    "OPERATOR_NAME_LABEL",
    "PYTORCHJOB",
    "REPLICA_INDEX_LABEL",
    "REPLICA_TYPE_LABEL",
    "SUSPENDED",
    "SUSPEND_FIELD",
    "TFJOB",
    "KubeflowAdapter",
    "mpijob",
    "pytorchjob",
    "tfjob",
]


def _resource(kind: str, version: str, short_names: tuple[str, ...] = ()) -> ResourceType:
    """A Kubeflow CRD as its manifests declare it: STATE (the last condition) and AGE."""
    return ResourceType(
        group=GROUP,
        version=version,
        kind=kind,
        plural=f"{kind.lower()}s",
        singular=kind.lower(),
        namespaced=True,
        short_names=short_names,
        printer_columns=(
            PrinterColumn("Name", "string", ".metadata.name", "Name of the job."),
            PrinterColumn("State", "string", ".status.conditions[-1:].type", "The job's last condition."),
            PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since the job was created."),
        ),
        has_status=True,
        categories=("all", "kubeflow"),
        description=f"Kubeflow's {kind}: a distributed training job run by its operator.",
    )


PYTORCHJOB: Final = _resource("PyTorchJob", "v1")
TFJOB: Final = _resource("TFJob", "v1")
MPIJOB: Final = _resource("MPIJob", "v2beta1", ("mpij",))


class _Container(Open):
    name: StrictStr


class _PodSpec(Open):
    containers: list[_Container] = Field(min_length=1)


class _Template(Open):
    spec: _PodSpec


class _ReplicaSpec(Open):
    replicas: Int32 = 1
    restart_policy: StrictStr | None = Field(default=None, alias="restartPolicy")
    template: _Template


class _SchedulingPolicy(Open):
    min_available: Int32 | None = Field(default=None, alias="minAvailable")
    queue: StrictStr | None = None
    priority_class: StrictStr | None = Field(default=None, alias="priorityClass")


class _RunPolicy(Open):
    clean_pod_policy: StrictStr | None = Field(default=None, alias="cleanPodPolicy")
    ttl_seconds_after_finished: Int32 | None = Field(default=None, alias="ttlSecondsAfterFinished")
    active_deadline_seconds: Int64 | None = Field(default=None, alias="activeDeadlineSeconds")
    backoff_limit: Int32 | None = Field(default=None, alias="backoffLimit")
    scheduling_policy: _SchedulingPolicy | None = Field(default=None, alias="schedulingPolicy")
    suspend: StrictBool | None = None


class _ElasticPolicy(Open):
    min_replicas: Int32 | None = Field(default=None, alias="minReplicas")
    max_replicas: Int32 | None = Field(default=None, alias="maxReplicas")
    n_proc_per_node: Int32 | None = Field(default=None, alias="nProcPerNode")
    max_restarts: Int32 | None = Field(default=None, alias="maxRestarts")


class _Spec(Open):
    run_policy: _RunPolicy | None = Field(default=None, alias="runPolicy")
    elastic_policy: _ElasticPolicy | None = Field(default=None, alias="elasticPolicy")
    nproc_per_node: StrictStr | None = Field(default=None, alias="nprocPerNode")
    success_policy: StrictStr | None = Field(default=None, alias="successPolicy")
    enable_dynamic_worker: StrictBool | None = Field(default=None, alias="enableDynamicWorker")
    slots_per_worker: Int32 | None = Field(default=None, alias="slotsPerWorker")
    run_launcher_as_worker: StrictBool | None = Field(default=None, alias="runLauncherAsWorker")
    launcher_creation_policy: StrictStr | None = Field(default=None, alias="launcherCreationPolicy")
    mpi_implementation: StrictStr | None = Field(default=None, alias="mpiImplementation")


class _Metadata(Open):
    name: StrictStr = Field(min_length=1)


class _Job(Open):
    metadata: _Metadata
    spec: _Spec


class KubeflowAdapter(ReplicaSpecAdapter):
    """A Kubeflow job kind: the replica specs at ``spec.<specs_field>``, ``spec.runPolicy``."""

    #: Replica types the kind allows.
    replica_types: ClassVar[tuple[str, ...]]
    #: Replica types that must have exactly one replica.
    singletons: ClassVar[tuple[str, ...]] = ()
    #: Replica types the job must have.
    required: ClassVar[tuple[str, ...]] = ()
    #: The container every template must have (the operator configures it), or "" for none.
    container: ClassVar[str] = ""
    #: The restart policies the kind's validation accepts.
    restart_policies: ClassVar[tuple[str, ...]] = tuple(sorted(RESTART_POLICIES))
    pod_job_label = JOB_NAME_LABEL
    #: The operators never say on the job that its gang waits: its pods do (see the module doc).
    reads_pods = True
    #: ``spec.runPolicy.suspend`` holds the job at the fleet (:mod:`fleet.jobs.pause`), shown as
    #: the operators show a suspended job: ``Suspended``.
    pause_field = SUSPEND_FIELD
    held_state = SUSPENDED

    @property
    def held_reason(self) -> str:
        """``<Kind>Suspended``, the operators' reason for a suspended job (``commonutil.NewReason``
        with ``JobSuspendedReason``; the MPI operator's ``mpiJobSuspendedReason``)."""
        return f"{self.kind}{SUSPENDED}"

    def pod_labels(self, name: str, rtype: str) -> dict[str, str]:
        return {JOB_NAME_LABEL: name, REPLICA_TYPE_LABEL: rtype.lower()}

    # --- suspend: the switch the owner may flip (fleet.jobs.pause) ------------------------------

    def paused(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``spec.runPolicy.suspend`` is true (``IsJobSuspended``, ``isMPIJobSuspended``)."""
        spec = obj.get("spec")
        run = spec.get("runPolicy") if isinstance(spec, Mapping) else None
        return isinstance(run, Mapping) and run.get("suspend") is True

    def without_pause_switch(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """The spec without ``runPolicy.suspend`` (a ``runPolicy`` left empty by it goes too:
        adding ``suspend: false`` where there was none changes nothing else)."""
        raw = obj.get("spec")
        spec = clone(dict(raw)) if isinstance(raw, Mapping) else {}
        run = spec.get("runPolicy")
        if isinstance(run, dict):
            run.pop("suspend", None)
            if not run:
                del spec["runPolicy"]
        return spec

    # --- status --------------------------------------------------------------------------------

    def map_status(self, member_obj: Mapping[str, Any]) -> WorkloadStatus:
        """The base's reading, with the state's condition (the last true one, never
        ``Suspended``: a copy is never suspended by Fleet, which holds a job itself) moved last,
        since the fleet reads its state from the last condition and the operators may leave a
        false one after it (a finished job's ``Running``, a resumed job's ``Suspended``)."""
        seen = super().map_status(member_obj)
        conditions = seen.conditions
        at = next(
            (
                i
                for i in range(len(conditions) - 1, -1, -1)
                if conditions[i].get("status") == "True" and conditions[i].get("type") != SUSPENDED
            ),
            None,
        )
        if at is None:
            return replace(seen, state=None, reason=None, message=None)
        last = conditions[at]
        ordered = [c for i, c in enumerate(conditions) if i != at] + [last]
        return replace(
            seen,
            state=last.get("type"),
            reason=last.get("reason"),
            message=last.get("message"),
            conditions=ordered,
        )

    def classify(self, status: WorkloadStatus) -> Outcome:
        """The base's classification; a copy not running yet whose pods the scheduler could not
        place (:attr:`WorkloadStatus.unschedulable`, as the syncer read them) waits for its gang:
        stuck pending, failed over past the policy's toleration."""
        outcome = super().classify(status)
        if outcome is Outcome.STARTING and status.unschedulable:
            return Outcome.STUCK_PENDING
        return outcome

    def validate(self, obj: Mapping[str, Any]) -> list[FieldError]:
        return self._check(obj)[1]

    def demand(self, obj: Mapping[str, Any]) -> Demand:
        demand, errors = self._check(obj)
        if errors or demand is None:
            raise InvalidWorkload(errors)
        return demand

    @remembered
    def _check(self, obj: Mapping[str, Any]) -> tuple[Demand | None, list[FieldError]]:
        errors: list[FieldError] = []
        for field, expected in (("apiVersion", self.api_version), ("kind", self.kind)):
            if obj.get(field) != expected:
                errors.append(FieldError(field, f"must be {expected}"))
        try:
            job = _Job.model_validate(obj)
        except ValidationError as exc:
            errors += pydantic_errors(exc)
            job = None
        name = (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"), Mapping) else None
        if isinstance(name, str) and name and (why := dns1035_label(name)):
            errors.append(FieldError("metadata.name", f'Invalid value: "{name}": {why}'))
        raw_spec = obj.get("spec")
        spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
        counts, template_errors = self._replica_errors(spec)
        errors += template_errors
        total = sum(counts.values())
        if job is not None:
            errors += self._policy_errors(job, total if counts else None)
        if errors:
            return None, errors
        return demand_verdict(self.accepted_demand, obj)

    def accepted_demand(self, obj: Mapping[str, Any]) -> Demand:
        """The demand of a job whose types the rules passed, read from the job as written (the one
        reading :meth:`_check` builds its demand with; see
        :class:`~fleet.workloads.base.AcceptedDemand`)."""
        spec, meta = obj["spec"], obj["metadata"]
        counts = {t: s.get("replicas", 1) for t, s in self.replica_specs(spec)}
        policy = (spec.get("runPolicy") or {}).get("schedulingPolicy") or {}
        return build_demand(
            self.replica_templates(obj, counts),
            min_available=policy.get("minAvailable"),
            annotations=meta.get("annotations") or {},
            labels=meta.get("labels") or {},
        )

    def _replica_errors(self, spec: Mapping[str, Any]) -> tuple[dict[str, int], list[FieldError]]:
        """The count of each replica type (when every one is readable) and what is wrong."""
        specs = self.replica_specs(spec)
        where = f"spec.{self.specs_field}"
        if not specs:
            return {}, [FieldError(where, "is required: at least one replica type", "FieldValueRequired")]
        errors: list[FieldError] = []
        counts: dict[str, int] = {}
        present = {t for t, _ in specs}
        for rtype in self.required:
            if rtype not in present:
                errors.append(FieldError(self.replica_path(rtype), f"is required for a {self.kind}"))
        for rtype, raw in specs:
            path = self.replica_path(rtype)
            if rtype not in self.replica_types:
                allowed = ", ".join(self.replica_types)
                errors.append(
                    FieldError(path, f"is not a replica type of a {self.kind} (allowed: {allowed})")
                )
                continue
            try:
                replica = _ReplicaSpec.model_validate(raw)
            except ValidationError as exc:
                errors += [
                    FieldError(f"{path}.{e.path}" if e.path else path, e.message)
                    for e in pydantic_errors(exc)
                ]
                continue
            if rtype in self.singletons and replica.replicas != 1:
                errors.append(FieldError(f"{path}.replicas", f"must be 1 for the {rtype} of a {self.kind}"))
            elif replica.replicas < 0:
                errors.append(FieldError(f"{path}.replicas", "must be non-negative"))
            if replica.restart_policy is not None and replica.restart_policy not in self.restart_policies:
                allowed = ", ".join(self.restart_policies)
                errors.append(FieldError(f"{path}.restartPolicy", f"must be one of {allowed}"))
            if self.container and not any(c.name == self.container for c in replica.template.spec.containers):
                errors.append(
                    FieldError(
                        f"{path}.template.spec.containers",
                        f"must have a container named {self.container} (the operator configures it)",
                    )
                )
            causes = validate_pod_template(raw["template"], f"{path}.template")
            errors += [FieldError(c.field, c.message, c.reason) for c in causes]
            counts[rtype] = replica.replicas
        if not errors and sum(counts.values()) == 0:
            errors.append(FieldError(where, "the job has no pods (every replicas is 0)"))
        return (counts if not errors else {}), errors

    def _policy_errors(self, job: _Job, total: int | None) -> list[FieldError]:
        errors: list[FieldError] = []
        run = job.spec.run_policy
        if run is not None:
            base = "spec.runPolicy"
            if run.clean_pod_policy is not None and run.clean_pod_policy not in CLEAN_POD_POLICIES:
                errors.append(
                    FieldError(f"{base}.cleanPodPolicy", f"must be one of {', '.join(CLEAN_POD_POLICIES)}")
                )
            for field, value in (
                ("backoffLimit", run.backoff_limit),
                ("ttlSecondsAfterFinished", run.ttl_seconds_after_finished),
            ):
                if value is not None and value < 0:
                    errors.append(FieldError(f"{base}.{field}", "must be non-negative"))
            if run.active_deadline_seconds is not None and run.active_deadline_seconds <= 0:
                errors.append(FieldError(f"{base}.activeDeadlineSeconds", "must be a positive integer"))
            policy = run.scheduling_policy
            wanted = policy.min_available if policy else None
            if wanted is not None and total is not None and not 1 <= wanted <= total:
                errors.append(
                    FieldError(
                        f"{base}.schedulingPolicy.minAvailable",
                        f"must be between 1 and the job's {total} pods",
                    )
                )
        return errors


class PyTorchJobAdapter(KubeflowAdapter):
    """``kubeflow.org/v1`` PyTorchJob: ``pytorchReplicaSpecs`` Master and Worker."""

    resource = PYTORCHJOB
    user_error_reasons = frozenset({"PyTorchJobFailedValidation"})
    specs_field = "pytorchReplicaSpecs"
    leaders = ("Master",)
    replica_types = ("Master", "Worker")
    singletons = ("Master",)
    container = "pytorch"

    def _policy_errors(self, job: _Job, total: int | None) -> list[FieldError]:
        errors = super()._policy_errors(job, total)
        elastic = job.spec.elastic_policy
        if elastic is not None:
            low, high = elastic.min_replicas, elastic.max_replicas
            if low is not None and high is not None and low > high:
                errors.append(
                    FieldError("spec.elasticPolicy.minReplicas", "must not be more than maxReplicas")
                )
            if elastic.n_proc_per_node is not None and job.spec.nproc_per_node is not None:
                errors.append(
                    FieldError(
                        "spec.elasticPolicy.nProcPerNode",
                        "must not be set together with spec.nprocPerNode (use spec.nprocPerNode)",
                    )
                )
        return errors


class TFJobAdapter(KubeflowAdapter):
    """``kubeflow.org/v1`` TFJob: ``tfReplicaSpecs`` Chief (or Master), PS, Worker, Evaluator."""

    resource = TFJOB
    user_error_reasons = frozenset({"TFJobFailedValidation"})
    specs_field = "tfReplicaSpecs"
    leaders = ("Chief", "Master", "PS")
    replica_types = ("Chief", "Master", "PS", "Worker", "Evaluator")
    singletons = ("Chief", "Master", "Evaluator")
    container = "tensorflow"

    def _replica_errors(self, spec: Mapping[str, Any]) -> tuple[dict[str, int], list[FieldError]]:
        counts, errors = super()._replica_errors(spec)
        present = {t for t, _ in self.replica_specs(spec)}
        if {"Chief", "Master"} <= present:  # tfjob_webhook.go: one chief-or-master role at most
            errors.append(
                FieldError(f"spec.{self.specs_field}", "must not have more than 1 Chief or Master role")
            )
            counts = {}
        return counts, errors

    def _policy_errors(self, job: _Job, total: int | None) -> list[FieldError]:
        errors = super()._policy_errors(job, total)
        policy = job.spec.success_policy
        if policy is not None and policy not in TF_SUCCESS_POLICIES:
            errors.append(FieldError("spec.successPolicy", 'must be "" or "AllWorkers"'))
        return errors


class MPIJobAdapter(KubeflowAdapter):
    """``kubeflow.org/v2beta1`` MPIJob: ``mpiReplicaSpecs`` Launcher (required, one) and Worker.

    The MPI operator runs the launcher as a batch Job (its pod ``<name>-launcher-<suffix>``) and
    the workers as pods ``<name>-worker-<i>``, labelled by role, not by replica type
    (``defaultLabels``); the launcher's completion decides the job.
    """

    resource = MPIJOB
    user_error_reasons = frozenset({"MPIJobFailedValidation"})
    specs_field = "mpiReplicaSpecs"
    leaders = ("Launcher",)
    replica_types = ("Launcher", "Worker")
    singletons = ("Launcher",)
    required = ("Launcher",)
    restart_policies = MPI_RESTART_POLICIES

    def pod_labels(self, name: str, rtype: str) -> dict[str, str]:
        return {JOB_NAME_LABEL: name, JOB_ROLE_LABEL: rtype.lower(), OPERATOR_NAME_LABEL: MPI_OPERATOR}

    def _replica_errors(self, spec: Mapping[str, Any]) -> tuple[dict[str, int], list[FieldError]]:
        counts, errors = super()._replica_errors(spec)
        if counts.get("Worker") == 0:  # validateWorkerReplicaSpec
            errors.append(
                FieldError(f"{self.replica_path('Worker')}.replicas", "must be greater than or equal to 1")
            )
            counts = {}
        return counts, errors

    def _policy_errors(self, job: _Job, total: int | None) -> list[FieldError]:
        errors = super()._policy_errors(job, total)
        spec = job.spec
        if spec.slots_per_worker is not None and spec.slots_per_worker < 0:
            errors.append(FieldError("spec.slotsPerWorker", "must be non-negative"))
        for field, value, allowed in (
            ("launcherCreationPolicy", spec.launcher_creation_policy, LAUNCHER_CREATION_POLICIES),
            ("mpiImplementation", spec.mpi_implementation, MPI_IMPLEMENTATIONS),
        ):
            if value is not None and value not in allowed:
                errors.append(
                    FieldError(
                        f"spec.{field}", f"must be one of {', '.join(allowed)}", "FieldValueNotSupported"
                    )
                )
        return errors


#: The adapters (registered in :mod:`fleet.workloads.registry`).
pytorchjob = PyTorchJobAdapter()
tfjob = TFJobAdapter()
mpijob = MPIJobAdapter()
