"""The kinds the fleet serves and stores, beyond the core kinds of :mod:`fleet.apiserver.core_kinds`.

Storage identity is ``(group, plural)``: each job kind of :data:`fleet.workloads.KINDS` is served
at the fleet under its member identity (the upstream CRD's names and short names) and differs only
in how it prints (STATE, CLUSTER, QUEUE, AGE; PRIORITY with ``-o wide``): :func:`fleet_kind`. The
dispatcher, workers and syncers read and write these kinds through :class:`fleet.state.Objects`.

Stored kinds: the job kinds, Event, PropagationPolicy, the ElasticQuotaTree (Kube Queue's group,
``scheduling.sigs.k8s.io/v1beta1``) and Kubernetes' own PriorityClass (``scheduling.k8s.io/v1``,
cluster-scoped: what a job's ``priorityClass`` names, see :mod:`fleet.jobs.priority`). Computed,
read-only kinds of Fleet's own group (``fleet.io/v1alpha1``): MemberCluster (one per member of the
kubeconfig, its health as the syncer last probed it) and Queue (one per quota tree node, from the
ledger). They have no ``create``/``update``/``delete`` verbs, so discovery tells kubectl so; the
API answers 405. This module only describes the kinds; their behaviour lives in the backends of
:mod:`fleet.endpoint`. It sits below the roles (the API, the dispatch roles, :mod:`fleet.jobs`), which
all name these kinds, and above the workload adapters it builds the job kinds from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, TypedDict

from fleet.apiserver import (
    EVENT,
    NAMESPACE,
    MergeRule,
    Obj,
    PrinterColumn,
    ResourceType,
    Subresource,
    json_path,
    since,
)
from fleet.policy import API_VERSION as POLICY_API_VERSION
from fleet.policy import CLUSTER_KIND as CLUSTER_POLICY_KIND
from fleet.policy import KARMADA_API_VERSION
from fleet.policy import KIND as POLICY_KIND
from fleet.workloads import KINDS, OTHER_VERSIONS, WorkloadAdapter
from queues import TREE_API_VERSION, TREE_KIND, format_quantity, parse_quantity

__all__ = [
    "CLUSTER_PROPAGATION_POLICY",
    "ELASTIC_QUOTA_TREE",
    "EXPLAIN",
    "FLEET_EVENT",
    "FLEET_GROUP",
    "FLEET_JOB_KINDS",
    "FLEET_JOB_VERSIONS",
    "FLEET_NAMESPACE",
    "FLEET_VERSION",
    "KARMADA_CLUSTER_PROPAGATION_POLICY",
    "KARMADA_PROPAGATION_POLICY",
    "MEMBER_CLUSTER",
    "POLICY_KINDS",
    "PRIORITY_CLASS",
    "PROPAGATION_POLICY",
    "QUEUE",
    "QUOTA_NODE_LABEL",
    "READ_VERBS",
    "QueueReading",
    "QueueSpec",
    "QueueStatus",
    "TreeNodeStatus",
    "TreeStatus",
    "amounts",
    "fleet_kind",
    "format_amounts",
    "nodes_by_free_cell",
    "npus_cell",
    "ready_condition",
    "tree_version",
]

#: Fleet's own API group, for the kinds only Fleet has.
FLEET_GROUP: Final = "fleet.io"
FLEET_VERSION: Final = "v1alpha1"
#: The verbs of a computed kind: it can be read and watched, never written.
READ_VERBS: Final = ("get", "list", "watch")

_AGE = PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since the object was created.")

#: How the fleet prints a job of any kind.
_JOB_COLUMNS: Final = (
    PrinterColumn("Name", "string", ".metadata.name", "Name of the job."),
    PrinterColumn("State", "string", ".status.conditions[-1].type", "The job's state: its last condition."),
    PrinterColumn("Cluster", "string", ".status.cluster", "The member cluster of the current attempt."),
    PrinterColumn("Queue", "string", ".status.queue", "The quota queue the job waits or runs in."),
    _AGE,
    PrinterColumn(
        "Priority",
        "integer",
        ".status.priority",
        "The priority resolved at submission (its PriorityClass, the default class, or the annotation).",
        priority=1,
    ),
)


#: Every job kind's ``explain`` subresource: ``POST`` a job to learn whether the fleet would accept
#: it, admit it and where it would fit now, ``GET`` the same of a stored job; the answer is an
#: ``Explanation`` (:mod:`fleet.endpoint.explain`). Nothing is stored or reserved.
EXPLAIN: Final = Subresource("explain", "Explanation", FLEET_GROUP, FLEET_VERSION)


def fleet_kind(adapter: WorkloadAdapter) -> ResourceType:
    """Job kind ``adapter`` as the fleet serves it: the upstream CRD's names, Fleet's columns,
    the ``explain`` subresource."""
    rt = adapter.resource
    return replace(
        rt,
        subresources=(EXPLAIN,),
        printer_columns=_JOB_COLUMNS,
        description=f"{rt.description} Queued by Fleet and run in one member cluster.",
    )


#: Every job kind as the fleet serves it, in the order of :data:`fleet.workloads.KINDS`.
FLEET_JOB_KINDS: Final = tuple(fleet_kind(adapter) for adapter in KINDS)

#: The job kinds' other served versions (:data:`fleet.workloads.OTHER_VERSIONS`), served with the
#: fleet's columns; stored at their kind's version, so only the API names them.
FLEET_JOB_VERSIONS: Final = tuple(
    replace(rt, subresources=(EXPLAIN,), printer_columns=_JOB_COLUMNS) for rt in OTHER_VERSIONS
)

#: Events at the fleet: Kubernetes' own Event, decoded strictly (every field of its schema, from
#: Kubernetes' type, is known; any other is an unknown field).
FLEET_EVENT: Final = replace(EVENT, strict=True)

#: The label and status field naming the quota tree node a namespace maps to.
QUOTA_NODE_LABEL: Final = "fleet.io/quota-node"


def _namespace_row(obj: Obj) -> list[Any]:
    status = obj.get("status") or {}
    return [
        obj["metadata"]["name"],
        str(status.get("phase") or ""),
        since(obj["metadata"].get("creationTimestamp")),
        str(status.get("quotaNode") or "<none>"),
        str(status.get("queue") or "<none>"),
    ]


#: Namespaces at the fleet: a read-only view (:mod:`fleet.endpoint.namespaces`), core/v1 as kubectl
#: knows it, with the quota node and queue each maps to.
FLEET_NAMESPACE: Final = replace(
    NAMESPACE,
    printer_columns=(
        *NAMESPACE.printer_columns,
        PrinterColumn("Quota-Node", "string", ".status.quotaNode", "The quota tree node of its jobs."),
        PrinterColumn("Queue", "string", ".status.queue", "The queue of that node.", priority=1),
    ),
    table_row=_namespace_row,
    has_status=False,
    prepare_create=None,
    verbs=READ_VERBS,
    description=(
        "A namespace of the fleet (read-only): one the ElasticQuotaTree binds or one holding objects, "
        "with the quota node its jobs are charged to."
    ),
)

_group, _, _version = POLICY_API_VERSION.partition("/")
_karmada_group, _, _karmada_version = KARMADA_API_VERSION.partition("/")

_POLICY_COLUMNS = (
    PrinterColumn("Name", "string", ".metadata.name", "Name of the policy."),
    PrinterColumn("Priority", "integer", ".spec.priority", "Precedence among matching policies."),
    _AGE,
)

PROPAGATION_POLICY: Final = ResourceType(
    group=_group,
    version=_version,
    kind=POLICY_KIND,
    plural="propagationpolicies",
    singular="propagationpolicy",
    namespaced=True,
    short_names=("pp",),
    printer_columns=_POLICY_COLUMNS,
    description="How Fleet places and fails over the jobs of its namespace it selects (ACK One's group).",
)

#: ACK One's ClusterPropagationPolicy: a PropagationPolicy for jobs of every namespace, which
#: yields to any PropagationPolicy that selects a job (:func:`fleet.policy.select_policy`).
CLUSTER_PROPAGATION_POLICY: Final = replace(
    PROPAGATION_POLICY,
    kind=CLUSTER_POLICY_KIND,
    plural="clusterpropagationpolicies",
    singular="clusterpropagationpolicy",
    namespaced=False,
    short_names=("cpp",),
    description="How Fleet places and fails over the jobs of any namespace it selects (ACK One's group).",
)

#: The same two kinds in Karmada's group (``policy.karmada.io/v1alpha1``), one schema with ACK
#: One's. No short names: ``pp`` and ``cpp`` stay ACK One's, the fleet seed's group.
KARMADA_PROPAGATION_POLICY: Final = replace(
    PROPAGATION_POLICY,
    group=_karmada_group,
    version=_karmada_version,
    short_names=(),
    categories=("karmada-io",),
    description="How Fleet places and fails over the jobs of its namespace it selects (Karmada's group).",
)
KARMADA_CLUSTER_PROPAGATION_POLICY: Final = replace(
    CLUSTER_PROPAGATION_POLICY,
    group=_karmada_group,
    version=_karmada_version,
    short_names=(),
    categories=("karmada-io",),
    description="How Fleet places and fails over the jobs of any namespace it selects (Karmada's group).",
)

#: Every served policy kind: what the dispatch roles list to choose a job's policy.
POLICY_KINDS: Final = (
    PROPAGATION_POLICY,
    CLUSTER_PROPAGATION_POLICY,
    KARMADA_PROPAGATION_POLICY,
    KARMADA_CLUSTER_PROPAGATION_POLICY,
)

_tree_group, _, _tree_version = TREE_API_VERSION.partition("/")

#: Kube Queue's quota tree: one object, in ``kube-system``; its status is computed from the ledger.
ELASTIC_QUOTA_TREE: Final = ResourceType(
    group=_tree_group,
    version=_tree_version,
    kind=TREE_KIND,
    plural="elasticquotatrees",
    singular="elasticquotatree",
    namespaced=True,
    short_names=("eqtree",),
    printer_columns=(
        PrinterColumn("Name", "string", ".metadata.name", "Name of the tree (one per fleet)."),
        PrinterColumn("Version", "integer", ".status.version", "The version the quota ledger applied."),
        _AGE,
    ),
    description=(
        "The hierarchical quota of the fleet (Kube Queue's ElasticQuotaTree): min and max per node, "
        "namespaces bound to leaves. Only one, in kube-system; its status shows use per node."
    ),
    verbs=("create", "get", "list", "patch", "update", "watch"),
)


def _map(value: object) -> Mapping[str, Any]:
    """``value`` when it is a map (a field of an object read back), else empty."""
    return value if isinstance(value, Mapping) else {}


class TreeNodeStatus(TypedDict):
    """One node of the tree's ``status.nodes``: what the ledger says of it now."""

    name: str
    path: str
    #: The node's Queue (:data:`QUEUE`).
    queue: str
    used: dict[str, str]
    #: What the jobs pending in its subtree ask for.
    requested: dict[str, str]
    admitted: int
    pending: int


