"""Kubeflow Trainer v2: TrainJob (``trainer.kubeflow.org/v1alpha1``) and the runtimes it runs on.

Sources: kubeflow/trainer ``pkg/apis/trainer/v1alpha1`` (``trainjob_types.go``: ``runtimeRef``
{``name``, ``apiGroup``, ``kind`` (default ClusterTrainingRuntime)}, ``trainer`` {``image``,
``command``, ``args``, ``env``, ``numNodes``, ``resourcesPerNode``, ``numProcPerNode``},
``suspend``, ``activeDeadlineSeconds``; status ``conditions`` (``Complete``, ``Failed``,
``Suspended``) and ``jobsStatus``; ``trainingruntime_types.go``: ``mlPolicy`` {``numNodes``,
``torch``, ``mpi``}, ``podGroupPolicy``, ``template`` (a JobSet template)),
``pkg/runtime/core/trainingruntime.go`` (the trainer job's pod count is ``mlPolicy.numNodes``;
``resourcesPerNode`` merged into the ``node`` container of the replicated job labelled
``trainer.kubeflow.org/trainjob-ancestor-step: trainer``),
``pkg/runtime/framework/plugins/torch/torch.go`` (``trainer.numNodes`` overrides it) and
``pkg/runtime/framework/plugins/jobset`` (``builder.go``: the trainer job has one replica, its
``node`` container takes the TrainJob's image, command, args and env; ``jobset.go``: each
replicated job's ``parallelism`` and ``completions`` are its pod count).

At the fleet:

* TrainingRuntime (namespaced) and ClusterTrainingRuntime (cluster-scoped) are served and
  stored; they are not queued (:data:`RUNTIME_KINDS`);
* a TrainJob is resolved at submission: the runtime its ``runtimeRef`` names must exist at the
  fleet (else 422 on ``spec.runtimeRef``), and is recorded on the job
  (:data:`fleet.trainer.RUNTIME_ANNOTATION`), so the job's demand, and what its member gets, do
  not change when the runtime changes later (Kueue's TrainJob integration likewise reads the
  runtime when it admits);
* its demand is the JobSet Trainer would build (:func:`effective_jobset`), counted as a JobSet
  (:mod:`fleet.workloads.jobset`: every pod of every replicated job, one gang);
* its member gets the runtime first, as ``propagateDeps`` sends a ConfigMap
  (:meth:`TrainJobAdapter.dependencies`): always as a namespaced TrainingRuntime in the job's
  namespace, marked ``fleet.io/companion``, and the copy's ``runtimeRef`` names it so: Fleet
  needs no cluster-wide write in a member (an existing runtime of that name is left as it is);
* the fleet shows Trainer's conditions and ``jobsStatus``, then the state in Fleet's words
  (``Succeeded`` for ``Complete``; ``Running`` while a Job is active). A failure is retried on
  another member unless Trainer says it was the job's own (``DeadlineExceeded``,
  ``TrainingRuntimeNotSupported``); ``spec.suspend`` holds it at the fleet.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from fleet.apiserver import PrinterColumn, ResourceType, clone, dns1035_label
from fleet.jobset import JOBSET_GROUP, JOBSET_KIND, JOBSET_VERSION
from fleet.placement import Demand
from fleet.trainer import (
    ANCESTOR_LABEL,
    ANCESTOR_TRAINER,
    CLUSTER_RUNTIME_KIND,
    COMPLETE,
    FAILED,
    NODE,
    RUNTIME_ANNOTATION,
    RUNTIME_KIND,
    RUNTIME_NOT_SUPPORTED,
    SUSPENDED,
    TRAINER_GROUP,
    TRAINER_VERSION,
    TRAINJOB_KIND,
)
from fleet.workloads.base import (
    FieldError,
    InvalidWorkload,
    Outcome,
    PriorityRequest,
    WorkloadStatus,
    member_metadata,
)
from fleet.workloads.jobset import jobset

__all__ = [
    "CLUSTER_TRAINING_RUNTIME",
    "RUNTIME_KINDS",
    "TRAINING_RUNTIME",
    "TRAINJOB",
    "TrainJobAdapter",
    "effective_jobset",
    "trainjob",
    "with_runtime",
]

_COLUMNS: Final = (
    PrinterColumn("Name", "string", ".metadata.name", "Name of the object."),
    PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since it was created."),
)

#: TrainJob as its CRD serves it in a member (STATE: the last condition, as Trainer prints it).
TRAINJOB: Final = ResourceType(
    group=TRAINER_GROUP,
    version=TRAINER_VERSION,
    kind=TRAINJOB_KIND,
    plural="trainjobs",
    singular="trainjob",
    namespaced=True,
    printer_columns=(
        PrinterColumn("Name", "string", ".metadata.name", "Name of the TrainJob."),
        PrinterColumn("State", "string", ".status.conditions[-1:].type", "The TrainJob's last condition."),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since it was created."),
    ),
    has_status=True,
    categories=("all", "kubeflow"),
    description="A training job of Kubeflow Trainer v2, run by its controller on a training runtime.",
)
#: The runtimes, namespaced and cluster-scoped (a template of the JobSet a TrainJob becomes).
TRAINING_RUNTIME: Final = ResourceType(
    group=TRAINER_GROUP,
    version=TRAINER_VERSION,
    kind=RUNTIME_KIND,
    plural="trainingruntimes",
    singular="trainingruntime",
    namespaced=True,
    printer_columns=_COLUMNS,
    categories=("kubeflow",),
    description="A namespaced blueprint of training jobs (Kubeflow Trainer): ML policy and JobSet template.",
)
CLUSTER_TRAINING_RUNTIME: Final = replace(
    TRAINING_RUNTIME,
    kind=CLUSTER_RUNTIME_KIND,
    plural="clustertrainingruntimes",
    singular="clustertrainingruntime",
    namespaced=False,
    description="A cluster-wide blueprint of training jobs (Kubeflow Trainer): ML policy, JobSet template.",
)
#: The runtime kinds, by the ``runtimeRef.kind`` that names each.
RUNTIME_KINDS: Final = {RUNTIME_KIND: TRAINING_RUNTIME, CLUSTER_RUNTIME_KIND: CLUSTER_TRAINING_RUNTIME}

#: Failure reasons that are the job's own (not retried on another member).
_USER_REASONS: Final = frozenset({"DeadlineExceeded", RUNTIME_NOT_SUPPORTED})


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(obj.get("spec"))


def runtime_ref(obj: Mapping[str, Any]) -> tuple[str, str]:
    """``(kind, name)`` of the runtime the TrainJob names (kind defaults to ClusterTrainingRuntime)."""
    ref = _map(_spec(obj).get("runtimeRef"))
    kind = ref.get("kind") if isinstance(ref.get("kind"), str) else CLUSTER_RUNTIME_KIND
    name = ref.get("name") if isinstance(ref.get("name"), str) else ""
    return str(kind), str(name)


def with_runtime(
    obj: dict[str, Any], lookup: Callable[[ResourceType, str | None, str], Mapping[str, Any] | None]
) -> None:
    """Record on TrainJob ``obj`` the runtime its ``runtimeRef`` names, as ``lookup`` finds it at
    the fleet (``None``: not found: the annotation is left off and validation says so). Whatever
    the body carried under the annotation is replaced."""
    meta = obj.setdefault("metadata", {})
    annotations = dict(meta.get("annotations") or {})
    annotations.pop(RUNTIME_ANNOTATION, None)
    kind, name = runtime_ref(obj)
    rt = RUNTIME_KINDS.get(kind)
    found = lookup(rt, meta.get("namespace") or "default", name) if rt is not None and name else None
    if found is not None:
        record = {"kind": kind, "name": name, "spec": found.get("spec") or {}}
        annotations[RUNTIME_ANNOTATION] = json.dumps(record, sort_keys=True, separators=(",", ":"))
    meta["annotations"] = annotations


def _recorded(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    raw = _map(_map(obj.get("metadata")).get("annotations")).get(RUNTIME_ANNOTATION)
    if not isinstance(raw, str):
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    return record if isinstance(record, Mapping) else None


def _merge_resources(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``MergeResourceRequirements``: the TrainJob's limits and requests win per resource."""
    out: dict[str, Any] = {}
    for part in ("limits", "requests"):
        merged = {**_map(base.get(part)), **_map(override.get(part))}
        if merged:
            out[part] = merged
    return out


