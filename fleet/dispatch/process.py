"""How each dispatch role is assembled and run as a process (``fleet dispatcher``, ``worker``, ``syncer``).

Each takes the deployment's key space (``space``, from ``--key-prefix``) into its one
:class:`~fleet.dispatch.context.Context`, which derives every key set and queue name from it.

``fleet up`` runs the same functions, so what a newcomer runs locally is what production runs.
Every role follows its members' kubeconfig while it runs (:meth:`Context.refresh_members`, every
:data:`~fleet.dispatch.context.MEMBERS_EVERY` seconds): no restart after ``fleet member add`` or
``remove``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import redis

from fleet import gc_tuning
from fleet.connections import mask_url, redis_from_url
from fleet.dispatch.capacity_publisher import CapacityPublisher
from fleet.dispatch.context import CLAIM_SECONDS, MEMBERS_EVERY, Context, install
from fleet.dispatch.dispatcher import Dispatcher, DispatcherSettings
from fleet.dispatch.lanes import DRAIN_SECONDS, lanes
from fleet.dispatch.ownership import Shards
from fleet.dispatch.syncer import Syncer, SyncerSettings
from fleet.dispatch.worker import Worker
from fleet.members import MemberChanges, MemberConfigError, member_labels
from fleet.placement import CapacityFeeder, Placer
from fleet.state import read_health
from queues import DEFAULT_SPACE, KeySpace

__all__ = ["run_dispatcher", "run_syncer", "run_worker"]

log = logging.getLogger("fleet.dispatch")


def _holder() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _follow_members(
    ctx: Context, stop: threading.Event, apply: Callable[[MemberChanges], None] | None = None
) -> None:
    """Follow the members' kubeconfig from a thread of its own until ``stop`` is set
    (:meth:`Context.refresh_members`; ``apply`` starts and stops what the role runs per member)."""

    def loop() -> None:
        while not stop.wait(MEMBERS_EVERY):
            try:
                ctx.refresh_members(apply)
            except Exception:  # a member's watch failing to start: the next change tries again
                log.exception("event=members_not_followed")

    threading.Thread(target=loop, name="members", daemon=True).start()


def run_dispatcher(
    redis_url: str,
    kubeconfig: Path | None,
    stop: threading.Event,
    *,
    settings: DispatcherSettings | None = None,
    sync_timeout: float = 5.0,
    space: KeySpace = DEFAULT_SPACE,
) -> None:
    """Watch every member's capacity and dispatch while leading, until ``stop`` is set. The
    capacity each member has is also published for the MemberCluster kind
    (:class:`fleet.dispatch.capacity_publisher.CapacityPublisher`).

    It decides with the members it can see: it waits (at most ``sync_timeout``) only for the
    members to be listed or to fail a first list, never for an unreachable one to come back, and
    not at all for one the syncer's health record calls NotReady. A member not listed yet offers
    no capacity; it counts from the moment its nodes and pods are listed.
    """
    log.info("event=connecting role=dispatcher redis=%s prefix=%s", mask_url(redis_url), space.prefix)
    ctx = Context(redis_from_url(redis_url), kubeconfig, space)
    placer = Placer(ctx.reservations)
    feeder = CapacityFeeder(placer, ctx.members, member_labels=member_labels(kubeconfig))
    feeder.start()

    def follow(change: MemberChanges) -> None:
        try:
            labels = member_labels(kubeconfig)
        except MemberConfigError as error:  # the members still count, without their labels
            log.warning("event=member_labels_unread error=%s", error)
            labels = {}
        for name in change.removed:
            feeder.remove(name)
        for name in (*change.added, *change.changed):
            feeder.add(ctx.members[name], labels.get(name))

    _follow_members(ctx, stop, follow)
    publisher = CapacityPublisher(placer, feeder.lock, ctx.client, ctx.keys)
    publisher.start()
    try:
        try:
            down = [
                m for m, record in read_health(ctx.client, ctx.keys, ctx.members).items() if record.not_ready
            ]
        except Exception as exc:  # Redis away: the dispatcher's own loop waits for it
            log.warning("event=health_not_read error=%s", exc)
            down = []
        try:  # a ledger kept by an older Fleet: its derived fields recomputed once
            drift = ctx.ledger.upgrade()
            if drift:
                log.info("event=ledger_upgraded corrected=%d", len(drift))
        except redis.RedisError as exc:  # Redis away: the next start does it
            log.warning("event=ledger_upgrade_skipped error=%s", exc)
        unknown = feeder.wait_settled(sync_timeout, skip=down)
        if unknown:
            log.warning(
                "event=capacity_unknown members=%s: deciding with the other members until they are listed",
                ",".join(sorted(unknown)),
            )
        dispatcher = Dispatcher(ctx, placer, holder=_holder(), lock=feeder.lock, settings=settings)
        feeder.on_change = dispatcher.wake
        gc_tuning.tune()
        log.info("event=dispatcher_started members=%d", len(ctx.members))
        dispatcher.run(stop)
    finally:
        publisher.stop()
        feeder.stop()
        ctx.close()
        log.info("event=dispatcher_stopped")


def run_worker(
    redis_url: str,
    kubeconfig: Path | None,
    *,
    burst: bool = False,
    name: str | None = None,
    claim_seconds: float = CLAIM_SECONDS,
    space: KeySpace = DEFAULT_SPACE,
) -> None:
    """Run an RQ worker on the eviction, propagation and purge queues, in that order (it stops
    on SIGTERM after its current task and the creates its lanes still hold). Its claim on the
    propagations it runs lasts ``claim_seconds`` unless renewed
    (:class:`fleet.dispatch.tasks.Claim`)."""
    log.info("event=connecting role=worker redis=%s prefix=%s", mask_url(redis_url), space.prefix)
    ctx = Context(redis_from_url(redis_url), kubeconfig, space, claim_seconds=claim_seconds)
    log.info("event=worker_members members=%d", len(ctx.members))  # built now, not on the first task
    install(ctx)
    stop = threading.Event()
    _follow_members(ctx, stop)
    gc_tuning.tune()
    worker = Worker(
        [ctx.evict_queue, ctx.queue, ctx.purge_queue],
        connection=ctx.client,
        name=name or f"fleet-worker-{_holder()}",
    )
    try:
        worker.work(burst=burst, with_scheduler=True, logging_level="WARNING")
    finally:
        lanes().drain(DRAIN_SECONDS)  # its tasks returned as they handed their creates over
        stop.set()
        ctx.close()


def run_syncer(
    redis_url: str,
    kubeconfig: Path | None,
    stop: threading.Event,
    *,
    settings: SyncerSettings | None = None,
    ownership_seconds: float | None = None,
    space: KeySpace = DEFAULT_SPACE,
) -> None:
    """Watch and probe the members and act on what they say, until ``stop`` is set: every member,
    or with ``ownership_seconds`` the share this syncer holds leases on (:mod:`fleet.dispatch.ownership`)."""
    log.info("event=connecting role=syncer redis=%s prefix=%s", mask_url(redis_url), space.prefix)
    ctx = Context(redis_from_url(redis_url), kubeconfig, space)
    gc_tuning.tune()
    shards = None if ownership_seconds is None else Shards(ctx.client, ctx.keys, ttl=ownership_seconds)
    try:
        Syncer(ctx, settings, shards).run(stop)
    finally:
        ctx.close()
