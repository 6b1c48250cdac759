"""``fleet dispatcher``, ``fleet worker`` and ``fleet syncer``: the three dispatch roles as processes."""

from __future__ import annotations

import threading
from pathlib import Path

import click

from fleet.cli.options import (
    key_prefix_option,
    kubeconfig_option,
    log_level_option,
    metrics_port_option,
    on_termination,
    redis_option,
    serve_metrics,
    setup_logging,
)
from queues import KeySpace

__all__ = ["dispatcher", "syncer", "worker"]


@click.command()
@redis_option
@key_prefix_option
@kubeconfig_option
@metrics_port_option
@log_level_option
@click.option(
    "--lease-seconds",
    type=click.FloatRange(min=0.3),
    default=3.0,
    show_default=True,
    help="Leader lease time: how long admissions stop when a leader dies without releasing it.",
)
@click.option("--no-pin", is_flag=True, help="Do not pin member copies to the planned nodes.")
@click.option(
    "--starvation-seconds",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="How long a leaf's head that fits its quota may be passed by later jobs.",
)
@click.option(
    "--wait-ratio",
    type=click.FloatRange(min=1),
    default=1.0,
    show_default=True,
    help="A refused head that waited over 5 s and this many times as long as a later job is not "
    "passed by it (1: after 5 s, no later job passes it).",
)
@click.option(
    "--reconcile-every",
    type=click.FloatRange(min=1),
    default=60.0,
    show_default=True,
    help="Seconds from the end of one reconcile of the ledger against the stored jobs to the start "
    "of the next (one also starts at every takeover).",
)
@click.option(
    "--preemptions-per-minute",
    type=click.IntRange(min=0),
    default=60,
    show_default=True,
    help="Victims taken per minute at most (0: never preempt).",
)
def dispatcher(
    *,
    redis_url: str,
    space: KeySpace,
    kubeconfig: Path | None,
    metrics_port: int | None,
    metrics_host: str,
    log_level: str,
    lease_seconds: float,
    no_pin: bool,
    starvation_seconds: float,
    wait_ratio: float,
    reconcile_every: float,
    preemptions_per_minute: int,
) -> None:
    """Admit, place and propagate queued jobs (one leader at a time; others stand by)."""
    from fleet.dispatch import DispatcherSettings, run_dispatcher

    setup_logging(log_level)
    serve_metrics(metrics_port, metrics_host)
    stop = threading.Event()
    on_termination(stop)
    settings = DispatcherSettings(
        lease_ttl=lease_seconds,
        pin=not no_pin,
        starvation_seconds=starvation_seconds,
        wait_ratio=wait_ratio,
        reconcile_every=reconcile_every,
        preemptions_per_minute=preemptions_per_minute,
    )
    run_dispatcher(redis_url, kubeconfig, stop, settings=settings, space=space)


@click.command()
@redis_option
@key_prefix_option
@kubeconfig_option
@metrics_port_option
@log_level_option
@click.option("--burst", is_flag=True, help="Stop when the queue is empty.")
@click.option(
    "--claim-seconds",
    type=click.FloatRange(min=0.3),
    default=3.0,
    show_default=True,
    help="How long this worker's claim on the propagations it runs lasts unless renewed (every "
    "third of it): a killed worker's propagations are sent to another about this long after.",
)
def worker(
    *,
    redis_url: str,
    space: KeySpace,
    kubeconfig: Path | None,
    metrics_port: int | None,
    metrics_host: str,
    log_level: str,
    burst: bool,
    claim_seconds: float,
) -> None:
    """Create and purge member copies (an RQ worker on the propagation queue)."""
    from fleet.dispatch import run_worker

    setup_logging(log_level)
    serve_metrics(metrics_port, metrics_host)
    run_worker(redis_url, kubeconfig, burst=burst, claim_seconds=claim_seconds, space=space)


@click.command()
@redis_option
@key_prefix_option
@kubeconfig_option
@metrics_port_option
@log_level_option
@click.option("--probe-interval", type=float, default=1.0, show_default=True, help="Seconds between probes.")
@click.option(
    "--failure-threshold", type=int, default=3, show_default=True, help="Failed probes to NotReady."
)
@click.option("--success-threshold", type=int, default=1, show_default=True, help="Good probes to Ready.")
@click.option(
    "--audit-every",
    type=click.FloatRange(min=0.1),
    default=20.0,
    show_default=True,
    help="Seconds between two lists of a member's copies checked against those Fleet expects there "
    "(and after every list its watches make); keep it well below the failover toleration.",
)
@click.option(
    "--starting-batch",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    help="Seconds a copy's version that says only that it is starting (Created) waits for a later "
    "one before it is mirrored, as Kubernetes' Job controller batches a Job's pod events: a copy "
    "that runs within it costs its job one status write, not two. 0: mirrored at once.",
)
@click.option(
    "--sharded",
    is_flag=True,
    help="Share the members with the other --sharded syncers through leases in Redis (run any "
    "number of them); without it this syncer acts on every member, and must be the only one.",
)
@click.option(
    "--ownership-seconds",
    type=click.FloatRange(min=0.5),
    default=5.0,
    show_default=True,
    help="With --sharded: a member's lease time, how long a killed syncer's members wait for another.",
)
def syncer(
    *,
    redis_url: str,
    space: KeySpace,
    kubeconfig: Path | None,
    metrics_port: int | None,
    metrics_host: str,
    log_level: str,
    probe_interval: float,
    failure_threshold: int,
    success_threshold: int,
    audit_every: float,
    starting_batch: float,
    sharded: bool,
    ownership_seconds: float,
) -> None:
    """Mirror member status to the fleet, probe members, fail over, purge, finish deletions."""
    from fleet.dispatch import SyncerSettings, run_syncer

    setup_logging(log_level)
    serve_metrics(metrics_port, metrics_host)
    stop = threading.Event()
    on_termination(stop)
    settings = SyncerSettings(
        probe_interval=probe_interval,
        failure_threshold=failure_threshold,
        success_threshold=success_threshold,
        audit_every=audit_every,
        starting_batch=starting_batch,
    )
    ownership = ownership_seconds if sharded else None
    run_syncer(redis_url, kubeconfig, stop, settings=settings, ownership_seconds=ownership, space=space)
