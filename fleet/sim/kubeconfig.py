"""The kubeconfig a simulator writes (one context per member) and how ``fleet sim fault`` reads it back.

Each cluster entry carries the simulator's control endpoint in a named cluster ``extensions``
entry, a kubeconfig field that kubectl and the ``kubernetes`` client keep and ignore, so the
file alone is enough to find the simulator again.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from fleet.members.clients import MEMBER_EXTENSION

__all__ = ["CONTROL_EXTENSION", "KubeconfigError", "build_kubeconfig", "control_endpoint", "write_atomically"]

#: The name of the cluster extension that holds ``{"control": URL, "member": NAME}``.
CONTROL_EXTENSION: Final = "sim.fleet.io/control"
_USER_TOKEN: Final = "fleet-sim"  # the simulator does not authenticate; kubectl wants a user entry


class KubeconfigError(ValueError):
    """A kubeconfig without what ``fleet sim fault`` needs; the message names the member or field."""


def build_kubeconfig(
    servers: Mapping[str, str], control_url: str, *, labels: Mapping[str, Mapping[str, str]] | None = None
) -> dict[str, Any]:
    """A kubeconfig with a cluster, user and context named after each member (first one current);
    a member with ``labels`` has them in its context's :data:`~fleet.members.MEMBER_EXTENSION`."""

    def context(member: str) -> dict[str, Any]:
        body: dict[str, Any] = {"cluster": member, "user": f"{member}-admin"}
        own = dict((labels or {}).get(member) or {})
        if own:
            body["extensions"] = [{"name": MEMBER_EXTENSION, "extension": {"labels": own}}]
        return {"name": member, "context": body}

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "current-context": next(iter(servers), ""),
        "clusters": [
            {
                "name": member,
                "cluster": {
                    "server": url,
                    "extensions": [
                        {"name": CONTROL_EXTENSION, "extension": {"control": control_url, "member": member}}
                    ],
                },
            }
            for member, url in servers.items()
        ],
        "users": [{"name": f"{member}-admin", "user": {"token": _USER_TOKEN}} for member in servers],
        "contexts": [context(member) for member in servers],
    }


def write_atomically(path: Path, config: Mapping[str, Any]) -> None:
    """Write the file whole or not at all (a temp file in the same directory, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            yaml.safe_dump(dict(config), handle, sort_keys=False)
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def control_endpoint(path: Path, member: str) -> str:
    """The control URL recorded for ``member``'s context in the kubeconfig at ``path``."""
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise KubeconfigError(f"{path}: cannot read the kubeconfig: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"{path}: not valid YAML: {exc}") from None
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or []}
    if member not in contexts:
        known = ", ".join(sorted(str(name) for name in contexts)) or "none"
        raise KubeconfigError(f"{path}: no context named {member!r} (contexts: {known})")
    cluster_name = contexts[member].get("cluster")
    for cluster in config.get("clusters") or []:
        if cluster.get("name") != cluster_name:
            continue
        for extension in (cluster.get("cluster") or {}).get("extensions") or []:
            if extension.get("name") == CONTROL_EXTENSION:
                url = (extension.get("extension") or {}).get("control")
                if url:
                    return str(url)
        break
    raise KubeconfigError(
        f"{path}: cluster {cluster_name!r} of context {member!r} has no {CONTROL_EXTENSION} extension "
        "(is it a kubeconfig written by fleet sim?)"
    )
