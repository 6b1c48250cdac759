"""Member health: each owned member probed on its own thread, its record kept in Redis.

Each member is probed every ``probe_interval``; it turns NotReady after ``failure_threshold``
failures in a row and Ready after ``success_threshold`` successes (Karmada's cluster status
controller's thresholds). The state is a :class:`fleet.state.member_health.MemberHealth` record in
the health hash, written after every probe and read back when the syncer starts (or first probes
a member it did not have): a restart continues the NotReady clock and the failure count where
they were. A member back from an outage has every copy its watches know looked at again (a
resumed watch reports only changes); those its jobs left meanwhile are stale now and purged.
While a member is Ready its probe thread also reads the pods of the copies that wait for their
gang (:meth:`fleet.dispatch.sync.gangs.GangWaits.read_pods`) and lists its copies against the
record of those Fleet expects there (:meth:`fleet.dispatch.sync.audit.CopyAudit.maybe`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence

from prometheus_client import Gauge

from fleet.dispatch.sync.audit import CopyAudit
from fleet.dispatch.sync.gangs import GangWaits
from fleet.dispatch.sync.observer import CopyObserver
from fleet.dispatch.sync.shared import Shared, log
from fleet.members import Member, redact
from fleet.state import MemberHealth, read_health, write_health

__all__ = ["MEMBER_READY", "Probes"]

MEMBER_READY = Gauge("fleet_member_ready", "1 while the member answers its health probes.", ["member"])


class Probes:
    """Writes ``shared.health`` and ``shared.probed`` (the only writer of both)."""

    def __init__(self, shared: Shared, observer: CopyObserver, gangs: GangWaits, audit: CopyAudit) -> None:
        self.shared = shared
        self.ctx = shared.ctx
        self.observer = observer
        self.gangs = gangs
        self.audit = audit

    def loop(self, name: str, member: Member, stop: threading.Event) -> None:
        """Probe ``name`` until ``stop`` is set (the syncer stops, or lets the member go)."""
        while not stop.is_set():
            probe = member.probe()
            if stop.is_set():
                break  # let go meanwhile: the member's health is its new owner's to write
            self.record(
                name, healthy=probe.healthy, error=probe.error, latency=probe.seconds, detail=probe.detail
            )
            if probe.healthy and self.shared.mine(name):
                self.gangs.read_pods(name, member)
                self.audit.maybe(name, member)
            stop.wait(self.shared.settings.probe_interval)

    def load(self, members: Sequence[str]) -> None:
        """Continue from the records in Redis: a restart must not reset a NotReady member's
        clock (its failover would wait a whole toleration more) nor its failures counted."""
        try:
            stored = read_health(self.ctx.client, self.ctx.keys, members)
        except Exception as exc:  # Redis away: start afresh; each probe tries to read it again
            log.warning("event=health_not_read error=%s", exc)
            return
        with self.shared.lock:
            for name, record in stored.items():
                self.shared.health.setdefault(name, record)
        for name, record in stored.items():
            log.info(
                "event=health_resumed member=%s ready=%s since=%.3f failures=%d",
                name, record.ready, record.since, record.failures,
            )  # fmt: skip

    def record(
        self, name: str, *, healthy: bool, error: str | None, latency: float, detail: str | None = None
    ) -> None:
        """Count a probe; ``error`` (no address in it) goes into the health every reader sees,
        ``detail`` (the client's own words, host and port included) only into this log."""
        error = redact(error) if error is not None else None
        shared = self.shared
        settings = shared.settings
        with shared.lock:
            known = name in shared.health
        if not known:
            self.load([name])  # a member this syncer has not had yet: continue its record
        with shared.lock:
            health, turned = shared.health.get(name, MemberHealth()).after_probe(
                healthy=healthy,
                error=error,
                latency=latency,
                now=time.time(),
                failure_threshold=settings.failure_threshold,
                success_threshold=settings.success_threshold,
            )
            shared.health[name] = health
            shared.probed.add(name)
        ready = health.ready
        MEMBER_READY.labels(name).set(1 if ready else 0)
        if turned:
            log.warning(
                "event=member_%s member=%s error=%r",
                "ready" if ready else "not_ready",
                name,
                detail or error,
            )
        watchers = shared.watchers.get(name)
        if turned and ready and watchers:
            # Back from an outage: a resumed watch reports only changes, so look again at every
            # copy it knows; those its jobs left meanwhile are stale now and get purged.
            for each in watchers:
                self.observer.observe(name, each.snapshot())
        try:
            write_health(self.ctx.client, self.ctx.keys, name, health)
        except Exception as exc:  # Redis away: the next probe writes again
            log.warning("event=health_not_written member=%s error=%s", name, exc)

    def forget(self, name: str) -> None:
        """Forget ``name``'s health (let go: its new owner continues the record from Redis).
        Called with the lock held; :meth:`unexport` after it is released."""
        self.shared.health.pop(name, None)
        self.shared.probed.discard(name)

    @staticmethod
    def unexport(name: str) -> None:
        """Stop exporting ``name``'s readiness (this syncer no longer probes it)."""
        with contextlib.suppress(KeyError):  # not probed yet: no series to remove
            MEMBER_READY.remove(name)
