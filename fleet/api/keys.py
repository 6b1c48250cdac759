"""Redis key names of the fleet endpoint itself (its objects live under :mod:`fleet.state.keys`).

They carry the quota ledger's hash tag like every fleet key, so that they share its Redis Cluster
slot.

``api:tree-lock``
    String (a lock with a TTL): held by the replica applying an ElasticQuotaTree, so that two
    replicas cannot interleave their ledger apply and their object write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from queues import DEFAULT_KEYS

__all__ = ["DEFAULT_API_KEYS", "ApiKeys"]


@dataclass(frozen=True)
class ApiKeys:
    prefix: str = DEFAULT_KEYS.prefix
    tag: str = DEFAULT_KEYS.tag

    @property
    def base(self) -> str:
        return f"{self.prefix}:{{{self.tag}}}:api:"

    @property
    def tree_lock(self) -> str:
        """Lock: one ElasticQuotaTree change at a time across the API replicas."""
        return self.base + "tree-lock"


DEFAULT_API_KEYS: Final = ApiKeys()
