"""The Volcano Job adapter (``batch.volcano.sh/v1alpha1`` Job, short names ``vcjob``, ``vcj``).

Validation is Volcano's admission webhook (volcano-sh/volcano
``pkg/webhooks/admission/jobs/validate/admit_job.go``, ``validateJobCreate``, and ``util.go``),
each failure one :class:`~fleet.workloads.base.FieldError` with its path:

* at least one task; task names unique; a task's ``minAvailable`` at most its ``replicas``; the
  job's ``minAvailable`` at most the replicas of all tasks (``minAvailable``, ``replicas`` and
  ``maxRetry`` are never negative: the CRD's ``minimum: 0``);
* every pod name ``<job>-<task>-<index>`` (``MakePodName``) a DNS-1123 label; the job's name a
  qualified name (``validateJobName``);
* lifecycle policies (``validatePolicies``): an event or an exit code, never both, never neither;
  an event and action a user may write (:data:`fleet.volcano.EVENTS`, :data:`~fleet.volcano.ACTIONS`);
  no event twice across the policies; ``*`` alone; exit code not 0 and not twice;
* every plugin one the controller has (:data:`fleet.volcano.PLUGINS`); every pod template passes
  the API server's rules (:mod:`fleet.apiserver.pods`).

Fleet refuses a job of no pod at all (Volcano accepts one; there is nothing to place). Volcano's
queue check (the queue exists, is Open, is a leaf) is Fleet's own: ``spec.queue`` names a leaf of
the ElasticQuotaTree (``default``, the webhook's default, leaves the job to its namespace's leaf).

Demand and the Ascend rules are AscendJob's: the pods of every task (in the order written), the
gang ``spec.minAvailable`` (else the sum of the tasks' ``minAvailable``, else of their replicas:
the mutating webhook's default and the PodGroup's ``minMember``), the hardware from the job's
``huawei.com/schedule_policy`` annotation, its ``ring-controller.atlas`` label and the pods'
``accelerator-type`` selectors, as MindCluster's ascend-for-volcano plugin reads them for a vcjob
as for an AscendJob (:func:`fleet.placement.build_demand`): the plugin reads a job's PodGroup,
to which Volcano's job controller copies the vcjob's labels and annotations
(``createOrUpdatePodGroup`` in ``pkg/controllers/job/job_controller_actions.go``). A task's own
``minAvailable`` is kept as written for Volcano in the member; Fleet fits the job's gang.

Status: the member's ``status.state`` (``phase``, ``reason``, ``message``), ``minAvailable``,
``taskStatusCount`` and the pod counts (``pending``, ``running``, ``succeeded``, ``failed``,
``terminating``, ``unknown``), ``retryCount``, ``version``, ``runningDuration`` are mirrored as
Volcano writes them; the fleet's state is the phase in Fleet's words (:data:`_STATE_OF_PHASE`).
Volcano writes no reason for a phase (its conditions are phases with a time), so Fleet names one.
A failure is classified by the job's policies (the controller's state machine,
``pkg/controllers/job/state``): ``Failed`` from ``Restarting`` (its policies restarted it until
``retryCount`` reached ``maxRetry``, reason ``MaxRetryExceeded``) is worth another member; a job
that failed with its pods' own exits (``PodsFailed``: fewer succeeded than ``minAvailable``) or
that its policies ended (``Aborted``, ``Terminated``) is the job's own, never retried elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Final

from pydantic import Field, StrictInt, StrictStr, ValidationError

from fleet.apiserver import (
    DNS1035_LABEL_MAX_LENGTH,
    PrinterColumn,
    ResourceType,
    clone,
    dns1123_label,
    validate_pod_template,
)
from fleet.ascend import Condition
from fleet.placement import Demand, ReplicaTemplate, build_demand
from fleet.volcano import (
    ACTIONS,
    DEFAULT_MAX_RETRY,
    EVENTS,
    JOB_NAME_LABEL,
    PLUGINS,
    TASK_SPEC_LABEL,
    VOLCANO_GROUP,
    VOLCANO_JOB_KIND,
    VOLCANO_JOB_PLURAL,
    VOLCANO_VERSION,
    Event,
    JobPhase,
)
from fleet.workloads.base import (
    DEFAULT_QUEUE,
    FieldError,
    InvalidWorkload,
    Outcome,
    PriorityRequest,
    WorkloadStatus,
)
from fleet.workloads.models import Int32, Open, pydantic_errors
from fleet.workloads.replicas import ReplicaSpecAdapter
from fleet.workloads.verdicts import demand_verdict, remembered

__all__ = ["MIRRORED_STATUS", "PRIORITY_FIELD", "QUEUE_FIELD", "VOLCANO_JOB", "VolcanoJobAdapter", "vcjob"]

QUEUE_FIELD: Final = "spec.queue"
PRIORITY_FIELD: Final = "spec.priorityClassName"

#: The member's ``status`` fields the fleet object carries as Volcano wrote them.
MIRRORED_STATUS: Final = (
    "state",
    "minAvailable",
    "taskStatusCount",
    "pending",
    "running",
    "succeeded",
    "failed",
    "terminating",
    "unknown",
    "retryCount",
    "version",
    "runningDuration",
)

#: Reasons Fleet gives a finished vcjob (Volcano writes none).
MAX_RETRY_EXCEEDED: Final = "MaxRetryExceeded"
PODS_FAILED: Final = "PodsFailed"

#: How the fleet's state reads a Volcano phase: winding down (Completing, Aborting, Terminating)
#: is still running until the controller says how it ended.
_STATE_OF_PHASE: Final = {
    JobPhase.PENDING: Condition.CREATED,
    JobPhase.RUNNING: Condition.RUNNING,
    JobPhase.COMPLETING: Condition.RUNNING,
    JobPhase.ABORTING: Condition.RUNNING,
    JobPhase.TERMINATING: Condition.RUNNING,
    JobPhase.RESTARTING: Condition.RESTARTING,
    JobPhase.COMPLETED: Condition.SUCCEEDED,
    JobPhase.FAILED: Condition.FAILED,
    JobPhase.ABORTED: Condition.FAILED,
    JobPhase.TERMINATED: Condition.FAILED,
}

#: Volcano Job as its CRD serves it in a member (``jobs.batch.volcano.sh``, short names vcjob, vcj).
VOLCANO_JOB: Final = ResourceType(
    group=VOLCANO_GROUP,
    version=VOLCANO_VERSION,
    kind=VOLCANO_JOB_KIND,
    plural=VOLCANO_JOB_PLURAL,
    singular=VOLCANO_JOB_KIND.lower(),
    namespaced=True,
    short_names=("vcjob", "vcj"),
    printer_columns=(
        PrinterColumn("Name", "string", ".metadata.name", "Name of the job.", format="name"),
        PrinterColumn("Status", "string", ".status.state.phase", "The job's phase."),
        PrinterColumn("minAvailable", "integer", ".status.minAvailable", "The job's gang."),
        PrinterColumn("Running", "integer", ".status.running", "Its running pods."),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since the job was created."),
        PrinterColumn("Queue", "string", ".spec.queue", "The job's queue.", priority=1),
    ),
    has_status=True,
    categories=("all",),
    description="A batch job of tasks scheduled as one gang, run by Volcano's job controller.",
)


#: An int32 the CRD declares ``minimum: 0``.
_Count = Annotated[StrictInt, Field(ge=0, le=2**31 - 1)]


class _Policy(Open):
    action: StrictStr | None = None
    event: StrictStr | None = None
    events: list[StrictStr] = Field(default_factory=list)
    exit_code: Int32 | None = Field(default=None, alias="exitCode")
    timeout: StrictStr | None = None


class _Task(Open):
    name: StrictStr = ""
    replicas: _Count = 0
    min_available: _Count | None = Field(default=None, alias="minAvailable")
    max_retry: _Count | None = Field(default=None, alias="maxRetry")
    template: dict[str, Any] = Field(default_factory=dict)
    policies: list[_Policy] = Field(default_factory=list)


class _Spec(Open):
    tasks: list[_Task] = Field(default_factory=list)
    min_available: _Count = Field(default=0, alias="minAvailable")
    min_success: _Count | None = Field(default=None, alias="minSuccess")
    max_retry: _Count = Field(default=DEFAULT_MAX_RETRY, alias="maxRetry")
    ttl_seconds_after_finished: _Count | None = Field(default=None, alias="ttlSecondsAfterFinished")
    queue: StrictStr | None = None
    priority_class_name: StrictStr | None = Field(default=None, alias="priorityClassName")
    scheduler_name: StrictStr | None = Field(default=None, alias="schedulerName")
    policies: list[_Policy] = Field(default_factory=list)
    plugins: dict[str, list[StrictStr] | None] = Field(default_factory=dict)


class _Metadata(Open):
    name: StrictStr = Field(min_length=1)
    namespace: StrictStr = "default"
    labels: dict[str, StrictStr] = Field(default_factory=dict)
    annotations: dict[str, StrictStr] = Field(default_factory=dict)


class _Job(Open):
    metadata: _Metadata
    spec: _Spec


def _policy_errors(policies: list[_Policy], path: str) -> list[FieldError]:
    """``validatePolicies`` of Volcano's webhook, one error per rule broken."""
    errors: list[FieldError] = []
    seen_events: set[str] = set()
    seen_codes: set[int] = set()
    for i, policy in enumerate(policies):
        where = f"{path}[{i}]"
        events = list(dict.fromkeys([*policy.events, *([policy.event] if policy.event else [])]))
        if events and policy.exit_code is not None:
            errors.append(FieldError(where, "must not specify event and exitCode simultaneously"))
            continue
        if not events and policy.exit_code is None:
            errors.append(
                FieldError(where, "either event or exitCode must be specified", "FieldValueRequired")
            )
            continue
        if policy.action not in ACTIONS:
            errors.append(
                FieldError(
                    f"{where}.action",
                    f"{policy.action!r} is not a policy action ({', '.join(ACTIONS)})",
                    "FieldValueNotSupported",
                )
            )
        for event in events:
            if event not in EVENTS:
                errors.append(
                    FieldError(
                        f"{where}.event",
                        f"{event!r} is not a policy event ({', '.join(EVENTS)})",
                        "FieldValueNotSupported",
                    )
                )
            elif event in seen_events:
                errors.append(
                    FieldError(
                        f"{where}.event", f"duplicate event {event} across policies", "FieldValueDuplicate"
                    )
                )
            seen_events.add(event)
        if policy.exit_code is not None:
            if policy.exit_code == 0:
                errors.append(FieldError(f"{where}.exitCode", "0 is not a valid error code"))
            elif policy.exit_code in seen_codes:
                errors.append(
                    FieldError(
                        f"{where}.exitCode", f"duplicate exitCode {policy.exit_code}", "FieldValueDuplicate"
                    )
                )
            seen_codes.add(policy.exit_code)
    if Event.ANY in seen_events and len(seen_events) > 1:
        errors.append(FieldError(path, "with the event *, no other policy may name an event"))
    return errors


