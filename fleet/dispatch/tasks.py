"""The tasks RQ workers run: everything that touches member clusters.

The dispatcher and the syncers enqueue them by reference (so a rename fails at import, and the
import contracts see the links): making copies (:mod:`fleet.dispatch.propagation`, in each
member's lane, :mod:`fleet.dispatch.lanes`), deleting them (:mod:`fleet.dispatch.purging`), and
keeping the objects that travel with a job up to date in its member
(:mod:`fleet.dispatch.companions`). Each task re-reads the fleet object and acts only if its
attempt is still the current one, so a task that runs late, twice, or after a dispatcher
takeover changes nothing it should not.
"""

from __future__ import annotations

from fleet.dispatch import companions
from fleet.dispatch.context import current
from fleet.dispatch.lanes import CLAIM_SECONDS, CREATE_CONCURRENCY, LANE_WAIT, Claim
from fleet.dispatch.propagation import (
    DEFER_SECONDS,
    EXCLUDE_DEGRADED_SECONDS,
    EXCLUDE_REFUSED_SECONDS,
    EXCLUDE_UNAVAILABLE_SECONDS,
    Propagation,
    propagate,
    propagate_batch,
)
from fleet.dispatch.purging import EVICT_WAIT_SECONDS, delete_copy, evict, purge

__all__ = [
    "CLAIM_SECONDS",
    "CREATE_CONCURRENCY",
    "DEFER_SECONDS",
    "EVICT_WAIT_SECONDS",
    "EXCLUDE_DEGRADED_SECONDS",
    "EXCLUDE_REFUSED_SECONDS",
    "EXCLUDE_UNAVAILABLE_SECONDS",
    "LANE_WAIT",
    "Claim",
    "Propagation",
    "delete_copy",
    "evict",
    "propagate",
    "propagate_batch",
    "purge",
    "resync_companions",
    "sync_companion",
]


def sync_companion(kind: str, namespace: str, name: str) -> list[str]:
    """A ConfigMap, Secret or Service changed at the fleet (the syncer follows them): update
    the members where jobs that reference it run (:func:`fleet.dispatch.companions.sync_companion`).
    Raises ``MemberUnavailable`` (RQ retries) while such a member cannot be reached."""
    return companions.sync_companion(current(), kind, namespace, name)


def resync_companions() -> list[str]:
    """Bring every running job's companions up to date in its member (the syncer sends this
    when it starts following their changes: :func:`fleet.dispatch.companions.resync`)."""
    return companions.resync(current())
