"""The Kubernetes ``batch/v1`` Job adapter, as Kueue treats a Job and as MultiKueue dispatches one.

Validation is kube-apiserver's (kubernetes ``pkg/apis/batch/validation/validation.go``,
``ValidateJob``/``ValidateJobSpec``), each failure one :class:`~fleet.workloads.base.FieldError`:

* ``parallelism``, ``completions``, ``backoffLimit``, ``ttlSecondsAfterFinished`` not negative,
  ``activeDeadlineSeconds`` positive; ``completionMode`` NonIndexed or Indexed, an Indexed job
  with ``completions``, both at most 100000;
* the pod template's ``restartPolicy`` OnFailure or Never (required: a Job's pods never restart
  Always); ``podFailurePolicy`` only with Never, each rule's action one Kubernetes knows;
* the name at most 63 characters (the controller labels every pod ``batch.kubernetes.io/job-name``),
  and the template passes the API server's pod rules (:mod:`fleet.apiserver.pods`).

Demand is Kueue's (kubernetes-sigs/kueue ``pkg/controller/jobs/job/job_controller.go``): one pod
set, ``main``, of ``min(parallelism, completions)`` pods (``parallelism`` defaults to 1), admitted
whole: the gang is every pod of it. A job of no pod is refused (nothing to place). The Ascend
rules are AscendJob's (:func:`fleet.placement.build_demand` over the job's labels and annotations).

``spec.suspend`` is the switch Kubernetes gives a Job, and Kueue's admission gate: a job that
names a Kueue queue (the ``kueue.x-k8s.io/queue-name`` label) is written ``suspend: true`` for
Kueue to open on admission (Kueue's own samples), and Fleet opens it as Kueue does (it is queued
and admitted as any job); without the label, ``suspend: true`` holds the job at the fleet
(:mod:`fleet.jobs.pause`: ``Suspended``, reason ``JobSuspended`` as the job controller words it)
until its owner turns it off. A member copy never carries ``suspend: true``.

Status: the member's conditions (``Complete``, ``Failed``, ``SuccessCriteriaMet``,
``FailureTarget``) with the fleet's state appended (Succeeded on ``Complete``, Failed on
``Failed``, Running once a pod is ready, else Created), ``active``, ``ready``, ``succeeded``,
``failed``, ``terminating``, the indexes and the times mirrored. A failure is retried on another
member unless the job said it is final: ``PodFailurePolicy`` (a ``FailJob`` rule matched) or
``DeadlineExceeded`` (it would run out of time anywhere).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Final

from pydantic import Field, StrictBool, StrictInt, StrictStr, ValidationError

from fleet.apiserver import (
    DNS1035_LABEL_MAX_LENGTH,
    POD,
    MergeRule,
    PrinterColumn,
    ResourceType,
    clone,
    validate_pod_template,
)
from fleet.ascend import Condition
from fleet.batch import (
    BATCH_GROUP,
    BATCH_JOB_KIND,
    BATCH_JOB_PLURAL,
    BATCH_VERSION,
    COMPLETION_MODES,
    DEADLINE_EXCEEDED,
    JOB_NAME_LABEL,
    JOB_RESTART_POLICIES,
    MAX_INDEXED_COMPLETIONS,
    POD_FAILURE_POLICY,
    POD_FAILURE_POLICY_ACTIONS,
    POD_SET,
    SUSPENDED_REASON,
    JobCondition,
)
from fleet.placement import Demand, ReplicaTemplate, build_demand
from fleet.workloads.base import KUEUE_QUEUE_LABEL, FieldError, InvalidWorkload, Outcome, WorkloadStatus
from fleet.workloads.models import Open, pydantic_errors
from fleet.workloads.replicas import ReplicaSpecAdapter
from fleet.workloads.verdicts import demand_verdict, remembered

__all__ = ["BATCH_JOB", "MIRRORED_STATUS", "BatchJobAdapter", "batch_job", "pods_count"]

SUSPEND_FIELD: Final = "spec.suspend"

#: The member's ``status`` fields the fleet object carries as the job controller wrote them.
MIRRORED_STATUS: Final = (
    "active",
    "ready",
    "succeeded",
    "failed",
    "terminating",
    "completedIndexes",
    "failedIndexes",
    "uncountedTerminatedPods",
)

#: kubectl sends strategic merge patches for a built-in kind (``kubectl apply`` of a changed Job):
#: the Job's lists merge as kube-apiserver merges them, its pod template's as a Pod's.
_STRATEGIC: Final = {
    **{path: rule for path, rule in (POD.strategic or {}).items() if path.startswith("metadata.")},
    **{
        f"spec.template.{path}": rule
        for path, rule in (POD.strategic or {}).items()
        if not path.startswith("status.")
    },
    "status.conditions": MergeRule("type"),
}

#: batch/v1 Job as kube-apiserver serves it (``kubectl get jobs``: its columns, no short name).
BATCH_JOB: Final = ResourceType(
    group=BATCH_GROUP,
    version=BATCH_VERSION,
    kind=BATCH_JOB_KIND,
    plural=BATCH_JOB_PLURAL,
    singular=BATCH_JOB_KIND.lower(),
    namespaced=True,
    printer_columns=(
        PrinterColumn("Name", "string", ".metadata.name", "Name of the job.", format="name"),
        PrinterColumn("Status", "string", ".status.conditions[-1].type", "The job's last condition."),
        PrinterColumn("Completions", "integer", ".status.succeeded", "Its pods that succeeded."),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since the job was created."),
    ),
    has_status=True,
    categories=("all",),
    strategic=_STRATEGIC,
    description="A Kubernetes Job: pods run to completion by the job controller.",
)

_Count = Annotated[StrictInt, Field(ge=0, le=2**31 - 1)]


class _Rule(Open):
    action: StrictStr


class _PodFailurePolicy(Open):
    rules: list[_Rule] = Field(default_factory=list)


class _Spec(Open):
    parallelism: _Count | None = None
    completions: _Count | None = None
    completion_mode: StrictStr | None = Field(default=None, alias="completionMode")
    backoff_limit: _Count | None = Field(default=None, alias="backoffLimit")
    active_deadline_seconds: Annotated[StrictInt, Field(ge=1)] | None = Field(
        default=None, alias="activeDeadlineSeconds"
    )
    ttl_seconds_after_finished: _Count | None = Field(default=None, alias="ttlSecondsAfterFinished")
    suspend: StrictBool | None = None
    pod_failure_policy: _PodFailurePolicy | None = Field(default=None, alias="podFailurePolicy")
    template: dict[str, Any]


class _Metadata(Open):
    name: StrictStr = Field(min_length=1)
    namespace: StrictStr = "default"
    labels: dict[str, StrictStr] = Field(default_factory=dict)
    annotations: dict[str, StrictStr] = Field(default_factory=dict)


class _Job(Open):
    metadata: _Metadata
    spec: _Spec


def pods_count(spec: Mapping[str, Any]) -> int:
    """Kueue's ``podsCount``: ``parallelism`` (1 when unset), at most ``completions``."""
    parallelism = spec.get("parallelism")
    count = parallelism if isinstance(parallelism, int) else 1
    completions = spec.get("completions")
    if isinstance(completions, int) and completions < count:
        count = completions
    return count


