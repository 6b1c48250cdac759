"""JobSet (``jobset.x-k8s.io/v1alpha2``): a group of batch Jobs run as one gang.

Sources: kubernetes-sigs/jobset ``api/jobset/v1alpha2/jobset_types.go`` (``JobSetSpec``:
``replicatedJobs``, ``successPolicy``, ``failurePolicy``, ``startupPolicy``, ``suspend``;
``JobSetStatus``: ``conditions``, ``restarts``, ``replicatedJobsStatus``, ``terminalState``),
``pkg/webhooks/jobset_webhook.go`` (what it refuses) and ``pkg/controllers/jobset_controller.go``
(how it ends); Kubernetes' batch/v1 Job for a replicated job's template (``parallelism``,
``completions``, a pod ``restartPolicy`` of Never or OnFailure); Kueue's JobSet integration
(kubernetes-sigs/kueue ``pkg/controller/jobs/jobset/jobset_controller.go``: one PodSet per
replicated job of ``replicas`` × ``parallelism`` pods, the whole JobSet admitted at once).

What Fleet refuses at submission (each a field path and rule):

* the name is a DNS-1035 label and every Job name the controller derives from it,
  ``<jobset>-<replicatedJob>-<index>``, is one too (at most 63 characters);
* ``replicatedJobs`` is not empty, names are DNS-1035 labels and unique, ``replicas`` is not
  negative, ``parallelism`` and ``completions`` are not negative, each pod template passes the
  API server's rules and its ``restartPolicy`` is Never or OnFailure (a Job's);
* ``successPolicy.operator`` is All or Any and its ``targetReplicatedJobs`` name replicated jobs;
  ``failurePolicy.maxRestarts`` is not negative, ``restartStrategy`` Recreate or
  BlockingRecreate, each rule's ``action`` one of JobSet's and its ``targetReplicatedJobs``
  replicated jobs; ``startupPolicy.startupPolicyOrder`` AnyOrder or InOrder.

The gang is every pod of every replicated job at once (Kueue's: ``replicas`` × ``parallelism``, a
Job never running more pods than its ``completions``); a ``suspend: true`` JobSet is held at the
fleet as Kueue holds one (:mod:`fleet.jobs.pause`), never sent suspended. The fleet shows
JobSet's own conditions (``Completed``, ``Failed``, ``Suspended``, ...), ``restarts``,
``replicatedJobsStatus`` and ``terminalState``, then one condition in Fleet's words for the state
(JobSet has no Running condition: a copy with active Jobs is ``Running``). A failed JobSet was
restarted by its member up to ``maxRestarts`` already: another member may do better, so it is
failed over (application failover), unless a ``FailJobSet`` rule of the user's own failure
policy ended it. JobSet never says that its gang waits: its pods do
(:class:`~fleet.workloads.base.PodEvidence`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from fleet.apiserver import (
    DNS1035_LABEL_MAX_LENGTH,
    PrinterColumn,
    ResourceType,
    clone,
    dns1035_label,
    validate_pod_template,
)
from fleet.jobset import (
    COMPLETED,
    FAILED,
    FAILURE_ACTIONS,
    JOBSET_GROUP,
    JOBSET_KIND,
    JOBSET_NAME_LABEL,
    JOBSET_PLURAL,
    JOBSET_STATUS_FIELDS,
    JOBSET_VERSION,
    REPLICATED_JOB_LABEL,
    RESTART_STRATEGIES,
    STARTUP_ORDERS,
    SUCCESS_OPERATORS,
    SUSPENDED,
)
from fleet.placement import Demand, DemandError, ReplicaTemplate, build_demand
from fleet.workloads.base import (
    FieldError,
    InvalidWorkload,
    Outcome,
    PriorityRequest,
    WorkloadStatus,
    fleet_labels,
    member_metadata,
    pin_to_nodes,
)

__all__ = ["JOBSET", "JobSetAdapter", "jobset", "jobset_pods", "replicated_jobs"]

#: JobSet as its CRD serves it in a member.
JOBSET: Final = ResourceType(
    group=JOBSET_GROUP,
    version=JOBSET_VERSION,
    kind=JOBSET_KIND,
    plural=JOBSET_PLURAL,
    singular=JOBSET_KIND.lower(),
    namespaced=True,
    printer_columns=(
        PrinterColumn("Name", "string", ".metadata.name", "Name of the JobSet."),
        PrinterColumn("TerminalState", "string", ".status.terminalState", "Completed or Failed, once ended."),
        PrinterColumn("Restarts", "integer", ".status.restarts", "How often the JobSet was recreated."),
        PrinterColumn("Suspended", "boolean", ".spec.suspend", "Whether the JobSet is suspended."),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since the JobSet was created."),
    ),
    has_status=True,
    categories=("all",),
    description="A group of batch Jobs run together as one workload (kubernetes-sigs/jobset).",
)

#: A batch Job's pod restart policies (``restartPolicy: Always`` is refused for a Job).
_JOB_RESTART_POLICIES: Final = ("Never", "OnFailure")
#: The conditions JobSet's controller writes whose true one is the JobSet's state.
_FLEET_STATE: Final = {COMPLETED: "Succeeded", FAILED: "Failed"}
#: The reason JobSet gives a failure a user's own ``FailJobSet`` rule decided.
_FAIL_RULE_REASON: Final = "FailJobSetActionMatched"


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def replicated_jobs(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``spec.replicatedJobs`` as written (entries that are not objects left out)."""
    jobs = _map(obj.get("spec")).get("replicatedJobs")
    return [j for j in jobs if isinstance(j, Mapping)] if isinstance(jobs, list) else []


