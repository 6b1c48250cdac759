"""Kubeflow's job kinds: PyTorchJob and TFJob (``kubeflow.org/v1``, the training operator) and
MPIJob (``kubeflow.org/v2beta1``, the MPI operator), on the replica-spec base.

Sources: kubeflow/training-operator ``pkg/apis/kubeflow.org/v1`` (``pytorch_types.go``,
``tensorflow_types.go``, ``common_types.go``: ``RunPolicy``, ``SchedulingPolicy``,
``ReplicaStatus``, ``JobConditionType``), its webhooks (``pytorchjob_webhook.go``,
``tfjob_webhook.go``) and CRDs (``manifests/base/crds``); kubeflow/mpi-operator
``pkg/apis/kubeflow/v2beta1`` (``types.go``, ``validation``). What Fleet checks at submission
is what the webhooks refuse:

* the name is a DNS-1035 label (``NameIsDNS1035Label``);
* replica types are the kind's (PyTorchJob: Master, Worker; TFJob: Chief, Master, PS, Worker,
  Evaluator; MPIJob: Launcher, Worker); a leader (Master, Chief, Launcher) and an Evaluator have
  exactly one replica; an MPIJob has its Launcher;
* every template has the kind's default container (``pytorch``, ``tensorflow``; an MPIJob has
  none) and passes the API server's pod rules;
* ``runPolicy``: ``cleanPodPolicy`` is All, Running or None; ``backoffLimit``,
  ``ttlSecondsAfterFinished`` non-negative int32; ``activeDeadlineSeconds`` a positive int64;
  ``schedulingPolicy.minAvailable`` within the job's pods; ``suspend`` a boolean;
* PyTorchJob's ``elasticPolicy`` has ``minReplicas <= maxReplicas`` and does not set
  ``nProcPerNode`` together with ``spec.nprocPerNode`` (the webhook's rule);
* ``restartPolicy`` is Always, OnFailure, Never or ExitCode.

Conditions are the Kubeflow job controller's (Created, Running, Restarting, Succeeded, Failed,
Suspended), reasons ``<Kind><Reason>`` (``commonutil.NewReason``: ``PyTorchJobFailed``); a job
failed by validation (``<Kind>FailedValidation``) is the user's error. Pods carry
``training.kubeflow.org/job-name`` and ``replica-type`` (lower case) and ``replica-index``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from pydantic import Field, StrictBool, StrictStr, ValidationError

from fleet.apiserver.pods import validate_pod_template
from fleet.apiserver.resources import PrinterColumn, ResourceType
from fleet.apiserver.validation import dns1035_label
from fleet.placement.demand import Demand, DemandError, build_demand
from fleet.workloads.base import FieldError, InvalidWorkload
from fleet.workloads.models import RESTART_POLICIES, Int32, Int64, Open, pydantic_errors
from fleet.workloads.replicas import ReplicaSpecAdapter

__all__ = [
    "JOB_NAME_LABEL",
    "MPIJOB",
    "PYTORCHJOB",
    "REPLICA_INDEX_LABEL",
    "REPLICA_TYPE_LABEL",
    "TFJOB",
    "KubeflowAdapter",
    "mpijob",
    "pytorchjob",
    "tfjob",
]

GROUP: Final = "kubeflow.org"
#: The labels the Kubeflow operators put on every pod of a job (``kubeflowv1.JobNameLabel``, ...).
JOB_NAME_LABEL: Final = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL: Final = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL: Final = "training.kubeflow.org/replica-index"
CLEAN_POD_POLICIES: Final = ("All", "Running", "None")


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
    slots_per_worker: Int32 | None = Field(default=None, alias="slotsPerWorker")


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
    pod_job_label = JOB_NAME_LABEL
    #: A gang waiting for room in the member. The training operator leaves that to the gang
    #: scheduler's PodGroup; a member that reports it on the job's ``Created`` condition, as the
    #: ascend-operator does (and the simulated members do for every kind), is failed over past
    #: the policy's toleration.
    pending_reasons = frozenset({"PodGroupPending"})

    def pod_labels(self, name: str, rtype: str) -> dict[str, str]:
        return {JOB_NAME_LABEL: name, REPLICA_TYPE_LABEL: rtype.lower()}

    def validate(self, obj: Mapping[str, Any]) -> list[FieldError]:
        return self._check(obj)[1]

    def demand(self, obj: Mapping[str, Any]) -> Demand:
        demand, errors = self._check(obj)
        if errors or demand is None:
            raise InvalidWorkload(errors)
        return demand

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
        run = job.spec.run_policy if job else None
        policy = run.scheduling_policy if run else None
        try:
            demand = build_demand(
                self.replica_templates(obj, counts),
                min_available=policy.min_available if policy else None,
                annotations=(obj.get("metadata") or {}).get("annotations") or {},
                labels=(obj.get("metadata") or {}).get("labels") or {},
            )
        except DemandError as exc:
            return None, [FieldError(exc.path, exc.message)]
        return demand, []

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
            if replica.restart_policy is not None and replica.restart_policy not in RESTART_POLICIES:
                allowed = ", ".join(sorted(RESTART_POLICIES))
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


class MPIJobAdapter(KubeflowAdapter):
    """``kubeflow.org/v2beta1`` MPIJob: ``mpiReplicaSpecs`` Launcher (required, one) and Worker."""

    resource = MPIJOB
    user_error_reasons = frozenset({"MPIJobFailedValidation"})
    specs_field = "mpiReplicaSpecs"
    leaders = ("Launcher",)
    replica_types = ("Launcher", "Worker")
    singletons = ("Launcher",)
    required = ("Launcher",)

    def _policy_errors(self, job: _Job, total: int | None) -> list[FieldError]:
        errors = super()._policy_errors(job, total)
        slots = job.spec.slots_per_worker
        if slots is not None and slots < 1:
            errors.append(FieldError("spec.slotsPerWorker", "must be at least 1"))
        return errors


#: The adapters (registered in :mod:`fleet.workloads.registry`).
pytorchjob = PyTorchJobAdapter()
tfjob = TFJobAdapter()
mpijob = MPIJobAdapter()
