"""A job's priority: where it comes from, what is recorded on the job, how it is read back.

One home for the names of priority (the annotation, the PriorityClass limits and preemption
policies, the fields recorded on the fleet object) and for the rules below.

Where a job's priority comes from (:func:`resolve`, at submission only)
    A job's kind says where it names its priority; its workload adapter reports it
    (:meth:`fleet.workloads.WorkloadAdapter.priority_request`): AscendJob, like the Kubeflow
    kinds, names a PriorityClass at ``spec.runPolicy.schedulingPolicy.priorityClass`` (the
    ascend-operator and the training-operator copy it into the Volcano PodGroup's
    ``priorityClassName``); a T9k job would carry a raw value at
    ``spec.scheduler.t9kScheduler.priority``. Fleet resolves the class through the
    PriorityClass objects at the fleet (``kubectl apply`` them against the fleet), with the rules
    of Kubernetes' Priority admission plugin (``plugin/pkg/admission/priority/admission.go``,
    ``admitPod``):

    1. A job naming a class gets that class's ``value`` and ``preemptionPolicy``. A class that
       does not exist refuses the job, as the plugin refuses a pod: 403 Forbidden, ``no
       PriorityClass with name <name> was found`` (:class:`PriorityClassNotFound`; the API adds
       the field, ``spec.runPolicy.schedulingPolicy.priorityClass``). Nothing is stored or queued.
    2. A job with a raw value of its own (T9k) gets it, with ``PreemptLowerPriority``.
    3. A job naming none gets the ``globalDefault`` class, when there is one: its value, policy
       and name (the plugin writes the default's name into the pod's ``priorityClassName`` too).
       Should two classes be marked default (two API replicas racing), the one with the lowest
       value wins, as in the plugin's ``getDefaultPriorityClass``.
    4. Otherwise the ``fleet.io/priority`` annotation (:data:`PRIORITY_ANNOTATION`), Fleet's
       older way of saying it: an integer, ``PreemptLowerPriority``.
    5. Otherwise 0 (``DefaultPriorityWhenNoDefaultClassExists``) and ``PreemptLowerPriority``.

    A job that names a class *and* carries the annotation gets the class: the annotation is a
    fallback only, read when neither the job nor a default class says anything; it is then not
    even checked. (Kubernetes refuses a pod whose own ``priority`` disagrees with its class; the
    annotation is not the job's spec, so Fleet ignores it instead of refusing the job.)

What a job may write itself (:func:`check_written`, at submission)
    A PriorityClass is an admin's (only ``fleet:admins`` write them, and none above
    1,000,000,000 but the system's), so a priority that comes from one is taken as it is, as in
    Kubernetes. A priority a job writes as a number (rules 2 and 4: the annotation, T9k's raw
    value) is the tenant's own, so it is accepted only within what an admin allows where the job
    runs: at most the lowest ``fleet.io/max-priority`` attribute of the ElasticQuotaTree on the
    job's leaf and its ancestors and on its namespace's leaf and its ancestors
    (:func:`queues.priority_cap`), and never above 1,000,000,000 (Kubernetes'
    ``HighestUserDefinablePriority``; above are the system's classes) where no node says less.
    Above it the job is refused as an admission plugin refuses (403 Forbidden naming the field,
    the value, the cap and the node that sets it; :class:`PriorityNotAllowed`) and nothing is
    stored: a tenant sharing a leaf with another team cannot outrank it beyond its own cap, nor
    preempt its jobs from above it. Kueue has no such number: a Workload's priority comes from
    the ``WorkloadPriorityClass`` its job's label ``kueue.x-k8s.io/priority-class`` names, else
    from its pods' PriorityClass, else the default (``pkg/util/priority``), all of them cluster
    objects an admin creates; Fleet keeps the number for the tenants who write it and caps it
    instead. A job accepted before a cap was set keeps its recorded priority.

What is recorded (:meth:`JobPriority.record`)
    Priority is fixed at submission, as a pod's ``spec.priority`` is: the resolved priority is
    written into the fleet object's status when it is stored, ``status.priority`` (the integer),
    ``status.priorityClassName`` (the class it came from, the default's included; absent when it
    came from the annotation or is the implicit 0) and ``status.preemptionPolicy``. Everything
    after submission (the dispatcher's reconcile, requeues, failover, preemption decisions) reads
    those through :func:`job_priority`, never the PriorityClasses again: a class deleted or
    re-created with another value later changes nothing for the jobs already accepted, as it
    changes nothing for running pods.

Cheap per submission (:class:`PriorityClasses`)
    The classes of the fleet are few and rarely change, submissions are many (hundreds a second).
    A :class:`PriorityClasses` keeps them in memory with the version it read them at, and before
    each resolution asks the kind's change feed whether anything changed since (the reads of
    :meth:`fleet.state.Objects.changes`, in one MULTI: small, no JSON when nothing changed); it
    reads them all again only when something did. Lookups are exact, not eventually consistent: a
    class applied a moment ago on another replica is seen by the next submission. Submission
    sends that check in the round trip it spends anyway on the quota tree's version
    (:meth:`PriorityClasses.check_call`, :func:`fleet.jobs.submit.prepare`), so resolving a
    priority costs no round trip of its own while no class changes.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import redis

from fleet.jobs.fleet_status import FleetStatus, status_of
from fleet.kinds import PRIORITY_CLASS
from fleet.state import Objects, kind_name, text
from fleet.workloads import FieldError, InvalidWorkload, adapter_for
from queues import HIGHEST_USER_PRIORITY, MAX_PRIORITY_ATTRIBUTE, ElasticQuotaTree, PriorityCap, priority_cap

__all__ = [
    "ANNOTATION_FIELD",
    "DEFAULT_PRIORITY",
    "HIGHEST_USER_DEFINABLE_PRIORITY",
    "NO_CLASSES",
    "PREEMPTION_POLICIES",
    "PREEMPT_LOWER_PRIORITY",
    "PREEMPT_NEVER",
    "PRIORITY_ANNOTATION",
    "SYSTEM_PRIORITY_CLASSES",
    "SYSTEM_PRIORITY_CLASS_PREFIX",
    "ClassInfo",
    "ClassLookup",
    "ClassesRead",
    "JobPriority",
    "PriorityClassNotFound",
    "PriorityClasses",
    "PriorityNotAllowed",
    "annotation_priority",
    "check_written",
    "global_default",
    "job_priority",
    "priority_classes",
    "resolve",
]

#: Queue priority of a job as Fleet's own annotation says it (an integer; higher first): the
#: fallback when the job names no PriorityClass and no class is the global default.
PRIORITY_ANNOTATION: Final = "fleet.io/priority"

#: ``core/v1`` PreemptionPolicy values, in the order Kubernetes lists them in its errors.
PREEMPT_LOWER_PRIORITY: Final = "PreemptLowerPriority"
PREEMPT_NEVER: Final = "Never"
PREEMPTION_POLICIES: Final = (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER)

#: Priority of a job that names nothing when no class is the default
#: (``scheduling.DefaultPriorityWhenNoDefaultClassExists``).
DEFAULT_PRIORITY: Final = 0
#: The largest value a user-defined class may have (``scheduling.HighestUserDefinablePriority``);
#: larger ones are for the system classes. Also the most a job may write as its own priority.
HIGHEST_USER_DEFINABLE_PRIORITY: Final = HIGHEST_USER_PRIORITY
#: Where the annotation's priority is written, as refusals name it.
ANNOTATION_FIELD: Final = f"metadata.annotations[{PRIORITY_ANNOTATION}]"
#: Names with this prefix are reserved for the system classes (``scheduling.SystemPriorityClassPrefix``).
SYSTEM_PRIORITY_CLASS_PREFIX: Final = "system-"
#: The system classes and their values (``pkg/apis/scheduling/helpers.go``): the only names with
#: the prefix that may be created, with exactly these values and ``globalDefault: false``. Unlike
#: kube-apiserver, the fleet does not create them itself: training jobs are not system-critical.
SYSTEM_PRIORITY_CLASSES: Final[Mapping[str, int]] = {
    "system-node-critical": 2_000_001_000,
    "system-cluster-critical": 2_000_000_000,
}


@dataclass(frozen=True)
class ClassInfo:
    """What resolution needs of one PriorityClass object."""

    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = PREEMPT_LOWER_PRIORITY

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ClassInfo | None:
        """The class ``obj`` describes; None for an object without a usable name or value (the
        API refuses those; this guards against objects written around it)."""
        name = (obj.get("metadata") or {}).get("name")
        value = obj.get("value")
        if not isinstance(name, str) or not isinstance(value, int) or isinstance(value, bool):
            return None
        policy = obj.get("preemptionPolicy")
        return cls(
            name,
            value,
            obj.get("globalDefault") is True,
            policy if policy in PREEMPTION_POLICIES else PREEMPT_LOWER_PRIORITY,
        )


def global_default(classes: Iterable[ClassInfo]) -> ClassInfo | None:
    """The default class among ``classes``: of several (a race), the lowest value, then name."""
    defaults = [c for c in classes if c.global_default]
    return min(defaults, key=lambda c: (c.value, c.name)) if defaults else None


@dataclass(frozen=True)
class JobPriority:
    """A job's priority as resolved at submission and recorded on the fleet object."""

    value: int = DEFAULT_PRIORITY
    class_name: str = ""
    preemption_policy: str = PREEMPT_LOWER_PRIORITY
    #: Where the job wrote the value itself (the annotation, T9k's raw field); ``""`` when it came
    #: from a class, the default, or the record of a stored job. Not recorded.
    written_at: str = field(default="", compare=False)

    @property
    def may_preempt(self) -> bool:
        """Whether the job may preempt jobs of lower priority (``Never`` only waits)."""
        return self.preemption_policy != PREEMPT_NEVER

    @classmethod
    def of_class(cls, pc: ClassInfo) -> JobPriority:
        return cls(pc.value, pc.name, pc.preemption_policy)

    def record(self, status: FleetStatus) -> None:
        """Write it into a fleet object's ``status`` (``priority``, ``priorityClassName``,
        ``preemptionPolicy``: what was resolved at submission)."""
        status["priority"] = self.value
        if self.class_name:
            status["priorityClassName"] = self.class_name
        else:
            status.pop("priorityClassName", None)
        status["preemptionPolicy"] = self.preemption_policy