class TreeStatus(TypedDict):
    """The tree's ``status``, computed from the ledger when read (:mod:`fleet.endpoint.quota_tree`)."""

    #: The version of the tree the ledger applied (0: none yet).
    version: int
    nodes: list[TreeNodeStatus]


def tree_version(obj: Mapping[str, Any] | None) -> int:
    """The version ``status.version`` of a tree object says was applied; 0 without one."""
    status = _map((obj or {}).get("status"))
    return int(status.get("version") or 0)


def _priority_class_row(obj: Obj) -> list[Any]:
    policy = obj.get("preemptionPolicy")
    value = obj.get("value")
    return [
        obj["metadata"]["name"],
        value if isinstance(value, int) and not isinstance(value, bool) else 0,
        obj.get("globalDefault") is True,
        since(obj["metadata"].get("creationTimestamp")),
        policy if isinstance(policy, str) else "",
    ]


_OBJECT_META = "Standard object's metadata."

#: Kubernetes' PriorityClass, served as kube-apiserver serves it (``scheduling.k8s.io/v1``,
#: cluster-scoped, short name ``pc``): fields ``value``, ``globalDefault``, ``description`` and
#: ``preemptionPolicy`` at the top level, no spec or status. The columns are kube-apiserver's
#: (``printPriorityClass`` in ``pkg/printers/internalversion/printers.go``: NAME, VALUE,
#: GLOBAL-DEFAULT, AGE, PREEMPTIONPOLICY). Validation:
#: :func:`fleet.endpoint.validation.validate_priority_class`; the checks against other objects
#: (the stored one on update, the other defaults) and defaulting:
#: :class:`fleet.endpoint.priority_classes.PriorityClassBackend`.
PRIORITY_CLASS: Final = ResourceType(
    group="scheduling.k8s.io",
    version="v1",
    kind="PriorityClass",
    plural="priorityclasses",
    singular="priorityclass",
    namespaced=False,
    short_names=("pc",),
    printer_columns=(
        PrinterColumn("Name", "string", ".metadata.name", _OBJECT_META, format="name"),
        PrinterColumn(
            "Value",
            "integer",
            ".value",
            "value represents the integer value of this priority class. This is the actual priority "
            "that pods receive when they have the name of this class in their pod spec.",
        ),
        PrinterColumn(
            "Global-Default",
            "boolean",
            ".globalDefault",
            "globalDefault specifies whether this PriorityClass should be considered as the default "
            "priority for pods that do not have any priority class.",
        ),
        PrinterColumn(
            "Age",
            "string",
            ".metadata.creationTimestamp",
            "CreationTimestamp is a timestamp representing the server time when this object was created.",
        ),
        PrinterColumn(
            "PreemptionPolicy",
            "string",
            ".preemptionPolicy",
            "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, "
            "PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.",
        ),
    ),
    table_row=_priority_class_row,
    top_level=("value", "globalDefault", "description", "preemptionPolicy"),
    # kubectl sends strategic merge patches for built-in kinds; a PriorityClass has no lists
    # beyond metadata's.
    strategic={"metadata.finalizers": MergeRule(), "metadata.ownerReferences": MergeRule("uid")},
    description=(
        "PriorityClass defines mapping from a priority class name to the priority integer value. "
        "Fleet resolves a job's priorityClass through it at submission."
    ),
)


