"""The quota tree as one read of the ledger, in memory: the dispatcher's model for a cycle.

The Lua scripts are the authority on admission: each decides atomically in Redis. But a
scheduler must look ahead of them: which leaf to serve next (its share of quota), whether a job
that was refused could be admitted if some running jobs were preempted, what a job's blocker is.
Kueue answers these from an in-memory snapshot of its cache; :class:`Snapshot` is ours, read in
one round trip (:meth:`queues.Ledger.snapshot`: every node's hash) and changed in memory as the
cycle plans admissions or evictions.

:meth:`Snapshot.check` is the admission rule of ``queues/lua/common.lua`` (``check``) spelt in
Python, refusal for refusal, including which refusal is reported when several apply; the
stateful tests hold the two to the same answers on random trees at every step
(``tests/queues/test_snapshot.py``), so the model cannot drift from the authority unseen.
:meth:`admit` and :meth:`release` change usage, pending counts and what children are owed as
the scripts do.

The share of a node (:meth:`share`), which orders leaves under contention (see
:mod:`queues.planner`), is its dominant resource share measured against its guarantee:
``max(used[r] / min[r])`` over the resources its ``min`` names (Kueue's fair sharing and DRF
measure the same dominant share, against nominal quota). A node without a ``min`` is measured
against its ``max``; one with neither has share 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from queues.quantity import MAX_JOBS
from queues.reasons import Refusal, RefusalKind

__all__ = ["Node", "Snapshot"]


@dataclass
class Node:
    """One node of the applied tree as its hash holds it (see ``queues/lua/common.lua``)."""

    name: str
    path: str
    parent: str
    #: The node and its ancestors, up to the root.
    chain: tuple[str, ...]
    #: The resources it limits (those at or above the unlimited mark are left out).
    max: dict[str, int] = field(default_factory=dict)
    min: dict[str, int] = field(default_factory=dict)
    used: dict[str, int] = field(default_factory=dict)
    #: Jobs pending in its subtree that could ever be admitted (what the borrowing rule counts).
    pending: int = 0
    #: Jobs in its own queue (leaves), every one, those above a max included.
    queued: int = 0
    #: (Leaves) what the ``pending`` jobs ask for in all, per governed resource.
    want: dict[str, int] = field(default_factory=dict)
    #: (Inner nodes) what its children could take, summed (:meth:`could_take`).
    kids: dict[str, int] = field(default_factory=dict)
    #: What its children are owed, summed (:meth:`owed`).
    due: dict[str, int] = field(default_factory=dict)
    #: Children that have a min (the siblings the borrowing rule protects), in tree order.
    guarded: tuple[str, ...] = ()
    children: list[str] = field(default_factory=list)

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def could_take(self, resource: str) -> int:
        """What the node could take of ``resource`` for its waiting jobs: what they ask for (its
        own, a leaf's; its children's could-take, an inner node's), no more than its ``max``
        leaves room for, and nothing while it is at its max-jobs."""
        jobs = self.max.get(MAX_JOBS)
        if jobs is not None and self.used.get(MAX_JOBS, 0) >= jobs:
            return 0
        want = self.want.get(resource, 0) + self.kids.get(resource, 0)
        limit = self.max.get(resource)
        if limit is not None:
            want = min(want, limit - self.used.get(resource, 0))
        return max(want, 0)

    def owed(self, resource: str) -> int:
        """What the node is owed in ``resource``: what it could take for its waiting jobs, up to
        its unused guarantee (``min - used``). A guarantee its jobs could not use anyway (held at
        a max or a max-jobs of their own) is not held back from borrowers."""
        if self.pending <= 0:
            return 0
        low, used = self.min.get(resource, 0), self.used.get(resource, 0)
        return min(low - used, self.could_take(resource)) if used < low else 0


def _copy_node(node: Node) -> Node:
    return Node(
        node.name,
        node.path,
        node.parent,
        node.chain,
        max=node.max,
        min=node.min,
        used=dict(node.used),
        pending=node.pending,
        queued=node.queued,
        want=dict(node.want),
        kids=dict(node.kids),
        due=dict(node.due),
        guarded=node.guarded,
        children=list(node.children),
    )


def _split(value: str) -> tuple[str, ...]:
    return tuple(part for part in value.split("\t") if part)


class Snapshot:
    """Every node of the tree with its limits and what it uses; see the module docstring."""

    def __init__(self, nodes: Iterable[Node], *, version: int = 0, epoch: int = 0) -> None:
        self.nodes: dict[str, Node] = {node.name: node for node in nodes}
        self.version = version
        self.epoch = epoch
        #: Each leaf's queue version when read (:attr:`queues.keys.Keys.queue_versions`).
        self.queue_versions: dict[str, int] = {}
        #: The resources some node limits (max or min): only these can refuse an admission.
        self.governed: frozenset[str] = frozenset(
            r for node in self.nodes.values() for r in (*node.max, *node.min)
        )
        #: The governed resources but max-jobs, sorted: those a node's could-take is kept for.
        self._kept = sorted(self.governed - {MAX_JOBS})
        for node in self.nodes.values():
            node.children = []
        for node in self.nodes.values():
            if node.parent and node.parent in self.nodes:
                self.nodes[node.parent].children.append(node.name)
        for node in self.nodes.values():
            node.children.sort(key=lambda name: self.nodes[name].path)

    @classmethod
    def from_rows(
        cls, rows: Mapping[str, Mapping[str, str]], *, version: int = 0, epoch: int = 0
    ) -> Snapshot:
        """From node hashes (field -> value, decoded); an empty mapping is the implicit root."""
        nodes = [_node(name, row) for name, row in rows.items()]
        return cls(nodes, version=version, epoch=epoch)

    def copy(self) -> Snapshot:
        """An independent copy to plan on: what the cycle changes (usage, pending counts, what
        children could take and are owed) is copied; the limits, which nothing changes, are
        shared. A cycle copies the snapshot at least once, so this is kept cheap (a deep copy
        cost several milliseconds with a few dozen nodes)."""
        out = Snapshot.__new__(Snapshot)
        out.nodes = {name: _copy_node(node) for name, node in self.nodes.items()}
        out.version, out.epoch, out.governed, out._kept = self.version, self.epoch, self.governed, self._kept
        out.queue_versions = self.queue_versions
        return out

    @property
    def root(self) -> Node:
        return next(node for node in self.nodes.values() if not node.parent)

    def waiting(self, name: str) -> int:
        """Every job queued in the node's subtree (``pending`` leaves out those that can never be
        admitted; this counts them too)."""
        node = self.nodes[name]
        return node.queued + sum(self.waiting(child) for child in node.children)

    def leaves(self) -> list[str]:
        """Leaf names in tree order (by path)."""
        return sorted((n.name for n in self.nodes.values() if n.is_leaf), key=lambda n: self.nodes[n].path)

    def queues(self) -> list[str]:
        """The nodes whose own queue a cycle looks at, in tree order: the leaves with pending
        jobs, and an inner node that still holds jobs queued on it (queued before the first
        tree was applied, on the implicit root, or on a leaf a tree change then gave children).
        Such jobs stay charged where they were queued and are scheduled from there, never
        stranded: no leaf's queue holds them."""
        return sorted(
            (n.name for n in self.nodes.values() if (n.pending > 0 if n.is_leaf else n.queued > 0)),
            key=lambda name: self.nodes[name].path,
        )

    def chain(self, leaf: str) -> tuple[str, ...]:
        return self.nodes[leaf].chain

    # -- the admission rule ---------------------------------------------------------------------

    def check(self, leaf: str, request: Mapping[str, int]) -> Refusal | None:
        """None when a job of ``request`` on ``leaf`` may be admitted now, else the refusal the
        admission script gives (the same one, field for field)."""
        # The script's order: the request's resources sorted, then max-jobs (parse_record).
        pairs = [*sorted((r, a) for r, a in request.items() if r != MAX_JOBS), (MAX_JOBS, 1)]
        asked = [(r, a) for r, a in pairs if a > 0 and r in self.governed]
        if not asked:
            return None
        chain = [self.nodes[name] for name in self.chain(leaf)]
        for node in chain:
            for r, amount in asked:
                limit = node.max.get(r)
                used = node.used.get(r, 0)
                if limit is not None and used + amount > limit:
                    return Refusal(RefusalKind.MAX, node.path, r, used, amount, limit)
        for i, node in enumerate(chain[:-1]):
            parent = chain[i + 1]
            for r, amount in asked:
                due = parent.due.get(r, 0)
                if due <= 0:
                    continue
                used, low = node.used.get(r, 0), node.min.get(r, 0)
                if used + amount <= low:
                    continue
                others = due - node.owed(r)
                headroom: int | None = None
                for up in chain[i + 1 :]:
                    limit = up.max.get(r)
                    if limit is not None:
                        left = limit - up.used.get(r, 0) - amount
                        headroom = left if headroom is None else min(headroom, left)
                if others > 0 and headroom is not None and headroom < others:
                    sibling = self._owed_sibling(parent, node, r)
                    return Refusal(RefusalKind.MIN, node.path, r, used, amount, low, *sibling)
        return None

    def _owed_sibling(self, parent: Node, node: Node, resource: str) -> tuple[str, int, int, int]:
        for name in parent.guarded:
            if name == node.name:
                continue
            s = self.nodes[name]
            have, low = s.used.get(resource, 0), s.min.get(resource, 0)
            if s.pending > 0 and have < low and s.owed(resource) > 0:
                return s.path, have, low, s.pending
        return "?", 0, 0, 0

    def never_fits(self, leaf: str, request: Mapping[str, int]) -> Refusal | None:
        """The refusal a job gets whatever else is admitted: its request is above a ``max`` of its
        leaf or an ancestor (None when it fits an empty tree). Its figures are the ledger's: what
        that node uses now, beside what the job asks and the ``max``."""
        for name in self.chain(leaf):
            node = self.nodes[name]
            for r, amount in sorted({**request, MAX_JOBS: 1}.items()):
                limit = node.max.get(r)
                if limit is not None and amount > limit:
                    return Refusal(RefusalKind.MAX, node.path, r, node.used.get(r, 0), amount, limit)
        return None

    # -- changes, as the scripts make them --------------------------------------------------------

    def admit(self, leaf: str, request: Mapping[str, int], *, from_queue: bool = True) -> None:
        self._change(leaf, request, +1, pending=-1 if from_queue else 0)

    def release(self, leaf: str, request: Mapping[str, int], *, to_queue: bool = False) -> None:
        """Return a running job's usage (``to_queue``: it goes back to its queue, as requeue)."""
        self._change(leaf, request, -1, pending=+1 if to_queue else 0)

    def enqueue(self, leaf: str, request: Mapping[str, int]) -> None:
        self._change(leaf, request, 0, pending=+1)

    def _change(self, leaf: str, request: Mapping[str, int], sign: int, *, pending: int) -> None:
        if self.never_fits(leaf, request) is not None:
            pending = 0  # a job that can never be admitted is not counted (fits_ever in Lua)
        chain = [self.nodes[name] for name in self.chain(leaf)]
        wants = [(r, a) for r, a in request.items() if a > 0 and r != MAX_JOBS and r in self.governed]
        kept = self._kept
        could = [[node.could_take(r) for r in kept] for node in chain[:-1]]
        before = [(node, r, node.owed(r)) for node in chain[:-1] for r in node.min if node.min[r] > 0]
        if pending:
            for r, amount in wants:
                _add(chain[0].want, r, pending * amount)
        for node in chain:
            node.pending += pending
            for r, amount in {**request, MAX_JOBS: 1}.items():
                if amount and sign:
                    _add(node.used, r, sign * amount)
        for node, was in zip(chain[:-1], could, strict=True):  # children first
            for r, old in zip(kept, was, strict=True):
                now = node.could_take(r)
                if now != old:
                    _add(self.nodes[node.parent].kids, r, now - old)
        for node, r, owed in before:
            now = node.owed(r)
            if now != owed:
                _add(self.nodes[node.parent].due, r, now - owed)

    def drained(self, name: str) -> Snapshot:
        """The tree as it would be once every job under ``name`` has ended (its waiting jobs
        still waiting): a starving head's hold at ``name`` can only ever help the head if the
        head fits this tree (:meth:`queues.planner.Planner.plan`). What children could take and
        are owed is derived again, as the scripts keep it, where the changed usage reaches: the
        nodes under ``name`` and its ancestors."""
        model = self.copy()
        gone = self.nodes[name].used
        under = self._subtree(name)
        for n in under:
            model.nodes[n].used = {}
        ancestors = list(self.nodes[name].chain[1:])
        for n in ancestors:
            used = model.nodes[n].used
            for r, amount in gone.items():
                _add(used, r, -amount)
        # Children first: the subtree deepest first, then the ancestors upwards.
        for n in [*sorted(under, key=lambda n: -len(self.nodes[n].chain)), *ancestors]:
            node = model.nodes[n]
            if not node.children:
                continue
            node.kids, node.due = {}, {}
            for c in node.children:
                child = model.nodes[c]
                for r in model._kept:
                    _add(node.kids, r, child.could_take(r))
                for r, low in child.min.items():
                    if low > 0:
                        _add(node.due, r, child.owed(r))
        return model

    def _subtree(self, name: str) -> list[str]:
        out = [name]
        for child in self.nodes[name].children:
            out.extend(self._subtree(child))
        return out

    # -- fairness -------------------------------------------------------------------------------

    def share(self, name: str) -> float:
        """The node's dominant share of its guarantee (see the module docstring)."""
        node = self.nodes[name]
        guarantee = {r: a for r, a in node.min.items() if a > 0} or {
            r: a for r, a in node.max.items() if a > 0
        }
        if not guarantee:
            return 0.0
        return max(node.used.get(r, 0) / a for r, a in guarantee.items())

    def fair_shares(self) -> dict[str, dict[str, float]]:
        """Each node's fair amount of every resource it limits, now: the root's ``max`` shared
        down the tree by water-filling, each child weighted by its ``min`` and capped by what it
        holds plus what its waiting jobs could take (:meth:`Node.could_take`). So a node gets its
        guarantee as far as its jobs need it, and what others leave unused is shared by the
        lowest ``used / min`` (the weighted max-min fairness the fair order converges to).

        The wait rule uses it to let a leaf's own smaller jobs fill the leaf's fair share while
        its head waits to borrow beyond it (:meth:`queues.planner.Planner.plan`)."""
        out: dict[str, dict[str, float]] = {}
        root = self.root
        for r in self._kept:
            total = root.max.get(r)
            if total is None:
                continue
            out.setdefault(root.name, {})[r] = float(min(total, root.used.get(r, 0) + root.could_take(r)))
            self._fill(root, r, out)
        return out

    def _fill(self, parent: Node, resource: str, out: dict[str, dict[str, float]]) -> None:
        if not parent.children:
            return
        kids = [self.nodes[c] for c in parent.children]
        caps = [float(k.used.get(resource, 0) + k.could_take(resource)) for k in kids]
        weights = [float(k.min.get(resource, 0)) for k in kids]
        if not any(weights):
            weights = [1.0] * len(kids)
        given = _water_fill(out[parent.name][resource], weights, caps)
        for kid, amount in zip(kids, given, strict=True):
            out.setdefault(kid.name, {})[resource] = amount
            self._fill(kid, resource, out)

    def below_min(self, name: str) -> bool:
        """Whether the node uses less than its ``min`` in some resource its ``min`` names."""
        node = self.nodes[name]
        return any(node.used.get(r, 0) < a for r, a in node.min.items() if a > 0)

    def borrowed(self, name: str) -> dict[str, int]:
        """What the node uses beyond its ``min``, per resource (against a ``min`` of 0 for a
        resource its ``min`` does not name; max-jobs only when its ``min`` names it). Reclaim
        asks this of the resources a waiting job needs, so unrelated ones never matter."""
        node = self.nodes[name]
        out: dict[str, int] = {}
        for r, used in node.used.items():
            if r == MAX_JOBS and r not in node.min:
                continue
            over = used - node.min.get(r, 0)
            if over > 0:
                out[r] = over
        return out


