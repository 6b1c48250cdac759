"""The kubeconfig ``fleet up`` writes: the fleet endpoint, and every member copied from the simulator.

Contexts: ``fleet`` (current; the fleet API's URL and its admin token, namespace ``default``),
``team-a`` (the same endpoint as a tenant: a token of the group ``namespace:default``, the
namespace the sample ElasticQuotaTree binds, so a user's view can be tried; :data:`TENANT`) and
one per member, copied whole from the simulator's kubeconfig, cluster ``extensions`` included:
that extension is how ``fleet sim fault member-2 down`` (``./fleet.kubeconfig`` by default) finds the
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

from fleet.members import FLEET_CONTEXT

__all__ = [
    "TENANT",
    "TENANT_NAMESPACE",
    "UP_EXTENSION",
    "KubeconfigInTheWay",
    "fleet_kubeconfig",
    "local_fleet",
    "remove_own",
    "remove_stale",
    "written_by_up",
]

#: The ``fleet`` cluster's extension naming the ``fleet up`` that wrote the file.
UP_EXTENSION: Final = "up.fleet.io/local"
_ADMIN: Final = "fleet-admin"
#: The tenant context and user ``fleet up`` writes, and the one namespace its token may use.
TENANT: Final = "team-a"
TENANT_NAMESPACE: Final = "default"


class KubeconfigInTheWay(RuntimeError):
    """The kubeconfig path holds a file ``fleet up`` did not write."""


def fleet_kubeconfig(
    api_url: str,
    token: str,
    members: Mapping[str, Any],
    *,
    state_dir: Path,
    ca_data: str | None = None,
    tenant_token: str | None = None,
) -> dict[str, Any]:
    """The merged kubeconfig: ``fleet`` first and current, ``team-a`` with ``tenant_token``
    (when given), then the members of ``members``.

    ``ca_data`` (base64 PEM) is the CA the fleet endpoint's HTTPS certificate is signed by.
    """
    trust = {"certificate-authority-data": ca_data} if ca_data else {}
    fleet_cluster = {
        "name": FLEET_CONTEXT,
        "cluster": {
            "server": api_url,
            **trust,
            "extensions": [
                {
                    "name": UP_EXTENSION,
                    "extension": {"stateDir": str(state_dir.resolve()), "pid": os.getpid()},
                }
            ],
        },
    }
    users = [{"name": _ADMIN, "user": {"token": token}}]
    contexts = [
        {"name": FLEET_CONTEXT, "context": {"cluster": FLEET_CONTEXT, "user": _ADMIN, "namespace": "default"}}
    ]
    if tenant_token is not None:
        users.append({"name": TENANT, "user": {"token": tenant_token}})
        contexts.append(
            {
                "name": TENANT,
                "context": {"cluster": FLEET_CONTEXT, "user": TENANT, "namespace": TENANT_NAMESPACE},
            }
        )
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "current-context": FLEET_CONTEXT,
        "clusters": [fleet_cluster, *(members.get("clusters") or [])],
        "users": [*users, *(members.get("users") or [])],
        "contexts": [*contexts, *(members.get("contexts") or [])],
    }


def _up_extension(path: Path) -> dict[str, Any] | None:
    """The :data:`UP_EXTENSION` of the ``fleet`` cluster in ``path``, or None."""
    try:
        config = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return None
    if not isinstance(config, dict):
        return None
    for cluster in config.get("clusters") or []:
        if not isinstance(cluster, dict) or cluster.get("name") != FLEET_CONTEXT:
            continue
        for extension in (cluster.get("cluster") or {}).get("extensions") or []:
            if isinstance(extension, dict) and extension.get("name") == UP_EXTENSION:
                value = extension.get("extension")
                return value if isinstance(value, dict) else {}
    return None


def local_fleet(path: Path, context: str | None = None) -> Path | None:
    """The state directory of the ``fleet up`` whose endpoint ``context`` of the kubeconfig at
    ``path`` (its current context by default) names, or None when it names another cluster.

    Any context on the fleet's cluster counts (``fleet``, the tenant's ``team-a``): the admin
    commands that change the members ask this to act on the local fleet's members file, since a
    local fleet has no cluster holding the members' Secret."""
    try:
        config = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return None
    if not isinstance(config, dict):
        return None
    name = context or config.get("current-context")
    entry = next(
        (c for c in config.get("contexts") or [] if isinstance(c, dict) and c.get("name") == name), None
    )
    cluster_name = ((entry or {}).get("context") or {}).get("cluster")
    for cluster in config.get("clusters") or []:
        if not isinstance(cluster, dict) or cluster.get("name") != cluster_name:
            continue
        for extension in (cluster.get("cluster") or {}).get("extensions") or []:
            if isinstance(extension, dict) and extension.get("name") == UP_EXTENSION:
                state_dir = (extension.get("extension") or {}).get("stateDir")
                return Path(state_dir) if state_dir else None
    return None


def written_by_up(path: Path) -> bool:
    """Whether the kubeconfig at ``path`` is one ``fleet up`` wrote."""
    return _up_extension(path) is not None


def remove_own(path: Path) -> None:
    """Remove the kubeconfig this process wrote, and only that one.

    A later ``fleet up`` may have replaced it with its own (same path, another state directory);
    removing that would leave the running fleet without its kubeconfig.
    """
    extension = _up_extension(path)
    if extension is not None and extension.get("pid") == os.getpid():
        path.unlink(missing_ok=True)


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
