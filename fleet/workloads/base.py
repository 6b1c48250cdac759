"""The workload adapter interface: one adapter per job kind, Kueue-style.

Everything Fleet does to a job that depends on its kind goes through its adapter: recognise it,
validate it (every failure a :class:`FieldError` with the field path), read its demand for the
gang fit, map the member copy's status to the fleet object's status, classify it (running,
succeeded, the user's error, worth retrying elsewhere, stuck pending), and build the member copy
(labelled with :mod:`fleet.labels` so it can be traced back). An adapter also owns the
resource it serves (group, version, plural, kind, short names, printer columns: the upstream
CRD's) and the selector of the pods its operator makes. The dispatcher, syncer, workers, API,
authorisation and CLI iterate :mod:`fleet.workloads.registry`; adding a kind is adding an
adapter (and its simulated controller) and one line there, not touching them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeGuard, runtime_checkable

from fleet.apiserver import ResourceType, clone, label_value
from fleet.jobset import JOBSET_STATUS_FIELDS
from fleet.labels import ATTEMPT_LABEL, JOB_NAME_LABEL, JOB_NAMESPACE_LABEL, JOB_UID_LABEL
from fleet.members import Resource
from fleet.placement import Demand

__all__ = [
    "DEFAULT_QUEUE",
    "KUEUE_QUEUE_LABEL",
    "MIRRORED_FIELDS",
    "RUN_POLICY_PRIORITY_CLASS",
    "RUN_POLICY_QUEUE",
    "AcceptedDemand",
    "Dependent",
    "FieldError",
    "InvalidWorkload",
    "Outcome",
    "Pausable",
    "PodEvidence",
    "PriorityRequest",
    "QueueNaming",
    "UnknownKind",
    "WorkloadAdapter",
    "WorkloadStatus",
    "fleet_label_errors",
    "fleet_labels",
    "is_accepted_demand",
    "is_dependent",
    "is_pausable",
    "is_pod_evidence",
    "is_queue_naming",
    "member_metadata",
    "member_resource",
    "pin_to_nodes",
    "run_policy_priority_class",
    "run_policy_queue",
    "unschedulable",
]

#: Metadata the API server owns on the fleet object; a member copy must not carry it over.
_SERVER_FIELDS = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "ownerReferences",
    "finalizers",
)


@dataclass(frozen=True)
class FieldError:
    """One validation failure: where (a field path such as ``spec.replicaSpecs.Master.replicas``)
    and what rule it breaks."""

    path: str
    message: str
    #: The Kubernetes cause type a 422 reports it with (``FieldValueRequired``, ...).
    reason: str = "FieldValueInvalid"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class InvalidWorkload(ValueError):
    """A job that its adapter refuses; ``errors`` lists every failure."""

    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors


class UnknownKind(LookupError):
    """No adapter handles this apiVersion and kind."""


#: The ``status`` fields besides conditions that some kind mirrors from its member copy; the fleet
#: object drops one its member copy no longer has.
MIRRORED_FIELDS: Final = (
    "phase",
    "tasks",
    "aggregate",
    *JOBSET_STATUS_FIELDS,
    "jobsStatus",
    # Volcano's Job (fleet.workloads.volcano_jobs.MIRRORED_STATUS)
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
    # Kubernetes' batch/v1 Job (fleet.workloads.batch_jobs.MIRRORED_STATUS)
    "active",
    "ready",
    "completedIndexes",
    "failedIndexes",
    "uncountedTerminatedPods",
)


class Outcome(enum.Enum):
    """What a member copy's status means for Fleet, as its kind's adapter classifies it."""

    #: Not running yet, nothing wrong (created, waiting for its pods).
    STARTING = "Starting"
    #: Running (or restarting its pods under its own restart policy).
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    #: Failed by the user's own doing (an invalid spec, a non-retriable exit): never retried.
    USER_ERROR = "UserError"
    #: Failed for a reason another attempt may not meet: failed over (application failover).
    RETRIABLE = "Retriable"
    #: Waiting for its gang in the member (``PodGroupPending``): the member could not run it;
    #: failed over once past the policy's toleration.
    STUCK_PENDING = "StuckPending"


@dataclass(frozen=True)
class WorkloadStatus:
    """What the fleet object shows of its member copy's status."""

    state: str | None  # the type of the last true condition (Created, Running, ...)
    reason: str | None
    message: str | None
    conditions: list[dict[str, Any]] = field(default_factory=list)
    replica_statuses: dict[str, Any] = field(default_factory=dict)
    start_time: str | None = None
    completion_time: str | None = None
    #: Further top-level ``status`` fields the kind mirrors as the member wrote them (T9k:
    #: ``phase``, ``tasks``, ``aggregate``); only keys of :data:`MIRRORED_FIELDS`.
    extra: dict[str, Any] = field(default_factory=dict)
    #: What the member's scheduler said of the copy's pods it could not place
    #: (:func:`unschedulable`), when the syncer read them (for the kinds whose operator never
    #: says on the job that its gang waits); None: not read, or every pod placed.
    unschedulable: str | None = None

    @property
    def finished(self) -> bool:
        return self.state in ("Succeeded", "Failed")

    def to_status(self) -> dict[str, Any]:
        """The fields in the shape the kind's ``status`` uses."""
        out: dict[str, Any] = {"conditions": self.conditions, "replicaStatuses": self.replica_statuses}
        if self.start_time:
            out["startTime"] = self.start_time
        if self.completion_time:
            out["completionTime"] = self.completion_time
        out.update(self.extra)
        return out


