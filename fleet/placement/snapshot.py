"""A member's capacity summary as a record, node by node: what the fleet API explains jobs with.

The dispatcher's capacity feed keeps each member's :class:`~fleet.placement.capacity.MemberCapacity`
in memory; the API (``fleet explain``, the console's "where would it fit now") must answer the
same question without watching members itself. So the feed also writes, per member, every node
as placement sees it (:func:`dump_nodes`), and the API rebuilds the summary from that record
(:func:`load_nodes`) and runs the very same fit and explanations on it.

A record keeps what a fit reads and nothing else: per node its labels, blocking taints,
allocatable resources, NPUs as built, why it is unusable (``cordoned``, ``NotReady``, or empty),
the requests of its bound pods (``used``), the free NPUs of each interconnect group before holds
(``groups``), what in-flight reservations hold (``held``) and the jobs whose pods are bound there
(``jobs``: job pod key -> pods, which is also how the console shows a job's nodes), and the
member's own labels (for cluster affinity). The static
part of a node (labels other than the identity labels, taints, allocatable, NPUs as built) is
shared by most nodes of a member, so it is written once per distinct kind (``kinds``) and each
node names its kind by index: a record costs a few bytes per node beyond its identity.
This module is the one dump/parse pair; nobody else spells the record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, NotRequired, TypedDict

from fleet.placement.capacity import GROUP_RESOURCE, IDENTITY_LABELS, MemberCapacity, NodeInfo, node_info
from fleet.placement.node_constraints import Taint

__all__ = ["NodeKindRecord", "NodeRecord", "NodesRecord", "dump_nodes", "load_nodes"]


class NodeKindRecord(TypedDict):
    """What nodes of one kind share."""

    labels: dict[str, str]
    #: Blocking taints as ``[key, value, effect]``.
    taints: list[list[str]]
    allocatable: dict[str, int]
    npuCapacity: int


class NodeRecord(TypedDict):
    name: str
    #: Index into :attr:`NodesRecord.kinds`.
    kind: int
    #: The node's identity labels (hostname...), which no two nodes share.
    identity: NotRequired[dict[str, str]]
    #: ``cordoned``, ``NotReady``; absent when usable.
    unusable: NotRequired[str]
    used: NotRequired[dict[str, int]]
    groups: NotRequired[list[int]]
    held: NotRequired[dict[str, int]]
    jobs: NotRequired[dict[str, int]]


class NodesRecord(TypedDict):
    #: The member's own labels (what a cluster affinity's label selector matches).
    labels: dict[str, str]
    kinds: list[NodeKindRecord]
    nodes: list[NodeRecord]


@dataclass(frozen=True)
class _Static:
    """What a node's record shares with nodes of its kind, and its identity labels."""

    signature: tuple[Any, ...]
    kind: NodeKindRecord
    identity: dict[str, str]


#: A node's static part by the summary's node object (replaced whenever the node changes, so an
#: entry whose object is not the node's any more is stale): the feed writes a member's record
#: every time its pods change, and its nodes' labels rarely do.
_STATIC: dict[str, tuple[NodeInfo, _Static]] = {}
_STATIC_LIMIT: Final = 200_000


def _static(member: str, info: NodeInfo) -> _Static:
    key = f"{member}\0{info.name}"
    found = _STATIC.get(key)
    if found is not None and found[0] is info:
        return found[1]
    if len(_STATIC) > _STATIC_LIMIT:
        _STATIC.clear()
    shared = {k: v for k, v in info.labels.items() if k not in IDENTITY_LABELS}
    taints = [[t.key, t.value, t.effect] for t in info.taints]
    signature = (
        tuple(sorted(shared.items())),
        tuple(map(tuple, taints)),
        tuple(sorted(info.allocatable.items())),
        info.npu_capacity,
    )
    kind: NodeKindRecord = {
        "labels": shared,
        "taints": taints,
        "allocatable": dict(info.allocatable),
        "npuCapacity": info.npu_capacity,
    }
    static = _Static(signature, kind, {k: v for k, v in info.labels.items() if k in IDENTITY_LABELS})
    _STATIC[key] = (info, static)
    return static


def dump_nodes(cap: MemberCapacity) -> NodesRecord:
    """The record of ``cap``'s nodes (see the module docstring); one pass over them."""
    kinds: list[NodeKindRecord] = []
    index: dict[tuple[Any, ...], int] = {}
    jobs = cap.node_jobs()
    nodes: list[NodeRecord] = []
    for info in sorted(cap.nodes(), key=lambda n: n.name):
        static = _static(cap.name, info)
        number = index.get(static.signature)
        if number is None:
            number = index[static.signature] = len(kinds)
            kinds.append(static.kind)
        record: NodeRecord = {"name": info.name, "kind": number}
        if static.identity:
            record["identity"] = static.identity
        if info.why_unusable:
            record["unusable"] = info.why_unusable
        used = {r: a for r, a in cap.used(info.name).items() if a}
        if used:
            record["used"] = used
        if info.groups:
            free = cap.unheld_free(info.name)
            record["groups"] = [free.get(f"{GROUP_RESOURCE}{i}", 0) for i in range(info.groups)]
        held = dict(cap.held(info.name))
        if held:
            record["held"] = held
        if info.name in jobs:
            record["jobs"] = jobs[info.name]
        nodes.append(record)
    return {"labels": dict(cap.labels), "kinds": kinds, "nodes": nodes}


def _ints(value: object) -> dict[str, int]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): int(v) for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool)}


def load_nodes(name: str, record: Mapping[str, Any]) -> MemberCapacity:
    """The summary of member ``name`` from its record. Raises ``ValueError`` for a record that is
    not one (written by something else)."""
    kinds = record.get("kinds")
    nodes = record.get("nodes")
    labels = record.get("labels")
    if not isinstance(kinds, list) or not isinstance(nodes, list):
        raise ValueError(f"capacity record of {name}: no kinds or nodes")
    member_labels = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}
    cap = MemberCapacity(name, member_labels)
    try:
        for node in nodes:
            kind = kinds[int(node["kind"])]
            node_labels = {**kind["labels"], **(node.get("identity") or {})}
            taints = tuple(Taint(str(k), str(v), str(e)) for k, v, e in kind["taints"])
            info = node_info(
                str(node["name"]),
                {str(k): str(v) for k, v in node_labels.items()},
                taints=taints,
                allocatable=_ints(kind["allocatable"]),
                npu_capacity=int(kind["npuCapacity"]),
                why_unusable=str(node.get("unusable") or ""),
            )
            cap.restore_node(
                info,
                used=_ints(node.get("used")),
                groups=[int(g) for g in node.get("groups") or []],
                held=_ints(node.get("held")),
                jobs=_ints(node.get("jobs")),
            )
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise ValueError(f"capacity record of {name}: {error!r}") from None
    return cap
