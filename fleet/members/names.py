"""Names member access shares with the CLI, in a module that imports nothing (the CLI reads them
without importing member access, so that it starts fast)."""

from __future__ import annotations

from typing import Final

__all__ = ["FLEET_CONTEXT"]

#: The kubeconfig context of the fleet endpoint; every other context is a member.
FLEET_CONTEXT: Final = "fleet"