def amounts(values: Mapping[str, Any] | None) -> str:
    """``cpu=10,memory=10Gi``: a map of quantities as one table cell (``-`` when empty)."""
    parts = [f"{resource}={value}" for resource, value in sorted((values or {}).items())]
    return ",".join(parts) or "-"


class QueueSpec(TypedDict):
    """A Queue's ``spec``: its quota tree node and the node's limits (Kubernetes quantities)."""

    path: str
    node: str
    min: dict[str, str]
    max: dict[str, str]


class QueueStatus(TypedDict):
    """A Queue's ``status``, from the ledger (:mod:`fleet.endpoint.quota_queues` says what each means)."""

    used: dict[str, str]
    borrowed: dict[str, str]
    lent: dict[str, str]
    share: str
    belowMin: bool
    admitted: int
    waiting: int
    #: ``waiting``'s first name (a server that predates ``waiting`` sends only this one).
    pending: int


@dataclass(frozen=True)
class QueueReading:
    """What a Queue object says, as the table and ``fleet queues`` show it: the one reader of its
    fields (an object from another server may lack some: they read as empty, 0, ``0.00``)."""

    min: Mapping[str, Any]
    max: Mapping[str, Any]
    used: Mapping[str, Any]
    borrowed: Mapping[str, Any]
    lent: Mapping[str, Any]
    share: str
    below_min: bool
    admitted: int
    waiting: int

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> QueueReading:
        spec, status = _map(obj.get("spec")), _map(obj.get("status"))
        return cls(
            min=_map(spec.get("min")),
            max=_map(spec.get("max")),
            used=_map(status.get("used")),
            borrowed=_map(status.get("borrowed")),
            lent=_map(status.get("lent")),
            share=str(status.get("share") or "0.00"),
            below_min=status.get("belowMin") is True,
            admitted=int(status.get("admitted") or 0),
            waiting=int(status.get("waiting", status.get("pending")) or 0),
        )


