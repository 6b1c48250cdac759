"""Derived queues: one per tree node, named as Kube Queue names them (``root``, ``root-child-2``).

A view is read, never stored: limits come from the applied tree, usage and pending counts from the
ledger's per-node counters (two round trips for the whole tree, whatever the number of jobs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from queues.ledger import Ledger
from queues.quantity import MAX_JOBS, format_quantity
from queues.tree import IMPLICIT_ROOT, queue_name

__all__ = ["QueueView", "format_views", "queue_views"]


@dataclass(frozen=True)
class QueueView:
    name: str
    path: str
    min: dict[str, int] = field(default_factory=dict)
    max: dict[str, int] = field(default_factory=dict)
    #: What the node's subtree uses, without the job count (that is ``admitted``).
    used: dict[str, int] = field(default_factory=dict)
    admitted: int = 0
    pending: int = 0


def queue_views(ledger: Ledger) -> list[QueueView]:
    """Every node's queue, root first; just the implicit ``root`` while no tree is applied."""
    tree = ledger.tree()
    nodes: list[tuple[str, str, dict[str, int], dict[str, int]]] = [(IMPLICIT_ROOT, IMPLICIT_ROOT, {}, {})]
    if tree is not None:
        nodes = [(node.name, path, node.min, node.max) for path, _, node in tree.walk()]
    usages = ledger.usages(name for name, *_ in nodes)
    pending = ledger.pending_counts()
    views: list[QueueView] = []
    for name, path, low, high in nodes:
        used = dict(usages[name])
        admitted = used.pop(MAX_JOBS, 0)
        views.append(
            QueueView(queue_name(path), path, dict(low), dict(high), used, admitted, pending.get(name, 0))
        )
    return views


def _amounts(amounts: dict[str, int]) -> str:
    return ",".join(f"{r}={format_quantity(r, a)}" for r, a in sorted(amounts.items())) or "-"


def format_views(views: list[QueueView]) -> str:
    """A table like ``kubectl get queue`` prints, with the quota numbers beside each queue."""
    rows = [("NAME", "ADMITTED", "PENDING", "USED", "MIN", "MAX")]
    rows += [
        (v.name, str(v.admitted), str(v.pending), _amounts(v.used), _amounts(v.min), _amounts(v.max))
        for v in views
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ("   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows)
    return "\n".join(line.rstrip() for line in lines)
