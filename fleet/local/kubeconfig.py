"""The kubeconfig ``fleet up`` writes: the fleet endpoint, and every member copied from the simulator.

Contexts: ``fleet`` (current; the fleet API's URL and its admin token, namespace ``default``) and
one per member, copied whole from the simulator's kubeconfig, cluster ``extensions`` included:
that extension is how ``fleet sim fault --kubeconfig fleet.kubeconfig member-2 down`` finds the
simulator's control endpoint.

The ``fleet`` cluster carries an extension of its own (:data:`UP_EXTENSION`: the state
directory and the pid of ``fleet up``) so that a later run can tell a file it wrote (replaced
freely) from someone else's kubeconfig at the same path (never overwritten).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from fleet.members.config import FLEET_CONTEXT

__all__ = ["UP_EXTENSION", "KubeconfigInTheWay", "fleet_kubeconfig", "remove_stale", "written_by_up"]

#: The ``fleet`` cluster's extension naming the ``fleet up`` that wrote the file.
UP_EXTENSION: Final = "up.fleet.io/local"
_ADMIN: Final = "fleet-admin"


class KubeconfigInTheWay(RuntimeError):
    """The kubeconfig path holds a file ``fleet up`` did not write."""


def fleet_kubeconfig(
    api_url: str, token: str, members: Mapping[str, Any], *, state_dir: Path
) -> dict[str, Any]:
    """The merged kubeconfig: ``fleet`` first and current, then the members of ``members``."""
    fleet_cluster = {
        "name": FLEET_CONTEXT,
        "cluster": {
            "server": api_url,
            "extensions": [
                {
                    "name": UP_EXTENSION,
                    "extension": {"stateDir": str(state_dir.resolve()), "pid": os.getpid()},
                }
            ],
        },
    }
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "current-context": FLEET_CONTEXT,
        "clusters": [fleet_cluster, *(members.get("clusters") or [])],
        "users": [{"name": _ADMIN, "user": {"token": token}}, *(members.get("users") or [])],
        "contexts": [
            {
                "name": FLEET_CONTEXT,
                "context": {"cluster": FLEET_CONTEXT, "user": _ADMIN, "namespace": "default"},
            },
            *(members.get("contexts") or []),
        ],
    }


def written_by_up(path: Path) -> bool:
    """Whether the kubeconfig at ``path`` is one ``fleet up`` wrote."""
    try:
        config = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return False
    if not isinstance(config, dict):
        return False
    for cluster in config.get("clusters") or []:
        if not isinstance(cluster, dict) or cluster.get("name") != FLEET_CONTEXT:
            continue
        for extension in (cluster.get("cluster") or {}).get("extensions") or []:
            if isinstance(extension, dict) and extension.get("name") == UP_EXTENSION:
                return True
    return False


def remove_stale(path: Path) -> None:
    """Remove an earlier run's kubeconfig, so that nobody mistakes it for this run's.

    Raises :class:`KubeconfigInTheWay` when ``path`` holds a file ``fleet up`` did not write.
    """
    if not path.exists():
        return
    if not written_by_up(path):
        raise KubeconfigInTheWay(
            f"{path} exists and was not written by fleet up; move it away or pass --kubeconfig OTHER_PATH"
        )
    path.unlink()
