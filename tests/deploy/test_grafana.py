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
from fleet.endpoint.metrics import QuotaCollector
from queues import Ledger, load

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "base" / "grafana" / "fleet-dashboard.json"
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
        "fleet_preemptions",
        "fleet_quota_refusals",
    } <= used


def test_what_users_are_told_about_waiting_is_on_the_dashboard() -> None:
    """Issue 16: preemptions by reason, refusals by kind, time to admission per queue (the leaf)
    and priority, at p50 and p95."""
    exprs = [expr for _, expr in queries()]
    assert any("fleet_preemptions_total" in e and "by (reason)" in e for e in exprs)
    assert any("fleet_quota_refusals_total" in e and "by (kind)" in e for e in exprs)
    for quantile in ("0.5", "0.95"):
        assert any(
            e.startswith(f"histogram_quantile({quantile}, ")
            and "fleet_admission_wait_seconds_bucket" in e
            and "by (queue, le)" in e
            for e in exprs
        ), quantile
    assert any(
        "fleet_admission_wait_seconds_bucket" in e and "by (queue, priority_class, le)" in e for e in exprs
    )
    exported = exported_labels()
    assert exported["fleet_preemptions"] >= {"reason"}
    assert exported["fleet_quota_refusals"] >= {"kind"}
    assert exported["fleet_admission_wait_seconds"] >= {"queue", "priority_class"}


def test_panels_do_not_overlap_and_ids_are_unique() -> None:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells = [
        (x, y)
        for p in panels
        for x in range(p["gridPos"]["x"], p["gridPos"]["x"] + p["gridPos"]["w"])
        for y in range(p["gridPos"]["y"], p["gridPos"]["y"] + p["gridPos"]["h"])
    ]
    assert len(cells) == len(set(cells))


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