def _queue_row(obj: Obj) -> list[Any]:
    queue = QueueReading.of(obj)
    return [
        obj["metadata"]["name"],
        amounts(queue.min),
        amounts(queue.max),
        amounts(queue.used),
        queue.admitted,
        queue.waiting,
        queue.share,
        amounts(queue.borrowed),
        amounts(queue.lent),
        queue.below_min,
    ]


#: A derived queue per quota tree node (``root``, ``root-child-2``), as ``kubectl get queue`` shows.
QUEUE: Final = ResourceType(
    group=FLEET_GROUP,
    version=FLEET_VERSION,
    kind="Queue",
    plural="queues",
    singular="queue",
    namespaced=False,
    printer_columns=(
        PrinterColumn("Name", "string", ".metadata.name", "The queue: the tree path joined by '-'."),
        PrinterColumn("Min", "string", ".spec.min", "The guarantee of the quota node."),
        PrinterColumn("Max", "string", ".spec.max", "The ceiling of the quota node."),
        PrinterColumn("Used", "string", ".status.used", "What the node's admitted jobs use."),
        PrinterColumn("Admitted", "integer", ".status.admitted", "Admitted, unfinished jobs."),
        PrinterColumn("Pending", "integer", ".status.waiting", "Jobs waiting in the node's subtree."),
        PrinterColumn(
            "Share",
            "string",
            ".status.share",
            "The dominant share of its min in use, which orders siblings (after those below their min).",
        ),
        PrinterColumn("Borrowed", "string", ".status.borrowed", "What the node uses beyond its min."),
        PrinterColumn(
            "Lent", "string", ".status.lent", "The part of its unused min that others use now.", priority=1
        ),
        PrinterColumn(
            "Below-Min",
            "boolean",
            ".status.belowMin",
            "Whether it uses less than its min of something (served first).",
            priority=1,
        ),
    ),
    table_row=_queue_row,
    description="A queue derived from a node of the ElasticQuotaTree, with its use (read-only).",
    verbs=READ_VERBS,
)