class BatchJobAdapter(ReplicaSpecAdapter):
    """Kubernetes' Job: one pod set (``main``) whose template is ``spec.template``; see the module doc."""

    resource = BATCH_JOB
    pod_job_label = JOB_NAME_LABEL
    reads_pods: ClassVar[bool] = True
    user_error_reasons: ClassVar[frozenset[str]] = frozenset({POD_FAILURE_POLICY, DEADLINE_EXCEEDED})
    #: ``spec.suspend`` holds a job that is not Kueue's at the fleet (:mod:`fleet.jobs.pause`).
    pause_field = SUSPEND_FIELD
    held_state = JobCondition.SUSPENDED
    held_reason = SUSPENDED_REASON

    def replica_specs(self, spec: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """The job's one pod set: its spec itself (``template`` beside the counts)."""
        return [(POD_SET, spec)] if isinstance(spec, Mapping) else []

    def replica_path(self, rtype: str) -> str:
        return "spec"

    def pod_labels(self, name: str, rtype: str) -> dict[str, str]:
        return {JOB_NAME_LABEL: name}

    # -- rules and demand ------------------------------------------------------------------------

    @remembered
    def _check(self, obj: Mapping[str, Any]) -> tuple[Demand | None, list[FieldError]]:
        errors: list[FieldError] = []
        if obj.get("apiVersion") != self.api_version:
            errors.append(FieldError("apiVersion", f"must be {self.api_version}"))
        if obj.get("kind") != self.kind:
            errors.append(FieldError("kind", f"must be {self.kind}"))
        try:
            job = _Job.model_validate(obj)
        except ValidationError as exc:
            return None, errors + pydantic_errors(exc)
        spec, name = job.spec, job.metadata.name
        if len(name) > DNS1035_LABEL_MAX_LENGTH:
            errors.append(
                FieldError(
                    "metadata.name",
                    f'Invalid value: "{name}": must be no more than {DNS1035_LABEL_MAX_LENGTH} characters: '
                    f"the job controller labels every pod {JOB_NAME_LABEL}",
                )
            )
        mode = spec.completion_mode or COMPLETION_MODES[0]
        if mode not in COMPLETION_MODES:
            errors.append(
                FieldError(
                    "spec.completionMode",
                    f'Unsupported value: "{mode}": supported values: "NonIndexed", "Indexed"',
                    "FieldValueNotSupported",
                )
            )
        if mode == "Indexed":
            if spec.completions is None:
                errors.append(
                    FieldError("spec.completions", "when completion mode is Indexed", "FieldValueRequired")
                )
            for field, value in (("completions", spec.completions), ("parallelism", spec.parallelism)):
                if value is not None and value > MAX_INDEXED_COMPLETIONS:
                    errors.append(
                        FieldError(
                            f"spec.{field}",
                            f"must be less than or equal to {MAX_INDEXED_COMPLETIONS} when completion "
                            "mode is Indexed",
                        )
                    )
        restart = (spec.template.get("spec") or {}).get("restartPolicy")
        if restart not in JOB_RESTART_POLICIES:
            reason = "FieldValueRequired" if restart is None else "FieldValueNotSupported"
            shown = "Required value" if restart is None else f'Unsupported value: "{restart}"'
            errors.append(
                FieldError(
                    "spec.template.spec.restartPolicy",
                    f'{shown}: supported values: "OnFailure", "Never"',
                    reason,
                )
            )
        if spec.pod_failure_policy is not None:
            if restart != "Never":
                errors.append(
                    FieldError(
                        "spec.podFailurePolicy",
                        "only allowed with spec.template.spec.restartPolicy Never",
                    )
                )
            for i, rule in enumerate(spec.pod_failure_policy.rules):
                if rule.action not in POD_FAILURE_POLICY_ACTIONS:
                    errors.append(
                        FieldError(
                            f"spec.podFailurePolicy.rules[{i}].action",
                            f'Unsupported value: "{rule.action}": supported values: '
                            + ", ".join(f'"{a}"' for a in POD_FAILURE_POLICY_ACTIONS),
                            "FieldValueNotSupported",
                        )
                    )
        causes = validate_pod_template(obj["spec"]["template"], "spec.template")
        errors += [FieldError(c.field, c.message, c.reason) for c in causes]
        count = pods_count(obj["spec"])
        if count == 0:
            errors.append(
                FieldError("spec.parallelism", "must run at least one pod: parallelism and completions are 0")
            )
        if errors:
            return None, errors
        return demand_verdict(self.accepted_demand, obj)

    def accepted_demand(self, obj: Mapping[str, Any]) -> Demand:
        """The demand of a job whose types the rules passed, read from the job as written (the one
        reading :meth:`_check` builds its demand with; see
        :class:`~fleet.workloads.base.AcceptedDemand`): its pods all at once."""
        spec, meta = obj["spec"], obj["metadata"]
        count = pods_count(spec)
        template = ReplicaTemplate(
            name=POD_SET,
            replicas=count,
            template=spec["template"],
            path="spec.template",
            pod_labels=self.pod_labels(str(meta["name"]), POD_SET),
        )
        return build_demand(
            [template],
            min_available=count,
            annotations=meta.get("annotations") or {},
            labels=meta.get("labels") or {},
        )

    def validate(self, obj: Mapping[str, Any]) -> list[FieldError]:
        return self._check(obj)[1]

    def demand(self, obj: Mapping[str, Any]) -> Demand:
        demand, errors = self._check(obj)
        if errors or demand is None:
            raise InvalidWorkload(errors)
        return demand

    # -- suspend: Kubernetes' switch, Kueue's gate -----------------------------------------------

    def paused(self, obj: Mapping[str, Any]) -> bool:
        """``spec.suspend`` on a job that is not Kueue's (one with Kueue's queue label is
        admitted by Fleet as Kueue admits it: the switch is Kueue's gate)."""
        spec = obj.get("spec")
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return isinstance(spec, Mapping) and spec.get("suspend") is True and KUEUE_QUEUE_LABEL not in labels

    def without_pause_switch(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        raw = obj.get("spec")
        spec = clone(dict(raw)) if isinstance(raw, Mapping) else {}
        spec.pop("suspend", None)
        return spec

    def member_copy(
        self,
        obj: Mapping[str, Any],
        fleet_uid: str,
        attempt: int,
        *,
        pin: Mapping[str, Sequence[str]] | None = None,
    ) -> dict[str, Any]:
        """The base's copy, never suspended (Fleet holds a job itself; Kueue's gate is open)."""
        body = super().member_copy(obj, fleet_uid, attempt, pin=pin)
        body["spec"]["suspend"] = False
        return body

    # -- status ----------------------------------------------------------------------------------

    def map_status(self, member_obj: Mapping[str, Any]) -> WorkloadStatus:
        status = member_obj.get("status")
        status = status if isinstance(status, Mapping) else {}
        native = [dict(c) for c in status.get("conditions") or [] if isinstance(c, Mapping)]
        true = {c.get("type"): c for c in native if c.get("status") == "True"}
        extra = {k: clone(status[k]) for k in MIRRORED_STATUS if k in status}
        counts = ", ".join(f"{k} {status.get(k, 0)}" for k in ("active", "ready", "succeeded", "failed"))
        state: str | None
        if JobCondition.FAILED in true:
            failed = true[JobCondition.FAILED]
            state, reason, message = (
                Condition.FAILED,
                str(failed.get("reason") or ""),
                str(failed.get("message") or ""),
            )
        elif JobCondition.COMPLETE in true:
            state, reason, message = Condition.SUCCEEDED, "Completed", f"the job completed ({counts})"
        elif isinstance(status.get("ready"), int) and status["ready"] > 0:
            state, reason, message = Condition.RUNNING, "PodsReady", f"its pods run ({counts})"
        elif status.get("active") or status.get("startTime"):
            state, reason, message = Condition.CREATED, "PodsCreated", f"its pods wait to run ({counts})"
        else:
            return WorkloadStatus(state=None, reason=None, message=None, conditions=native, extra=extra)
        stamp = max((str(c.get("lastTransitionTime") or "") for c in native), default="")
        own = true.get(state)
        last = own or {
            "type": state,
            "status": "True",
            "reason": reason,
            "message": message,
            **({"lastTransitionTime": stamp} if stamp else {}),
        }
        conditions = [c for c in native if c is not own] + [last]
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
        outcome = super().classify(status)
        if outcome is Outcome.STARTING and status.unschedulable:
            return Outcome.STUCK_PENDING
        return outcome


#: The batch Job adapter (listed in :mod:`fleet.workloads.registry`).
batch_job = BatchJobAdapter()