class PriorityNotAllowed(Exception):
    """A job writes itself a priority above what it may (an admission refusal: 403 Forbidden)."""

    def __init__(self, field: str, value: int, cap: PriorityCap, namespace: str) -> None:
        if cap.node:
            where = (
                f"the most the ElasticQuotaTree allows jobs of namespace {namespace} there "
                f"(attribute {MAX_PRIORITY_ATTRIBUTE} of quota node {cap.node!r})"
            )
        else:
            where = "the highest priority a user may define (higher ones are the system's)"
        super().__init__(
            f"priority {value} is above {cap.value}, {where}; name a PriorityClass an admin created, "
            "or write a lower value"
        )
        self.field = field
        self.value = value
        self.cap = cap


def check_written(priority: JobPriority, tree: ElasticQuotaTree | None, namespace: str, leaf: str) -> None:
    """Refuse a priority the job wrote itself above its cap (see the module docstring); a value
    from a class, or a stored job's record, is never checked."""
    if not priority.written_at:
        return
    cap = priority_cap(tree, namespace, leaf)
    if priority.value > cap.value:
        raise PriorityNotAllowed(priority.written_at, priority.value, cap, namespace)


class PriorityClassNotFound(Exception):
    """A job names a PriorityClass that does not exist (Kubernetes answers 403 Forbidden)."""

    def __init__(self, name: str, field: str) -> None:
        super().__init__(f"no PriorityClass with name {name} was found")
        self.name = name
        self.field = field


