"""Choosing whom to preempt for a refused head, and sending their evictions.

A refused leaf head that may preempt (its PriorityClass and its node's policy allow) gets the
fewest victims the planner's simulation needs (:meth:`queues.Planner.victims`); they are marked
(:func:`fleet.dispatch.preemption.mark_victims`, through the state machine's
:class:`fleet.jobs.Preempt`) and evicted by the workers (:func:`fleet.dispatch.tasks.evict`,
enqueued by reference), requeued once their copies are gone, at a bounded rate. The preemptor
holds a nomination meanwhile: what its victims free is kept for it.
"""

from __future__ import annotations

from collections import deque

from rq import Retry

from fleet.dispatch.lead.shared import Leading
from fleet.dispatch.preemption import PREEMPTIONS, RUNNING_STATES, mark_victims
from fleet.dispatch.tasks import evict
from fleet.jobs import Phase, attempt_of, cluster_of, current_state, get_jobs, job_priority, preempted_by_of
from fleet.workloads import job_ref
from queues import PreemptionKind, Refused, RunningJob, Snapshot, class_request, preemption_policy, queue_name

__all__ = ["Victims"]


class Victims:
    """The preemptions under way: preemptors and their victims, the rate of evictions."""

    def __init__(self, leading: Leading) -> None:
        self.leading = leading
        self.ctx = leading.ctx
        self.settings = leading.settings
        self._victims_at: deque[float] = deque()
        #: Leaf -> (its usage when read, the lowest priority running in it).
        self._lowest: dict[str, tuple[dict[str, int] | None, int | None]] = {}
        #: Preemptor -> its victims, while they still hold quota (see Planner.victims_gone).
        self._nominees: dict[str, list[str]] = {}

    def forget(self) -> None:
        self._nominees.clear()

    def check_nominees(self) -> None:
        """Tell the planner which preemptors' victims no longer hold quota (evicted and
        requeued, or ended on their own): one pipeline, only while preemptions are under way."""
        planner = self.leading.planner
        for job in [j for j in self._nominees if planner.nominated(j) is None]:
            del self._nominees[job]
        if not self._nominees:
            return
        pipe = self.ctx.client.pipeline(transaction=False)
        for victims in self._nominees.values():
            pipe.hmget(self.ctx.ledger.keys.admitted, victims)
        for (job, _), held in zip(list(self._nominees.items()), pipe.execute(), strict=True):
            if all(raw is None for raw in held):
                planner.victims_gone(job)
                del self._nominees[job]

    def _lowest_running(self, snap: Snapshot, leaves: set[str]) -> dict[str, int | None]:
        """The lowest priority running in each leaf (None: none runs), cached until the leaf's
        usage changes; one pipeline for the leaves whose cache is stale."""
        stale = [leaf for leaf in leaves if self._lowest.get(leaf, (None,))[0] != snap.nodes[leaf].used]
        if stale:
            for leaf, jobs in self.ctx.ledger.running_jobs(stale).items():
                lowest = min((j.priority for j in jobs), default=None)
                self._lowest[leaf] = (dict(snap.nodes[leaf].used), lowest)
        return {leaf: self._lowest[leaf][1] for leaf in leaves}

    def preempt(self, refused: list[Refused], snap: Snapshot, now: float) -> int:
        """Find victims for refused leaf heads that may preempt, mark them and send their
        evictions; returns how many were marked. See :mod:`queues.planner` for whom it takes."""
        leading = self.leading
        planner = leading.planner
        while self._victims_at and self._victims_at[0] < now - 60:
            self._victims_at.popleft()
        candidates = [r for r in refused if planner.nominated(r.job) is None]
        if not candidates or len(self._victims_at) >= self.settings.preemptions_per_minute:
            return 0
        lowest = self._lowest_running(snap, {r.leaf for r in candidates})
        candidates = [
            r
            for r in candidates
            if planner.may_preempt(snap, r.leaf, class_request(r.cls), r.head.priority, lowest[r.leaf])
        ]
        if not candidates:
            return 0
        tree = self.ctx.ledger.tree()
        objs = get_jobs(self.ctx.objects, [r.job for r in candidates])
        fresh: Snapshot | None = None
        running: dict[str, list[RunningJob]] | None = None
        taken: set[str] = set()
        marked_total = 0
        for r, obj in zip(candidates, objs, strict=True):
            if obj is None or current_state(obj) != Phase.QUEUED or obj["metadata"].get("deletionTimestamp"):
                continue
            if not job_priority(obj).may_preempt:
                continue
            node_policy = preemption_policy(tree, r.leaf)
            kinds = [
                kind
                for kind in planner.may_preempt(
                    snap, r.leaf, class_request(r.cls), r.head.priority, lowest[r.leaf]
                )
                if (node_policy.within if kind is PreemptionKind.PRIORITY else node_policy.reclaim) != "Never"
            ]
            if not kinds:
                continue
            if fresh is None:
                fresh = self.ctx.ledger.snapshot()
                running = self.ctx.ledger.running_jobs(fresh.leaves())
            assert running is not None
            pool = running
            if node_policy.reclaim == "LowerPriority":
                pool = {
                    leaf: [j for j in jobs if leaf == r.leaf or j.priority < r.head.priority]
                    for leaf, jobs in running.items()
                }
            request = class_request(r.cls)
            exclude = set(taken)
            preemptor = preempted_by_of(obj)
            if preemptor:
                exclude.add(preemptor)
            for _ in range(3):  # victims not running yet are left out and the choice made again
                found = planner.victims(
                    fresh, r.leaf, request, r.head.priority, pool, kinds=kinds, exclude=exclude
                )
                if found is None:
                    break
                kind, victims = found
                if len(self._victims_at) + len(victims) > self.settings.preemptions_per_minute:
                    found = None
                    break
                vobjs = get_jobs(self.ctx.objects, [v.job for v in victims])
                idle = [
                    v.job
                    for v, o in zip(victims, vobjs, strict=True)
                    if o is None
                    or current_state(o) not in RUNNING_STATES
                    or o["metadata"].get("deletionTimestamp")
                ]
                if not idle:
                    break
                exclude.update(idle)
                found = None
            if found is None:
                continue
            queue = queue_name(fresh.nodes[r.leaf].path)
            why = (
                f"priority {r.head.priority} over lower-priority jobs of {queue}"
                if kind is PreemptionKind.PRIORITY
                else f"reclaiming the guaranteed quota of {queue}"
            )
            marked = mark_victims(
                self.ctx, obj, list(zip(victims, [o for o in vobjs if o is not None], strict=True)),
                why=why, fence=leading.fence,
            )  # fmt: skip
            if not marked:
                continue
            for victim, vobj in marked:
                taken.add(victim.job)
                self._victims_at.append(now)
                fresh.release(victim.leaf, victim.request, to_queue=True)
                self.ctx.evict_queue.enqueue(
                    evict,
                    str(cluster_of(vobj)),
                    vobj["metadata"].get("namespace"),
                    vobj["metadata"]["name"],
                    str(vobj["metadata"]["uid"]),
                    attempt_of(vobj),
                    kind=job_ref(victim.job).tag,
                    retry=Retry(max=8, interval=[1, 2, 4, 8, 15, 30, 60, 60]),
                    job_timeout=60,
                    failure_ttl=3600,
                )
            PREEMPTIONS.labels(kind.value).inc(len(marked))
            fresh.admit(r.leaf, request)
            held = planner.nominate(
                r.job, r.leaf, fresh, r.refusal, request, until=now + self.settings.nomination_seconds
            )
            self._nominees[r.job] = [victim.job for victim, _ in marked]
            leading.timer(held.until)
            marked_total += len(marked)
        return marked_total