def effective_jobset(obj: Mapping[str, Any], runtime_spec: Mapping[str, Any]) -> dict[str, Any]:
    """The JobSet spec Trainer makes of TrainJob ``obj`` on a runtime of ``runtime_spec``: the
    runtime's template, its trainer job (labelled ancestor ``trainer``) of one replica and
    ``numNodes`` pods (the TrainJob's, else ``mlPolicy.numNodes``, else 1) whose ``node``
    container takes the TrainJob's image, command, args, env and ``resourcesPerNode``; every other
    replicated job runs its ``parallelism`` pods."""
    spec = clone(dict(_map(_map(runtime_spec.get("template")).get("spec"))))
    trainer = _map(_spec(obj).get("trainer"))
    ml = _map(runtime_spec.get("mlPolicy"))
    nodes = trainer.get("numNodes", ml.get("numNodes", 1))
    for rjob in spec.get("replicatedJobs") or []:
        if not isinstance(rjob, dict):
            continue
        template = rjob.setdefault("template", {})
        job_spec = template.setdefault("spec", {})
        labels = _map(_map(template.get("metadata")).get("labels"))
        if labels.get(ANCESTOR_LABEL) != ANCESTOR_TRAINER:
            count = job_spec.get("parallelism", 1)
            job_spec["parallelism"] = job_spec["completions"] = count
            continue
        rjob["replicas"] = 1
        job_spec["parallelism"] = job_spec["completions"] = nodes
        pod_spec = job_spec.setdefault("template", {}).setdefault("spec", {})
        for container in pod_spec.get("containers") or []:
            if not isinstance(container, dict) or container.get("name") != NODE:
                continue
            for field in ("image", "command", "args"):
                if field in trainer:
                    container[field] = clone(trainer[field])
            if isinstance(trainer.get("env"), list):
                names = {e.get("name") for e in trainer["env"] if isinstance(e, Mapping)}
                kept = [e for e in container.get("env") or [] if _map(e).get("name") not in names]
                container["env"] = [*kept, *clone(trainer["env"])]
            if isinstance(trainer.get("resourcesPerNode"), Mapping):
                container["resources"] = _merge_resources(
                    _map(container.get("resources")), trainer["resourcesPerNode"]
                )
    return spec


