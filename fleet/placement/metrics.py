"""Prometheus metrics of gang placement: decisions, their cost, and each member's capacity."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

__all__ = [
    "CAPACITY_EVENTS",
    "DECISIONS",
    "DECISION_SECONDS",
    "FREE_NPUS",
    "NODE_CLASSES",
    "RESERVE_CONFLICTS",
]

DECISIONS = Counter(
    "fleet_placement_decisions_total",
    "Fit-and-choose decisions by outcome (placed, nofit).",
    ["outcome"],
)
DECISION_SECONDS = Histogram(
    "fleet_placement_decision_seconds",
    "Time of one fit-and-choose decision over every member, reservation included.",
    buckets=(0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1),
)
RESERVE_CONFLICTS = Counter(
    "fleet_placement_reserve_conflicts_total",
    "Holds refused because another decision took the capacity first (the decision is retried).",
    ["member"],
)
NODE_CLASSES = Gauge(
    "fleet_placement_node_classes",
    "Classes of interchangeable usable nodes in a member (what one fit costs).",
    ["member"],
)
FREE_NPUS = Gauge(
    "fleet_placement_free_npus",
    "Free NPUs summed over a member's usable nodes, after in-flight holds.",
    ["member"],
)
CAPACITY_EVENTS = Counter(
    "fleet_placement_capacity_events_total",
    "Node and pod watch events applied to the capacity summaries.",
    ["member", "resource", "type"],
)
