"""What every concern of the syncer shares: its settings, its one lock, the members' health.

The composer (:class:`fleet.dispatch.syncer.Syncer`) makes one :class:`Shared` and hands it to
each concern. One lock guards every table of every concern (and the health here): the watch
threads, the probe threads, the tick and the deletion follower each touch several of them in one
critical section (a copy that vanished is forgotten by every concern at once), so they share it
rather than each taking its own. No member call and no Redis call is ever made with it held.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fleet.dispatch.context import Context, policy_for
from fleet.dispatch.ownership import Shards
from fleet.members import Watcher
from fleet.policy import ApplicationFailover, PropagationPolicy
from fleet.state import MemberHealth

__all__ = ["Shared", "SyncerSettings", "log"]

#: Every concern logs as the syncer: one logger for the role, as operators filter it.
log = logging.getLogger("fleet.dispatch.syncer")


@dataclass(frozen=True)
class SyncerSettings:
    probe_interval: float = 1.0
    failure_threshold: int = 3
    success_threshold: int = 1
    #: How often the time-based rules (tolerations, grace periods) are checked.
    tick: float = 0.5
    #: A purge sent for a copy that is still there after this long is sent again.
    purge_again_after: float = 30.0
    #: How often every fleet job is read again (a safety net under the change stream).
    resync_every: float = 60.0
    #: While the fleet's jobs change, the deletion follower reads their change stream at most
    #: this often: one wake-up for the changes of many jobs rather than one per change (it
    #: reads them all to find the few deletions), for at most this much delay on a deletion.
    deletions_every: float = 0.25
    policy_refresh: float = 2.0
    #: A deleted job's copy not yet confirmed gone: the delete is sent again after this long,
    #: doubling up to ``delete_retry_max`` (and at once when the copy is seen again).
    delete_retry_initial: float = 1.0
    delete_retry_max: float = 30.0
    #: How often the pods waiting in a member are read (one list), while copies of kinds whose
    #: operator never says on the job that its gang waits (Kubeflow's: ``reads_pods``) wait to
    #: run there; from the member's probe thread, only while the member is Ready.
    pod_check_every: float = 2.0
    #: How often each owned member's copies are listed and checked against the record of the
    #: copies Fleet expects there (:mod:`fleet.dispatch.sync.audit`), besides after every list
    #: its watches make. Kept well below the failover toleration (30 s by default): a job stays
    #: Running for a copy that is gone at most about this long plus ``copy_grace``. Each audit
    #: lists every copy the member holds: at 10 s the contention benchmark's syncer spent 35%
    #: more CPU (15 s over 10,000 jobs) and the simulated members 60% more; 20 s halves that and
    #: stays within the default toleration (20 + 5 < 30).
    audit_every: float = 20.0
    #: A copy made this long before a list began and absent from it is lost; one made later
    #: may simply not be in it yet.
    copy_grace: float = 5.0
    #: How long a version of a copy that says only that it is starting (no state yet, or
    #: Created) waits for a later one before it is mirrored (:mod:`fleet.dispatch.sync.holds`;
    #: Kubernetes' Job controller batches a Job's pod events for its ``syncJobBatchPeriod``, 1 s):
    #: a copy that runs within it costs its job one write, not two. 0: each is mirrored at once.
    starting_batch: float = 1.0


@dataclass
class Shared:
    """The state the concerns read besides their own tables; made and owned by the composer."""

    ctx: Context
    settings: SyncerSettings
    #: With shards, the syncer acts on the members it owns (:mod:`fleet.dispatch.ownership`);
    #: without, on every member.
    shards: Shards | None = None
    #: Guards every concern's tables and :attr:`health` and :attr:`probed`.
    lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    #: Member -> its health record, as last written (or read back when first needed). Written
    #: by the probes (:mod:`fleet.dispatch.sync.probes`) only.
    health: dict[str, MemberHealth] = field(default_factory=dict, init=False)
    #: Members this syncer has probed itself: a record read back fails a member over only
    #: once a probe here confirmed it (it may have come back while no syncer looked).
    probed: set[str] = field(default_factory=set, init=False)
    #: Member -> its watchers, one per job kind: the members this syncer watches (the composer
    #: adds and removes them; the probes look again at what they know).
    watchers: dict[str, list[Watcher]] = field(default_factory=dict, init=False, repr=False)
    #: The policies as last read, and when (monotonic): read again after ``policy_refresh``.
    _policies: tuple[float, list[PropagationPolicy]] = field(
        default_factory=lambda: (0.0, []), init=False, repr=False
    )

    def mine(self, member: str) -> bool:
        """Whether this syncer may decide for ``member`` now (its lease held and fresh)."""
        return self.shards is None or self.shards.owns(member)

    def watching(self, member: str) -> bool:
        """Whether events of ``member`` are still this syncer's to apply: until it lets the member
        go (a write from a lease about to lapse is a compare-and-set its successor repeats)."""
        return self.shards is None or member in self.watchers

    def not_ready(self, member: str) -> bool:
        """Whether ``member``'s health record says NotReady. Called with the lock held."""
        health = self.health.get(member)
        return health is not None and health.ready is False

    def policy_list(self) -> list[PropagationPolicy]:
        at, policies = self._policies
        if time.monotonic() - at > self.settings.policy_refresh:
            policies = self.ctx.policies()
            self._policies = (time.monotonic(), policies)
        return policies

    def failover_policy(self, obj: Mapping[str, Any]) -> ApplicationFailover:
        return policy_for(obj, self.policy_list()).spec.failover.application
