"""The Queue kind: one read-only object per quota tree node, computed from the ledger.

``kubectl get queue`` prints NAME MIN MAX USED ADMITTED PENDING SHARE BORROWED (``-o wide`` adds
LENT and BELOW-MIN), the numbers of :func:`queues.queue_views`: limits from the applied tree,
everything else from one snapshot of the ledger (two round trips, whatever the number of jobs).
While no tree is applied there is one queue, the implicit ``root``.

The object::

    apiVersion: fleet.io/v1alpha1
    kind: Queue
    metadata: {name: root-child-2, labels: {fleet.io/quota-node: child-2}}
    spec: {path: root/child-2, node: child-2, min: {...}, max: {...}}
    status:
      used: {cpu: "4", huawei.com/Ascend910: "4"}
      borrowed: {huawei.com/Ascend910: "4"}
      lent: {}
      share: "1.50"
      belowMin: false
      admitted: 1
      waiting: 2
      pending: 2

Quantities are Kubernetes strings; ``used`` leaves out the job count, which is ``admitted``.
``borrowed`` is what the node uses beyond its ``min``; ``lent`` the part of its unused ``min``
that others use now; ``share`` the dominant share of its guarantee that the planner orders
siblings by (nodes ``belowMin`` first, then the lowest share), a decimal string with two places
since Kubernetes objects carry no floats; ``waiting`` the jobs pending in its subtree, also
under its first name ``pending``. :mod:`queues.views` defines each precisely.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final

from fleet.apiserver import FRESH_WAIT_SECONDS, Obj
from fleet.endpoint.computed import ComputedKind
from fleet.kinds import QUEUE, QueueSpec, QueueStatus, format_amounts
from queues import Ledger, QueueView, format_share, queue_views

__all__ = ["NODE_LABEL", "queue_kind", "queue_object"]

#: The quota node a Queue is derived from, as a label (``kubectl get queue -l fleet.io/quota-node=x``).
NODE_LABEL: Final = "fleet.io/quota-node"


def queue_object(view: QueueView) -> Obj:
    node = view.path.rsplit("/", 1)[-1]
    spec: QueueSpec = {
        "path": view.path,
        "node": node,
        "min": format_amounts(view.min),
        "max": format_amounts(view.max),
    }
    status: QueueStatus = {
        "used": format_amounts(view.used),
        "borrowed": format_amounts(view.borrowed),
        "lent": format_amounts(view.lent),
        "share": format_share(view.share),
        "belowMin": view.below_min,
        "admitted": view.admitted,
        "waiting": view.waiting,
        "pending": view.waiting,
    }
    return {
        "apiVersion": QUEUE.api_version,
        "kind": QUEUE.kind,
        "metadata": {"name": view.name, "labels": {NODE_LABEL: node}},
        "spec": spec,
        "status": status,
    }


def queue_kind(
    ledger: Ledger,
    version: Callable[[], Awaitable[str]],
    *,
    interval: float = 1.0,
    fresh_wait: float = FRESH_WAIT_SECONDS,
) -> ComputedKind:
    """The Queue kind over ``ledger`` (its sync client is used from a worker thread)."""

    async def compute() -> list[Obj]:
        views = await asyncio.to_thread(queue_views, ledger)
        return [queue_object(view) for view in views]

    return ComputedKind(QUEUE, compute, version, interval=interval, fresh_wait=fresh_wait)
