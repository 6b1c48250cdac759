"""Kubeconfig files for member tests: one context per member, plus the ``fleet`` one."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml

#: The bearer token every test kubeconfig carries; it must never show up in a repr or a log.
TOKEN = "s3cr3t-member-token-do-not-log"


def write_kubeconfig(path: Path, servers: Mapping[str, str], *, token: str = TOKEN) -> Path:
    """Write a kubeconfig with a context per ``servers`` entry and a ``fleet`` context."""
    everything = {"fleet": "http://127.0.0.1:1", **servers}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "fleet",
        "clusters": [{"name": name, "cluster": {"server": url}} for name, url in everything.items()],
        "users": [{"name": f"{name}-admin", "user": {"token": token}} for name in everything],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": f"{name}-admin"}} for name in everything
        ],
    }
    path.write_text(yaml.safe_dump(config))
    return path
