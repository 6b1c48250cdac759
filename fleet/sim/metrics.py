"""Prometheus metrics of a simulator process, served on its control port at ``/metrics``.

One registry per simulator (not the global one), so that tests and the benchmark can run several
in one interpreter; every series carries the ``member`` it is about.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["SimMetrics"]


class SimMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.nodes = Gauge(
            "fleet_sim_nodes", "Nodes of a simulated member", ["member"], registry=self.registry
        )
        self.up = Gauge(
            "fleet_sim_member_up",
            "1 while the member's API listener is open",
            ["member"],
            registry=self.registry,
        )
        self.pending = Gauge(
            "fleet_sim_jobs_pending", "Jobs waiting for their gang to fit", ["member"], registry=self.registry
        )
        self.running = Gauge("fleet_sim_jobs_running", "Jobs running", ["member"], registry=self.registry)
        self.transitions = Counter(
            "fleet_sim_job_transitions",
            "AscendJob condition changes made by the simulated operator",
            ["member", "state"],
            registry=self.registry,
        )
        self.pods_bound = Counter(
            "fleet_sim_pods_bound", "Pods bound to nodes", ["member"], registry=self.registry
        )
        self.schedule_seconds = Histogram(
            "fleet_sim_schedule_seconds",
            "Time of one scheduling pass over a member's queue",
            ["member"],
            registry=self.registry,
        )
        self.faults = Counter(
            "fleet_sim_faults",
            "Faults applied through the control endpoint",
            ["member", "fault"],
            registry=self.registry,
        )
        self.injected = Counter(
            "fleet_sim_injected_responses",
            "API requests answered by a fault (503) instead of the member",
            ["member"],
            registry=self.registry,
        )
