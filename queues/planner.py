"""The scheduling cycle's quota side: which waiting jobs to admit now, in what order, and why not.

The dispatcher runs one cycle after another; :class:`Planner` is the part of it that knows
nothing of clusters. It is I/O-free: the dispatcher reads a :class:`~queues.snapshot.Snapshot`
and the heads of every request class (:meth:`queues.Ledger.class_heads`), asks :meth:`plan`,
checks capacity for the picks and admits them through the ledger's script, which stays the
authority. The planner keeps, from one cycle to the next, only what makes the next one cheap and
fair: which classes are parked, which leaf heads have waited how long, which preemptors hold a
nomination. It follows Kueue's scheduler in spirit (heads of queues, an in-memory snapshot,
inadmissible workloads parked until something changes, fair sharing by dominant share,
preemption with a minimal victim set) on Kube Queue's tree.

Cost follows admissions and changes, not refusals
    All jobs of one request class of one leaf get the same quota answer at the same moment. A
    class whose head is refused is *parked* with a stamp of its leaf's chain (what each node
    uses and is owed, and the tree version) and is not checked again until the stamp improves:
    something under one of those nodes was released, what siblings are owed changed, or the
    tree changed; or a job of higher priority became the class head, or jobs of lower priority
    than the head were admitted in its leaf (it may preempt now where it could not before). A
    refusal that a job picked earlier in the same cycle may have caused is not certain (that
    pick may still fail on capacity): the class is only deferred to the next cycle, which comes
    at once because this one admitted something.

Fair order between leaves (:meth:`Snapshot.share`)
    Each pick goes to the leaf that comes first in a walk down the tree: at every level, the
    children below their ``min`` before the others, then the lowest dominant share of quota
    (``used / min``, or ``used / max`` for a node without a ``min``), then the leaf whose head
    was submitted first. Shares are recomputed after every pick, so a batch interleaves leaves
    as single admissions would, and a leaf's turn never depends on where it sits in the tree or
    on how many jobs other leaves hold. Within a leaf the order is the queue's (priority, then
    submission); jobs of a class that cannot be admitted do not stop the classes behind them
    (Kube Queue's best-effort policy), within the starvation bound below.

Large jobs are not passed for long (``grace_seconds``, ``wait_ratio``)
    Best effort lets small jobs pass a large head that does not fit yet, which keeps the quota
    busy but, unchecked, makes large jobs wait far longer than small ones. So a job may pass a
    refused leaf head (of no lower priority, refused at a node of the job's chain, wanting a
    resource it wants) only while the head has waited at most ``grace_seconds`` or at most
    ``wait_ratio`` times as long as the job itself. With the default ratio of 1, a head that has
    waited past the grace is passed by no job submitted after it: first come, first served under
    the node that holds it back, whatever the size, with the grace for small jobs to fill what a
    large head could not use yet. (A larger ratio lets the younger jobs that have waited long
    too pass: measured, that let large jobs wait 2-5 times as long as small ones in their leaf.)
    A head that waits for capacity or its backoff, not quota, holds nothing. Waits are measured
    from submission, which the ledger's sequence records (a clock reading,
    :attr:`queues.heads.Head.submitted`).

No starvation (``starvation_seconds``)
    A leaf's head that is refused for quota while it would fit the tree (its request is within
    every ``max`` of its chain) may be passed by later, smaller jobs only for
    ``starvation_seconds``. Then it holds a *reservation* at the node that refuses it (for a
    ``max``, that node; for the borrowing rule, the node that would borrow; for strict order,
    the leaf): no job submitted after it under that node that asks for any resource the head
    asks for is admitted before it (reservations and the wait rule follow one order, by
    submission, so no two heads ever hold each other back), so the node drains until the head
    fits, except jobs of other leaves that
    fit within their own leaf's ``min``: another leaf's guaranteed quota is never held back,
    which is also what keeps a head refused by a sibling's guarantee from blocking that very
    sibling; nor are a leaf's own jobs within its guarantee held back for a head of the leaf that
    asks for more than the leaf's ``min`` (it can only start by borrowing). Its wait is bounded
    by the bound plus the time the jobs already running under that node take to end (or less,
    with preemption), plus the time owed siblings take to reach their ``min``. A head holds
    nothing (neither this reservation nor the wait rule above) while it would be refused even
    with every job under that node ended: what it waits for (a sibling's guarantee, usage
    elsewhere) no hold there brings about, and holding would only idle the quota or, with
    nothing running, keep the jobs behind it waiting for good. The clock is the
    dispatcher's memory: a new leader starts it again.

Preemption (:meth:`victims`)
    A refused leaf head may be admitted by evicting running jobs, if its policy allows. Within
    its leaf it may take jobs of strictly lower priority, lowest priority first and the most
    recently admitted first among equals. A leaf below its ``min`` whose head fits within that
    ``min`` may *reclaim*: it takes jobs from sibling subtrees (its own siblings first, then its
    parent's, and so on) that use more than their own ``min`` in a resource the head needs,
    most recently admitted first, while that subtree still borrows. Either way the victims are
    as few as the simulation on the snapshot needs (then trimmed, Kueue's minimal set), the head
    is *nominated*: it holds a reservation at the refusing node until it is admitted, until the
    first cycle after its victims are gone (:meth:`Planner.victims_gone`) if it is refused even
    then, or until the nomination expires; so the quota the victims free goes to it and not to
    whoever comes next. In that first cycle after its victims are gone it is served before the
    fair order (:meth:`Planner._nominee`): the victims also freed what they held at the nodes
    above the refusing one (a job slot at the root, say), which a job of another leaf served
    first could take, leaving the preemptor refused there and evicting again for one start.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from queues.heads import ClassHeads, Head, RunningJob
from queues.quantity import MAX_JOBS
from queues.reasons import Refusal, RefusalKind
from queues.snapshot import Snapshot

__all__ = [
    "Blocked",
    "Pick",
    "Plan",
    "Planner",
    "PlannerSettings",
    "PreemptionKind",
    "Refused",
    "Reservation",
]


class PreemptionKind(StrEnum):
    PRIORITY = "priority"  #: lower-priority jobs of the preemptor's own leaf
    RECLAIM = "reclaim"  #: jobs of siblings that borrow what the preemptor's leaf is guaranteed


@dataclass(frozen=True)
class PlannerSettings:
    #: How long a leaf's head that fits its tree may be passed by later jobs (see module docs).
    starvation_seconds: float = 30.0
    #: A refused leaf head that has waited longer than this, and longer than ``wait_ratio`` times
    #: as long as a job of no higher priority under the node that refuses it, is not passed by
    #: that job (see module docs).
    grace_seconds: float = 5.0
    wait_ratio: float = 1.0
    #: Picks per cycle at most.
    max_picks: int = 512
    #: How long a preemptor's nomination keeps the headroom its victims free.
    nomination_seconds: float = 120.0


@dataclass(frozen=True)
class Pick:
    """A job the cycle would admit now (the model is charged with it)."""

    job: str
    leaf: str
    cls: str
    request: dict[str, int]
    head: Head


@dataclass(frozen=True)
class Refused:
    """A class head refused for quota in this cycle, with the exact refusal."""

    job: str
    leaf: str
    cls: str
    refusal: Refusal
    head: Head
    #: True when the job is its leaf's head (the first job of the leaf): it may preempt.
    leaf_head: bool
    #: The refusal it would get even in an empty tree (it can never be admitted), if any.
    never: Refusal | None = None


@dataclass(frozen=True)
class Reservation:
    """A job that others under ``node`` must not pass (starvation bound, or a nomination)."""

    job: str
    leaf: str
    #: The node whose headroom is kept for the job.
    node: str
    resources: frozenset[str]
    since: float
    #: Why: ``starving`` (passed too long) or ``nominated`` (it preempted).
    why: str
    #: For a nomination: when it lapses.
    until: float = math.inf
    #: When the job was submitted (None: unknown, ``since`` stands in).
    submitted: float | None = None
    #: The job asks for more than its leaf's min (it can only start by borrowing).
    borrows: bool = False

    @property
    def rank(self) -> tuple[bool, float]:
        """Nominations first (a preemptor's victims are already being evicted for it), then by
        submission, the first submitted first: the same order the wait rule (:meth:`Planner._older`)
        keeps, so that no two heads can each hold the other back."""
        return (self.why != "nominated", self.since if self.submitted is None else self.submitted)


@dataclass(frozen=True)
class Blocked:
    """A class head held back by another job's reservation."""

    job: str
    leaf: str
    holder: Reservation


@dataclass
class Plan:
    picks: list[Pick] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    blocked: list[Blocked] = field(default_factory=list)
    #: The planner's holds changed in a way that may let the next cycle admit what this one held
    #: back, though nothing in the ledger changed: run another cycle.
    changed: bool = False


@dataclass
class _Park:
    stamp: _Stamp
    head: Head
    refusal: Refusal


@dataclass
class _Starving:
    job: str
    since: float
    node: str
    resources: frozenset[str]
    head: Head
    leaf: str = ""
    #: It asks for more than its leaf's min: it can only start by borrowing.
    borrows: bool = False
    #: What it asks for.
    request: Mapping[str, int] = field(default_factory=dict)
    #: Whether holding ``node`` can help it: it would fit once every job under ``node`` ended
    #: (:func:`_can_hold`). A hold that cannot help only idles the quota it keeps.
    holds: bool = True


class Planner:
    """See the module docstring. One per dispatcher; its memory is a cache of the cycle."""

    def __init__(self, settings: PlannerSettings | None = None) -> None:
        self.settings = settings or PlannerSettings()
        self._parked: dict[tuple[str, str], _Park] = {}
        self._starving: dict[str, _Starving] = {}
        self._nominated: dict[str, Reservation] = {}
        #: Per leaf, the lowest priority picked last cycle: a parked head of higher priority may
        #: now preempt what passed it, so it is looked at again.
        self._passed: dict[str, int] = {}
        self._last_chance: set[str] = set()
        #: What the starving heads held at the end of the last cycle.
        self._holds: dict[str, tuple[str, str, frozenset[str]]] = {}
        #: This cycle's fair shares (:meth:`Snapshot.fair_shares`), when some head holds.
        self._fair: dict[str, dict[str, float]] = {}
        #: This cycle's trees with a node's jobs all ended (:meth:`_can_hold`), by node.
        self._drained: dict[str, Snapshot] = {}

    # ---- memory -------------------------------------------------------------------------------

    def forget(self) -> None:
        """Drop everything remembered (a new leader, or a tree change the caller saw)."""
        self._parked.clear()
        self._starving.clear()
        self._nominated.clear()
        self._passed.clear()
        self._last_chance.clear()

    def parked(self, leaf: str, cls: str) -> Refusal | None:
        park = self._parked.get((leaf, cls))
        return None if park is None else park.refusal

    def nominate(
        self,
        job: str,
        leaf: str,
        snap: Snapshot,
        refusal: Refusal,
        request: Mapping[str, int],
        *,
        until: float,
    ) -> Reservation:
        """Keep the headroom the preemptor's victims free for it until ``until`` (or admission)."""
        node = _blocking_node(snap, leaf, refusal)
        since = until - self.settings.nomination_seconds
        resources = _held(refusal, request)
        held = Reservation(job, leaf, node, resources, since=since, why="nominated", until=until)
        self._nominated[job] = held
        return held

    def nominated(self, job: str) -> Reservation | None:
        return self._nominated.get(job)

    def victims_gone(self, job: str) -> None:
        """The preemptor's victims no longer hold quota: the next cycle is its last chance to
        use the nomination (if the quota refuses it even then, something else than its victims
        stands in its way, and holding others back for it would only idle the quota)."""
        if job in self._nominated:
            self._last_chance.add(job)

    def admitted(self, jobs: Iterable[str]) -> None:
        """Jobs the ledger admitted: their nominations and starvation clocks end."""
        gone = set(jobs)
        for job in gone:
            self._nominated.pop(job, None)
        for leaf in [leaf for leaf, s in self._starving.items() if s.job in gone]:
            del self._starving[leaf]

    def reservations(self, now: float) -> list[Reservation]:
        """The reservations in force: starving heads past the bound, nominations not lapsed,
        oldest first."""
        bound = self.settings.starvation_seconds
        held = [
            Reservation(
                s.job,
                leaf,
                s.node,
                s.resources,
                s.since,
                "starving",
                submitted=s.head.submitted,
                borrows=s.borrows,
            )
            for leaf, s in self._starving.items()
            if now - s.since >= bound and s.holds
        ]
        for job, nomination in list(self._nominated.items()):
            if nomination.until <= now:
                del self._nominated[job]
            elif all(r.job != job for r in held):
                held.append(nomination)
        held.sort(key=lambda r: r.rank)
        return held

    def starving_since(self, leaf: str) -> tuple[str, float] | None:
        s = self._starving.get(leaf)
        return None if s is None else (s.job, s.since)

    # ---- the cycle ----------------------------------------------------------------------------

    def plan(
        self,
        snap: Snapshot,
        heads: Mapping[str, Sequence[ClassHeads]],
        now: float,
        *,
        skip: Callable[[str], bool] = lambda job: False,
    ) -> Plan:
        """One cycle's decisions on ``snap`` (changed in place: charged with every pick).

        ``heads``: each leaf's classes with their first jobs. ``skip(job)``: jobs the caller
        will not consider now (no capacity since it last looked, backoff, being deleted): the
        class goes on with its next job.
        """
        plan = Plan()
        self._drained.clear()
        for leaf, s in list(self._starving.items()):
            first = _leaf_first(heads.get(leaf, ()))
            if first is None or first.job != s.job:
                del self._starving[leaf]  # no longer its leaf's head: it holds nothing
                continue
            park = next(
                (p for (at, _), p in self._parked.items() if at == leaf and p.head.job == s.job), None
            )
            if park is not None and leaf in snap.nodes:  # it holds what its last refusal says
                s.node = _blocking_node(snap, leaf, park.refusal)
                s.resources = _held(park.refusal, _class_of(heads[leaf], s.job))
                s.holds = self._can_hold(snap, leaf, s.node, s.request)
        reservations = self.reservations(now)
        self._fair = snap.fair_shares() if self._starving else {}
        cursors: dict[str, list[_Cursor]] = {}
        for leaf, classes in heads.items():
            if leaf not in snap.nodes:
                continue
            stamp = _stamp(snap, leaf)
            open_classes = []
            for c in classes:
                if not c.heads:
                    continue
                park = self._parked.get((leaf, c.cls))
                if park is not None:
                    passed = park.head.priority > self._passed.get(leaf, park.head.priority)
                    if not (_improved(park.stamp, stamp) or c.heads[0].score < park.head.score or passed):
                        continue
                    del self._parked[(leaf, c.cls)]
                open_classes.append(_Cursor(c))
            if open_classes:
                cursors[leaf] = open_classes
        self._passed.clear()
        for leaf in list(self._parked_leaves() - set(heads)):
            self._drop_leaf(leaf)
        touched: set[str] = set()
        deferred: dict[str, Refusal] = {}
        keys = _Keys(snap)
        nominees = set(self._last_chance)  # those not yet served this cycle
        while len(plan.picks) < self.settings.max_picks:
            nominee = self._nominee(nominees, cursors, skip) if nominees else None
            if nominee is None:
                nominees.clear()  # none is at the head of its class now: the fair order alone
            chosen = nominee[0] if nominee is not None else keys.first(cursors, skip)
            if chosen is None:
                break
            leaf = chosen
            cursor = (
                nominee[1]
                if nominee is not None
                else min((c for c in cursors[leaf] if c.current(skip) is not None), key=lambda c: c.key(skip))
            )
            head = cursor.current(skip)
            assert head is not None
            nominees.discard(head.job)
            request = cursor.classes.request
            blocked = _blocker(reservations, head, leaf, request, snap=snap, keys=keys) or self._older(
                head, leaf, request, snap, now=now, keys=keys
            )
            if blocked is not None:
                plan.blocked.append(Blocked(head.job, leaf, blocked))
                cursor.close()
                keys.moved(leaf)
                continue
            refusal = snap.check(leaf, request)
            if refusal is not None:
                deferred[head.job] = refusal
                held = self._starving.get(leaf)
                if held is not None and held.job == head.job:
                    # What holds it back now, at once: the jobs after it in this very cycle are
                    # held for the node that refuses it now, not the one that did before.
                    held.node = _blocking_node(snap, leaf, refusal)
                    held.resources = _held(refusal, request)
                    held.holds = self._can_hold(snap, leaf, held.node, request)
                if not touched.intersection(snap.chain(leaf)):
                    self._parked[(leaf, cursor.classes.cls)] = _Park(_stamp(snap, leaf), head, refusal)
                    never = snap.never_fits(leaf, request)
                    plan.refused.append(
                        Refused(head.job, leaf, cursor.classes.cls, refusal, head, False, never)
                    )
                cursor.close()
                keys.moved(leaf)
                continue
            snap.admit(leaf, request)
            touched.update(snap.chain(leaf))
            keys.changed(snap.chain(leaf))
            plan.picks.append(Pick(head.job, leaf, cursor.classes.cls, request, head))
            self._passed[leaf] = min(self._passed.get(leaf, head.priority), head.priority)
            cursor.advance()
            keys.moved(leaf)
        self._track_heads(snap, heads, plan, deferred, now=now, skip=skip)
        picked = {p.job for p in plan.picks}
        for job in self._last_chance:
            if job not in picked:
                self._nominated.pop(job, None)
                plan.changed = True
        self._last_chance.clear()
        after = {leaf: (s.job, s.node, s.resources) for leaf, s in self._starving.items()}
        if after != self._holds and plan.blocked:
            plan.changed = True  # what held jobs back is not what will: look again
        self._holds = after
        return plan

    def _older(
        self,
        head: Head,
        leaf: str,
        request: Mapping[str, int],
        snap: Snapshot,
        *,
        now: float,
        keys: _Keys,
    ) -> Reservation | None:
        """A refused leaf head that ``head`` must not pass: one at a node of its chain asking for
        a resource it asks for, of no lower priority, that has waited more than the grace and
        more than ``wait_ratio`` times as long as ``head``. Jobs of leaves the fair order puts
        first (see :func:`_passes`) and other leaves' guaranteed jobs pass."""
        waited = head.submitted
        if waited is None or head.job in self._nominated:
            return None  # a preemptor is not held back: its victims are being evicted for it
        chain = snap.chain(leaf)
        asks = _resources(request)
        guaranteed = _within_guarantee(snap, leaf, request)
        for s in self._starving.values():
            if s.job == head.job or not s.holds or s.node not in chain or not s.resources & asks:
                continue
            if s.head.priority < head.priority or (guaranteed and (s.leaf != leaf or s.borrows)):
                continue
            if s.leaf == leaf and s.borrows and self._fills_share(snap, leaf, s.request, request):
                continue
            if _passes(keys, leaf, s.leaf):
                continue
            held = s.head.submitted
            if held is None:
                continue
            wait = now - held
            if wait > self.settings.grace_seconds and wait > self.settings.wait_ratio * (now - waited):
                return Reservation(
                    s.job, s.leaf, s.node, s.resources, held, "older", submitted=held, borrows=s.borrows
                )
        return None

    def _nominee(
        self, nominees: set[str], cursors: Mapping[str, list[_Cursor]], skip: Callable[[str], bool]
    ) -> tuple[str, _Cursor] | None:
        """A preemptor whose victims are gone, first in nomination order, with its leaf: it goes
        before the fair order. Its victims freed quota at every node of their chain (at an
        ancestor, a job slot or a resource the preemptor was not refused on); served in fair
        order, a job of another leaf could take that and leave the preemptor refused again, so
        that it would evict a second set of victims for one start."""
        best: tuple[tuple[bool, float], str, str, _Cursor] | None = None
        for leaf, cs in cursors.items():
            for c in cs:
                head = c.current(skip)
                if head is None or head.job not in nominees:
                    continue
                held = self._nominated.get(head.job)
                rank = held.rank if held is not None else (True, 0.0)
                if best is None or (rank, head.job) < (best[0], best[1]):
                    best = (rank, head.job, leaf, c)
        return None if best is None else (best[2], best[3])

    def _fills_share(
        self, snap: Snapshot, leaf: str, head: Mapping[str, int], request: Mapping[str, int]
    ) -> bool:
        """Whether a job of ``leaf`` (``request``) may pass its leaf's own waiting head
        (``head``) during the wait rule: the head alone asks for more than the leaf's fair
        share (:meth:`Snapshot.fair_shares`, at the cycle's start) of some resource, so it can
        only start on quota other leaves leave unused, and the job keeps the leaf within its
        fair share of everything it asks for. Holding the leaf's smaller jobs back for such a
        head would leave its fair share idle for as long as the head waits; the head's wait
        stays bounded by its starvation reservation, which the leaf's own jobs do not pass."""
        fair = self._fair.get(leaf)
        if not fair or not any(a > fair[r] for r, a in head.items() if r in fair):
            return False
        used = snap.nodes[leaf].used
        asked = [(r, a) for r, a in request.items() if a > 0 and r in fair]
        return bool(asked) and all(used.get(r, 0) + a <= fair[r] for r, a in asked)

    def _can_hold(self, snap: Snapshot, leaf: str, node: str, request: Mapping[str, int]) -> bool:
        """Whether keeping what is released under ``node`` for a head of ``leaf`` can ever let
        the head in: it fits once every job under ``node`` has ended (:meth:`Snapshot.drained`,
        one per node and cycle). A head refused by what another subtree is owed, or by usage
        outside ``node``, waits for something no hold at ``node`` brings about; holding the jobs
        behind it would idle the quota and, with nothing running under ``node``, keep everything
        behind it waiting for good."""
        if node not in snap.nodes:
            return False
        drained = self._drained.get(node)
        if drained is None:
            drained = self._drained[node] = snap.drained(node)
        return drained.check(leaf, request) is None

    def _parked_leaves(self) -> set[str]:
        return {leaf for leaf, _ in self._parked}

    def _drop_leaf(self, leaf: str) -> None:
        for key in [k for k in self._parked if k[0] == leaf]:
            del self._parked[key]

    def _track_heads(
        self,
        snap: Snapshot,
        heads: Mapping[str, Sequence[ClassHeads]],
        plan: Plan,
        refusals: Mapping[str, Refusal],
        *,
        now: float,
        skip: Callable[[str], bool],
    ) -> None:
        """Start, keep or end each leaf's starvation clock; mark the refusals of leaf heads.

        A leaf's clock runs while the same job stays its head and is refused for quota (this
        cycle, or its class is parked); it stops when another job becomes the head, or the head
        is picked or skipped by the caller (it waits for capacity, not quota). A refusal this
        cycle could not be sure of keeps a running clock going."""
        picked = {p.job for p in plan.picks}
        for i, r in enumerate(plan.refused):
            first = _leaf_first(heads.get(r.leaf, ()))
            if first is not None and first.job == r.job:
                plan.refused[i] = Refused(r.job, r.leaf, r.cls, r.refusal, r.head, True, r.never)
        for leaf in list(self._starving):
            if leaf not in heads:
                del self._starving[leaf]
        for leaf, classes in heads.items():
            first = _leaf_first(classes)
            known = self._starving.get(leaf)
            if first is None or leaf not in snap.nodes or first.job in picked or skip(first.job):
                # Admitted, or waiting for something else than quota (capacity, its backoff):
                # holding quota back for it would only leave the quota idle.
                self._starving.pop(leaf, None)
                continue
            if known is not None and known.job != first.job:
                del self._starving[leaf]
                known = None
            cls = next(c for c in classes if c.heads and c.heads[0] == first)
            park = self._parked.get((leaf, cls.cls))
            refusal = refusals.get(first.job) or (park.refusal if park else None)
            if refusal is None or snap.never_fits(leaf, cls.request) is not None:
                continue
            # The clock keeps running; the node it holds follows the latest refusal (a head
            # refused by a max may be refused by a sibling's guarantee once the max has room).
            node = _blocking_node(snap, leaf, refusal)
            since = now if known is None else known.since
            borrows = _borrows(snap, leaf, cls.request)
            holds = self._can_hold(snap, leaf, node, cls.request)
            self._starving[leaf] = _Starving(
                first.job, since, node, _held(refusal, cls.request), first, leaf, borrows, cls.request, holds
            )

    # ---- preemption ---------------------------------------------------------------------------

    def may_preempt(
        self,
        snap: Snapshot,
        leaf: str,
        request: Mapping[str, int],
        priority: int,
        lowest: int | None,
    ) -> list[PreemptionKind]:
        """The kinds of preemption that could help a refused job, from the snapshot alone (no
        running jobs read): priority needs a running job of lower priority in its leaf
        (``lowest``: the lowest priority running there, None for none); reclaim needs the job to
        fit within its leaf's ``min`` and some sibling subtree to borrow what it asks for. A cheap
        filter before :meth:`victims`, which a dispatcher would otherwise run for every refused
        head every time something is released."""
        kinds = []
        if lowest is not None and lowest < priority:
            kinds.append(PreemptionKind.PRIORITY)
        if _within_guarantee(snap, leaf, request):
            asks = {r for r, a in request.items() if a > 0}
            chain = snap.chain(leaf)
            for i in range(len(chain) - 1):
                siblings = snap.nodes[chain[i + 1]].children
                if any(s != chain[i] and set(snap.borrowed(s)) & asks for s in siblings):
                    kinds.append(PreemptionKind.RECLAIM)
                    break
        return kinds

    def victims(
        self,
        snap: Snapshot,
        leaf: str,
        request: Mapping[str, int],
        priority: int,
        running: Mapping[str, Sequence[RunningJob]],
        *,
        kinds: Iterable[PreemptionKind] = (PreemptionKind.PRIORITY, PreemptionKind.RECLAIM),
        exclude: Iterable[str] = (),
    ) -> tuple[PreemptionKind, list[RunningJob]] | None:
        """The fewest running jobs whose eviction lets a job of ``request`` and ``priority`` on
        ``leaf`` be admitted, and the kind of preemption; None when no allowed set does.

        ``running``: admitted jobs by leaf (most recently admitted first), at least those of
        ``leaf`` and, for reclaim, of its ancestors' other subtrees. ``exclude``: jobs that must
        not be taken (being evicted already, not yet started, or the preemptor's own preemptor).
        ``snap`` is not changed.
        """
        banned = set(exclude)
        for kind in kinds:
            if kind is PreemptionKind.PRIORITY:
                pool = [r for r in running.get(leaf, ()) if r.priority < priority and r.job not in banned]
                pool.sort(key=lambda r: (r.priority, -r.admission))
                chosen = _simulate(snap, leaf, request, pool, lambda model, victim: True)
            else:
                if not _within_guarantee(snap, leaf, request):
                    continue
                pool = [r for r in _borrowers(snap, leaf, request, running) if r.job not in banned]
                chosen = _simulate(snap, leaf, request, pool, _still_borrows(snap, leaf, request))
            if chosen:
                return kind, chosen
        return None


# ---- helpers ------------------------------------------------------------------------------------


@dataclass
class _Cursor:
    """A class's heads as this cycle walks them."""

    classes: ClassHeads
    index: int = 0
    closed: bool = False

    def current(self, skip: Callable[[str], bool]) -> Head | None:
        if self.closed:
            return None
        heads = self.classes.heads
        while self.index < len(heads) and skip(heads[self.index].job):
            self.index += 1
        return heads[self.index] if self.index < len(heads) else None

    def key(self, skip: Callable[[str], bool]) -> tuple[int, int]:
        head = self.current(skip)
        assert head is not None
        return head.score, head.seq

    def advance(self) -> None:
        self.index += 1

    def close(self) -> None:
        self.closed = True


class _Keys:
    """Fair-order keys, cached: a node's until a pick changes its usage, a leaf's head until one
    of its cursors moves (:meth:`moved`), a leaf's key until either changes."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self._node: dict[str, tuple[int, float]] = {}
        self._head: dict[str, tuple[int, int] | None] = {}
        self._leaf: dict[str, tuple[object, ...]] = {}
        #: Leaves under each node (for invalidating their keys when the node's changes).
        self._under: dict[str, list[str]] = {}

    def node_key(self, name: str) -> tuple[int, float]:
        key = self._node.get(name)
        if key is None:
            key = (0 if self.snap.below_min(name) else 1, self.snap.share(name))
            self._node[name] = key
        return key

    def changed(self, names: Iterable[str]) -> None:
        for name in names:
            self._node.pop(name, None)
            for leaf in self._under.get(name, ()):
                self._leaf.pop(leaf, None)

    def order(self, leaf: str) -> tuple[tuple[int, float], ...]:
        """The leaf's place in the fair order, without its head: per level from the top, below
        its min or not, then its share."""
        return tuple(self.node_key(n) for n in reversed(self.snap.chain(leaf)[:-1]))

    def moved(self, leaf: str) -> None:
        self._head.pop(leaf, None)
        self._leaf.pop(leaf, None)

    def first(self, cursors: dict[str, list[_Cursor]], skip: Callable[[str], bool]) -> str | None:
        """The leaf to serve next: the least (per level from the top: below min, share; then
        its head's score and submission) among leaves that still have a candidate."""
        best: tuple[object, ...] | None = None
        chosen = None
        for leaf, cs in list(cursors.items()):
            key = self._leaf.get(leaf)
            if key is None:
                if leaf not in self._head:
                    live = [c.key(skip) for c in cs if c.current(skip) is not None]
                    self._head[leaf] = min(live) if live else None
                head = self._head[leaf]
                if head is None:
                    del cursors[leaf]
                    continue
                chain = self.snap.chain(leaf)
                if leaf not in self._under.get(chain[0], ()):
                    for name in chain[:-1]:  # the root's share is in no leaf's key
                        self._under.setdefault(name, []).append(leaf)
                key = (*(self.node_key(n) for n in reversed(chain[:-1])), head)
                self._leaf[leaf] = key
            if best is None or key < best:
                best, chosen = key, leaf
        return chosen


def _class_of(classes: Iterable[ClassHeads], job: str) -> dict[str, int]:
    """The request of the class whose head ``job`` is."""
    return next((c.request for c in classes if c.heads and c.heads[0].job == job), {})


def _leaf_first(classes: Iterable[ClassHeads]) -> Head | None:
    heads = [c.heads[0] for c in classes if c.heads]
    return min(heads) if heads else None


@dataclass(frozen=True)
class _Stamp:
    """What a refusal on a leaf's chain depends on: the tree version, and what every node of
    the chain uses and is owed."""

    version: int
    nodes: tuple[tuple[dict[str, int], dict[str, int]], ...]


def _stamp(snap: Snapshot, leaf: str) -> _Stamp:
    nodes = [snap.nodes[n] for n in snap.chain(leaf)]
    return _Stamp(snap.version, tuple((dict(n.used), dict(n.due)) for n in nodes))


def _improved(old: _Stamp, new: _Stamp) -> bool:
    """Whether a refusal stamped ``old`` may no longer hold: tree changed, a node uses less of
    something, or what a node's children are owed changed."""
    if old.version != new.version or len(old.nodes) != len(new.nodes):
        return True
    for (used_before, due_before), (used_after, due_after) in zip(old.nodes, new.nodes, strict=True):
        if due_before != due_after:
            return True
        if any(used_after.get(r, 0) < amount for r, amount in used_before.items()):
            return True
    return False


def _held(refusal: Refusal, request: Mapping[str, int]) -> frozenset[str]:
    """What a reservation keeps for its job: the resource it was refused on (a job that does not
    ask for it cannot delay it; were another resource of the node to run out next, the next
    refusal names that one and the reservation follows)."""
    return frozenset({refusal.resource}) if refusal.resource else _resources(request)


def _resources(request: Mapping[str, int]) -> frozenset[str]:
    return frozenset({*(r for r, a in request.items() if a > 0), MAX_JOBS})


def _blocking_node(snap: Snapshot, leaf: str, refusal: Refusal) -> str:
    """The node whose headroom a refused job waits for: the node whose ``max`` refuses it, or
    the node that would borrow beyond its ``min`` (not its parent: the siblings it would take
    from are owed their guarantee first), or for strict order the leaf."""
    if refusal.kind is RefusalKind.ORDER:
        return leaf
    by_path = {node.path: name for name, node in snap.nodes.items()}
    return by_path.get(refusal.node, leaf)


def _passes(keys: _Keys, leaf: str, holder: str) -> bool:
    """Whether jobs of ``leaf`` go before a head of ``holder`` that holds them back: another leaf
    that the fair order serves first (below its min where the holder's is not, or a lower share
    at the first level where their paths part). Holds keep a leaf's own order and an order
    among equals, never the order between leaves: a rich leaf's old head does not stop a poor
    leaf's new jobs."""
    return leaf != holder and keys.order(leaf) < keys.order(holder)


def _blocker(
    reservations: Sequence[Reservation],
    head: Head,
    leaf: str,
    request: Mapping[str, int],
    *,
    snap: Snapshot,
    keys: _Keys,
) -> Reservation | None:
    """The reservation that holds ``head`` back, if any: one at a node of its chain that keeps a
    resource the job asks for, and that ranks before it (a job holding a reservation itself
    ranks by its own; any other by its submission, so a job submitted before a starving head is
    not held back for it: every hold in the planner follows one order, and none can wait on
    another in a circle)."""
    chain = snap.chain(leaf)
    asks = _resources(request)
    own = next((r for r in reservations if r.job == head.job), None)
    rank = own.rank if own is not None else None if head.submitted is None else (True, head.submitted)
    guaranteed = _within_guarantee(snap, leaf, request)
    for held in reservations:
        if held.job == head.job:
            continue
        if guaranteed and (held.leaf != leaf or held.borrows):
            continue  # guaranteed quota is held back only for a job of its leaf that needs no more
        if rank is not None and held.rank >= rank:
            continue
        if held.why != "nominated" and _passes(keys, leaf, held.leaf):
            continue
        if held.node in chain and held.resources & asks:
            return held
    return None


def _simulate(
    snap: Snapshot,
    leaf: str,
    request: Mapping[str, int],
    pool: Sequence[RunningJob],
    allowed: Callable[[Snapshot, RunningJob], bool],
) -> list[RunningJob]:
    """Evict from ``pool`` in order (each victim back to its queue) until the job fits; then put
    back every victim it fits without, last first. Empty when it never fits."""
    model = snap.copy()
    chosen: list[RunningJob] = []
    fits = model.check(leaf, request) is None
    for victim in pool:
        if fits:
            break
        if not allowed(model, victim):
            continue
        model.release(victim.leaf, victim.request, to_queue=True)
        chosen.append(victim)
        fits = model.check(leaf, request) is None
    if not fits:
        return []
    for victim in reversed(list(chosen)):
        model.admit(victim.leaf, victim.request)
        if model.check(leaf, request) is None:
            chosen.remove(victim)
        else:
            model.release(victim.leaf, victim.request, to_queue=True)
    return chosen


def _borrows(snap: Snapshot, leaf: str, request: Mapping[str, int]) -> bool:
    """Whether a job asks for more than its leaf's ``min`` of some governed resource (a ``min``
    that does not name a resource guarantees none of it): it can then only start by borrowing,
    never within its leaf's guarantee alone."""
    node = snap.nodes[leaf]
    return any(a > node.min.get(r, 0) for r, a in _guarded(snap, node.min, request))


def _within_guarantee(snap: Snapshot, leaf: str, request: Mapping[str, int]) -> bool:
    """Whether the job fits within its leaf's ``min`` for every governed resource it asks for
    (0 where the ``min`` does not name one), and the ``min`` names one of them: what it may
    reclaim, and what passes holds. Kueue's rule for reclaimWithinCohort is the same (the
    preemptor's ClusterQueue stays within its nominal quota for every resource the workload
    requests); a job that asks for something its leaf is not guaranteed is itself a borrower,
    and taking from one borrower to give to another is no reclaim."""
    node = snap.nodes[leaf]
    asked = _guarded(snap, node.min, request)
    return any(node.min.get(r, 0) > 0 for r, _ in asked) and all(
        node.used.get(r, 0) + a <= node.min.get(r, 0) for r, a in asked
    )


def _guarded(snap: Snapshot, floor: Mapping[str, int], request: Mapping[str, int]) -> list[tuple[str, int]]:
    """What a job asks for that a guarantee is measured in: the governed resources it asks for,
    and its job slot where the ``min`` names max-jobs."""
    asked = [(r, a) for r, a in request.items() if a > 0 and r != MAX_JOBS and r in snap.governed]
    if floor.get(MAX_JOBS, 0) > 0:
        asked.append((MAX_JOBS, 1))
    return asked


def _subtree_leaves(snap: Snapshot, name: str) -> list[str]:
    node = snap.nodes[name]
    if node.is_leaf:
        return [name]
    return [leaf for child in node.children for leaf in _subtree_leaves(snap, child)]


def _borrowers(
    snap: Snapshot, leaf: str, request: Mapping[str, int], running: Mapping[str, Sequence[RunningJob]]
) -> list[RunningJob]:
    """Running jobs of the subtrees that borrow a resource the job asks for: the leaf's own
    siblings first, then its parent's, and so on; most recently admitted first in each."""
    asks = {r for r, a in request.items() if a > 0}
    out: list[RunningJob] = []
    chain = snap.chain(leaf)
    for i in range(len(chain) - 1):
        parent = snap.nodes[chain[i + 1]]
        level: list[RunningJob] = []
        for sibling in parent.children:
            if sibling == chain[i] or not (set(snap.borrowed(sibling)) & asks):
                continue
            for name in _subtree_leaves(snap, sibling):
                level.extend(running.get(name, ()))
        level.sort(key=lambda r: -r.admission)
        out.extend(level)
    return out


def _still_borrows(
    snap: Snapshot, leaf: str, request: Mapping[str, int]
) -> Callable[[Snapshot, RunningJob], bool]:
    """Reclaim takes a victim only while the subtree it belongs to (below the first common
    ancestor with the preemptor) still uses more than its ``min`` of something both ask for."""
    chain = snap.chain(leaf)
    asks = {r for r, a in request.items() if a > 0}

    def allowed(model: Snapshot, victim: RunningJob) -> bool:
        victim_chain = model.chain(victim.leaf)
        # The victim's ancestor just below the lowest common ancestor with the preemptor.
        top = next(
            (victim_chain[i] for i in range(len(victim_chain) - 1) if victim_chain[i + 1] in chain),
            victim.leaf,
        )
        borrowed = model.borrowed(top)
        return any(borrowed.get(r, 0) > 0 and victim.request.get(r, 0) > 0 for r in asks)

    return allowed