#: Where AscendJob and the Kubeflow kinds name their priority class (``RunPolicy.SchedulingPolicy``
#: of kubeflow/common, which MindCluster's ascend-operator copies into the PodGroup's
#: ``priorityClassName``: ``newPodGroupSpec`` in ascend-operator ``pkg/controllers/v1/job.go``).
RUN_POLICY_PRIORITY_CLASS: Final = "spec.runPolicy.schedulingPolicy.priorityClass"


@dataclass(frozen=True)
class PriorityRequest:
    """What a job says about its priority, where its kind writes it (see :mod:`fleet.jobs.priority`
    for how Fleet resolves it).

    ``class_name``: a PriorityClass to resolve (AscendJob, PyTorchJob, TFJob, MPIJob:
    ``spec.runPolicy.schedulingPolicy.priorityClass``); ``value``: a raw priority the kind carries
    itself (T9k: ``spec.scheduler.t9kScheduler.priority``). ``field`` is the path of whichever is
    set, for error messages. Empty: the job says nothing (the global default or the annotation).
    """

    class_name: str = ""
    value: int | None = None
    field: str = ""


def run_policy_priority_class(obj: Mapping[str, Any]) -> PriorityRequest:
    """The class named at :data:`RUN_POLICY_PRIORITY_CLASS` (kubeflow/common ``SchedulingPolicy``),
    for the adapters of the kinds that write it there. An empty string names none, as an empty
    ``priorityClassName`` does for a pod. Call it on a validated job (the adapter checks the type)."""
    spec = obj.get("spec")
    run = spec.get("runPolicy") if isinstance(spec, Mapping) else None
    policy = run.get("schedulingPolicy") if isinstance(run, Mapping) else None
    name = policy.get("priorityClass") if isinstance(policy, Mapping) else None
    if isinstance(name, str) and name:
        return PriorityRequest(class_name=name, field=RUN_POLICY_PRIORITY_CLASS)
    return PriorityRequest()


