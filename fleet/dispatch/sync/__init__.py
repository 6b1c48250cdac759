"""The syncer's concerns, one module each, composed by :class:`fleet.dispatch.syncer.Syncer`.

Each concern is a class that holds its own tables (under the one lock of :class:`Shared`) and
is handed, by the composer, the concerns it calls; the composer's docstring says which runs on
which thread, what they share and why, and the order of a round.
"""

from fleet.dispatch.sync.audit import CopyAudit
from fleet.dispatch.sync.companion_changes import follow_companions
from fleet.dispatch.sync.copies import MemberCopy, Seen
from fleet.dispatch.sync.failover import EXCLUDE_DOWN_SECONDS, Failover
from fleet.dispatch.sync.finalizers import Finalizers
from fleet.dispatch.sync.gangs import GangWaits
from fleet.dispatch.sync.mirror import StatusMirror
from fleet.dispatch.sync.observer import CopyObserver
from fleet.dispatch.sync.probes import Probes
from fleet.dispatch.sync.shared import Shared, SyncerSettings
from fleet.dispatch.sync.stale import StaleCopies

__all__ = [
    "EXCLUDE_DOWN_SECONDS",
    "CopyAudit",
    "CopyObserver",
    "Failover",
    "Finalizers",
    "GangWaits",
    "MemberCopy",
    "Probes",
    "Seen",
    "Shared",
    "StaleCopies",
    "StatusMirror",
    "SyncerSettings",
    "follow_companions",
]
