"""Derived queues: one per tree node, named as Kube Queue names them (``root``, ``root-child-2``).

A view is read, never stored. :func:`queue_views` reads the ledger once
(:meth:`queues.Ledger.snapshot`: every node's limits, usage, pending count and what its children
are owed, in one round trip whatever the number of jobs) and takes the limits as written
(unlimited ones included) from the tree of the snapshot's version, which the ledger keeps parsed.
:func:`views_of` builds the views from those two, without I/O.

What a view says of a node, per resource (amounts in canonical units, see :mod:`queues.quantity`)

``used``
    What the node's subtree uses (admitted, unfinished jobs), without the job count, which is
    ``admitted``.
``waiting``
    Jobs queued in the node's subtree, every one (those too large for a ``max`` of their chain,
    which the borrowing rule does not count, included). ``pending`` is the same number, its
    first name.
``borrowed``
    What the node uses beyond its ``min``: ``used - min`` where positive
    (:meth:`queues.snapshot.Snapshot.borrowed`, the amount reclaim may take back), for the
    resources its ``min`` or an ancestor's ``min``/``max`` names. This is Kueue's ``borrowed``
    of a ClusterQueue's usage ("the used quota that is over the nominalQuota",
    ``ResourceUsage.borrowed`` in kueue's ``apis/kueue/v1beta1/clusterqueue_types.go``), with
    ``min`` as the nominal quota. The root has no siblings to borrow from: nothing is borrowed
    there.
``lent``
    The part of the node's unused guarantee that others are using now: of ``min - used`` (where
    positive), what the ancestors' headroom lacks, ``max(0, (min - used) - free)`` with ``free``
    the least ``max - used`` among the ancestors whose ``max`` names the resource (nothing is
    lent where no ancestor limits it). It is exactly what the node could not take of its
    guarantee right now without reclaim freeing it, and it never exceeds what the rest of the
    tree borrows (every ``max`` covers the ``min`` of the children under it, so an ancestor runs
    short of headroom only through usage beyond some other node's ``min``). Kueue keeps no such
    field: idle guarantees form one pool, so "A lends to B" has no exact meaning (KEP-1224,
    ``keps/1224-lending-limit/README.md``, "We have considered adding this status field, but
    discarded it"; borrowable resources are "the unused nominal quota of all the cluster queues
    in a cohort"). Fleet therefore reports, per node, the shortfall of its own guarantee, which
    is exact for that node; siblings that are idle at once share one headroom, so their ``lent``
    amounts overlap and are not to be summed. Siblings ``a``, ``b``, ``c`` with ``min`` 4 under a
    parent of ``max`` 12, ``c`` using 8: ``c`` borrows 4; ``a`` and ``b`` each lend 0, since
    either could still take its 4 alone (not both). When ``a`` then uses 2, ``b`` lends 2.
``share``
    The number the planner orders siblings by (:meth:`queues.snapshot.Snapshot.share`): the
    dominant share ``max(used / min)`` over the resources its ``min`` names (``used / max`` for a
    node without a ``min``; 0 with neither). At every level the children ``below_min`` come
    first, then the lowest share (see :mod:`queues.planner`).
``below_min``
    Whether it uses less than its ``min`` in some resource its ``min`` names.

:func:`job_wait` tells where a pending job stands: its place in its leaf's queue and what the
quota says of it now (:meth:`~queues.snapshot.Snapshot.check`, the refusal the admission script
would give, and :meth:`~queues.snapshot.Snapshot.never_fits`): three round trips, for one job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from queues.ledger import Ledger
from queues.quantity import MAX_JOBS, format_quantity
from queues.reasons import Refusal
from queues.records import SEQ_WIDTH, score_of, text
from queues.snapshot import Node, Snapshot
from queues.tree import IMPLICIT_ROOT, ElasticQuotaTree, queue_name

__all__ = [
    "HEADERS",
    "QueueView",
    "Waiting",
    "borrowed_of",
    "format_share",
    "format_views",
    "job_wait",
    "job_would_wait",
    "lent_of",
    "queue_views",
    "render",
    "views_of",
]


@dataclass(frozen=True)
class QueueView:
    """One node's queue; see the module docstring for what each number means."""

    name: str
    path: str
    min: dict[str, int] = field(default_factory=dict)
    max: dict[str, int] = field(default_factory=dict)
    #: What the node's subtree uses, without the job count (that is ``admitted``).
    used: dict[str, int] = field(default_factory=dict)
    admitted: int = 0
    waiting: int = 0
    borrowed: dict[str, int] = field(default_factory=dict)
    lent: dict[str, int] = field(default_factory=dict)
    share: float = 0.0
    below_min: bool = False

    @property
    def pending(self) -> int:
        """``waiting``, by its first name."""
        return self.waiting


