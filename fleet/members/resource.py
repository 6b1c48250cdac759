"""What Fleet lists and watches in a member: the kind (:class:`Resource`) and a list's result
(:class:`Listing`).

Apart from :mod:`~fleet.members.access` so that the watcher (:mod:`~fleet.members.watch`), which
:class:`~fleet.members.access.Member` starts, can name them without importing the member back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "CONFIGMAPS",
    "NAMESPACES",
    "NODES",
    "PODS",
    "SECRETS",
    "SERVICES",
    "JSONObject",
    "Listing",
    "Resource",
]

JSONObject = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    """A kind Fleet lists and watches in members; ``name`` is its plural (metrics, logs).

    A custom kind (a job kind: the workload adapters name theirs) also carries its API group,
    version and kind; the core kinds (nodes, pods) have an empty ``group``."""

    name: str
    namespaced: bool
    group: str = ""
    version: str = ""
    kind: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def custom(self) -> bool:
        return bool(self.group)


NODES = Resource("nodes", namespaced=False, version="v1", kind="Node")
PODS = Resource("pods", namespaced=True, version="v1", kind="Pod")
NAMESPACES = Resource("namespaces", namespaced=False, version="v1", kind="Namespace")
#: The objects a job references that Fleet makes beside its copy (``propagateDeps``).
CONFIGMAPS = Resource("configmaps", namespaced=True, version="v1", kind="ConfigMap")
SECRETS = Resource("secrets", namespaced=True, version="v1", kind="Secret")
SERVICES = Resource("services", namespaced=True, version="v1", kind="Service")


@dataclass(frozen=True)
class Listing:
    """The items of a (possibly paged) list and the resourceVersion to watch from."""

    items: list[JSONObject]
    resource_version: str