def jobset_pods(replicated: Mapping[str, Any]) -> int:
    """Pods one replicated job runs at once: ``replicas`` Jobs of ``parallelism`` pods each (a Job
    runs no more pods than its ``completions``), as Kueue counts a PodSet."""
    job_spec = _map(_map(replicated.get("template")).get("spec"))
    parallelism = _int(job_spec.get("parallelism"), 1)
    completions = job_spec.get("completions")
    if isinstance(completions, int) and not isinstance(completions, bool):
        parallelism = min(parallelism, completions)
    return max(_int(replicated.get("replicas"), 1), 0) * max(parallelism, 0)


def _names_errors(path: str, names: object, known: set[str]) -> list[FieldError]:
    if names is None:
        return []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return [FieldError(path, "must be a list of replicated job names")]
    return [
        FieldError(
            f"{path}[{i}]",
            f"{n!r} is not a replicated job of this JobSet (known: {', '.join(sorted(known))})",
        )
        for i, n in enumerate(names)
        if n not in known
    ]


def _enum_error(path: str, value: object, allowed: Sequence[str]) -> list[FieldError]:
    if value is None or value in allowed:
        return []
    return [
        FieldError(
            path,
            f"Unsupported value: {value!r}: supported values: {', '.join(allowed)}",
            "FieldValueNotSupported",
        )
    ]


