"""A job's history as users read it: its Events (``kubectl describe``), not its conditions, which
hold only the current state of each type (fleet/jobs/conditions.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet.state import Objects
from fleet.state.events import events_for

__all__ = ["event_reasons", "events_with", "happened"]


def event_reasons(objects: Objects, obj: Mapping[str, Any]) -> list[str]:
    """The reasons of the job's Events, oldest first (an aggregated Event once)."""
    return [str(e["reason"]) for e in events_for(objects, obj)]


def events_with(objects: Objects, obj: Mapping[str, Any], reason: str) -> list[dict[str, Any]]:
    """The job's Events of one reason, oldest first."""
    return [e for e in events_for(objects, obj) if e.get("reason") == reason]


def happened(objects: Objects, obj: Mapping[str, Any], reason: str) -> bool:
    """Whether an Event of ``reason`` was recorded about the job."""
    return bool(events_with(objects, obj, reason))
