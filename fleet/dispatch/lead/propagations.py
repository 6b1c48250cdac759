"""Sending admitted attempts to the workers, and sending again those that got lost.

Each round's placements go out as one RQ job per member
(:func:`fleet.dispatch.tasks.propagate_batch`, enqueued by reference), with every attempt marked in
flight with a deadline and its copy recorded as one that may exist (:mod:`fleet.state.copies`),
all in one transaction: a propagation is repeatable (it checks that its attempt is still current),
so sending one twice costs a repeated create, never a second copy. An attempt still in flight
after its deadline (its worker died, its task was lost) is sent again (:meth:`Propagations.retry`).
"""

from __future__ import annotations

from rq import Queue

from fleet.dispatch.handback import inflight_entry
from fleet.dispatch.lead.shared import Leading, log
from fleet.dispatch.tasks import Propagation, propagate_batch
from fleet.jobs import Phase, attempt_of, cluster_of, current_state, get_jobs
from fleet.state import CopyEntry

__all__ = ["Propagations"]


class Propagations:
    """The leader's side of propagation; keeps no table of its own."""

    def __init__(self, leading: Leading) -> None:
        self.leading = leading
        self.ctx = leading.ctx

    def send(self, items: list[Propagation], *, now: float) -> None:
        """Mark the attempts in flight and enqueue their propagation, one RQ job per member
        (both repeatable: a propagation checks the attempt is still current)."""
        if not items:
            return
        deadline = now + self.leading.settings.inflight_timeout
        entries = {inflight_entry(i[0], i[1], i[2]): deadline for i in items}
        by_member: dict[str, list[Propagation]] = {}
        for item in items:
            by_member.setdefault(item[3], []).append(item)
        jobs = [
            Queue.prepare_data(
                propagate_batch,
                args=(batch,),
                job_id=f"propagate-{member}-{batch[0][1]}-{batch[0][2]}-{int(now * 1000)}",
                result_ttl=60,
                failure_ttl=3600,
                description=(
                    f"propagate {len(batch)} jobs to {member} (first {batch[0][0]} attempt {batch[0][2]})"
                ),
            )
            for member, batch in by_member.items()
        ]
        expected = [CopyEntry(i[3], i[0], i[1], i[2]) for i in items]
        with self.ctx.client.pipeline(transaction=True) as pipe:  # one round trip for the round
            pipe.zadd(self.ctx.keys.inflight, entries)
            self.ctx.copies.expect(expected, pipeline=pipe)  # before any copy can exist
            self.ctx.queue.enqueue_many(jobs, pipeline=pipe)
            pipe.execute()

    def retry(self, now: float) -> None:
        """Enqueue again the propagations whose copy did not appear in time (a worker died)."""
        due = self.ctx.client.zrangebyscore(self.ctx.keys.inflight, "-inf", now, start=0, num=100)
        entries = [raw.decode() if isinstance(raw, bytes) else str(raw) for raw in due]
        parsed = [entry.rsplit("|", 2) for entry in entries]
        objs = get_jobs(self.ctx.objects, [key for key, _, _ in parsed])
        again: list[Propagation] = []
        gone: list[str] = []
        for entry, (key, uid, attempt_text), obj in zip(entries, parsed, objs, strict=True):
            attempt = int(attempt_text)
            if (
                obj is None
                or obj["metadata"].get("uid") != uid
                or attempt_of(obj) != attempt
                or current_state(obj) != Phase.ADMITTED
            ):
                gone.append(entry)
                continue
            member = str(cluster_of(obj))
            log.warning("event=propagation_retried job=%s attempt=%d member=%s", key, attempt, member)
            again.append((key, uid, attempt, member, None))
        if gone:
            self.ctx.client.zrem(self.ctx.keys.inflight, *gone)
        self.send(again, now=now)
