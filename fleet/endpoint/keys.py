"""Redis key names of the fleet endpoint itself (its objects live under :mod:`fleet.state.keys`).

They carry the quota ledger's hash tag like every fleet key, so that they share its Redis Cluster
slot.

``api:tree-lock``
    String (a lock with a TTL): held by the replica applying an ElasticQuotaTree, so that two
    replicas cannot interleave their ledger apply and their object write.

``api:durability-marker``
    String: written by a submission just before it waits for ``WAIT``/``WAITAOF``
    (:mod:`fleet.jobs.durability`), so the wait covers every write of the submission.

``api:console-session:<sha256 of the session id>``
    String with a TTL: the bearer token of one console session
    (:mod:`fleet.endpoint.console.access`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final

from queues import KeyParts, KeySpace, key, key_function

__all__ = ["DEFAULT_API_KEYS", "ApiKeys"]


@dataclass(frozen=True)
class ApiKeys(KeySpace):
    """Key names of the fleet endpoint's own records."""

    SECTION: ClassVar[str] = "api:"

    @key()
    def tree_lock(self) -> str:
        """Lock: one ElasticQuotaTree change at a time across the API replicas."""
        return "tree-lock"

    @key()
    def durability_marker(self) -> str:
        """String: the write a durable submission waits on (:mod:`fleet.jobs.durability`)."""
        return "durability-marker"

    @key_function()
    def console_session(self, digest: str) -> KeyParts:
        """String (TTL): the token of the console session whose id hashes to ``digest``."""
        return "console-session:", digest


DEFAULT_API_KEYS: Final = ApiKeys()
