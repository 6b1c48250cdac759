"""The ElasticQuotaTree as Kube Queue writes it, with its quantities as exact canonical integers.

The model is strict about shape (unknown fields are refused: a misspelt ``mxa`` must not silently
mean "unlimited") and converts every ``min``/``max`` quantity through :mod:`queues.quantity` as it
loads, so nothing downstream ever sees a float. It dumps quantities back as Kubernetes strings, so
``ElasticQuotaTree.model_validate(tree.model_dump())`` round-trips exactly. The semantic rules
(unique names, ``min <= max``, ...) live in :mod:`queues.validation`.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_serializer, field_validator

from queues.quantity import (
    MAX_JOBS,
    MAX_JOBS_ALIASES,
    MAX_JOBS_UNLIMITED,
    UNLIMITED,
    QuantityError,
    format_quantity,
    parse,
)

__all__ = [
    "ANY_NAMESPACE",
    "API_VERSION",
    "AVAILABLE_ATTRIBUTE",
    "HIGHEST_USER_PRIORITY",
    "IMPLICIT_ROOT",
    "KIND",
    "LOWEST_PRIORITY",
    "MAX_PRIORITY_ATTRIBUTE",
    "PREEMPTION_ATTRIBUTE",
    "PREEMPTION_VALUES",
    "QUOTA_LABEL",
    "RECLAIM_ATTRIBUTE",
    "RECLAIM_VALUES",
    "TREE_NAMESPACE",
    "ElasticQuotaTree",
    "PreemptionPolicy",
    "PriorityCap",
    "QuotaNode",
    "QuotaNotAvailable",
    "UnboundJob",
    "available_entries",
    "is_unlimited",
    "parse_max_priority",
    "preemption_policy",
    "priority_cap",
    "queue_name",
]

API_VERSION: Final = "scheduling.sigs.k8s.io/v1beta1"
KIND: Final = "ElasticQuotaTree"
#: The only namespace where Kube Queue honours an ElasticQuotaTree.
TREE_NAMESPACE = "kube-system"
#: A job label naming its quota node explicitly: a leaf its namespace may use (see
#: :meth:`ElasticQuotaTree.leaf_for` and :data:`AVAILABLE_ATTRIBUTE`).
QUOTA_LABEL = "quota.scheduling.alibabacloud.com/name"
#: The node every job belongs to while no tree is applied: queue order, no limits.
IMPLICIT_ROOT = "root"
#: Node attribute: may a waiting job preempt running jobs of its own leaf? ``LowerPriority``
#: (the default: those of strictly lower priority) or ``Never``. Set on any node, it holds for
#: the leaves below it unless a nearer node says otherwise (Kueue's ``withinClusterQueue``).
PREEMPTION_ATTRIBUTE: Final = "fleet.io/preemption"
PREEMPTION_VALUES: Final = ("LowerPriority", "Never")
#: Node attribute: may a leaf below its ``min`` take back what siblings borrowed? ``Any`` (the
#: default: the borrowers' jobs whatever their priority), ``LowerPriority`` (only jobs of lower
#: priority than the waiting one) or ``Never`` (Kueue's ``reclaimWithinCohort``).
RECLAIM_ATTRIBUTE: Final = "fleet.io/reclaim"
RECLAIM_VALUES: Final = ("Any", "LowerPriority", "Never")
#: Node attribute: the namespaces, besides those a leaf binds, whose jobs may name the leaf with
#: :data:`QUOTA_LABEL`: comma-separated namespace names, or :data:`ANY_NAMESPACE` for every
#: namespace the tree binds. Set on any node, it holds for the leaves below it unless a nearer
#: node says otherwise (an empty value: none). Unset everywhere, a job may use only the leaf that
#: binds its namespace. This is koord-queue's ``kube-queue/available-quota-in-namespace`` (a
#: Namespace annotation listing the quotas its jobs may name, checked under the
#: ``ElasticQuotaTreeCheckAvailableQuota`` gate) turned around onto the tree, where Fleet keeps
#: quota policy: see :meth:`ElasticQuotaTree.leaf_for`.
AVAILABLE_ATTRIBUTE: Final = "fleet.io/available-in-namespaces"
#: The :data:`AVAILABLE_ATTRIBUTE` entry meaning "every namespace some node binds".
ANY_NAMESPACE: Final = "*"
#: Node attribute: the highest priority a job may give itself as a number (Fleet's
#: ``fleet.io/priority`` annotation, T9k's ``t9kScheduler.priority``) when it is charged in a leaf
#: below this node or its namespace is bound below it: an integer, at most
#: :data:`HIGHEST_USER_PRIORITY`. The lowest such cap of the two chains holds (the job's leaf up to
#: the root, and its namespace's leaf up to the root), so two teams sharing a leaf keep the caps
#: of their own leaves (:func:`priority_cap`). A priority that comes from a PriorityClass is not
#: capped: classes are an admin's, as in Kubernetes. Kubernetes has no such cap (a pod's
#: ``priority`` is always its class's); this is what lets tenants keep the annotation.
MAX_PRIORITY_ATTRIBUTE: Final = "fleet.io/max-priority"
#: The highest priority any user may define (Kubernetes' ``HighestUserDefinablePriority``: values
#: above are for the system's own classes); the cap where no node sets one.
HIGHEST_USER_PRIORITY: Final = 1_000_000_000
#: The lowest priority (a PriorityClass ``value`` is an int32).
LOWEST_PRIORITY: Final = -(2**31)


@dataclass(frozen=True)
class PriorityCap:
    """The most a job may write as its own priority, and the node whose attribute says so
    (``""``: no node does; :data:`HIGHEST_USER_PRIORITY` holds)."""

    value: int = HIGHEST_USER_PRIORITY
    node: str = ""


def parse_max_priority(value: str) -> int | None:
    """A :data:`MAX_PRIORITY_ATTRIBUTE` value as an integer; None when it is not one in range."""
    try:
        cap = int(value.strip())
    except ValueError:
        return None
    return cap if LOWEST_PRIORITY <= cap <= HIGHEST_USER_PRIORITY else None


def priority_cap(tree: ElasticQuotaTree | None, namespace: str, leaf: str) -> PriorityCap:
    """The cap of a job of ``namespace`` charged in ``leaf``: the lowest
    :data:`MAX_PRIORITY_ATTRIBUTE` on the path from ``leaf`` to the root and on the path from the
    leaf that binds ``namespace`` to the root; :data:`HIGHEST_USER_PRIORITY` where none is set
    (of equal caps, the node nearest the root names it). Read from the tree's index."""
    best = PriorityCap()
    if tree is None:
        return best
    index = tree._index
    on_chains = index.chain_of_name.get(leaf, frozenset()) | index.chain_of_namespace.get(
        namespace, frozenset()
    )
    for name, cap in index.caps:  # root first
        if name in on_chains and cap < best.value:
            best = PriorityCap(cap, name)
    return best


