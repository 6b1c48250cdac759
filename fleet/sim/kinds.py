"""The job kinds a simulated member serves: every kind Fleet propagates, as its CRD describes it
(the workload adapters own those descriptions; only the names, columns and shape are shared, never
Fleet's placement rules)."""

from __future__ import annotations

from typing import Final

from fleet.apiserver.resources import ResourceType
from fleet.workloads import KINDS

__all__ = ["SERVED"]

#: The job kinds' resources, served by every simulated member.
SERVED: Final[tuple[ResourceType, ...]] = tuple(adapter.resource for adapter in KINDS)