def _ancestors(snapshot: Snapshot, node: Node) -> list[Node]:
    return [snapshot.nodes[name] for name in node.chain[1:] if name in snapshot.nodes]


def borrowed_of(snapshot: Snapshot, name: str) -> dict[str, int]:
    """What ``name`` uses beyond its ``min``, per resource its own ``min`` or an ancestor's
    limits name (empty at the root)."""
    node = snapshot.nodes[name]
    ancestors = _ancestors(snapshot, node)
    if not ancestors:
        return {}
    named = set(node.min).union(*(set(a.max) | set(a.min) for a in ancestors))
    return {r: a for r, a in snapshot.borrowed(name).items() if r in named}


def lent_of(snapshot: Snapshot, name: str) -> dict[str, int]:
    """The part of ``name``'s unused guarantee that others use now (see the module docstring)."""
    node = snapshot.nodes[name]
    ancestors = _ancestors(snapshot, node)
    out: dict[str, int] = {}
    for resource, low in sorted(node.min.items()):
        idle = low - node.used.get(resource, 0)
        frees = [a.max[resource] - a.used.get(resource, 0) for a in ancestors if resource in a.max]
        if idle <= 0 or not frees:
            continue
        taken = idle - max(0, min(frees))
        if taken > 0:
            out[resource] = taken
    return out


def views_of(snapshot: Snapshot, tree: ElasticQuotaTree | None) -> list[QueueView]:
    """Every node's queue, root first (tree order); just the implicit ``root`` without a tree.

    Limits come from ``tree`` as written; everything else from ``snapshot``. A node the snapshot
    lacks (the tree changed between the two reads) shows its limits and nothing else.
    """
    nodes: list[tuple[str, str, dict[str, int], dict[str, int]]] = [(IMPLICIT_ROOT, IMPLICIT_ROOT, {}, {})]
    if tree is not None:
        nodes = [(node.name, path, node.min, node.max) for path, _, node in tree.walk()]
    views: list[QueueView] = []
    for name, path, low, high in nodes:
        node = snapshot.nodes.get(name)
        if node is None:
            views.append(QueueView(queue_name(path), path, dict(low), dict(high)))
            continue
        used = dict(node.used)
        admitted = used.pop(MAX_JOBS, 0)
        views.append(
            QueueView(
                queue_name(path),
                path,
                dict(low),
                dict(high),
                used,
                admitted=admitted,
                waiting=snapshot.waiting(name),
                borrowed=borrowed_of(snapshot, name),
                lent=lent_of(snapshot, name),
                share=snapshot.share(name),
                below_min=snapshot.below_min(name),
            )
        )
    return views


def queue_views(ledger: Ledger) -> list[QueueView]:
    """Every node's queue, root first, from one snapshot of the ledger and the tree it was read
    under (:meth:`queues.Ledger.tree_at`: no read of its own unless the tree changed)."""
    snapshot = ledger.snapshot()
    return views_of(snapshot, ledger.tree_at(snapshot.version))


# --- one waiting job -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Waiting:
    """Where a pending job stands now: its place in its leaf's queue and what the quota says."""

    job: str
    leaf: str
    #: The leaf's queue (``root-child-2``).
    queue: str
    #: 1-based, in the queue's order (priority, then submission).
    position: int
    length: int
    #: The refusal the admission script would give now (None: the quota admits it now).
    refusal: Refusal | None = None
    #: Set when the job is larger than a ``max`` of its chain: no release will ever admit it.
    never: Refusal | None = None
    #: Why it is out of line (:meth:`queues.Ledger.park`): ``fleet`` or ``quota``; None: in line.
    parked: str | None = None

    @property
    def where(self) -> str:
        """``3 of 120 in queue root-team-a``, or, for a parked job, that it holds no place."""
        if self.parked is not None:
            what = "the tree" if self.parked == "quota" else "the fleet"
            return f"out of line in queue {self.queue} (holding no place) until {what} changes"
        return f"{self.position} of {self.length} in queue {self.queue}"

    def blocker(self, otherwise: str) -> str:
        """What holds the job: the quota's exact refusal, or (when the quota admits it now) that
        it waits for capacity or its turn, with ``otherwise`` (the job's last pending message)."""
        if self.never is not None:
            return f"can never be admitted: {self.never}; it waits for the tree to change"
        if self.parked is not None:
            return otherwise or "it cannot run as the fleet is"
        if self.refusal is not None:
            return str(self.refusal)
        return "quota admits it; waiting for capacity or its turn" + (f": {otherwise}" if otherwise else "")