@runtime_checkable
class WorkloadAdapter(Protocol):
    @property
    def resource(self) -> ResourceType:
        """The resource as the kind's own CRD serves it in a member (names, short names, columns)."""
        ...

    @property
    def api_version(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def plural(self) -> str: ...

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether this adapter handles ``obj`` (by apiVersion and kind)."""
        ...

    def validate(self, obj: Mapping[str, Any]) -> list[FieldError]:
        """Every rule ``obj`` breaks; empty when it is valid."""
        ...

    def demand(self, obj: Mapping[str, Any]) -> Demand:
        """The gang the job needs; raises :class:`InvalidWorkload` when it is invalid."""
        ...

    def priority_request(self, obj: Mapping[str, Any]) -> PriorityRequest:
        """Where the job names its priority: a class to resolve or a raw value (Fleet resolves it
        at submission, :func:`fleet.jobs.priority.resolve`); empty when it names none."""
        ...

    def map_status(self, member_obj: Mapping[str, Any]) -> WorkloadStatus:
        """The member copy's status as the fleet object shows it."""
        ...

    def classify(self, status: WorkloadStatus) -> Outcome:
        """What the member copy's mapped status means: running, succeeded, the user's error,
        worth retrying elsewhere, or stuck waiting for its gang."""
        ...

    def member_copy(
        self,
        obj: Mapping[str, Any],
        fleet_uid: str,
        attempt: int,
        *,
        pin: Mapping[str, Sequence[str]] | None = None,
    ) -> dict[str, Any]:
        """The body to create in a member for this attempt of the fleet job ``obj``.

        ``pin`` (replica type -> node names, from the chosen placement) restricts each replica
        type's pods to the nodes Fleet reserved for them (see :func:`pin_to_nodes`).
        """
        ...


@runtime_checkable
class AcceptedDemand(Protocol):
    """A kind that reads the demand of a job its rules already accepted without asking them again.

    The API judges a job whole once, at submission; the dispatcher then needs only its demand.
    Asking every rule again there (the kind's model, the pod rules of the API server) cost about a
    fifth of the dispatcher's admitting, measured with py-spy on ``bench.dispatch_bench``. A stored
    job is not judged again by rules that came later, as kube-apiserver never judges a stored
    object again until it is written (kubernetes/kubernetes#64841, "Validation Tightening is not
    Generally Possible"; KEP-4008 ratchets CRD validation the same way), and as Kueue's scheduler
    reads a Workload's pod sets, made once from the job, never the job's templates.
    """

    def accepted_demand(self, obj: Mapping[str, Any]) -> Demand:
        """The demand, read the way the kind's full rules read it (one reading for both); may raise
        :class:`~fleet.placement.DemandError` (a ``ValueError``), ``LookupError``, ``TypeError`` or
        ``AttributeError`` on a job its rules never accepted, which is then judged by
        :meth:`WorkloadAdapter.demand`."""
        ...


@runtime_checkable
class Pausable(Protocol):
    """A kind with a switch that holds a job back (T9k ``spec.runMode.pause``, Kubeflow
    ``spec.runPolicy.suspend``): held, a job has no replicas, hence no member capacity and no
    quota; the switch is the one part of its spec a user may change after submission
    (:mod:`fleet.jobs.pause`, one mechanism for every such kind)."""

    #: Where the switch sits, for messages and errors (``spec.runPolicy.suspend``).
    pause_field: str
    #: The fleet state a held job shows, in its kind's word (one of :data:`fleet.jobs.phases.HELD`:
    #: ``Paused`` for T9k, ``Suspended`` for Kubeflow).
    held_state: str

    @property
    def held_reason(self) -> str:
        """The reason of that state and of its Event, as the kind's operator gives it
        (``PyTorchJobSuspended``; T9k: ``Paused``)."""
        ...

    def paused(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj``'s switch holds it back."""
        ...

    def without_pause_switch(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """``obj``'s spec without the switch: two specs that differ only there compare equal."""
        ...


@runtime_checkable
class Dependent(Protocol):
    """A kind whose member copy needs other objects in the member first (a Kubeflow TrainJob its
    training runtime): the dispatcher creates each before the copy, as ``propagateDeps`` sends a
    ConfigMap, and leaves one the member already has as it is."""

    def dependencies(self, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The bodies to create in the member (each with apiVersion, kind, namespaced metadata)."""
        ...

    def resolve(
        self,
        obj: dict[str, Any],
        lookup: Callable[[ResourceType, str | None, str], Mapping[str, Any] | None],
    ) -> None:
        """At submission, record on ``obj`` what it depends on as ``lookup`` finds it at the fleet
        (its demand and :meth:`dependencies` are made of that record)."""
        ...


@runtime_checkable
class PodEvidence(Protocol):
    """A kind whose operator may never say on the job that its gang waits (Kubeflow's training
    and MPI operators leave that to the scheduler): when ``reads_pods``, the syncer reads a
    waiting copy's pods into :attr:`WorkloadStatus.unschedulable` before classifying it."""

    @property
    def reads_pods(self) -> bool: ...


@runtime_checkable
class QueueNaming(Protocol):
    """A kind that names its queue in its spec (T9k ``spec.scheduler.t9kScheduler.queue``;
    Kubeflow's kinds and AscendJob ``spec.runPolicy.schedulingPolicy.queue``). The queue routes
    the job to a leaf of the ElasticQuotaTree as the quota label does, under the same rule
    (:func:`fleet.jobs.submit.quota_labels`)."""

    #: Where the job names its queue, for the errors that refuse it.
    queue_field: str

    def queue(self, obj: Mapping[str, Any]) -> str | None:
        """The queue ``obj`` names; None when it names none or its scheduler's default queue
        (:data:`DEFAULT_QUEUE`: the job is left to its namespace's leaf)."""
        ...


# --- what an adapter can do, asked once per adapter class -----------------------------------------

_CAPABLE: dict[tuple[type, object], bool] = {}


def _capable(adapter: object, protocol: Any) -> bool:
    """``isinstance(adapter, protocol)`` for one of the protocols above, answered once per adapter
    class. Python 3.11 walks a protocol's members on every such check (10-20 µs), and the
    dispatcher, the syncer and the workers ask it of every job they touch; an adapter's members
    are its class's, so its class's answer is its own."""
    key = (type(adapter), protocol)
    known = _CAPABLE.get(key)
    if known is None:
        known = _CAPABLE[key] = isinstance(adapter, protocol)
    return known


def is_pausable(adapter: object) -> TypeGuard[Pausable]:
    return _capable(adapter, Pausable)


def is_dependent(adapter: object) -> TypeGuard[Dependent]:
    return _capable(adapter, Dependent)


def is_pod_evidence(adapter: object) -> TypeGuard[PodEvidence]:
    return _capable(adapter, PodEvidence)


def is_queue_naming(adapter: object) -> TypeGuard[QueueNaming]:
    return _capable(adapter, QueueNaming)


def is_accepted_demand(adapter: object) -> TypeGuard[AcceptedDemand]:
    return _capable(adapter, AcceptedDemand)


#: The queue a job is put in when it names none, in the schedulers these kinds are written for:
#: Volcano creates a queue named ``default`` at installation, and Kubeflow's training operator
#: gives a job's PodGroup ``spec.queue: default`` when ``schedulingPolicy.queue`` is empty
#: (kubeflow/training-operator ``pkg/controller.v1/common/job.go``, ``ReconcileJobs``); T9k's
#: scheduler has its own ``default`` queue. Naming it says nothing about where the job belongs,
#: so at the fleet it means "the leaf of the job's namespace", as naming no queue does (the
#: samples of every kind name it).
DEFAULT_QUEUE: Final = "default"

#: Kueue's queue label (``constants.QueueLabel`` in kubernetes-sigs/kueue ``pkg/controller/constants``):
#: a job written for Kueue names its LocalQueue here, on any kind Kueue integrates. At the fleet it
#: names the job's quota leaf (:func:`fleet.jobs.submit.queue_source`).
KUEUE_QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"

#: Where AscendJob and the Kubeflow kinds name their queue (``RunPolicy.SchedulingPolicy.Queue``
#: of kubeflow/common, copied into the PodGroup's ``spec.queue``).
RUN_POLICY_QUEUE: Final = "spec.runPolicy.schedulingPolicy.queue"


def run_policy_queue(obj: Mapping[str, Any]) -> str | None:
    """The queue named at :data:`RUN_POLICY_QUEUE`; None for none, an empty one or
    :data:`DEFAULT_QUEUE`. Call it on a validated job (the adapter checks the type)."""
    spec = obj.get("spec")
    run = spec.get("runPolicy") if isinstance(spec, Mapping) else None
    policy = run.get("schedulingPolicy") if isinstance(run, Mapping) else None
    name = policy.get("queue") if isinstance(policy, Mapping) else None
    return name if isinstance(name, str) and name and name != DEFAULT_QUEUE else None


def unschedulable(pods: Sequence[Mapping[str, Any]]) -> str | None:
    """What the scheduler says of the pods it could not place: the message of a ``Pending``
    pod's ``PodScheduled`` condition that is False with reason ``Unschedulable`` (what
    kube-scheduler writes, ``PodReasonUnschedulable``, and Volcano for a gang it cannot place,
    ``taskUnschedulable``), naming the pod; None when no pod says so. A pod not looked at yet
    (no condition) says nothing: a copy just created is not stuck."""
    for pod in pods:
        status = pod.get("status")
        if not isinstance(status, Mapping) or status.get("phase", "Pending") != "Pending":
            continue
        for condition in status.get("conditions") or ():
            if (
                isinstance(condition, Mapping)
                and condition.get("type") == "PodScheduled"
                and condition.get("status") == "False"
                and condition.get("reason") == "Unschedulable"
            ):
                name = (pod.get("metadata") or {}).get("name")
                return f"pod {name} is unschedulable: {condition.get('message') or 'no node fits it'}"
    return None


def member_resource(rt: ResourceType) -> Resource:
    """How member access names a job kind (:class:`fleet.members.Resource`)."""
    return Resource(rt.plural, namespaced=True, group=rt.group, version=rt.version, kind=rt.kind)


def pin_to_nodes(pod_spec: dict[str, Any], nodes: Sequence[str]) -> None:
    """Restrict a pod template to ``nodes`` by required node affinity on ``metadata.name``.

    Fleet's hold sits on the nodes of its plan; a member scheduler that bound the pods elsewhere
    (because the member changed between decision and binding) could take nodes another job in
    flight was planned on. Pinning makes the plan binding: every existing required term is
    narrowed to the nodes (``matchFields``, as the DaemonSet controller pins pods), or one term
    is added. The user's own selectors and affinities still apply.
    """
    pin = {"key": "metadata.name", "operator": "In", "values": sorted(set(nodes))}
    affinity = pod_spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    for term in terms:
        term["matchFields"] = [*(term.get("matchFields") or []), pin]
    required["nodeSelectorTerms"] = terms


def fleet_labels(obj: Mapping[str, Any], fleet_uid: str, attempt: int) -> dict[str, str]:
    """The labels that tie a member copy (and its pods) to its fleet job and attempt."""
    meta = obj.get("metadata") or {}
    return {
        JOB_NAMESPACE_LABEL: str(meta.get("namespace") or "default"),
        JOB_NAME_LABEL: str(meta.get("name") or ""),
        JOB_UID_LABEL: fleet_uid,
        ATTEMPT_LABEL: str(attempt),
    }


def fleet_label_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    """Whatever kind a job is, the labels :func:`fleet_labels` derives from its name and namespace
    must be labels a member accepts (``IsValidLabelValue``: at most 63 characters), or every copy
    would be refused: a job whose name or namespace cannot be one is refused at submission."""
    meta = obj.get("metadata") or {}
    errors: list[FieldError] = []
    for key, label in (("namespace", JOB_NAMESPACE_LABEL), ("name", JOB_NAME_LABEL)):
        value = meta.get(key)
        if isinstance(value, str) and (why := label_value(value)):
            message = f'Invalid value: "{value}": Fleet labels every member copy {label}: {why}'
            errors.append(FieldError(f"metadata.{key}", message))
    return errors


def member_metadata(obj: Mapping[str, Any], fleet_uid: str, attempt: int) -> dict[str, Any]:
    """The fleet object's metadata minus server-owned fields, plus :func:`fleet_labels`."""
    meta = clone(dict(obj.get("metadata") or {}))
    for name in _SERVER_FIELDS:
        meta.pop(name, None)
    meta["namespace"] = meta.get("namespace") or "default"
    meta["labels"] = {**(meta.get("labels") or {}), **fleet_labels(obj, fleet_uid, attempt)}
    return meta
