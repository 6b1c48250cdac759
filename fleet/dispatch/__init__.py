"""Dispatch: the running system that joins quota, placement and the members.

Three roles, each its own process (``fleet dispatcher``, ``fleet worker``, ``fleet syncer``),
sharing nothing but Redis and the members' APIs:

Dispatcher (:mod:`~fleet.dispatch.dispatcher`), one leader at a time
    Holds the lease (:mod:`~fleet.dispatch.lease`) and passes its fencing token to every write.
    Each round it takes a few heads of every leaf queue that has pending jobs (cost per decision
    independent of how many jobs wait), skips those whose last miss still stands (backoff, no fit
    since capacity last changed), checks the gang fit, admits the fitting ones in one batch
    through the quota ledger, places and holds each admitted one on its member
    (:class:`fleet.placement.Placer`, reservations in Redis), records ``Admitted`` with the
    member and the new attempt on the fleet object, marks it in flight, and enqueues its
    propagation on RQ. A round is one batch: one read of its candidates, one pipeline of holds
    (decided in memory, each over those before it), one of ``Admitted`` writes and one of
    Events, one RQ job per member (all enqueued in one pipeline). A job that does not fit or is
    refused by quota stays queued, its ``Queued`` condition carrying the exact reason. The
    capacity it decides on comes from its own node and pod watches of every member
    (:class:`fleet.placement.feeder.CapacityFeeder`).

Workers (:mod:`~fleet.dispatch.tasks`, run by RQ)
    ``propagate_batch`` (``propagate`` for one): create the member copies of the attempts the
    round sent to one member (one read of their fleet objects, the member calls a few at a
    time in that member's own lane of the worker, which the task hands them to and returns, so
    no member holds the worker nor the other members' batches; one pipeline of ``Dispatched``
    writes for the batch, made by whoever sees its creates end), each named and labelled
    after the fleet job (:mod:`fleet.labels`), optionally pinned to the planned nodes.
    Creation is idempotent: an existing copy of the same uid and attempt is adopted, an older
    attempt's copy is deleted first, another job's copy is a conflict. A member that stays
    unreachable gives the job back: its hold and quota are released and it is queued again with that
    member excluded for a while (firmly: this exclusion does not give way), the reason kept. A
    permanent refusal is judged by whom it is about (:func:`fleet.members.scope_of`): the job itself
    (a 422 from the member's own validation, which every member would repeat) fails the job; the
    member's own (403, 404, a conflict, an admission denial) gives the job back with that member
    excluded for good, and fails it with every member's reason once no member is left. An error
    while making one job's copy fails that job; the rest of the batch goes on. Member calls are
    guarded per member (:mod:`fleet.members.guard`: a bulkhead, a circuit breaker, a time budget per
    call); a member whose breaker opens on timeouts is *degraded* (:mod:`~fleet.dispatch.degraded`):
    nothing new is placed there while the mark holds, its pending creates are deferred, and handed
    back to be placed elsewhere once it has been degraded longer than the job's toleration, as a
    NotReady member's jobs are.
    ``purge``: delete a member copy of a given uid and attempt (never its successor).
    ``delete_copy``: the same for a job deleted at the fleet, then, once the member confirms the
    copy gone, complete the deletion (:mod:`~fleet.dispatch.deletion`).

Syncer (:mod:`~fleet.dispatch.syncer`)
    Per member: watches the propagated jobs (resuming from their resourceVersion after any
    disconnect) and mirrors their conditions and replicaStatuses onto the fleet object (what
    arrived while it was busy as one batch: one read, one pipeline of writes); probes
    health with failure and success thresholds. On the fleet side: finishes jobs (quota released
    once: release is idempotent), applies failover (cluster failover after the toleration,
    application failover for retriable failures and for PodGroupPending past the toleration,
    bounded by the policy's backoffLimit with exponential backoff; the member a job failed on is
    excluded in proportion to what the failure says about it, and the exclusion gives way when
    no other member fits: :mod:`~fleet.dispatch.handback`), purges stale copies by the
    policy's purgeMode, and drives deletions (:mod:`~fleet.dispatch.deletion`): a deleted job
    stays ``Terminating`` until its member copy is confirmed gone (the delete sent again with
    backoff while its member is unreachable), then its quota is released and its finalizer off.
    Each concern is its own module under :mod:`~fleet.dispatch.sync`, composed by the syncer.

Crash safety: every step is recorded in Redis before the next is taken, and each role can repeat
its step (admission, placement hold, creation, release and purge are idempotent). When a
dispatcher takes the lease it reconciles: a stored job absent from the ledger is queued, an
admitted job still marked ``Queued`` is requeued, an ``Admitted`` job not in flight is
re-enqueued. The reconcile walks the stored jobs a bounded slice per round, between cycles
(:mod:`~fleet.dispatch.sweep`), so however deep the queue, the new leader's first cycle comes
at once. A job in flight past its deadline (a worker killed mid-task) is enqueued again.
"""

from fleet.dispatch.companions import references
from fleet.dispatch.context import Context
from fleet.dispatch.dispatcher import DispatcherSettings
from fleet.dispatch.draining import drain_member
from fleet.dispatch.handback import give_back
from fleet.dispatch.process import run_dispatcher, run_syncer, run_worker
from fleet.dispatch.syncer import EXCLUDE_DOWN_SECONDS, SyncerSettings

__all__ = [
    "EXCLUDE_DOWN_SECONDS",
    "Context",
    "DispatcherSettings",
    "SyncerSettings",
    "drain_member",
    "give_back",
    "references",
    "run_dispatcher",
    "run_syncer",
    "run_worker",
]