def is_unlimited(resource: str, amount: int) -> bool:
    """Whether a ``max`` this large means "not limited" (Kube Queue's max-jobs convention, 2**53)."""
    return amount >= UNLIMITED or (resource == MAX_JOBS and amount >= MAX_JOBS_UNLIMITED)


@dataclass(frozen=True)
class PreemptionPolicy:
    """What a leaf's waiting jobs may preempt (see the two attributes above)."""

    within: str = PREEMPTION_VALUES[0]
    reclaim: str = RECLAIM_VALUES[0]


def preemption_policy(tree: ElasticQuotaTree | None, leaf: str) -> PreemptionPolicy:
    """The policy of ``leaf``: each attribute from the nearest node up its chain that sets it."""
    if tree is None:
        return PreemptionPolicy()
    found: dict[str, str] = {}
    for _, _, node in tree.walk():  # root first: nearer nodes overwrite
        if node.name == leaf or leaf in _descendants(node):
            found.update(
                {k: v for k, v in node.attributes.items() if k in (PREEMPTION_ATTRIBUTE, RECLAIM_ATTRIBUTE)}
            )
    return PreemptionPolicy(
        found.get(PREEMPTION_ATTRIBUTE, PREEMPTION_VALUES[0]), found.get(RECLAIM_ATTRIBUTE, RECLAIM_VALUES[0])
    )


def _descendants(node: QuotaNode) -> set[str]:
    out: set[str] = set()
    for child in node.children:
        out.add(child.name)
        out |= _descendants(child)
    return out


def queue_name(path: str) -> str:
    """The derived queue of a node: ``root/child-2`` -> ``root-child-2`` (as Kube Queue names it)."""
    return path.replace("/", "-")


def available_entries(value: str) -> tuple[str, ...]:
    """The entries of an :data:`AVAILABLE_ATTRIBUTE` value, stripped of spaces; ``()`` for a blank
    value. Empty entries (``a,,b``) are kept, for validation to report."""
    if not value.strip():
        return ()
    return tuple(entry.strip() for entry in value.split(","))


class UnboundJob(LookupError):
    """A job that no quota node takes: its namespace is unbound, or its label names no leaf.

    ``label`` is the label key when the label is what is refused (None: the namespace is).
    """

    def __init__(self, message: str, *, label: str | None = None) -> None:
        super().__init__(message)
        self.label = label


