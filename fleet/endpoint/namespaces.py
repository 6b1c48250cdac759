"""Namespaces at the fleet: a read-only view of the namespaces that matter to the fleet.

The fleet has no Namespace objects to create: a namespace exists for Fleet when the applied
ElasticQuotaTree binds it to a leaf, or when some object is stored in it (jobs, policies,
Events, the tree itself in ``kube-system``). ``kubectl get namespaces`` lists exactly those,
each with the quota node its jobs are charged to and that node's queue::

    apiVersion: v1
    kind: Namespace
    metadata: {name: team-a, labels: {kubernetes.io/metadata.name: team-a, fleet.io/quota-node: a}}
    spec: {finalizers: [kubernetes]}
    status: {phase: Active, quotaNode: a, queue: root-a}

With no tree applied every namespace is charged to the implicit ``root``; a namespace the tree
does not bind has no quota node (its jobs are refused at submission). Writes are 405. A tenant
sees only the namespaces its token grants (:meth:`fleet.endpoint.auth.FleetAuthorizer.visible`).

Cost: the tree from the ledger (parsed once per version) and, per namespaced kind, one
``ZRANGEBYLEX`` per namespace that holds such objects, skipping from one namespace to the next
through the kind's list index (:data:`fleet.state.keys.NAMES_INDEX`), never reading objects.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

import redis.asyncio

from fleet.apiserver import FRESH_WAIT_SECONDS, Obj, ResourceType
from fleet.endpoint.computed import ComputedKind
from fleet.kinds import FLEET_NAMESPACE, QUOTA_NODE_LABEL
from fleet.state import DEFAULT_STATE_KEYS, StateKeys, kind_name
from queues import ElasticQuotaTree, Ledger, queue_name

__all__ = ["namespace_kind", "namespace_object", "namespaces_holding"]

#: The label Kubernetes puts on every namespace (its name), which selectors rely on.
NAME_LABEL = "kubernetes.io/metadata.name"
_ROOT = "root"


def namespace_object(name: str, node: str | None, queue: str | None) -> Obj:
    labels = {NAME_LABEL: name}
    status: Obj = {"phase": "Active"}
    if node is not None:
        labels[QUOTA_NODE_LABEL] = node
        status["quotaNode"] = node
    if queue is not None:
        status["queue"] = queue
    return {
        "apiVersion": FLEET_NAMESPACE.api_version,
        "kind": FLEET_NAMESPACE.kind,
        "metadata": {"name": name, "labels": labels},
        "spec": {"finalizers": ["kubernetes"]},
        "status": status,
    }


def _bindings(tree: ElasticQuotaTree | None) -> dict[str, tuple[str, str]]:
    """Namespace -> (leaf, its queue) as the tree binds them."""
    if tree is None:
        return {}
    out: dict[str, tuple[str, str]] = {}
    for path, _, node in tree.walk():
        for namespace in node.namespaces:
            out[namespace] = (node.name, queue_name(path))
    return out


async def namespaces_holding(client: redis.asyncio.Redis, key: str) -> set[str]:
    """The namespaces of the members of a list index (``namespace\\0name``), one lookup each."""
    found: set[str] = set()
    start = b"-"
    while True:
        first = await client.zrangebylex(key, start, b"+", start=0, num=1)
        if not first:
            return found
        member = first[0]
        raw = member.encode() if isinstance(member, str) else bytes(member)
        namespace, separator, _ = raw.partition(b"\0")
        if not separator:  # a cluster-scoped member: nothing to learn
            return found
        found.add(namespace.decode())
        start = b"(" + namespace + b"\1"


def namespace_kind(
    ledger: Ledger,
    client: redis.asyncio.Redis,
    kinds: Iterable[ResourceType],
    version: Callable[[], Awaitable[str]],
    *,
    keys: StateKeys = DEFAULT_STATE_KEYS,
    interval: float = 1.0,
    fresh_wait: float = FRESH_WAIT_SECONDS,
) -> ComputedKind:
    """The Namespace view over the ledger's tree and the list indexes of ``kinds`` (the stored,
    namespaced ones)."""
    indexes = [keys.index(kind_name(rt.key)) for rt in kinds if rt.namespaced]

    async def compute() -> list[Obj]:
        tree = await asyncio.to_thread(ledger.tree)
        bound = _bindings(tree)
        holding: set[str] = set()
        for index in indexes:
            holding |= await namespaces_holding(client, index)
        out = []
        for name in sorted(set(bound) | holding):
            node: str | None = _ROOT
            queue: str | None = _ROOT
            if tree is not None:
                node, queue = bound.get(name, (None, None))
            out.append(namespace_object(name, node, queue))
        return out

    return ComputedKind(FLEET_NAMESPACE, compute, version, interval=interval, fresh_wait=fresh_wait)
