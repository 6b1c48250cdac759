"""The AscendJob adapter: the ascend-operator's validation, demand, status and member copy.

Validation follows the ascend-operator (MindCluster) rules for ``mindxdl.gitee.com/v1``
AscendJob, each failure one :class:`~fleet.workloads.base.FieldError` with its path:

* ``metadata.labels.framework`` is pytorch, mindspore or tensorflow;
* replica types are the framework's leader and ``Worker`` (pytorch: Master, mindspore:
  Scheduler, tensorflow: Chief); the leader has exactly one replica and is required once the
  job has more than one pod (the workers rendezvous with it);
* every template has a container named ``ascend`` with an image;
* replica counts lie in 1..:data:`MAX_REPLICAS`, ``minAvailable`` in 1..total replicas;
* quantities are valid Kubernetes quantities (requests within limits), the schedule policy
  annotation is well formed;
* ``spec.runPolicy.schedulingPolicy.priorityClass``, when given, is a string: the name of a
  PriorityClass, which Fleet resolves at submission (:mod:`fleet.jobs.priority`).

The pydantic models read only the parts Fleet uses and allow any other field: users write full
pod templates and the member copy carries them unchanged.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fleet.ascend import (
    ASCENDJOB_GROUP,
    ASCENDJOB_KIND,
    ASCENDJOB_PLURAL,
    ASCENDJOB_VERSION,
    FRAMEWORK_LABEL,
)
from fleet.placement.demand import Demand, DemandError, ReplicaTemplate, build_demand
from fleet.workloads.base import (
    FieldError,
    InvalidWorkload,
    PriorityRequest,
    WorkloadStatus,
    fleet_labels,
    member_metadata,
    pin_to_nodes,
    register,
    run_policy_priority_class,
)

__all__ = ["ASCEND_CONTAINER", "FRAMEWORKS", "MAX_REPLICAS", "AscendJobAdapter", "ascendjob"]

#: The container the ascend-operator configures (``name: ascend # do not modify``).
ASCEND_CONTAINER: Final = "ascend"
#: Framework -> its leader replica type; the other type is always ``Worker``.
FRAMEWORKS: Final[dict[str, str]] = {"pytorch": "Master", "mindspore": "Scheduler", "tensorflow": "Chief"}
WORKER: Final = "Worker"
#: Most replicas one type may ask for (an int32 field; anything larger is a typo).
MAX_REPLICAS: Final = 10_000


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Container(_Open):
    name: str
    image: str | None = None


class PodSpec(_Open):
    containers: list[Container] = Field(min_length=1)


class PodTemplate(_Open):
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: PodSpec


class ReplicaSpec(_Open):
    replicas: int = 1
    restart_policy: str | None = Field(default=None, alias="restartPolicy")
    template: PodTemplate


class SchedulingPolicy(_Open):
    min_available: int | None = Field(default=None, alias="minAvailable")
    queue: str | None = None
    #: The PriorityClass of the job (the ascend-operator copies it into the PodGroup's
    #: ``priorityClassName``); Fleet resolves it at submission (:mod:`fleet.jobs.priority`).
    priority_class: str | None = Field(default=None, alias="priorityClass")


class RunPolicy(_Open):
    scheduling_policy: SchedulingPolicy | None = Field(default=None, alias="schedulingPolicy")
    backoff_limit: int | None = Field(default=None, alias="backoffLimit")


class Spec(_Open):
    replica_specs: dict[str, ReplicaSpec] = Field(alias="replicaSpecs")
    run_policy: RunPolicy | None = Field(default=None, alias="runPolicy")


class Metadata(_Open):
    name: str = Field(min_length=1)
    namespace: str = "default"
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class AscendJob(_Open):
    api_version: str = Field(alias="apiVersion")
    kind: str
    metadata: Metadata
    spec: Spec

    @property
    def min_available(self) -> int | None:
        run = self.spec.run_policy
        return run.scheduling_policy.min_available if run and run.scheduling_policy else None


_RESTART_POLICIES = frozenset({"Always", "OnFailure", "Never", "ExitCode"})

_PYDANTIC_MESSAGES = {
    "missing": "is required",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "string_type": "must be a string",
    "dict_type": "must be an object",
    "list_type": "must be a list",
    "model_type": "must be an object",
    "too_short": "must not be empty",
}


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _pydantic_errors(exc: ValidationError) -> list[FieldError]:
    return [
        FieldError(_path(e["loc"]), _PYDANTIC_MESSAGES.get(e["type"], e["msg"][:1].lower() + e["msg"][1:]))
        for e in exc.errors()
    ]


def _replica_templates(obj: Mapping[str, Any], job: AscendJob, leader: str) -> list[ReplicaTemplate]:
    """The leader first, then the others by name; templates as the user wrote them."""
    order = sorted(job.spec.replica_specs, key=lambda t: (t != leader, t))
    raw = obj["spec"]["replicaSpecs"]
    return [
        ReplicaTemplate(
            name=t,
            replicas=job.spec.replica_specs[t].replicas,
            template=raw[t]["template"],
            path=f"spec.replicaSpecs.{t}.template",
        )
        for t in order
    ]


class AscendJobAdapter:
    api_version = f"{ASCENDJOB_GROUP}/{ASCENDJOB_VERSION}"
    kind = ASCENDJOB_KIND
    plural = ASCENDJOB_PLURAL

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return obj.get("apiVersion") == self.api_version and obj.get("kind") == self.kind

    def _parse(self, obj: Mapping[str, Any]) -> tuple[AscendJob | None, list[FieldError]]:
        try:
            job = AscendJob.model_validate(obj)
        except ValidationError as exc:
            return None, _pydantic_errors(exc)
        errors: list[FieldError] = []
        if job.api_version != self.api_version:
            errors.append(FieldError("apiVersion", f"must be {self.api_version}"))
        if job.kind != self.kind:
            errors.append(FieldError("kind", f"must be {self.kind}"))
        return job, errors

    def validate(self, obj: Mapping[str, Any]) -> list[FieldError]:
        return self._check(obj)[1]

    def _check(self, obj: Mapping[str, Any]) -> tuple[Demand | None, list[FieldError]]:
        """Every rule at once: the job's demand (None when any rule failed) and what failed."""
        job, errors = self._parse(obj)
        if job is None:
            return None, errors
        framework = job.metadata.labels.get(FRAMEWORK_LABEL)
        allowed = ", ".join(FRAMEWORKS)
        fpath = f"metadata.labels.{FRAMEWORK_LABEL}"
        if framework is None:
            errors.append(FieldError(fpath, f"is required (one of {allowed})"))
        elif framework not in FRAMEWORKS:
            errors.append(FieldError(fpath, f"{framework!r} is not a supported framework (one of {allowed})"))
        specs = job.spec.replica_specs
        if not specs:
            errors.append(FieldError("spec.replicaSpecs", "must name at least one replica type"))
        leader = FRAMEWORKS.get(framework or "")
        for rtype, spec in specs.items():
            path = f"spec.replicaSpecs.{rtype}"
            if leader is not None and rtype not in (leader, WORKER):
                errors.append(
                    FieldError(
                        path, f"is not a replica type of a {framework} job (allowed: {leader}, {WORKER})"
                    )
                )
            if rtype == leader and spec.replicas != 1:
                errors.append(FieldError(f"{path}.replicas", f"must be 1 for the {framework} leader"))
            elif not 1 <= spec.replicas <= MAX_REPLICAS:
                errors.append(FieldError(f"{path}.replicas", f"must be between 1 and {MAX_REPLICAS}"))
            if spec.restart_policy is not None and spec.restart_policy not in _RESTART_POLICIES:
                errors.append(
                    FieldError(
                        f"{path}.restartPolicy", f"must be one of {', '.join(sorted(_RESTART_POLICIES))}"
                    )
                )
            cpath = f"{path}.template.spec.containers"
            ascend = [i for i, c in enumerate(spec.template.spec.containers) if c.name == ASCEND_CONTAINER]
            if not ascend:
                errors.append(FieldError(cpath, f"must have a container named {ASCEND_CONTAINER}"))
            for i in ascend:
                if not spec.template.spec.containers[i].image:
                    errors.append(FieldError(f"{cpath}[{i}].image", "is required"))
        total = sum(s.replicas for s in specs.values())
        if leader is not None and leader not in specs and total > 1:
            errors.append(
                FieldError(
                    f"spec.replicaSpecs.{leader}", f"is required for a {framework} job of more than one pod"
                )
            )
        counts_ok = bool(specs) and all(1 <= s.replicas <= MAX_REPLICAS for s in specs.values())
        min_available = job.min_available
        if counts_ok and min_available is not None and not 1 <= min_available <= total:
            errors.append(
                FieldError(
                    "spec.runPolicy.schedulingPolicy.minAvailable",
                    f"must be between 1 and the job's {total} replicas",
                )
            )
        demand: Demand | None = None
        try:
            demand = build_demand(
                job.metadata.name,
                _replica_templates(obj, job, leader or ""),
                min_available=min_available if not errors else None,
                annotations=job.metadata.annotations,
            )
        except DemandError as exc:
            errors.append(FieldError(exc.path, exc.message))
        return (demand if not errors else None), errors

    def demand(self, obj: Mapping[str, Any]) -> Demand:
        demand, errors = self._check(obj)
        if errors or demand is None:
            raise InvalidWorkload(errors)
        return demand

    def priority_request(self, obj: Mapping[str, Any]) -> PriorityRequest:
        """``spec.runPolicy.schedulingPolicy.priorityClass``, as MindCluster documents it."""
        return run_policy_priority_class(obj)

    def map_status(self, member_obj: Mapping[str, Any]) -> WorkloadStatus:
        status = member_obj.get("status") or {}
        conditions = [dict(c) for c in status.get("conditions") or [] if isinstance(c, Mapping)]
        last = next((c for c in reversed(conditions) if c.get("status") == "True"), None)
        return WorkloadStatus(
            state=last.get("type") if last else None,
            reason=last.get("reason") if last else None,
            message=last.get("message") if last else None,
            conditions=conditions,
            replica_statuses=dict(status.get("replicaStatuses") or {}),
            start_time=status.get("startTime"),
            completion_time=status.get("completionTime"),
        )

    def member_copy(
        self,
        obj: Mapping[str, Any],
        fleet_uid: str,
        attempt: int,
        *,
        pin: Mapping[str, Sequence[str]] | None = None,
    ) -> dict[str, Any]:
        """Same name and namespace (the job's own anti-affinity names it), fleet labels on the
        job and on every pod template, no status and no server-owned metadata; with ``pin``,
        each replica type's pods restricted to its planned nodes."""
        body: dict[str, Any] = {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "metadata": member_metadata(obj, fleet_uid, attempt),
            "spec": copy.deepcopy(dict(obj.get("spec") or {})),
        }
        labels = fleet_labels(obj, fleet_uid, attempt)
        for rtype, spec in (body["spec"].get("replicaSpecs") or {}).items():
            template = spec.setdefault("template", {})
            meta = template.setdefault("metadata", {})
            meta["labels"] = {**(meta.get("labels") or {}), **labels}
            if pin and pin.get(rtype):
                pin_to_nodes(template.setdefault("spec", {}), pin[rtype])
        return body


#: The registered AscendJob adapter.
ascendjob = register(AscendJobAdapter())
