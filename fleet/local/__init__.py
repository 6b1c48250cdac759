"""``fleet up``: the whole fleet on one machine, as the processes production runs.

Each part is a process of its own (``fleet sim``, ``fleet syncer``, ``fleet worker``, ``fleet
dispatcher``, ``fleet api``, each run as the ``fleet`` command), started by
:mod:`~fleet.local.up`, as the roles run in production: they share nothing but Redis and the
members' APIs, so a role that exits is restarted without losing anything, and what runs locally
is what runs in a cluster. :mod:`~fleet.local.children` says why each child gets its own process
group, a leash and a log file; :mod:`~fleet.local.readiness` when the fleet counts as up.

The face below is what the CLI uses; the modules are this package's own.
"""

from fleet.local.kubeconfig import KubeconfigInTheWay, local_fleet
from fleet.local.layout import Layout, StateDirBusy, running_redis_url
from fleet.local.resumed import Resumed, resumed_state
from fleet.local.up import LocalFleet, UpError, UpSettings

__all__ = [
    "KubeconfigInTheWay",
    "Layout",
    "LocalFleet",
    "Resumed",
    "StateDirBusy",
    "UpError",
    "UpSettings",
    "local_fleet",
    "resumed_state",
    "running_redis_url",
]
