"""Companion objects changed at the fleet, sent to be updated where the jobs that use them run.

A ConfigMap, Secret or Service written at the fleet: a worker updates it in the members where the
jobs that reference it run (:func:`fleet.dispatch.tasks.sync_companion`; what a companion is:
:mod:`fleet.dispatch.companions`, after Karmada's dependencies distributor).
"""

from __future__ import annotations

import threading

from rq import Retry

from fleet.apiserver import COMPANION_KINDS, Gone
from fleet.dispatch.context import Context
from fleet.dispatch.sync.shared import log
from fleet.dispatch.tasks import resync_companions, sync_companion
from fleet.members import DELETED

__all__ = ["follow_companions"]


def follow_companions(ctx: Context, stop: threading.Event) -> None:
    """Follow the companions' change stream from the moment the syncer starts, when one resync
    (:func:`fleet.dispatch.tasks.resync_companions`) brings up to date what changed while no syncer
    followed; until ``stop`` is set."""
    since: dict[str, str] = {}
    while not stop.is_set():
        try:
            if not since:  # (again) from now: what changed before is brought up to date once
                ctx.queue.enqueue(resync_companions, job_timeout=600, failure_ttl=3600)
            for rt in COMPANION_KINDS:
                if rt.kind not in since:
                    since[rt.kind] = ctx.objects.resource_version()
                events, since[rt.kind] = ctx.objects.changes(rt, since[rt.kind], block_ms=300)
                for event in events:
                    meta = (event.object or {}).get("metadata") or {}
                    if event.type == DELETED or not meta.get("name"):
                        continue
                    ctx.queue.enqueue(
                        sync_companion,
                        rt.kind,
                        meta.get("namespace"),
                        meta["name"],
                        retry=Retry(max=8, interval=[1, 2, 4, 8, 15, 30, 60, 60]),
                        job_timeout=60,
                        failure_ttl=3600,
                    )
        except Gone:
            since.clear()
        except Exception:  # Redis away: start again from now once it answers
            log.exception("event=companions_follow_failed")
            since.clear()
            stop.wait(1.0)