class QuotaNotAvailable(UnboundJob):
    """A job whose quota label names a leaf that its namespace may not use: not the leaf that
    binds the namespace, and not one that :data:`AVAILABLE_ATTRIBUTE` opens to it."""

    def __init__(self, message: str, *, label: str, node: str, namespace: str) -> None:
        super().__init__(message, label=label)
        self.node = node
        self.namespace = namespace


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class QuotaNode(_Strict):
    """One node: guaranteed ``min``, ceiling ``max`` (canonical ints), children or namespaces."""

    name: str
    min: dict[str, int] = Field(default_factory=dict)
    max: dict[str, int] = Field(default_factory=dict)
    children: tuple[QuotaNode, ...] = ()
    namespaces: tuple[str, ...] = ()
    attributes: dict[str, str] = Field(default_factory=dict)

    @field_validator("min", "max", mode="before")
    @classmethod
    def _quantities(cls, value: Any, info: ValidationInfo) -> dict[str, int]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ValueError(f"{info.field_name} must be a map of resource to quantity")
        out: dict[str, int] = {}
        spelt: dict[str, str] = {}
        for resource, raw in value.items():
            key = MAX_JOBS if resource in MAX_JOBS_ALIASES else str(resource)
            try:
                amount = parse(key, raw)
            except QuantityError as exc:
                raise ValueError(f"{info.field_name}.{resource} {exc}") from None
            if key in out and out[key] != amount:
                raise ValueError(
                    f"{info.field_name}.{resource} and {info.field_name}.{spelt[key]} are one limit "
                    "(the job count) and must not differ"
                )
            out[key] = amount
            spelt[key] = str(resource)
        return out

    @field_validator("children", "namespaces", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return () if value is None else value

    @field_serializer("min", "max")
    def _dump_quantities(self, value: dict[str, int]) -> dict[str, str]:
        return {resource: format_quantity(resource, amount) for resource, amount in value.items()}

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def limit(self, resource: str) -> int | None:
        """The node's ``max`` for ``resource``, or None when it does not limit it."""
        amount = self.max.get(resource)
        return None if amount is None or is_unlimited(resource, amount) else amount


class TreeMeta(BaseModel):
    """Object metadata; labels, annotations and the like are kept out of the way, not refused."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = "elasticquotatree"
    namespace: str = TREE_NAMESPACE


class TreeSpec(_Strict):
    root: QuotaNode


@dataclass(frozen=True)
class _Index:
    """What a submission asks of a tree, found in one walk and kept while the (frozen) tree
    lives (:func:`_index_of`): a job's leaf, queue and priority cap had walked the whole tree four
    times per submission (a tenth of an in-process submission's CPU with 36 nodes; issue 30)."""

    #: Node name -> node, and -> its path (of equal names, the last in walk order, as a walk's
    #: dict keeps).
    nodes: dict[str, QuotaNode]
    paths: dict[str, str]
    #: Namespace -> the node that binds it (the last in walk order).
    bound: dict[str, str]
    #: Node name -> the names on the paths of the nodes so named; namespace -> the names on the
    #: paths of the nodes that bind it.
    chain_of_name: dict[str, frozenset[str]]
    chain_of_namespace: dict[str, frozenset[str]]
    #: (node name, its valid :data:`MAX_PRIORITY_ATTRIBUTE`), root first.
    caps: tuple[tuple[str, int], ...]


def _build_index(tree: ElasticQuotaTree) -> _Index:
    nodes: dict[str, QuotaNode] = {}
    paths: dict[str, str] = {}
    bound: dict[str, str] = {}
    of_name: dict[str, set[str]] = {}
    of_namespace: dict[str, set[str]] = {}
    caps: list[tuple[str, int]] = []
    for path, _, node in tree.walk():
        nodes[node.name] = node
        paths[node.name] = path
        parts = path.split("/")
        of_name.setdefault(node.name, set()).update(parts)
        for namespace in node.namespaces:
            bound[namespace] = node.name
            of_namespace.setdefault(namespace, set()).update(parts)
        raw = node.attributes.get(MAX_PRIORITY_ATTRIBUTE)
        cap = parse_max_priority(raw) if raw is not None else None
        if cap is not None:
            caps.append((node.name, cap))
    return _Index(
        nodes,
        paths,
        bound,
        {name: frozenset(parts) for name, parts in of_name.items()},
        {namespace: frozenset(parts) for namespace, parts in of_namespace.items()},
        tuple(caps),
    )


#: Tree identity -> (a weak reference to it, its index). Kept beside the tree, not in it, so a
#: ``model_copy(update=...)`` of a tree is indexed anew, never answered from its original's.
_INDEXES: dict[int, tuple[weakref.ref[ElasticQuotaTree], _Index]] = {}


def _index_of(tree: ElasticQuotaTree) -> _Index:
    key = id(tree)
    known = _INDEXES.get(key)
    if known is not None and known[0]() is tree:
        return known[1]
    index = _build_index(tree)
    _INDEXES[key] = (weakref.ref(tree, lambda _: _INDEXES.pop(key, None)), index)
    return index


class ElasticQuotaTree(_Strict):
    """The whole document; :meth:`walk` yields ``(path, parent_path, node)`` root first."""

    api_version: Literal["scheduling.sigs.k8s.io/v1beta1"] = Field(API_VERSION, alias="apiVersion")
    kind: Literal["ElasticQuotaTree"] = KIND
    metadata: TreeMeta = Field(default_factory=TreeMeta)
    spec: TreeSpec

    def walk(self) -> Iterator[tuple[str, str | None, QuotaNode]]:
        stack: list[tuple[str, str | None, QuotaNode]] = [(self.spec.root.name, None, self.spec.root)]
        while stack:
            path, parent, node = stack.pop()
            yield path, parent, node
            stack.extend((f"{path}/{child.name}", path, child) for child in reversed(node.children))

    @property
    def _index(self) -> _Index:
        return _index_of(self)

    def paths(self) -> dict[str, str]:
        """Node name -> path (``child-2`` -> ``root/child-2``); names are unique in a valid tree."""
        return dict(self._index.paths)

    def leaf_for(self, namespace: str, labels: Mapping[str, str] | None = None) -> str:
        """The name of the leaf a job of ``namespace`` with ``labels`` belongs to.

        The rule is koord-queue's (``koordinator-sh/koord-queue``, formerly kube-queue:
        ``pkg/framework/plugins/elasticquota/elastic_quota_tree.go``,
        ``getElasticQuotaInfoWithoutLock`` with the ``ElasticQuotaTreeCheckAvailableQuota`` gate
        on, and ``consts.go``, ``IsQuotaAvailableInNamespace``): a job without
        :data:`QUOTA_LABEL` belongs to the leaf that binds its namespace; a job with the label
        belongs to the quota it names only if that quota is available in the job's namespace,
        and is refused otherwise. Upstream lists a namespace's available quotas in an annotation
        of the Namespace (``kube-queue/available-quota-in-namespace``); Fleet lists on the tree
        the namespaces a node is available in (:data:`AVAILABLE_ATTRIBUTE`), and adds that the
        leaf binding a namespace is always available in it (naming it is the same as not
        labelling). As koordinator refuses a pod linked to a parent quota
        (``koordinator-sh/koordinator``, ``pkg/webhook/elasticquota/pod_check.go``,
        ``ValidateAddPod``), the label must name a leaf. Before any label is looked at, the
        namespace must be bound by some node: a job of an unbound namespace is refused whatever
        its labels say.

        Raises :class:`UnboundJob` (the namespace is bound nowhere, or the label names no leaf)
        or :class:`QuotaNotAvailable` (the label names a leaf the namespace may not use).
        """
        index = self._index
        nodes = index.nodes
        bound = index.bound.get(namespace)
        if bound is None:
            raise UnboundJob(f"namespace {namespace!r} is bound to no node of the ElasticQuotaTree")
        named = (labels or {}).get(QUOTA_LABEL)
        if named is None or named == bound:
            return bound
        node = nodes.get(named)
        if node is None or not node.is_leaf:
            raise UnboundJob(
                f"label {QUOTA_LABEL}={named!r} names no leaf of the ElasticQuotaTree", label=QUOTA_LABEL
            )
        if not self.available_in(named, namespace):
            raise QuotaNotAvailable(
                f"label {QUOTA_LABEL}={named!r}: quota node {named!r} is not available in namespace "
                f"{namespace!r}, whose jobs belong to {bound!r} (a node is available in other "
                f"namespaces only where the tree lists them in its attribute {AVAILABLE_ATTRIBUTE})",
                label=QUOTA_LABEL,
                node=named,
                namespace=namespace,
            )
        return named

    def available_in(self, name: str, namespace: str) -> bool:
        """Whether :data:`AVAILABLE_ATTRIBUTE` opens node ``name`` to ``namespace``, as set on the
        nearest node from ``name`` up to the root that sets it (set nowhere: it does not). Bindings
        are not looked at: :meth:`leaf_for` has checked that ``namespace`` is bound somewhere."""
        nodes: dict[str, QuotaNode] = {}
        chain: list[str] = []
        for path, _, each in self.walk():
            nodes[each.name] = each
            if each.name == name:
                chain = path.split("/")
        for ancestor in reversed(chain):
            value = nodes[ancestor].attributes.get(AVAILABLE_ATTRIBUTE)
            if value is not None:
                entries = available_entries(value)
                return namespace in entries or ANY_NAMESPACE in entries
        return False

    def to_document(self) -> dict[str, Any]:
        """The tree as YAML/JSON would write it (quantities as Kubernetes strings)."""
        return self.model_dump(by_alias=True, exclude_defaults=False)
