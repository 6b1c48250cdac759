"""A member's capacity as people read it: per accelerator type, allocatable and free NPUs, cpu
and memory, and how many nodes have how many NPUs free.

The dispatcher's capacity feed keeps one :class:`~fleet.placement.capacity.MemberCapacity` per
member; :func:`capacity_view` turns it into the plain JSON that the MemberCluster kind shows
(``kubectl get mc -o yaml``, ``fleet clusters``). The numbers are the ones placement decides on:

* ``allocatable`` sums ``status.allocatable`` of every node of the type (Ready or not), as
  ``kubectl describe node`` shows it;
* ``free`` sums, over the usable nodes only (Ready, not cordoned), allocatable minus the requests
  of the node's bound, unfinished pods and minus what in-flight reservations hold (never below
  zero per node): what a new job could take now;
* ``nodesByFreeNPUs`` counts the usable nodes by their free NPUs (``"8": 2`` is two nodes with
  eight NPUs free): a 2 x 8-NPU job needs two nodes at ``"8"``, not sixteen free NPUs.

Quantities are Kubernetes quantity strings (``752``, ``6000Gi``). Nodes without an
``accelerator-type`` label are grouped under :data:`NO_ACCELERATOR`. One pass over the member's
nodes: the feed calls it at most once a second per member whose summary changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, TypedDict

from fleet.ascend import ACCELERATOR_TYPE_LABEL
from fleet.placement.capacity import MemberCapacity
from queues import format_quantity

__all__ = [
    "NO_ACCELERATOR",
    "NPU_PREFIX",
    "AcceleratorView",
    "CapacityView",
    "capacity_view",
    "is_view_resource",
]

#: The accelerator type of nodes that carry no ``accelerator-type`` label.
NO_ACCELERATOR: Final = "none"
#: The extended resources of Ascend NPUs (``huawei.com/Ascend910``, ``huawei.com/Ascend310P``...).
NPU_PREFIX: Final = "huawei.com/Ascend"


class AcceleratorView(TypedDict):
    """The nodes of one accelerator type (see the module docstring)."""

    type: str
    nodes: int
    usableNodes: int
    allocatable: dict[str, str]
    free: dict[str, str]
    allocatableNPUs: int
    freeNPUs: int
    nodesByFreeNPUs: dict[str, int]


class CapacityView(TypedDict):
    """A member's capacity, one entry per accelerator type in type order."""

    accelerators: list[AcceleratorView]


@dataclass
class _Tally:
    """One accelerator type's sums while the nodes are counted."""

    nodes: int = 0
    usable_nodes: int = 0
    allocatable: dict[str, int] = field(default_factory=dict)
    free: dict[str, int] = field(default_factory=dict)
    #: Free NPUs -> usable nodes with that many free.
    by_free: dict[int, int] = field(default_factory=dict)


def is_view_resource(resource: str) -> bool:
    """The resources the view reports: NPUs, cpu and memory."""
    return resource in ("cpu", "memory") or resource.startswith(NPU_PREFIX)


def _npus(amounts: Mapping[str, int]) -> int:
    return sum(max(a, 0) for r, a in amounts.items() if r.startswith(NPU_PREFIX))


def _add(into: dict[str, int], amounts: Mapping[str, int]) -> None:
    for resource, amount in amounts.items():
        if is_view_resource(resource):
            into[resource] = into.get(resource, 0) + max(amount, 0)


def _quantities(amounts: Mapping[str, int]) -> dict[str, str]:
    return {r: format_quantity(r, a) for r, a in sorted(amounts.items())}


def capacity_view(cap: MemberCapacity) -> CapacityView:
    """The member's capacity per accelerator type (see the module docstring)::

    {"accelerators": [{"type": "module-910b-8", "nodes": 4, "usableNodes": 4,
                       "allocatable": {"cpu": "752", "huawei.com/Ascend910": "32", ...},
                       "free": {...}, "nodesByFreeNPUs": {"0": 2, "8": 2}}, ...]}
    """
    by_type: dict[str, _Tally] = {}
    for info in cap.nodes():
        kind = info.labels.get(ACCELERATOR_TYPE_LABEL) or NO_ACCELERATOR
        entry = by_type.setdefault(kind, _Tally())
        entry.nodes += 1
        _add(entry.allocatable, info.allocatable)
        if info.cls is None:
            continue  # NotReady or cordoned: offers nothing
        entry.usable_nodes += 1
        free = info.cls.free_map
        _add(entry.free, free)
        npus = _npus(free)
        entry.by_free[npus] = entry.by_free.get(npus, 0) + 1
    accelerators: list[AcceleratorView] = []
    for kind, entry in sorted(by_type.items()):
        free = {r: entry.free.get(r, 0) for r in entry.allocatable}
        accelerators.append(
            {
                "type": kind,
                "nodes": entry.nodes,
                "usableNodes": entry.usable_nodes,
                "allocatable": _quantities(entry.allocatable),
                "free": _quantities(free),
                "allocatableNPUs": _npus(entry.allocatable),
                "freeNPUs": _npus(free),
                "nodesByFreeNPUs": {str(n): c for n, c in sorted(entry.by_free.items(), reverse=True)},
            }
        )
    return {"accelerators": accelerators}