class TrainJobAdapter:
    """The TrainJob adapter (see the module doc)."""

    resource = TRAINJOB
    #: The runtime's pods carry no label of one job: Fleet reads none of them.
    reads_pods = False
    pod_job_label = ""
    pause_field = "spec.suspend"
    held_state = SUSPENDED

    @property
    def api_version(self) -> str:
        return self.resource.api_version

    @property
    def kind(self) -> str:
        return self.resource.kind

    @property
    def plural(self) -> str:
        return self.resource.plural

    @property
    def held_reason(self) -> str:
        """Trainer's reason for a suspended TrainJob (``TrainJobSuspendedReason``)."""
        return "Suspended"

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return obj.get("apiVersion") == self.api_version and obj.get("kind") == self.kind

    def _as_jobset(self, obj: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[FieldError]]:
        errors: list[FieldError] = []
        meta = _map(obj.get("metadata"))
        name = meta.get("name")
        if isinstance(name, str) and (why := dns1035_label(name)):
            errors.append(FieldError("metadata.name", f'Invalid value: "{name}": {why}'))
        spec = _spec(obj)
        ref = _map(spec.get("runtimeRef"))
        kind, rname = runtime_ref(obj)
        if not rname:
            errors.append(FieldError("spec.runtimeRef.name", "is required", "FieldValueRequired"))
        if kind not in RUNTIME_KINDS:
            errors.append(
                FieldError(
                    "spec.runtimeRef.kind",
                    f"Unsupported value: {kind!r}: supported values: {', '.join(RUNTIME_KINDS)}",
                    "FieldValueNotSupported",
                )
            )
        group = ref.get("apiGroup", TRAINER_GROUP)
        if group != TRAINER_GROUP:
            errors.append(FieldError("spec.runtimeRef.apiGroup", f"must be {TRAINER_GROUP}"))
        trainer = _map(spec.get("trainer"))
        for field, low in (("numNodes", 0), ("numProcPerNode", 1)):
            value = trainer.get(field)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < low):
                errors.append(FieldError(f"spec.trainer.{field}", f"must be an integer of at least {low}"))
        suspend = spec.get("suspend")
        if suspend is not None and not isinstance(suspend, bool):
            errors.append(FieldError("spec.suspend", "must be a boolean"))
        if errors:
            return None, errors
        record = _recorded(obj)
        if record is None or record.get("kind") != kind or record.get("name") != rname:
            where = (
                ""
                if kind == CLUSTER_RUNTIME_KIND
                else f" in namespace {meta.get('namespace') or 'default'!r}"
            )
            return None, [
                FieldError(
                    "spec.runtimeRef",
                    f"{kind} {rname!r} not found{where}: create the runtime at the fleet before the TrainJob",
                    "FieldValueNotFound",
                )
            ]
        body = {
            "apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}",
            "kind": JOBSET_KIND,
            "metadata": {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta},
            "spec": effective_jobset(obj, _map(record.get("spec"))),
        }
        return body, []

    def validate(self, obj: Mapping[str, Any]) -> list[FieldError]:
        body, errors = self._as_jobset(obj)
        if body is None:
            return errors
        kind, name = runtime_ref(obj)
        return [
            FieldError("spec.runtimeRef", f"the JobSet Trainer builds from {kind} {name!r}: {e}", e.reason)
            if e.path.startswith("spec.")
            else e
            for e in jobset.validate(body)
        ]

    def demand(self, obj: Mapping[str, Any]) -> Demand:
        body, errors = self._as_jobset(obj)
        if body is None:
            raise InvalidWorkload(errors)
        return jobset.demand(body)

    def priority_request(self, obj: Mapping[str, Any]) -> PriorityRequest:
        return PriorityRequest()

    def pod_labels(self, name: str, rtype: str) -> dict[str, str]:
        return jobset.pod_labels(name, rtype)

    # --- suspend (fleet.jobs.pause) ------------------------------------------------------------------

    def paused(self, obj: Mapping[str, Any]) -> bool:
        return _spec(obj).get("suspend") is True

    def without_pause_switch(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        spec = clone(dict(_spec(obj)))
        spec.pop("suspend", None)
        return spec

    # --- status --------------------------------------------------------------------------------------

    def map_status(self, member_obj: Mapping[str, Any]) -> WorkloadStatus:
        """Trainer's conditions and ``jobsStatus``, then the state in Fleet's words."""
        status = _map(member_obj.get("status"))
        native = [dict(c) for c in status.get("conditions") or [] if isinstance(c, Mapping)]
        true = {str(c.get("type")): c for c in native if c.get("status") == "True"}
        state: str | None = None
        reason = message = None
        if COMPLETE in true:
            state, reason, message = "Succeeded", true[COMPLETE].get("reason"), true[COMPLETE].get("message")
        elif FAILED in true:
            state, reason, message = "Failed", true[FAILED].get("reason"), true[FAILED].get("message")
        elif any(
            isinstance(j, Mapping) and (j.get("active") or j.get("ready"))
            for j in status.get("jobsStatus") or []
        ):
            state, reason, message = "Running", "JobsActive", "the TrainJob's Jobs are running"
        conditions = list(native)
        if state is not None:
            same = true.get(state)
            stamp = max((str(c.get("lastTransitionTime") or "") for c in native), default="")
            last = same or {
                "type": state,
                "status": "True",
                "reason": reason or state,
                "message": message or "",
                **({"lastTransitionTime": stamp} if stamp else {}),
            }
            conditions = [c for c in native if c.get("type") != state] + [last]
        extra = {"jobsStatus": clone(status["jobsStatus"])} if "jobsStatus" in status else {}
        return WorkloadStatus(state=state, reason=reason, message=message, conditions=conditions, extra=extra)

    def classify(self, status: WorkloadStatus) -> Outcome:
        if status.state == "Succeeded":
            return Outcome.SUCCEEDED
        if status.state == "Failed":
            return Outcome.USER_ERROR if status.reason in _USER_REASONS else Outcome.RETRIABLE
        if status.state == "Running":
            return Outcome.RUNNING
        return Outcome.STARTING

    # --- the member copy and what goes before it ----------------------------------------------------

    def resolve(
        self,
        obj: dict[str, Any],
        lookup: Callable[[ResourceType, str | None, str], Mapping[str, Any] | None],
    ) -> None:
        """The runtime the job names, recorded on it (:func:`with_runtime`)."""
        with_runtime(obj, lookup)

    def dependencies(self, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The runtime the job was submitted with, as a namespaced TrainingRuntime of the job's
        namespace, marked as Fleet's (created in the member before the copy)."""
        record = _recorded(obj)
        if record is None:
            return []
        meta = _map(obj.get("metadata"))
        return [
            {
                "apiVersion": TRAINING_RUNTIME.api_version,
                "kind": RUNTIME_KIND,
                "metadata": {
                    "name": str(record.get("name")),
                    "namespace": str(meta.get("namespace") or "default"),
                    "labels": {"fleet.io/companion": "true"},
                },
                "spec": clone(dict(_map(record.get("spec")))),
            }
        ]

    def member_copy(
        self,
        obj: Mapping[str, Any],
        fleet_uid: str,
        attempt: int,
        *,
        pin: Mapping[str, Sequence[str]] | None = None,
    ) -> dict[str, Any]:
        """The TrainJob never suspended, naming the namespaced runtime sent before it."""
        spec = clone(dict(_spec(obj)))
        spec.pop("suspend", None)
        _, name = runtime_ref(obj)
        spec["runtimeRef"] = {"name": name, "apiGroup": TRAINER_GROUP, "kind": RUNTIME_KIND}
        meta = member_metadata(obj, fleet_uid, attempt)
        annotations = dict(meta.get("annotations") or {})
        annotations.pop(RUNTIME_ANNOTATION, None)
        meta["annotations"] = annotations
        return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": meta, "spec": spec}


#: The TrainJob adapter (registered in :mod:`fleet.workloads.registry`).
trainjob = TrainJobAdapter()