def _water_fill(total: float, weights: list[float], caps: list[float]) -> list[float]:
    """Split ``total`` so each gets ``min(cap, level * weight)`` for one level; a zero weight
    gets only what the others leave (after every weighted one is at its cap)."""
    out = [0.0] * len(caps)
    left = min(total, sum(caps))
    weighted = sorted((i for i, w in enumerate(weights) if w > 0), key=lambda i: caps[i] / weights[i])
    weight = sum(weights[i] for i in weighted)
    for at, i in enumerate(weighted):
        if caps[i] > left / weight * weights[i]:
            for j in weighted[at:]:
                out[j] = left / weight * weights[j]
            return out
        out[i] = caps[i]
        left -= caps[i]
        weight -= weights[i]
    for i, w in enumerate(weights):
        if w <= 0 and left > 0:
            out[i] = min(caps[i], left)
            left -= out[i]
    return out


def _add(amounts: dict[str, int], resource: str, delta: int) -> None:
    """Add to a counter, leaving out zeros as the node hashes do."""
    value = amounts.get(resource, 0) + delta
    if value:
        amounts[resource] = value
    else:
        amounts.pop(resource, None)


def _node(name: str, row: Mapping[str, str]) -> Node:
    node = Node(
        name=name,
        path=row.get("path") or name,
        parent=row.get("parent") or "",
        chain=_split(row.get("chain") or "") or (name,),
        guarded=_split(row.get("guarded") or ""),
        pending=int(row.get("pending") or 0),
        queued=int(row.get("queued") or 0),
    )
    for key, value in row.items():
        prefix, _, resource = key.partition(":")
        if not resource:
            continue
        if prefix == "max":
            node.max[resource] = int(value)
        elif prefix == "min":
            node.min[resource] = int(value)
        elif prefix == "used" and int(value):
            node.used[resource] = int(value)
        elif prefix == "due" and int(value):
            node.due[resource] = int(value)
        elif prefix == "want" and int(value):
            node.want[resource] = int(value)
        elif prefix == "kids" and int(value):
            node.kids[resource] = int(value)
    return node