class ClassLookup(Protocol):
    """What :func:`resolve` looks classes up in: :class:`PriorityClasses` (checked for changes at
    each lookup) or :class:`ClassesRead` (the classes as one check found them)."""

    def get(self, name: str) -> ClassInfo | None: ...

    def default(self) -> ClassInfo | None: ...


@dataclass(frozen=True)
class ClassesRead:
    """The fleet's classes as stored at one resourceVersion ``version`` (``""``: no store)."""

    version: str = ""
    by_name: Mapping[str, ClassInfo] = field(default_factory=dict)
    default_class: ClassInfo | None = None

    def get(self, name: str) -> ClassInfo | None:
        return self.by_name.get(name)

    def default(self) -> ClassInfo | None:
        return self.default_class


#: The classes of a fleet without any.
NO_CLASSES: Final = ClassesRead()


class PriorityClasses:
    """The fleet's PriorityClasses for resolution, kept in memory and checked for changes before
    each use (see the module docstring). Thread-safe; share one per :class:`~fleet.state.Objects`
    (:func:`priority_classes`). ``objects=None``: a fleet without any class."""

    def __init__(self, objects: Objects | None) -> None:
        self.objects = objects
        self._lock = threading.Lock()
        #: The classes as last read (or last checked unchanged); None before the first read.
        self._read: ClassesRead | None = None

    def check_call(self, pipeline: redis.client.Pipeline) -> Callable[[Sequence[Any]], ClassesRead]:
        """:meth:`current` in two halves, for a caller that sends the check in one round trip with
        reads of its own: queues on ``pipeline`` (a MULTI, so that the check's reads are one
        atomic read) the reads of the kind's change feed after the version the classes were read
        at (those of :meth:`fleet.state.Objects.changes`: the next change if any, the kind's
        trim floor, the version counter), and returns the function to give the pipeline's replies
        (all of them): the classes as stored when the pipeline ran. They are read again (one more
        round trip) only when one changed since, or the feed no longer reaches back (410 Gone
        for a watch). Nothing is queued before the first read (the function reads) nor without
        objects."""
        objects, read = self.objects, self._read
        if objects is None:
            return lambda _: NO_CLASSES
        if read is None:
            return lambda _: self._list(objects)
        at = len(pipeline)
        kind = kind_name(PRIORITY_CLASS.key)
        start = int(read.version)
        pipeline.xrange(objects.keys.changes(kind), f"{start + 1}-0", "+", count=1)
        pipeline.hget(objects.keys.floors, kind)
        pipeline.get(objects.keys.version)

        def settle(replies: Sequence[Any]) -> ClassesRead:
            entries, floor, version = replies[at : at + 3]
            if entries or (floor is not None and start < int(text(floor))):
                return self._list(objects)
            now = str(max(start, int(version or 0)))
            if now == read.version:
                return read
            # Unchanged up to ``now``: later checks need not look back past it.
            checked = self._read = ClassesRead(now, read.by_name, read.default_class)
            return checked

        return settle

    def current(self) -> ClassesRead:
        """The classes as stored now: one small round trip while none changed."""
        if self.objects is None:
            return NO_CLASSES
        pipeline = self.objects.client.pipeline(transaction=True)
        settle = self.check_call(pipeline)
        return settle(pipeline.execute() if len(pipeline) else [])

    def _list(self, objects: Objects) -> ClassesRead:
        with self._lock:
            items, version = objects.list(PRIORITY_CLASS)
            by_name = {c.name: c for c in (ClassInfo.of(item) for item in items) if c is not None}
            read = self._read = ClassesRead(version, by_name, global_default(by_name.values()))
            return read

    def get(self, name: str) -> ClassInfo | None:
        """The class named ``name``, as stored now; None when there is none."""
        return self.current().get(name)

    def default(self) -> ClassInfo | None:
        """The ``globalDefault`` class now, if any."""
        return self.current().default()

    def snapshot(self) -> tuple[dict[str, ClassInfo], ClassInfo | None]:
        """All classes by name and the default, as stored now (one consistent read)."""
        read = self.current()
        return dict(read.by_name), read.default_class