def gang_size(spec: Mapping[str, Any]) -> int:
    """The PodGroup's ``minMember`` of a job's ``spec`` as written (its rules passed):
    ``spec.minAvailable``, else the sum of the tasks' ``minAvailable`` (each its ``replicas``
    when unset), as the mutating webhook defaults it."""
    wanted = int(spec.get("minAvailable") or 0)
    if wanted > 0:
        return wanted
    tasks = spec.get("tasks") or []
    return sum(
        int(t["minAvailable"]) if t.get("minAvailable") is not None else int(t.get("replicas") or 0)
        for t in tasks
    )


class VolcanoJobAdapter(ReplicaSpecAdapter):
    """Volcano's Job: ``spec.tasks`` (a list, each named) as the replica types; see the module doc."""

    resource = VOLCANO_JOB
    pod_job_label = JOB_NAME_LABEL
    queue_field: ClassVar[str] = QUEUE_FIELD
    reads_pods: ClassVar[bool] = True

    def replica_specs(self, spec: Mapping[str, Any]) -> list[tuple[str, Any]]:
        tasks = spec.get("tasks")
        if not isinstance(tasks, list):
            return []
        return [(str(t.get("name") or ""), t) for t in tasks if isinstance(t, Mapping)]

    def replica_path(self, rtype: str) -> str:
        return f"spec.tasks[name={rtype}]"

    def pod_labels(self, name: str, rtype: str) -> dict[str, str]:
        return {JOB_NAME_LABEL: name, TASK_SPEC_LABEL: rtype}

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
        if why := dns1123_label(name):
            errors.append(FieldError("metadata.name", f'Invalid value: "{name}": {why}'))
        if not spec.tasks:
            errors.append(FieldError("spec.tasks", "must list at least one task", "FieldValueRequired"))
        raw_tasks = obj["spec"]["tasks"] if spec.tasks else []
        seen: set[str] = set()
        templates_ok = True
        for i, task in enumerate(spec.tasks):
            path = f"spec.tasks[{i}]"
            if task.name in seen:
                errors.append(
                    FieldError(f"{path}.name", f"duplicated task name {task.name!r}", "FieldValueDuplicate")
                )
            seen.add(task.name)
            if task.min_available is not None and task.min_available > task.replicas:
                errors.append(
                    FieldError(
                        f"{path}.minAvailable",
                        f"must not be greater than the task's replicas ({task.replicas})",
                    )
                )
            pod = f"{name}-{task.name}-{i}"
            if why := dns1123_label(pod):
                errors.append(
                    FieldError(
                        f"{path}.name" if task.name else "metadata.name",
                        f"the task's pods are named {pod!r}, which must be a DNS-1123 label of at most "
                        f"{DNS1035_LABEL_MAX_LENGTH} characters: {why}",
                    )
                )
            errors += _policy_errors(task.policies, f"{path}.policies")
            if not isinstance(raw_tasks[i].get("template"), Mapping) or not task.template:
                errors.append(FieldError(f"{path}.template", "is required", "FieldValueRequired"))
                templates_ok = False
                continue
            causes = validate_pod_template(raw_tasks[i]["template"], f"{path}.template")
            templates_ok = templates_ok and not causes
            errors += [FieldError(c.field, c.message, c.reason) for c in causes]
        total = sum(t.replicas for t in spec.tasks)
        if spec.tasks and total == 0:
            errors.append(
                FieldError("spec.tasks", "must ask for at least one pod: every task has 0 replicas")
            )
        if spec.min_available > total:
            errors.append(
                FieldError(
                    "spec.minAvailable", f"must not be greater than the replicas of all tasks ({total})"
                )
            )
        errors += _policy_errors(spec.policies, "spec.policies")
        for plugin in spec.plugins:
            if plugin not in PLUGINS:
                errors.append(
                    FieldError(
                        f"spec.plugins.{plugin}",
                        f"unable to find job plugin {plugin!r} ({', '.join(PLUGINS)})",
                        "FieldValueNotSupported",
                    )
                )
        if errors or not templates_ok:
            return None, errors
        return demand_verdict(self.accepted_demand, obj)

    def accepted_demand(self, obj: Mapping[str, Any]) -> Demand:
        """The demand of a job whose types the rules passed, read from the job as written (the one
        reading :meth:`_check` builds its demand with; see
        :class:`~fleet.workloads.base.AcceptedDemand`): a task per replica type, the
        gang :func:`gang_size`."""
        spec, meta = obj["spec"], obj["metadata"]
        name = str(meta["name"])
        templates = [
            ReplicaTemplate(
                name=str(task.get("name") or ""),
                replicas=int(task.get("replicas") or 0),
                template=task["template"],
                path=f"spec.tasks[{i}].template",
                pod_labels=self.pod_labels(name, str(task.get("name") or "")),
            )
            for i, task in enumerate(spec["tasks"])
        ]
        return build_demand(
            templates,
            min_available=gang_size(spec),
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

    def priority_request(self, obj: Mapping[str, Any]) -> PriorityRequest:
        """``spec.priorityClassName`` (the PodGroup's priority class in the member)."""
        spec = obj.get("spec")
        name = spec.get("priorityClassName") if isinstance(spec, Mapping) else None
        if isinstance(name, str) and name:
            return PriorityRequest(class_name=name, field=PRIORITY_FIELD)
        return PriorityRequest()

    def queue(self, obj: Mapping[str, Any]) -> str | None:
        """``spec.queue``, unless it is Volcano's ``default`` (then the namespace's leaf)."""
        spec = obj.get("spec")
        value = spec.get("queue") if isinstance(spec, Mapping) else None
        return value if isinstance(value, str) and value and value != DEFAULT_QUEUE else None

    # -- status ----------------------------------------------------------------------------------

    def map_status(self, member_obj: Mapping[str, Any]) -> WorkloadStatus:
        status = member_obj.get("status")
        status = status if isinstance(status, Mapping) else {}
        raw_state = status.get("state")
        state: Mapping[str, Any] = raw_state if isinstance(raw_state, Mapping) else {}
        phase = state.get("phase") if isinstance(state.get("phase"), str) else None
        fleet_state = _STATE_OF_PHASE.get(phase or "")
        extra = {k: clone(status[k]) for k in MIRRORED_STATUS if k in status}
        if fleet_state is None or phase is None:
            return WorkloadStatus(state=None, reason=None, message=None, extra=extra)
        reason, message = self._reason(member_obj, status, phase)
        if state.get("message"):
            message = f"{message}: {state['message']}"
        condition: dict[str, Any] = {
            "type": fleet_state,
            "status": "True",
            "reason": reason,
            "message": message,
        }
        if state.get("lastTransitionTime"):
            condition["lastTransitionTime"] = state["lastTransitionTime"]
        return WorkloadStatus(
            state=fleet_state,
            reason=reason,
            message=message,
            conditions=[condition],
            replica_statuses={},
            extra=extra,
        )

    @staticmethod
    def _reason(member_obj: Mapping[str, Any], status: Mapping[str, Any], phase: str) -> tuple[str, str]:
        counts = ", ".join(f"{k} {status.get(k, 0)}" for k in ("pending", "running", "succeeded", "failed"))
        if phase != JobPhase.FAILED:
            return phase, f"phase {phase} ({counts})"
        spec = member_obj.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        retries = status.get("retryCount", 0)
        limit = spec.get("maxRetry", DEFAULT_MAX_RETRY)
        if isinstance(retries, int) and isinstance(limit, int) and retries > 0 and retries >= limit:
            return (
                MAX_RETRY_EXCEEDED,
                f"its policies restarted it {retries} times, as many as its maxRetry {limit} ({counts})",
            )
        gang = status.get("minAvailable", spec.get("minAvailable", 0))
        return PODS_FAILED, f"fewer pods succeeded than its minAvailable {gang} ({counts})"

    def classify(self, status: WorkloadStatus) -> Outcome:
        if status.state == Condition.SUCCEEDED:
            return Outcome.SUCCEEDED
        if status.state == Condition.FAILED:
            return Outcome.RETRIABLE if status.reason == MAX_RETRY_EXCEEDED else Outcome.USER_ERROR
        if status.state in (Condition.RUNNING, Condition.RESTARTING):
            return Outcome.RUNNING
        if status.unschedulable:
            return Outcome.STUCK_PENDING
        return Outcome.STARTING


#: The Volcano Job adapter (listed in :mod:`fleet.workloads.registry`).
vcjob = VolcanoJobAdapter()