class JobSetAdapter:
    """The JobSet adapter (see the module doc)."""

    resource = JOBSET
    #: JobSet never says the gang waits: its pods do (PodEvidence).
    reads_pods = True
    pod_job_label = JOBSET_NAME_LABEL
    #: ``spec.suspend`` holds the JobSet at the fleet (Pausable), shown as JobSet shows it.
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
        """JobSet's reason for a suspended JobSet (``JobSetSuspendedReason``)."""
        return "SuspendedJobs"

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return obj.get("apiVersion") == self.api_version and obj.get("kind") == self.kind

    # --- what the webhook refuses, and the gang ----------------------------------------------------

    def _check(self, obj: Mapping[str, Any]) -> tuple[list[ReplicaTemplate], list[FieldError]]:
        errors: list[FieldError] = []
        if obj.get("apiVersion") != self.api_version:
            errors.append(FieldError("apiVersion", f"must be {self.api_version}"))
        meta = _map(obj.get("metadata"))
        name = meta.get("name")
        name = name if isinstance(name, str) else ""
        if name and (why := dns1035_label(name)):
            errors.append(FieldError("metadata.name", f'Invalid value: "{name}": {why}'))
        spec = obj.get("spec")
        if not isinstance(spec, Mapping):
            return [], [*errors, FieldError("spec", "is required")]
        raw = spec.get("replicatedJobs")
        if not isinstance(raw, list) or not raw:
            return [], [*errors, FieldError("spec.replicatedJobs", "must list at least one replicated job")]
        seen: set[str] = set()
        templates: list[ReplicaTemplate] = []
        for i, rjob in enumerate(raw):
            path = f"spec.replicatedJobs[{i}]"
            if not isinstance(rjob, Mapping):
                errors.append(FieldError(path, "must be an object"))
                continue
            rname = rjob.get("name")
            if not isinstance(rname, str) or not rname:
                errors.append(FieldError(f"{path}.name", "is required", "FieldValueRequired"))
                continue
            if why := dns1035_label(rname):
                errors.append(FieldError(f"{path}.name", f'Invalid value: "{rname}": {why}'))
            if rname in seen:
                errors.append(
                    FieldError(f"{path}.name", f'Duplicate value: "{rname}"', "FieldValueDuplicate")
                )
            seen.add(rname)
            replicas = rjob.get("replicas", 1)
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
                errors.append(FieldError(f"{path}.replicas", "must be a non-negative integer"))
                replicas = 0
            generated = f"{name}-{rname}-{max(replicas - 1, 0)}"
            if name and len(generated) > DNS1035_LABEL_MAX_LENGTH:
                errors.append(
                    FieldError(
                        "metadata.name",
                        f"JobSet name is too long: the Job names it generates ({generated!r}) must be "
                        f"no more than {DNS1035_LABEL_MAX_LENGTH} characters",
                    )
                )
            job_template = rjob.get("template")
            job_spec = _map(job_template).get("spec") if isinstance(job_template, Mapping) else None
            if not isinstance(job_spec, Mapping):
                errors.append(FieldError(f"{path}.template.spec", "is required", "FieldValueRequired"))
                continue
            for field in ("parallelism", "completions", "backoffLimit"):
                value = job_spec.get(field)
                if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                    errors.append(
                        FieldError(f"{path}.template.spec.{field}", "must be a non-negative integer")
                    )
            pod_path = f"{path}.template.spec.template"
            pod = job_spec.get("template")
            causes = validate_pod_template(pod, pod_path)
            errors += [FieldError(c.field, c.message, c.reason) for c in causes]
            policy = _map(_map(pod).get("spec")).get("restartPolicy")
            if policy is not None and policy not in _JOB_RESTART_POLICIES:
                errors.append(
                    FieldError(
                        f"{pod_path}.spec.restartPolicy",
                        f"Unsupported value: {policy!r}: supported values: Never, OnFailure (a Job's pods)",
                        "FieldValueNotSupported",
                    )
                )
            if not causes and isinstance(pod, Mapping):
                labels = {
                    JOBSET_NAME_LABEL: name,
                    REPLICATED_JOB_LABEL: rname,
                }
                templates.append(ReplicaTemplate(rname, jobset_pods(rjob), pod, pod_path, labels))
        success = _map(spec.get("successPolicy"))
        errors += _enum_error("spec.successPolicy.operator", success.get("operator"), SUCCESS_OPERATORS)
        errors += _names_errors(
            "spec.successPolicy.targetReplicatedJobs", success.get("targetReplicatedJobs"), seen
        )
        failure = _map(spec.get("failurePolicy"))
        restarts = failure.get("maxRestarts")
        if restarts is not None and (
            not isinstance(restarts, int) or isinstance(restarts, bool) or restarts < 0
        ):
            errors.append(FieldError("spec.failurePolicy.maxRestarts", "must be a non-negative integer"))
        errors += _enum_error(
            "spec.failurePolicy.restartStrategy", failure.get("restartStrategy"), RESTART_STRATEGIES
        )
        rules = failure.get("rules")
        for i, raw_rule in enumerate(rules if isinstance(rules, list) else []):
            rpath = f"spec.failurePolicy.rules[{i}]"
            rule = _map(raw_rule)
            errors += _enum_error(f"{rpath}.action", rule.get("action"), FAILURE_ACTIONS)
            errors += _names_errors(f"{rpath}.targetReplicatedJobs", rule.get("targetReplicatedJobs"), seen)
        startup = _map(spec.get("startupPolicy"))
        errors += _enum_error(
            "spec.startupPolicy.startupPolicyOrder", startup.get("startupPolicyOrder"), STARTUP_ORDERS
        )
        suspend = spec.get("suspend")
        if suspend is not None and not isinstance(suspend, bool):
            errors.append(FieldError("spec.suspend", "must be a boolean"))
        if not errors and not any(t.replicas for t in templates):
            errors.append(FieldError("spec.replicatedJobs", "must ask for at least one pod"))
        return templates, errors

    def validate(self, obj: Mapping[str, Any]) -> list[FieldError]:
        return self._check(obj)[1]

    def demand(self, obj: Mapping[str, Any]) -> Demand:
        templates, errors = self._check(obj)
        if errors:
            raise InvalidWorkload(errors)
        meta = _map(obj.get("metadata"))
        try:
            return build_demand(
                templates, annotations=_map(meta.get("annotations")), labels=_map(meta.get("labels"))
            )
        except DemandError as exc:
            raise InvalidWorkload([FieldError(exc.path, exc.message)]) from exc

    def priority_request(self, obj: Mapping[str, Any]) -> PriorityRequest:
        """JobSet names no priority of its own (Kueue reads the pods'): none."""
        return PriorityRequest()

    def pod_labels(self, name: str, rtype: str) -> dict[str, str]:
        return {JOBSET_NAME_LABEL: name, REPLICATED_JOB_LABEL: rtype}

    # --- suspend: the switch the owner may flip (fleet.jobs.pause) -------------------------------

    def paused(self, obj: Mapping[str, Any]) -> bool:
        return _map(obj.get("spec")).get("suspend") is True

    def without_pause_switch(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        spec = clone(dict(_map(obj.get("spec"))))
        spec.pop("suspend", None)
        return spec

    # --- status ------------------------------------------------------------------------------------

    def map_status(self, member_obj: Mapping[str, Any]) -> WorkloadStatus:
        """JobSet's conditions, then the state in Fleet's words (``Succeeded`` for a true
        ``Completed``, ``Failed``; ``Running`` while any Job is active or ready); ``restarts``,
        ``replicatedJobsStatus`` and ``terminalState`` carried over."""
        status = _map(member_obj.get("status"))
        native = [dict(c) for c in status.get("conditions") or [] if isinstance(c, Mapping)]
        terminal = next(
            (c for c in reversed(native) if c.get("type") in _FLEET_STATE and c.get("status") == "True"), None
        )
        state: str | None = None
        reason: str | None = None
        message: str | None = None
        if terminal is not None:
            state = _FLEET_STATE[str(terminal.get("type"))]
            reason, message = terminal.get("reason"), terminal.get("message")
        else:
            jobs = [j for j in status.get("replicatedJobsStatus") or [] if isinstance(j, Mapping)]
            if any(_int(j.get("active"), 0) or _int(j.get("ready"), 0) for j in jobs):
                state, reason, message = "Running", "JobsActive", "the JobSet's Jobs are running"
        conditions = list(native)
        if state is not None:
            # JobSet's own condition of the state's type (Failed) goes last; otherwise one in
            # Fleet's words stands for the state (Succeeded, Running): one condition per type.
            same = next((c for c in native if c.get("type") == state and c.get("status") == "True"), None)
            stamp = max((str(c.get("lastTransitionTime") or "") for c in native), default="")
            last = same or {
                "type": state,
                "status": "True",
                "reason": reason or state,
                "message": message or "",
                **({"lastTransitionTime": stamp} if stamp else {}),
            }
            conditions = [c for c in native if c.get("type") != state] + [last]
        extra = {k: clone(status[k]) for k in JOBSET_STATUS_FIELDS if k in status}
        return WorkloadStatus(
            state=state,
            reason=reason,
            message=message,
            conditions=conditions,
            extra=extra,
        )

    def classify(self, status: WorkloadStatus) -> Outcome:
        if status.state == "Succeeded":
            return Outcome.SUCCEEDED
        if status.state == "Failed":
            return Outcome.USER_ERROR if status.reason == _FAIL_RULE_REASON else Outcome.RETRIABLE
        if status.state == "Running":
            return Outcome.RUNNING
        if status.unschedulable:
            return Outcome.STUCK_PENDING
        return Outcome.STARTING

    # --- the member copy ---------------------------------------------------------------------------

    def member_copy(
        self,
        obj: Mapping[str, Any],
        fleet_uid: str,
        attempt: int,
        *,
        pin: Mapping[str, Sequence[str]] | None = None,
    ) -> dict[str, Any]:
        """The JobSet unchanged but never suspended, fleet labels on it and on every pod
        template, each replicated job's pods pinned to the nodes Fleet planned for them."""
        spec = clone(dict(_map(obj.get("spec"))))
        spec.pop("suspend", None)
        labels = fleet_labels(obj, fleet_uid, attempt)
        for rjob in spec.get("replicatedJobs") or []:
            if not isinstance(rjob, dict):
                continue
            job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
            pod = job_spec.setdefault("template", {})
            meta = pod.setdefault("metadata", {})
            meta["labels"] = {**(meta.get("labels") or {}), **labels}
            name = rjob.get("name")
            if pin and isinstance(name, str) and pin.get(name):
                pin_to_nodes(pod.setdefault("spec", {}), pin[name])
        return {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "metadata": member_metadata(obj, fleet_uid, attempt),
            "spec": spec,
        }


#: The JobSet adapter (registered in :mod:`fleet.workloads.registry`).
jobset = JobSetAdapter()
