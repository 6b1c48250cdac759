"""Submission: what turns an accepted job into a queued one, and the names that tie the two.

A job is accepted in two steps: the fleet object is stored (status ``Queued``, a finalizer so
that deleting it waits for Fleet to release its quota and purge its member copy), then queued on
its quota leaf in the ledger. If a process dies between the two, the dispatcher's reconcile finds
the stored job missing from the ledger and queues it then, so an accepted job is never lost
(:meth:`fleet.dispatch.dispatcher.Dispatcher.reconcile`). Everything the ledger needs (leaf,
request, priority) is derived from the stored object, so queueing is repeatable and idempotent.

Priority is resolved once, at submission (:func:`prepare`: the job's PriorityClass, the default
class, the annotation; see :mod:`fleet.jobs.priority`), and recorded in the stored object's status;
queueing a stored job again (:func:`enqueue`) uses what was recorded, whatever happened to the
classes since.

Accepting a job takes three round trips to Redis (the hot path: hundreds a second): what
:func:`prepare` reads before the create (the quota tree's version and the PriorityClass change
check, in one MULTI: both exact as of that moment), the create, then the queueing and the
``Submitted`` Event together (:func:`queue_accepted`). One more only after a change: the tree's
spec when another tree was applied, the classes when one changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from fleet.connections import run_scripts
from fleet.jobs.fleet_status import job_queue_of
from fleet.jobs.lifecycle import Submit, step
from fleet.jobs.phases import FleetReason
from fleet.jobs.priority import (
    PRIORITY_ANNOTATION,
    ClassesRead,
    JobPriority,
    PriorityClasses,
    check_written,
    job_priority,
    priority_classes,
    resolve,
)
from fleet.jobs.store import job_kind
from fleet.placement import Demand
from fleet.state import Objects, event_call, record_event
from fleet.workloads import (
    DEFAULT_QUEUE,
    KUEUE_QUEUE_LABEL,
    adapter_for,
    is_queue_naming,
    job_key,
    job_ref,
    stored_demand,
)
from queues import QUOTA_LABEL, ElasticQuotaTree, Ledger, leaf_in, queue_name

__all__ = [
    "FINALIZER",
    "KUEUE_QUEUE_LABEL",
    "PRIORITY_ANNOTATION",
    "Prepared",
    "enqueue",
    "job_key",
    "node_of_queue",
    "prepare",
    "queue_accepted",
    "queue_of",
    "queue_source",
    "quota_labels",
    "quota_request",
    "split_key",
    "submit",
]

#: Held on every fleet job until Fleet has released its quota and purged its member copy.
FINALIZER: Final = "fleet.io/dispatch"
#: The component named on the Events of submission.
COMPONENT: Final = "fleet"


def split_key(key: str) -> tuple[str, str]:
    """The namespace and name of the job ``key`` names (its kind: :func:`fleet.workloads.job_ref`)."""
    return job_ref(key).names


def quota_request(demand: Demand) -> dict[str, int]:
    """What the whole job charges its quota nodes: every pod's requests summed, per resource."""
    resources = {r for shape in demand.shapes for r, _ in shape.requests}
    return {r: demand.total(r) for r in sorted(resources) if demand.total(r) > 0}


def node_of_queue(tree: ElasticQuotaTree | None, queue: str) -> str:
    """The tree node a queue name names: a node of that name, else the node whose derived queue
    it is (:func:`queue_of`: ``root-child-2``, what ``status.queue`` and ``kubectl get queues``
    show); the name as written when it is neither (the tree then refuses it: it names no leaf)."""
    if tree is None:
        return queue
    paths = tree.paths()
    if queue in paths:
        return queue
    return next((name for name, path in paths.items() if queue_name(path) == queue), queue)


