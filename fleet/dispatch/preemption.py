"""Preemption, once decided: evicting the victims and handing them back to their queues.

The dispatcher decides *whom* (:meth:`queues.planner.Planner.victims`); this module does it, in
three steps that each survive a crash of whoever runs them:

1. **Mark** (:func:`mark_victims`, the dispatcher, fenced): each victim's fleet object moves
   from a running state to ``Rescheduling`` with reason ``Preempted``, naming its preemptor
   (``status.preemptedBy``), by compare-and-set on its uid and attempt, so a job that finished
   or moved meanwhile is left alone. An Event on the victim names the preemptor; one on the
   preemptor lists its victims. Its quota stays charged: nothing else may use it yet.
2. **Evict** (:func:`fleet.dispatch.tasks.evict`, an RQ worker): the member copy of that attempt
   is deleted and the task waits until the member no longer has it; it is retried while the
   member cannot be reached.
3. **Requeue** (:func:`requeued`, by the evict task, or by the syncer when it sees the copy
   vanish): the victim goes back to its queue in its old place (``Queued``, reason
   ``Preempted``, the attempt counted but not as a failure) and its quota is released, only
   now, so the copy is gone before the preemptor can be admitted into what it frees.

The preemptor meanwhile holds a nomination (:meth:`queues.planner.Planner.nominate`): the
headroom its victims free is kept for it. A victim is never preempted by a job it preempted
itself (``status.preemptedBy`` of the preemptor excludes it), and the dispatcher bounds how many
victims it takes per minute.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from prometheus_client import Counter

from fleet.ascend import Condition
from fleet.dispatch.context import Context
from fleet.dispatch.handback import COMPONENT, give_back
from fleet.jobs import (
    Attempt,
    FleetReason,
    Phase,
    Preempt,
    attempt_of,
    cluster_of,
    condition,
    last_condition,
    mutate_jobs,
    preempted_by_of,
    transition,
    try_get_job,
)
from fleet.state import record_events
from queues import Fence, RunningJob

__all__ = [
    "PREEMPTIONS",
    "RUNNING_STATES",
    "is_being_preempted",
    "mark_victims",
    "requeued",
]

log = logging.getLogger("fleet.dispatch.preemption")

PREEMPTIONS = Counter("fleet_preemptions_total", "Jobs preempted, by why.", ["reason"])

#: States in which a job runs (or is being created) in its member: the ones a victim may be in.
RUNNING_STATES: Final = frozenset(
    {Phase.DISPATCHED, Condition.CREATED, Condition.RUNNING, Condition.RESTARTING}
)


def is_being_preempted(obj: Mapping[str, object]) -> bool:
    """Whether the job was marked for eviction and its copy is not known to be gone yet."""
    last = last_condition(obj) or {}
    return last.get("type") == Phase.RESCHEDULING and last.get("reason") == FleetReason.PREEMPTED


def mark_victims(
    ctx: Context,
    preemptor: Mapping[str, Any],
    victims: Sequence[tuple[RunningJob, dict[str, Any]]],
    *,
    why: str,
    fence: Fence,
) -> list[tuple[RunningJob, dict[str, Any]]]:
    """Step 1: mark the victims (each read just before, ``victims`` as (job, object)); returns
    those marked, each with its stored object. The caller enqueues their evictions."""
    key = f"{preemptor['metadata'].get('namespace')}/{preemptor['metadata']['name']}"
    message = f"preempted by {key} ({why})"

    changes = [
        (job.job, transition(Preempt(key, message), Attempt(str(obj["metadata"]["uid"]), attempt_of(obj))))
        for job, obj in victims
    ]
    stored = mutate_jobs(ctx.objects, changes, fence=fence, currents=[o for _, o in victims])
    marked = [
        (job, obj)
        for (job, _), obj in zip(victims, stored, strict=True)
        if obj is not None and is_being_preempted(obj) and preempted_by_of(obj) == key
    ]
    if marked:
        names = ", ".join(job.job for job, _ in marked)
        events = [(obj, str(FleetReason.PREEMPTED), message) for _, obj in marked]
        record_events(ctx.objects, events, type="Warning", component=COMPONENT, fence=fence)
        record_events(
            ctx.objects,
            [(dict(preemptor), "Preempting", f"evicting {len(marked)} job(s) to start ({why}): {names}")],
            component=COMPONENT,
            fence=fence,
        )
    for job, _ in marked:
        log.info("event=preempting victim=%s preemptor=%s why=%s", job.job, key, why)
    return marked


def requeued(ctx: Context, key: str, uid: str, attempt: int, *, member: str) -> bool:
    """Step 3: the victim's copy is gone from ``member``: queue the job again and release its
    quota. Idempotent (a second call, or one for an attempt that moved on, changes nothing)."""
    obj = try_get_job(ctx.objects, key)
    if obj is None or obj["metadata"].get("uid") != uid or attempt_of(obj) != attempt:
        return False
    if cluster_of(obj) != member or not is_being_preempted(obj):
        return False
    message = str((condition(obj, Phase.RESCHEDULING) or {}).get("message") or "preempted")
    outcome = give_back(
        ctx,
        key,
        Attempt(uid, attempt, member),
        reason=FleetReason.PREEMPTED,
        message=f"{message}; its copy in {member} is gone, waiting in its queue again",
    )
    return outcome.changed
