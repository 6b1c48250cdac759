"""Prometheus metrics of the fleet endpoint beyond the serving core's request metrics.

Queue and quota gauges are computed on scrape by :class:`QuotaCollector` from the ledger's
per-node counters (two round trips whatever the number of jobs), so every API replica reports
the same truth and nothing has to keep gauges up to date:

``fleet_queue_pending_jobs{queue}``, ``fleet_queue_admitted_jobs{queue}``
    Jobs waiting in, and admitted under, each derived queue (a node's whole subtree).
``fleet_quota_used{node,resource}``, ``fleet_quota_min{...}``, ``fleet_quota_max{...}``
    Per tree node and resource, in canonical units (cpu in millicores, memory in bytes, NPUs and
    ``kube-queue/max-jobs`` as counts); an unlimited ``max`` is ``+Inf``.
``fleet_quota_tree_version``
    The version of the applied tree (0: none).
``fleet_quota_scrape_ok``
    1 when the ledger could be read for this scrape, 0 when Redis was away (the other families
    are then absent rather than stale).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator

import redis
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from queues import MAX_JOBS, Ledger, is_unlimited, queue_views

__all__ = ["QuotaCollector"]

log = logging.getLogger("fleet.endpoint.metrics")


def _families() -> dict[str, GaugeMetricFamily]:
    return {
        "pending": GaugeMetricFamily(
            "fleet_queue_pending_jobs", "Jobs pending in the queue's subtree.", labels=["queue"]
        ),
        "admitted": GaugeMetricFamily(
            "fleet_queue_admitted_jobs", "Admitted, unfinished jobs in the queue's subtree.", labels=["queue"]
        ),
        "used": GaugeMetricFamily(
            "fleet_quota_used",
            "What a quota node's admitted jobs use (canonical units: cpu millicores, memory bytes).",
            labels=["node", "resource"],
        ),
        "min": GaugeMetricFamily(
            "fleet_quota_min", "A quota node's guarantee (canonical units).", labels=["node", "resource"]
        ),
        "max": GaugeMetricFamily(
            "fleet_quota_max",
            "A quota node's ceiling (canonical units; +Inf when unlimited).",
            labels=["node", "resource"],
        ),
        "version": GaugeMetricFamily("fleet_quota_tree_version", "Version of the applied quota tree."),
    }


class QuotaCollector(Collector):
    """Queue and quota gauges read from ``ledger`` at each scrape."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def describe(self) -> Iterator[Metric]:
        yield from _families().values()
        yield GaugeMetricFamily("fleet_quota_scrape_ok", "Whether the ledger could be read.")

    def collect(self) -> Iterator[Metric]:
        ok = GaugeMetricFamily("fleet_quota_scrape_ok", "Whether the ledger could be read.")
        try:
            views = queue_views(self.ledger)
            version = self.ledger.version()
        except redis.RedisError as error:
            log.warning("event=metrics_scrape_failed error=%r", error)
            ok.add_metric([], 0)
            yield ok
            return
        families = _families()
        for view in views:
            node = view.path.rsplit("/", 1)[-1]
            families["pending"].add_metric([view.name], view.pending)
            families["admitted"].add_metric([view.name], view.admitted)
            for resource, amount in {**view.used, MAX_JOBS: view.admitted}.items():
                families["used"].add_metric([node, resource], amount)
            for resource, amount in view.min.items():
                families["min"].add_metric([node, resource], amount)
            for resource, amount in view.max.items():
                value = math.inf if is_unlimited(resource, amount) else amount
                families["max"].add_metric([node, resource], value)
        families["version"].add_metric([], version)
        yield from families.values()
        ok.add_metric([], 1)
        yield ok