def job_wait(ledger: Ledger, job: str) -> Waiting | None:
    """Where the pending ``job`` stands, or None when it is not pending (admitted, gone, or not
    yet queued). Three round trips: its record, its rank, the snapshot."""
    record = ledger.pending.record(job)
    if record is None:
        return None
    queue_key = ledger.keys.queue(record.leaf)
    member = f"{record.seq:0{SEQ_WIDTH}d}{job}"
    pipe = ledger.client.pipeline(transaction=False)
    pipe.zrank(queue_key, member)
    pipe.zcard(queue_key)
    pipe.hget(ledger.keys.parked, job)
    rank, length, parked = pipe.execute()
    why = None if parked is None else text(parked).partition("\t")[2]
    if rank is None and why is None:
        return None  # admitted (or requeued under a new sequence) since the record was read
    snapshot = ledger.snapshot()
    node = snapshot.nodes.get(record.leaf)
    position = 0 if rank is None else int(rank) + 1
    if node is None:
        return Waiting(job, record.leaf, queue_name(record.leaf), position, int(length), parked=why)
    return Waiting(
        job,
        record.leaf,
        queue_name(node.path),
        position,
        int(length),
        refusal=snapshot.check(record.leaf, record.request),
        never=snapshot.never_fits(record.leaf, record.request),
        parked=why,
    )


def job_would_wait(
    ledger: Ledger, job: str, leaf: str, request: dict[str, int], priority: int = 0
) -> Waiting:
    """Where ``job`` would stand if it were queued now on ``leaf`` with ``request`` and
    ``priority`` (a job not submitted yet: ``fleet explain``): the place queueing would give it
    (behind every job of its priority or higher, as :mod:`queues.pending` orders), and what the
    quota would say of it, by the same :meth:`~queues.snapshot.Snapshot.check` and
    :meth:`~queues.snapshot.Snapshot.never_fits` as :func:`job_wait` (a job no release could admit
    would be parked out of line, :meth:`queues.Ledger.park`). Two round trips."""
    queue_key = ledger.keys.queue(leaf)
    pipe = ledger.client.pipeline(transaction=False)
    pipe.zcount(queue_key, "-inf", score_of(priority))
    pipe.zcard(queue_key)
    ahead, length = pipe.execute()
    snapshot = ledger.snapshot()
    node = snapshot.nodes.get(leaf)
    if node is None:  # no tree applied: the implicit root, where quota limits nothing
        return Waiting(job, leaf, queue_name(leaf), int(ahead) + 1, int(length) + 1)
    never = snapshot.never_fits(leaf, request)
    return Waiting(
        job,
        leaf,
        queue_name(node.path),
        int(ahead) + 1,
        int(length) + 1,
        refusal=snapshot.check(leaf, request),
        never=never,
        parked=None if never is None else "quota",  # as the dispatcher would set it aside
    )


# --- tables --------------------------------------------------------------------------------------


def format_share(share: float) -> str:
    """A share as the tables and the Queue objects print it (``0.75``)."""
    return f"{share:.2f}"


def _amounts(amounts: dict[str, int]) -> str:
    return ",".join(f"{r}={format_quantity(r, a)}" for r, a in sorted(amounts.items())) or "-"


#: The columns of :func:`format_views` (and of ``fleet queues``, which reads the Queue objects).
HEADERS = ("NAME", "MIN", "MAX", "USED", "BORROWED", "LENT", "SHARE", "BELOW-MIN", "ADMITTED", "WAITING")


def render(rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns three spaces apart, trailing blanks trimmed."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ("   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows)
    return "\n".join(line.rstrip() for line in lines)


def format_views(views: list[QueueView]) -> str:
    """A table of every queue with its quota numbers (:data:`HEADERS`)."""
    rows: list[Sequence[str]] = [HEADERS]
    rows += [
        (
            v.name,
            _amounts(v.min),
            _amounts(v.max),
            _amounts(v.used),
            _amounts(v.borrowed),
            _amounts(v.lent),
            format_share(v.share),
            str(v.below_min).lower(),
            str(v.admitted),
            str(v.waiting),
        )
        for v in views
    ]
    return render(rows)