def ready_condition(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """A MemberCluster's ``Ready`` condition (from the syncer's health record); empty without one."""
    for condition in json_path(obj, ".status.conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition
    return {}


def npus_cell(status: Mapping[str, Any] | None, field: str = "freeNPUs") -> str:
    """``module-910b-8=16``: a member's NPUs by accelerator type (``<unknown>`` with no view)."""
    per_type = (status or {}).get(field)
    if not isinstance(per_type, Mapping):
        return "<unknown>"
    return ",".join(f"{kind}={count}" for kind, count in sorted(per_type.items())) or "0"


def nodes_by_free_cell(status: Mapping[str, Any] | None) -> str:
    """``module-910b-8=2x8+2x0``: per accelerator type, how many nodes have how many NPUs free."""
    accelerators = (status or {}).get("accelerators")
    if not isinstance(accelerators, list):
        return "<unknown>"
    cells = []
    for entry in accelerators:
        counts = entry.get("nodesByFreeNPUs") or {}
        shape = "+".join(f"{nodes}x{npus}" for npus, nodes in counts.items()) or "0"
        cells.append(f"{entry.get('type')}={shape}")
    return ",".join(cells) or "0"


def _total_cell(status: Mapping[str, Any] | None, resource: str) -> str:
    """The member's free ``resource`` over all its accelerator types, as a quantity."""
    accelerators = (status or {}).get("accelerators")
    if not isinstance(accelerators, list):
        return "<unknown>"
    total = 0
    for entry in accelerators:
        raw = (entry.get("free") or {}).get(resource)
        if raw is not None:
            total += parse_quantity(resource, raw)
    return format_quantity(resource, total)


def _member_row(obj: Obj) -> list[Any]:
    ready = ready_condition(obj)
    status = obj.get("status") or {}
    return [
        obj["metadata"]["name"],
        str(ready.get("status") or "Unknown"),
        since(ready.get("lastTransitionTime")),
        since(ready.get("lastProbeTime")),
        npus_cell(status),
        str(status.get("scheduling") or "Schedulable"),
        npus_cell(status, "allocatableNPUs"),
        nodes_by_free_cell(status),
        _total_cell(status, "cpu"),
        _total_cell(status, "memory"),
        str(ready.get("message") or ""),
    ]


#: A member cluster as Fleet sees it: one per kubeconfig context, with the syncer's health.
MEMBER_CLUSTER: Final = ResourceType(
    group=FLEET_GROUP,
    version=FLEET_VERSION,
    kind="MemberCluster",
    plural="memberclusters",
    singular="membercluster",
    namespaced=False,
    short_names=("mc",),
    printer_columns=(
        PrinterColumn("Name", "string", ".metadata.name", "The member: its kubeconfig context."),
        PrinterColumn("Ready", "string", description="Whether the member answers its health probes."),
        PrinterColumn("Since", "string", description="Time since the readiness last changed."),
        PrinterColumn("Last-Probe", "string", description="Time since the syncer last probed it."),
        PrinterColumn(
            "Free-NPUs", "string", description="Free NPUs by accelerator type (after in-flight holds)."
        ),
        PrinterColumn(
            "Scheduling",
            "string",
            description="Schedulable, Cordoned (no new jobs) or Draining (its jobs moved away): spec.taints.",
        ),
        PrinterColumn(
            "Allocatable-NPUs", "string", description="Allocatable NPUs by accelerator type.", priority=1
        ),
        PrinterColumn(
            "Nodes-By-Free-NPUs",
            "string",
            description="Per accelerator type, nodes x free NPUs (2x8: two nodes with 8 free).",
            priority=1,
        ),
        PrinterColumn("Free-CPU", "string", description="Free cpu of the usable nodes.", priority=1),
        PrinterColumn("Free-Memory", "string", description="Free memory of the usable nodes.", priority=1),
        PrinterColumn("Message", "string", description="The last probe error, if any.", priority=1),
    ),
    table_row=_member_row,
    description=(
        "A member cluster of the fleet: its health as the syncer last probed it and its capacity "
        "per accelerator type as the dispatcher's capacity feed last saw it; spec.taints (Karmada's "
        "NoSchedule, NoExecute) keep new jobs away from it, the one field an admin may set."
    ),
    verbs=(*READ_VERBS, "update", "patch"),
)


def format_amounts(values: Mapping[str, int]) -> dict[str, str]:
    """Canonical amounts as Kubernetes quantity strings (``cpu: 10``, ``memory: 10Gi``)."""
    return {resource: format_quantity(resource, amount) for resource, amount in sorted(values.items())}
