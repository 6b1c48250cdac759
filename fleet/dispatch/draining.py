"""Draining a member (``fleet member drain``): each job placed there is moved away by the task
:func:`fleet.dispatch.purging.drain_copy`, which deletes its copy, waits until it is gone, then
sends the job back to its queue as a cluster failover does. The tasks go to the eviction queue,
which workers take before propagations, so the old copies go before new ones are made."""

from __future__ import annotations

from collections.abc import Sequence

from rq import Retry

from fleet.dispatch.context import Context
from fleet.dispatch.purging import drain_copy
from fleet.workloads import job_ref

__all__ = ["drain_member"]


def drain_member(ctx: Context, member: str, placed: Sequence[tuple[str, str, int]]) -> int:
    """Send a drain task for each (job key, uid, attempt) placed on ``member``; how many."""
    for key, uid, attempt in placed:
        ref = job_ref(key)
        ctx.evict_queue.enqueue(
            drain_copy,
            member,
            ref.namespace,
            ref.name,
            uid,
            attempt,
            kind=ref.tag,
            retry=Retry(max=8, interval=[1, 2, 4, 8, 15, 30, 60, 60]),
            job_timeout=60,
            failure_ttl=3600,
        )
    return len(placed)
