"""A member's capacity record in Redis: the one reader of what the dispatcher's capacity feed writes.

The dispatcher (:class:`fleet.dispatch.capacity_publisher.CapacityPublisher`) writes each member's capacity
view to the capacity hash (:attr:`fleet.state.dispatch_keys.DispatchKeys.capacity`, member ->
JSON); the MemberCluster kind reads it. Readers go through :func:`parse_capacity`; nobody else
spells the record. Beside it, the same feed writes the member's nodes one by one
(:attr:`~fleet.state.dispatch_keys.DispatchKeys.capacity_nodes`, :mod:`fleet.placement.snapshot`
spells that record), which the API explains jobs with: :func:`parse_capacity_nodes` reads it.
"""

from __future__ import annotations

import json
from typing import Any, Final

__all__ = ["OBSERVED", "parse_capacity", "parse_capacity_nodes"]

#: The record's field holding when the feed's view was taken (epoch seconds).
OBSERVED: Final = "observed"


def parse_capacity(raw: bytes | str | None) -> dict[str, Any] | None:
    """A record as the hash holds it; ``None`` when absent or unreadable."""
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("accelerators"), list):
        return None
    return data


def parse_capacity_nodes(raw: bytes | str | None) -> dict[str, Any] | None:
    """A node-by-node record as the hash holds it (:mod:`fleet.placement.snapshot` reads its
    fields); ``None`` when absent or unreadable."""
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        return None
    return data