def quota_labels(obj: Mapping[str, Any], tree: ElasticQuotaTree | None) -> dict[str, str]:
    """The labels the tree binds a job by (:meth:`queues.ElasticQuotaTree.leaf_for`): its own,
    plus, for a job that names its queue with Kueue's queue label or in its spec
    (:func:`queue_source`: ``kueue.x-k8s.io/queue-name``; :class:`~fleet.workloads.base.QueueNaming`:
    ``runPolicy.schedulingPolicy.queue``, ``t9kScheduler.queue``), :data:`~queues.QUOTA_LABEL`
    naming the node that queue names (:func:`node_of_queue`).

    So the queue field routes exactly as the quota label does, under the same rule: it may name
    the job's own leaf, or another leaf only where the tree makes that leaf available in the
    job's namespace (else 403), never an inner node or a name the tree does not have (422).
    Accepted names: a leaf's own name (as the label and T9k's queue name it) or its derived queue
    name (``root-child-2``). A queue named ``default`` (Volcano's and T9k's default queue) or none
    leaves the job to its namespace's leaf; a quota label on the job wins over its queue field;
    with no tree applied every job is in the implicit root, whatever it names."""
    meta = obj.get("metadata") or {}
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    source = queue_source(obj)
    if QUOTA_LABEL not in labels and source is not None:
        labels[QUOTA_LABEL] = node_of_queue(tree, source[1])
    return labels