_SHARED: weakref.WeakKeyDictionary[Objects, PriorityClasses] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def priority_classes(objects: Objects) -> PriorityClasses:
    """The :class:`PriorityClasses` shared by everything that submits through ``objects``."""
    with _SHARED_LOCK:
        found = _SHARED.get(objects)
        if found is None:
            found = _SHARED[objects] = PriorityClasses(objects)
        return found


def annotation_priority(obj: Mapping[str, Any]) -> int | None:
    """The :data:`PRIORITY_ANNOTATION` of ``obj``; None without it; ``InvalidWorkload`` when it
    is not an integer."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(PRIORITY_ANNOTATION)
    if raw is None:
        return None
    try:
        return int(str(raw))
    except ValueError:
        raise InvalidWorkload(
            [FieldError(f"metadata.annotations[{PRIORITY_ANNOTATION}]", f"{raw!r} is not an integer")]
        ) from None


def resolve(obj: Mapping[str, Any], classes: ClassLookup | None) -> JobPriority:
    """The priority of a job being submitted, by the rules of the module docstring, its class
    looked up in ``classes`` (:class:`PriorityClasses`, or the :class:`ClassesRead` a check found).

    Raises :class:`PriorityClassNotFound` (a class it names does not exist), ``InvalidWorkload``
    (the annotation, when it is used, is not an integer) or ``UnknownKind``. ``classes=None``:
    the fleet has no PriorityClass at all.
    """
    request = adapter_for(obj).priority_request(obj)
    if request.class_name:
        found = classes.get(request.class_name) if classes is not None else None
        if found is None:
            raise PriorityClassNotFound(request.class_name, request.field)
        return JobPriority.of_class(found)
    if request.value is not None:
        return JobPriority(request.value, written_at=request.field)
    default = classes.default() if classes is not None else None
    if default is not None:
        return JobPriority.of_class(default)
    annotated = annotation_priority(obj)
    if annotated is None:
        return JobPriority(DEFAULT_PRIORITY)
    return JobPriority(annotated, written_at=ANNOTATION_FIELD)


def job_priority(obj: Mapping[str, Any]) -> JobPriority:
    """The priority of a stored fleet job: what was recorded at its submission. Never reads the
    PriorityClasses, so it neither fails nor changes when they change. A job stored before
    priorities were recorded gets what it was queued with then: its annotation, or 0."""
    status = status_of(obj)
    value = status.get("priority")
    if isinstance(value, int) and not isinstance(value, bool):
        policy = status.get("preemptionPolicy")
        return JobPriority(
            value,
            str(status.get("priorityClassName") or ""),
            policy if policy in PREEMPTION_POLICIES else PREEMPT_LOWER_PRIORITY,
        )
    annotated = annotation_priority(obj)
    return JobPriority(DEFAULT_PRIORITY if annotated is None else annotated)
