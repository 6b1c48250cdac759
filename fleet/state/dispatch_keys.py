"""Redis key names of the dispatch roles, and the RQ queue names.

They share the quota ledger's hash tag, so that the fenced writes of the dispatcher (ledger, fleet
objects, in-flight set) all live in one Redis Cluster slot with the lease they check. The queue
names carry the deployment's prefix (:meth:`queues.KeySpace.rq_queue`): ``fleet-propagate`` by
default, so two deployments in one Redis never take each other's tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final

from queues import KeySpace, key

__all__ = ["DEFAULT_DISPATCH_KEYS", "EVICT_QUEUE", "PROPAGATE_QUEUE", "PURGE_QUEUE", "DispatchKeys"]

#: The RQ queue the dispatcher enqueues propagations on (its role in :meth:`DispatchKeys.queue`).
PROPAGATE_QUEUE: Final = "propagate"
#: The RQ queue of preemptions' evictions, taken first: a preemptor waits on them, holding the
#: quota its victims will free, and each one is short (it never waits on a member for long).
EVICT_QUEUE: Final = "evict"
#: The RQ queue of purges (the syncer's). Workers take propagations first: a purge retrying
#: against a member that is slow or just back must never hold up placing jobs elsewhere.
PURGE_QUEUE: Final = "purge"


@dataclass(frozen=True)
class DispatchKeys(KeySpace):
    """Key names of the dispatch roles' records, and their RQ queues' names."""

    SECTION: ClassVar[str] = "dispatch:"

    def queue(self, role: str) -> str:
        """The RQ queue of ``role`` (:data:`PROPAGATE_QUEUE`, :data:`EVICT_QUEUE`, :data:`PURGE_QUEUE`)."""
        return self.rq_queue(role)

    @key()
    def lease(self) -> str:
        """String: the dispatcher leader's fencing token (TTL = lease time)."""
        return "lease"

    @key()
    def inflight(self) -> str:
        """Sorted set: ``job key|uid|attempt`` -> deadline (epoch s) for its member copy to exist."""
        return "inflight"

    @key()
    def copies(self) -> str:
        """Sorted set, all at score 0: ``member|job key|uid|attempt`` of every member copy that
        may exist, from the moment its attempt is sent until the copy is known gone
        (:mod:`fleet.state.copies`): what the syncer checks each member's copies against."""
        return "copies"

    @key()
    def left(self) -> str:
        """Set: ``member|uid|attempt`` of the member copies that deleted jobs left in place
        (purgeMode Never): never purged as orphans; an entry goes when its copy does."""
        return "left"

    @key()
    def held(self) -> str:
        """Set: ``member|job key|uid|attempt`` of the member copies whose jobs were held (paused,
        suspended) while placed there, for the syncer to purge at once
        (:func:`fleet.jobs.pause.held_entry`): a running copy may not change again to be seen
        stale. An entry goes when its purge is sent."""
        return "held"

    @key()
    def health(self) -> str:
        """Hash: member -> JSON of its health as the syncer last probed it."""
        return "health"

    @key()
    def taints(self) -> str:
        """Hash: member -> JSON list of its taints (``[{key, effect}]``, as Karmada's Cluster
        ``spec.taints``): ``fleet member cordon`` and ``drain`` set them
        (:mod:`fleet.state.member_taints`)."""
        return "taints"

    @key()
    def capacity(self) -> str:
        """Hash: member -> JSON of its capacity view as the dispatcher's feed last saw it
        (:mod:`fleet.dispatch.capacity_publisher`)."""
        return "capacity"

    @key()
    def capacity_nodes(self) -> str:
        """Hash: member -> JSON of its capacity node by node, as the dispatcher's feed last saw
        it (:mod:`fleet.placement.snapshot`): what the API explains jobs with."""
        return "capacity-nodes"

    @key()
    def syncers(self) -> str:
        """Sorted set: live syncer id -> when its heartbeat expires (ms, Redis' clock);
        :mod:`fleet.dispatch.ownership`."""
        return "syncers"

    @key()
    def owners(self) -> str:
        """Hash: member -> ``syncer id|lease expiry ms`` of the syncer that owns it now."""
        return "owners"

    @key()
    def degraded(self) -> str:
        """Hash: member -> JSON of its degraded mark (calls timing out), :mod:`fleet.dispatch.degraded`."""
        return "degraded"


DEFAULT_DISPATCH_KEYS: Final = DispatchKeys()
