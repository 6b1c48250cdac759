"""The AscendJob adapter: the ascend-operator's validation, demand, status and member copy.

Validation refuses at submission what a member would refuse later (its API server storing the
copy, the ascend-operator reconciling it, or the API server refusing the pods and Service the
operator makes of it), each failure one :class:`~fleet.workloads.base.FieldError` with its path.
The operator's own rules are ``validateJob`` in MindCluster's ascend-operator
(``component/ascend-operator/pkg/controllers/v1/ascendjob_validate.go``, with ``maxReplicas`` in
``consts.go`` and the framework label in ``pkg/api/v1/defaults.go``):

* ``metadata.labels.framework`` is pytorch, mindspore or tensorflow (``GetJobFramework``);
* replica types are the framework's leader and ``Worker`` (pytorch: Master, mindspore:
  Scheduler, tensorflow: Chief; ``validateReplicaType``); the leader has exactly one replica
  (``validateLeader``); a pytorch or tensorflow job always has its leader, a mindspore job
  without a Scheduler only when its workers take at most one NPU in all (``checkReplicaSpecs``:
  ``jobTotalRequest``, the ``huawei.com/`` request of each Worker's ``ascend`` container);
* replica counts lie in 0..:data:`MAX_REPLICAS` (``validateReplicas`` refuses only a negative
  count and more than ``maxReplicas``: a type with ``replicas: 0`` is accepted and makes no pod;
  Fleet refuses a job whose types are all 0, a gang of no pod it cannot place), ``minAvailable``
  in 1..total replicas;
* every template has a container named ``ascend`` (``validateContainer``);
* ``spec.successPolicy`` is ``""`` or ``AllWorkers`` (``validateBasicInfo``); a
  ``scaleout-type`` label, when set, is RoCE or UBoE in any case (``CheckAcJobScaleOutTypeLabel``,
  ``pkg/utils/job_v2.go``); a ``mind-cluster/scaling-rule`` label comes with
  ``mind-cluster/group-name`` and ``jobID`` labels (``ValidJob``,
  ``pkg/controllers/scaling/controller.go``);
* the name is a DNS-1035 label, as Kubeflow's training-operator requires of its jobs
  (``NameIsDNS1035Label`` in its webhooks): the operator labels every pod with it (``job-name``)
  and names the leader's Service ``<name>-<leader>-0`` (``getOrCreateSvc`` /
  ``GenGeneralName``), which the API server refuses beyond 63 characters, so a job with a
  leader leaves room for that suffix (a pytorch job's name has at most 54 characters);
* the fields of the CRD's schema are of their type: ``replicas``, ``minAvailable`` and
  ``backoffLimit`` are int32, ``activeDeadlineSeconds`` int64, never a string or a boolean;
* every pod template passes the API server's own rules (:mod:`fleet.apiserver.pods`: field
  types, labels and annotations, container names, images and ports, and resource quantities:
  whole NPUs, requests equal to limits for extended resources);
* the schedule policy annotation is well formed; ``spec.runPolicy.schedulingPolicy.priorityClass``,
  when given, is a string: the name of a PriorityClass, which Fleet resolves at submission
  (:mod:`fleet.jobs.priority`).

The pydantic models read only the parts Fleet uses and allow any other field: users write full
pod templates and the member copy carries them unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import Field, StrictStr, ValidationError

from fleet.apiserver import (
    DNS1035_LABEL_MAX_LENGTH,
    PrinterColumn,
    ResourceType,
    dns1035_label,
    validate_pod_template,
)
from fleet.ascend import (
    ASCENDJOB_GROUP,
    ASCENDJOB_KIND,
    ASCENDJOB_PLURAL,
    ASCENDJOB_VERSION,
    FRAMEWORK_LABEL,
    JOB_NAME_LABEL,
    Reason,
)
from fleet.placement import Demand, DemandError, build_demand
from fleet.workloads.base import (
    FieldError,
    InvalidWorkload,
)
from fleet.workloads.models import RESTART_POLICIES, Int32, Int64, Open, pydantic_errors
from fleet.workloads.replicas import ReplicaSpecAdapter
from fleet.workloads.verdicts import remembered
from queues import QuantityError, parse_quantity

__all__ = ["ASCENDJOB", "ASCEND_CONTAINER", "FRAMEWORKS", "MAX_REPLICAS", "AscendJobAdapter", "ascendjob"]

#: The container the ascend-operator configures (``name: ascend # do not modify``).
ASCEND_CONTAINER: Final = "ascend"
#: Framework -> its leader replica type; the other type is always ``Worker``.
FRAMEWORKS: Final[dict[str, str]] = {"pytorch": "Master", "mindspore": "Scheduler", "tensorflow": "Chief"}
WORKER: Final = "Worker"
#: Most replicas one type may ask for (the ascend-operator's ``maxReplicas``).
MAX_REPLICAS: Final = 20_000
#: ``successPolicy`` values the operator accepts (``SuccessPolicyDefault``, ``SuccessPolicyAllWorkers``).
SUCCESS_POLICIES: Final = ("", "AllWorkers")
#: The label naming the scale-out network of a job, and its values (compared in upper case).
SCALE_OUT_TYPE_LABEL: Final = "scaleout-type"
SCALE_OUT_TYPES: Final = ("ROCE", "UBOE")
#: A job with the scaling-rule label must name its group and job ID too.
SCALING_RULE_LABEL: Final = "mind-cluster/scaling-rule"
SCALING_LABELS: Final = ("mind-cluster/group-name", "jobID")
#: The ``huawei.com/`` requests the operator counts as a pod's NPUs (``getContainerResourceReq``).
NPU_RESOURCE_PREFIX: Final = "huawei.com/"


class Container(Open):
    name: str
    image: str | None = None


class PodSpec(Open):
    containers: list[Container] = Field(min_length=1)


class PodTemplate(Open):
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: PodSpec


class ReplicaSpec(Open):
    replicas: Int32 = 1
    restart_policy: StrictStr | None = Field(default=None, alias="restartPolicy")
    template: PodTemplate


class SchedulingPolicy(Open):
    min_available: Int32 | None = Field(default=None, alias="minAvailable")
    queue: StrictStr | None = None
    #: The PriorityClass of the job (the ascend-operator copies it into the PodGroup's
    #: ``priorityClassName``); Fleet resolves it at submission (:mod:`fleet.jobs.priority`).
    priority_class: StrictStr | None = Field(default=None, alias="priorityClass")


class RunPolicy(Open):
    scheduling_policy: SchedulingPolicy | None = Field(default=None, alias="schedulingPolicy")
    backoff_limit: Int32 | None = Field(default=None, alias="backoffLimit")
    active_deadline_seconds: Int64 | None = Field(default=None, alias="activeDeadlineSeconds")
    ttl_seconds_after_finished: Int32 | None = Field(default=None, alias="ttlSecondsAfterFinished")
    clean_pod_policy: StrictStr | None = Field(default=None, alias="cleanPodPolicy")


class Spec(Open):
    replica_specs: dict[str, ReplicaSpec] = Field(alias="replicaSpecs")
    run_policy: RunPolicy | None = Field(default=None, alias="runPolicy")
    success_policy: StrictStr | None = Field(default=None, alias="successPolicy")
    scheduler_name: StrictStr | None = Field(default=None, alias="schedulerName")


class Metadata(Open):
    name: str = Field(min_length=1)
    namespace: str = "default"
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class AscendJob(Open):
    api_version: str = Field(alias="apiVersion")
    kind: str
    metadata: Metadata
    spec: Spec

    @property
    def min_available(self) -> int | None:
        run = self.spec.run_policy
        return run.scheduling_policy.min_available if run and run.scheduling_policy else None


def _npu_request(template: Mapping[str, Any]) -> int:
    """NPUs the ``ascend`` container requests, as ``getContainerResourceReq`` counts them: its
    first ``huawei.com/`` request (limits are not looked at), rounded up."""
    for container in template["spec"]["containers"]:  # as the model read them
        if container.get("name") == ASCEND_CONTAINER:
            resources = container.get("resources")
            requests = resources.get("requests") if isinstance(resources, Mapping) else None
            for name, value in (requests if isinstance(requests, Mapping) else {}).items():
                if NPU_RESOURCE_PREFIX in str(name):
                    try:
                        return parse_quantity(str(name), value)
                    except QuantityError:
                        return 0
            return 0
    return 0


def _name_errors(name: str, framework: str | None, leader: str | None, has_leader: bool) -> list[FieldError]:
    """The job's name: a DNS-1035 label (pod label ``job-name``), short enough for the Service
    the operator names after the leader (``<name>-<leader>-0``)."""
    if why := dns1035_label(name):
        return [FieldError("metadata.name", f'Invalid value: "{name}": {why}')]
    if leader is None or not has_leader:
        return []
    service = f"{name}-{leader.lower()}-0"
    longest = DNS1035_LABEL_MAX_LENGTH - (len(service) - len(name))
    if len(service) > DNS1035_LABEL_MAX_LENGTH:
        return [
            FieldError(
                "metadata.name",
                f'Invalid value: "{name}": must be no more than {longest} characters for a {framework} '
                f"job: the ascend-operator names the {leader}'s Service {service!r}, a DNS-1035 label of "
                f"at most {DNS1035_LABEL_MAX_LENGTH} characters",
            )
        ]
    return []


def _label_errors(labels: Mapping[str, str]) -> list[FieldError]:
    """The operator's rules on the job's own labels (scale-out type, scaling rule)."""
    errors: list[FieldError] = []
    scale_out = labels.get(SCALE_OUT_TYPE_LABEL)
    if scale_out is not None and scale_out.strip() and scale_out.upper() not in SCALE_OUT_TYPES:
        errors.append(
            FieldError(
                f"metadata.labels.{SCALE_OUT_TYPE_LABEL}",
                f"{scale_out!r} is not a scale-out type (RoCE or UBoE, in any case)",
            )
        )
    if SCALING_RULE_LABEL in labels:
        errors += [
            FieldError(f"metadata.labels.{key}", f"is required with the {SCALING_RULE_LABEL} label")
            for key in SCALING_LABELS
            if key not in labels
        ]
    return errors


def _leader_errors(
    framework: str | None, leader: str | None, specs: Mapping[str, ReplicaSpec], raw: Mapping[str, Any]
) -> list[FieldError]:
    """A pytorch or tensorflow job needs its leader; a mindspore job without a Scheduler may only
    have workers that take at most one NPU in all (``checkReplicaSpecs``)."""
    if leader is None or leader in specs or not specs:
        return []
    if framework != "mindspore":
        return [FieldError(f"spec.replicaSpecs.{leader}", f"is required for a {framework} job")]
    worker = specs.get(WORKER)
    npus = _npu_request(raw[WORKER]["template"]) * worker.replicas if worker is not None else 0
    if npus > 1:
        return [
            FieldError(
                f"spec.replicaSpecs.{leader}",
                f"is required for a mindspore job whose workers take more than one NPU ({npus})",
            )
        ]
    return []


def _unparsed_errors(obj: Mapping[str, Any], reported: set[str]) -> list[FieldError]:
    """For a job the models could not read: the rules that need only the raw object (the name,
    the pod templates), so that one answer lists every fault, not only the type errors."""
    meta = obj.get("metadata")
    spec = obj.get("spec")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    raw = spec.get("replicaSpecs") if isinstance(spec, Mapping) else None
    raw = raw if isinstance(raw, Mapping) else {}
    framework = labels.get(FRAMEWORK_LABEL) if isinstance(labels, Mapping) else None
    leader = FRAMEWORKS.get(framework) if isinstance(framework, str) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    errors = _name_errors(name, framework, leader, leader in raw) if isinstance(name, str) and name else []
    for rtype, replica in raw.items():
        if isinstance(replica, Mapping) and isinstance(replica.get("template"), Mapping):
            causes = validate_pod_template(replica["template"], f"spec.replicaSpecs.{rtype}.template")
            errors += [FieldError(c.field, c.message, c.reason) for c in causes]
    return [e for e in errors if e.path not in reported]


#: AscendJob as MindCluster's CRD serves it in a member (short name ``acjob``).
ASCENDJOB: Final = ResourceType(
    group=ASCENDJOB_GROUP,
    version=ASCENDJOB_VERSION,
    kind=ASCENDJOB_KIND,
    plural=ASCENDJOB_PLURAL,
    singular=ASCENDJOB_KIND.lower(),
    namespaced=True,
    short_names=("acjob",),
    printer_columns=(
        PrinterColumn("Name", "string", ".metadata.name", "Name of the job."),
        PrinterColumn(
            "State", "string", ".status.conditions[-1].type", "The state of the job: its last condition."
        ),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since the job was created."),
    ),
    has_status=True,
    categories=("all",),
    description="A distributed training job on Ascend NPUs, run by the MindCluster ascend-operator.",
)


class AscendJobAdapter(ReplicaSpecAdapter):
    """MindCluster's AscendJob: the Kubeflow job shape under ``spec.replicaSpecs``; a
    ``JobValidFailed`` failure is the user's, ``PodGroupPending`` the gang waiting (the
    ascend-operator's reasons, :class:`fleet.ascend.Reason`)."""

    resource = ASCENDJOB
    leaders = tuple(FRAMEWORKS.values())
    user_error_reasons = frozenset({Reason.JOB_VALID_FAILED})
    pending_reasons = frozenset({Reason.POD_GROUP_PENDING})
    pod_job_label = JOB_NAME_LABEL

    def _parse(self, obj: Mapping[str, Any]) -> tuple[AscendJob | None, list[FieldError]]:
        try:
            job = AscendJob.model_validate(obj)
        except ValidationError as exc:
            return None, pydantic_errors(exc)
        errors: list[FieldError] = []
        if job.api_version != self.api_version:
            errors.append(FieldError("apiVersion", f"must be {self.api_version}"))
        if job.kind != self.kind:
            errors.append(FieldError("kind", f"must be {self.kind}"))
        return job, errors

    def validate(self, obj: Mapping[str, Any]) -> list[FieldError]:
        return self._check(obj)[1]

    @remembered
    def _check(self, obj: Mapping[str, Any]) -> tuple[Demand | None, list[FieldError]]:
        """Every rule at once: the job's demand (None when any rule failed) and what failed."""
        job, errors = self._parse(obj)
        if job is None:
            return None, errors + _unparsed_errors(obj, {e.path for e in errors})
        framework = job.metadata.labels.get(FRAMEWORK_LABEL)
        allowed = ", ".join(FRAMEWORKS)
        fpath = f"metadata.labels.{FRAMEWORK_LABEL}"
        if framework is None:
            errors.append(FieldError(fpath, f"is required (one of {allowed})"))
        elif framework not in FRAMEWORKS:
            errors.append(FieldError(fpath, f"{framework!r} is not a supported framework (one of {allowed})"))
        errors += _label_errors(job.metadata.labels)
        specs = job.spec.replica_specs
        if not specs:
            errors.append(FieldError("spec.replicaSpecs", "must name at least one replica type"))
        leader = FRAMEWORKS.get(framework or "")
        errors += _name_errors(job.metadata.name, framework, leader, leader in specs)
        success = job.spec.success_policy
        if success is not None and success not in SUCCESS_POLICIES:
            errors.append(FieldError("spec.successPolicy", 'must be "" or "AllWorkers"'))
        raw = obj["spec"]["replicaSpecs"]
        templates_ok = True
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
            elif spec.replicas < 0:
                errors.append(FieldError(f"{path}.replicas", f"can not be negative, but got {spec.replicas}"))
            elif spec.replicas > MAX_REPLICAS:
                why = f"can not be larger than {MAX_REPLICAS}, but got {spec.replicas}"
                errors.append(FieldError(f"{path}.replicas", why))
            if spec.restart_policy is not None and spec.restart_policy not in RESTART_POLICIES:
                errors.append(
                    FieldError(
                        f"{path}.restartPolicy", f"must be one of {', '.join(sorted(RESTART_POLICIES))}"
                    )
                )
            if not any(c.name == ASCEND_CONTAINER for c in spec.template.spec.containers):
                cpath = f"{path}.template.spec.containers"
                errors.append(FieldError(cpath, f"must have a container named {ASCEND_CONTAINER}"))
            causes = validate_pod_template(raw[rtype]["template"], f"{path}.template")
            templates_ok = templates_ok and not causes
            errors += [FieldError(c.field, c.message, c.reason) for c in causes]
        errors += _leader_errors(framework, leader, specs, raw)
        total = sum(s.replicas for s in specs.values())
        counts_ok = bool(specs) and all(0 <= s.replicas <= MAX_REPLICAS for s in specs.values())
        if counts_ok and total == 0:
            why = "must ask for at least one pod (every replicas is 0)"
            errors.append(FieldError("spec.replicaSpecs", why))
        min_available = job.min_available
        if counts_ok and total and min_available is not None and not 1 <= min_available <= total:
            errors.append(
                FieldError(
                    "spec.runPolicy.schedulingPolicy.minAvailable",
                    f"must be between 1 and the job's {total} replicas",
                )
            )
        if not templates_ok:
            return None, errors
        demand: Demand | None = None
        try:
            demand = self.accepted_demand(obj, gang=not errors)
        except DemandError as exc:
            errors.append(FieldError(exc.path, exc.message))
        return (demand if not errors else None), errors

    def accepted_demand(self, obj: Mapping[str, Any], *, gang: bool = True) -> Demand:
        """The demand of a job whose types the rules passed, read from the job as written (the one
        reading :meth:`_check` builds its demand with; see
        :class:`~fleet.workloads.base.AcceptedDemand`); ``gang=False`` leaves out a
        ``minAvailable`` that another rule refused."""
        spec, meta = obj["spec"], obj["metadata"]
        counts = {str(t): s.get("replicas", 1) for t, s in spec["replicaSpecs"].items()}
        policy = (spec.get("runPolicy") or {}).get("schedulingPolicy") or {}
        return build_demand(
            self.replica_templates(obj, counts),
            min_available=policy.get("minAvailable") if gang else None,
            annotations=meta.get("annotations") or {},
            labels=meta.get("labels") or {},
        )

    def demand(self, obj: Mapping[str, Any]) -> Demand:
        demand, errors = self._check(obj)
        if errors or demand is None:
            raise InvalidWorkload(errors)
        return demand


#: The AscendJob adapter (registered in :mod:`fleet.workloads.registry`).
ascendjob = AscendJobAdapter()
