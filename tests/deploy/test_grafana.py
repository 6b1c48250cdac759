"""The Grafana dashboard in ``deploy/`` queries only what Fleet's processes really export.

A dashboard that names a metric or a label nobody exports shows "No data" exactly when an operator
needs it; this test ties every query to the metric families the dispatcher, syncer, workers,
member access layer, placement and the API's quota collector define.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import fakeredis
from prometheus_client import REGISTRY

import fleet.dispatch.dispatcher
import fleet.dispatch.syncer
import fleet.members.metrics
import fleet.placement.metrics  # noqa: F401  (registers its metrics)
from fleet.api.metrics import QuotaCollector
from queues import Ledger, load

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "fleet-dashboard.json"
TREE = ROOT / "config" / "samples" / "elasticquotatree.yaml"
_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created")


def exported_labels() -> dict[str, set[str]]:
    """Metric family name (without suffixes) -> its label names, for every Fleet metric."""
    families: dict[str, set[str]] = {}
    for name, collector in REGISTRY._names_to_collectors.items():
        if name.startswith("fleet_"):
            labels = set(getattr(collector, "_labelnames", ()))
            families.setdefault(_family(name), set()).update(labels | {"le"})
    ledger = Ledger(fakeredis.FakeRedis(server=fakeredis.FakeServer()))
    ledger.apply(load(TREE.read_text())[0])
    for metric in QuotaCollector(ledger).collect():
        labels = families.setdefault(metric.name, set())
        for sample in metric.samples:
            labels.update(sample.labels)
    return families


def _family(name: str) -> str:
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [(panel["title"], t["expr"]) for panel in dashboard["panels"] for t in panel["targets"]]


def test_the_dashboard_covers_what_operators_watch() -> None:
    used = {_family(m) for _, expr in queries() for m in re.findall(r"\bfleet_[a-z_]+", expr)}
    assert {
        "fleet_queue_pending_jobs",
        "fleet_admission_wait_seconds",
        "fleet_dispatch_decisions",
        "fleet_jobs_finished",
        "fleet_failovers",
        "fleet_quota_used",
        "fleet_quota_min",
        "fleet_quota_max",
        "fleet_member_ready",
        "fleet_placement_free_npus",
        "fleet_sync_seconds",
        "fleet_dispatch_round_seconds",
    } <= used


def test_every_query_names_exported_metrics_and_labels() -> None:
    exported = exported_labels()
    for title, expr in queries():
        for metric in re.findall(r"\bfleet_[a-z_]+", expr):
            family = _family(metric)
            assert family in exported, f"{title}: {metric} is not exported by Fleet"
        for group in re.findall(r"by \(([^)]*)\)", expr):
            labels = {label.strip() for label in group.split(",")}
            owners = [exported[_family(m)] for m in re.findall(r"\bfleet_[a-z_]+", expr)]
            assert any(labels <= owned for owned in owners), f"{title}: no metric has labels {labels}"
        for matcher in re.findall(r"\{([^}]*)\}", expr):
            for label in re.findall(r"(\w+)\s*=", matcher):
                assert any(label in exported[_family(m)] for m in re.findall(r"\bfleet_[a-z_]+", expr)), (
                    f"{title}: no metric has label {label}"
                )
