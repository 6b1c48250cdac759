"""Prometheus metrics of member access, labelled by member so one sick cluster stands out."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

__all__ = [
    "REQUESTS",
    "REQUEST_ERRORS",
    "REQUEST_RETRIES",
    "REQUEST_SECONDS",
    "WATCH_EVENTS",
    "WATCH_RELISTS",
    "WATCH_RESTARTS",
]

REQUEST_SECONDS = Histogram(
    "fleet_member_request_seconds",
    "Latency of one HTTP attempt against a member API server.",
    ["member", "operation"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
REQUESTS = Counter(
    "fleet_member_requests_total",
    "Member calls by outcome (ok, or the error class that ended them).",
    ["member", "operation", "outcome"],
)
REQUEST_ERRORS = Counter(
    "fleet_member_request_errors_total",
    "Failed attempts against a member, by HTTP code or 'network'.",
    ["member", "operation", "code"],
)
REQUEST_RETRIES = Counter(
    "fleet_member_request_retries_total",
    "Attempts repeated after a transient failure.",
    ["member", "operation"],
)
WATCH_RESTARTS = Counter(
    "fleet_member_watch_restarts_total",
    "Watch streams reopened, by why the previous one ended.",
    ["member", "resource", "cause"],
)
WATCH_RELISTS = Counter(
    "fleet_member_watch_relists_total",
    "Full lists made by watchers (initial, after 410 Gone, after a failed callback).",
    ["member", "resource", "cause"],
)
WATCH_EVENTS = Counter(
    "fleet_member_watch_events_total",
    "Watch events received, by type.",
    ["member", "resource", "type"],
)