def queue_source(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """Where a job without the quota label names its queue, and the name: Kueue's queue label
    (:data:`KUEUE_QUEUE_LABEL`, ``metadata.labels[kueue.x-k8s.io/queue-name]``), else its kind's
    queue field (:class:`~fleet.workloads.base.QueueNaming`); None when it names none (or
    ``default``, Kueue's default LocalQueue and Volcano's and T9k's default queue: the namespace's
    leaf). Labels come first, as the quota label does: a job written for Kueue keeps its kind's
    fields for the kind's own scheduler (Volcano's ``spec.queue: default``, ...)."""
    meta = obj.get("metadata") or {}
    kueue = (meta.get("labels") or {}).get(KUEUE_QUEUE_LABEL)
    if isinstance(kueue, str) and kueue and kueue != DEFAULT_QUEUE:
        return f"metadata.labels[{KUEUE_QUEUE_LABEL}]", kueue
    adapter = adapter_for(obj)
    if is_queue_naming(adapter) and (queue := adapter.queue(obj)):
        return adapter.queue_field, queue
    return None


def queue_of(tree: ElasticQuotaTree | None, leaf: str) -> str:
    """The derived queue a leaf's jobs wait in (``root-child-2``) under the applied ``tree``."""
    return queue_name(tree.paths().get(leaf, leaf) if tree is not None else leaf)


@dataclass(frozen=True)
class Prepared:
    """A validated job ready to store and queue."""

    obj: dict[str, Any]
    key: str
    leaf: str
    request: dict[str, int]
    priority: int
    demand: Demand
    #: The whole of what was resolved (``priority`` is its value), as recorded in ``obj``'s status.
    resolved: JobPriority = field(default_factory=JobPriority)


#: What :func:`prepare` resolves PriorityClasses through: a shared resolver, the objects (their
#: shared resolver is used), or None (the fleet has no PriorityClass).
Classes = PriorityClasses | Objects | None


def prepare(obj: Mapping[str, Any], ledger: Ledger, classes: Classes = None) -> Prepared:
    """Validate a job being submitted and derive its queueing, its priority resolved through
    ``classes`` (:func:`fleet.jobs.priority.resolve`) and recorded in the status it will be
    stored with. Raises ``InvalidWorkload``, ``UnknownKind``,
    :class:`~fleet.jobs.priority.PriorityNotAllowed` (a priority it writes itself above its cap),
    ``queues.UnboundJob`` (no quota
    node binds its namespace, or its quota label names no leaf), ``queues.QuotaNotAvailable``
    (its quota label names a leaf not available in its namespace:
    :meth:`queues.ElasticQuotaTree.leaf_for`) or
    :class:`~fleet.jobs.priority.PriorityClassNotFound`, and changes nothing. A valid job costs
    one round trip (:func:`_read_current`) while neither the tree nor any class changed."""
    adapter = adapter_for(obj)
    demand = adapter.demand(obj)
    if isinstance(classes, Objects):
        classes = priority_classes(classes)
    tree, found = _read_current(ledger, classes)
    return _derive(obj, tree, demand, resolve(obj, found))


def _read_current(
    ledger: Ledger, classes: PriorityClasses | None
) -> tuple[ElasticQuotaTree | None, ClassesRead | None]:
    """The applied tree and the PriorityClasses, both as stored now: the tree's version and the
    classes' change check (:meth:`~fleet.jobs.priority.PriorityClasses.check_call`) in one MULTI
    when the ledger and the classes' objects share a Redis client (they always do in Fleet),
    separately otherwise. The tree's spec and the classes are read again only after a change."""
    if classes is None or classes.objects is None:
        return ledger.tree(), None
    if classes.objects.client is not ledger.client:
        return ledger.tree(), classes.current()
    pipeline = ledger.client.pipeline(transaction=True)
    pipeline.hget(ledger.keys.meta, "version")  # what Ledger.version() reads
    settle = classes.check_call(pipeline)
    replies = pipeline.execute()
    return ledger.tree_at(int(replies[0] or 0)), settle(replies)


def _derive(
    obj: Mapping[str, Any], tree: ElasticQuotaTree | None, demand: Demand, priority: JobPriority
) -> Prepared:
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    leaf = leaf_in(tree, namespace, quota_labels(obj, tree))
    check_written(priority, tree, namespace, leaf)  # a stored job's record is never checked
    body = dict(obj)
    metadata = dict(meta)
    finalizers = list(metadata.get("finalizers") or [])
    if FINALIZER not in finalizers:
        finalizers.append(FINALIZER)
    metadata["finalizers"] = finalizers
    body["metadata"] = metadata
    queue = queue_of(tree, leaf)
    body["status"] = {}
    status = step(body, Submit(queue)) or {}
    priority.record(status)
    body["status"] = status
    return Prepared(body, job_key(body), leaf, quota_request(demand), priority.value, demand, priority)


def submit(
    objects: Objects, ledger: Ledger, obj: Mapping[str, Any], *, dry_run: bool = False
) -> dict[str, Any]:
    """Accept a job: validate it, store it ``Queued``, queue it on its leaf; returns the stored job.
    Its priority is resolved through the PriorityClasses of ``objects``.

    Raises what :func:`prepare` raises, or the store's ``AlreadyExists``; nothing is written then.
    """
    prepared = prepare(obj, ledger, objects)
    if dry_run:
        return prepared.obj
    stored = objects.create(job_kind(adapter_for(prepared.obj)), prepared.obj)
    queue_accepted(objects, ledger, prepared, stored)
    return stored


def queue_accepted(objects: Objects, ledger: Ledger, prepared: Prepared, stored: dict[str, Any]) -> None:
    """The second step of accepting a job (``stored``, the object :func:`prepare` made and the
    store created): queue it on its leaf and record its ``Submitted`` Event, both in one round
    trip when the ledger and the objects share a Redis client (they always do in Fleet).

    A failure here leaves the job stored, hence accepted: the dispatcher's reconcile queues it.
    So the Event is recorded even if the queueing failed (the two are sent together): it says
    where the job waits, which the reconcile makes true.
    """
    message = f"queued in {job_queue_of(stored)}"
    if ledger.client is not objects.client:
        ledger.enqueue(prepared.key, prepared.leaf, prepared.request, prepared.priority)
        record_event(objects, stored, reason=FleetReason.SUBMITTED, message=message, component=COMPONENT)
        return
    enqueue = ledger.pending.enqueue_call(prepared.key, prepared.leaf, prepared.request, prepared.priority)
    event, settle = event_call(
        objects, stored, reason=FleetReason.SUBMITTED, message=message, component=COMPONENT
    )
    queued, recorded = run_scripts(objects.client, [enqueue, event])
    settle(recorded)
    ledger.pending.enqueue_outcome(queued)


def enqueue(ledger: Ledger, obj: Mapping[str, Any]) -> Prepared:
    """Queue a stored job on its leaf (idempotent: a job already pending or admitted stays), with
    the priority recorded at its submission (:func:`fleet.jobs.priority.job_priority`): the
    PriorityClasses are not read again, so a class deleted or changed since changes nothing.
    Its demand is read as accepted (:func:`fleet.workloads.stored_demand`, as the dispatcher
    reads it): a rule that came after its submission does not fail it."""
    prepared = _derive(obj, ledger.tree(), stored_demand(obj), job_priority(obj))
    ledger.enqueue(prepared.key, prepared.leaf, prepared.request, prepared.priority)
    return prepared
