"""Keeps the placer's member capacity current from the member access layer's watches.

One :class:`~fleet.members.Watcher` per member for nodes and one for pods; every event is applied
to that member's :class:`~fleet.placement.capacity.MemberCapacity` (which stays pure), and after
pod events the member's holds whose pods are now bound are ended. Watch callbacks run on the
watchers' threads, so the feeder and the decision loop share :attr:`CapacityFeeder.lock`: hold
it around :meth:`Placer.place`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from fleet.ascend import NPU_RESOURCE
from fleet.members import DELETED, NODES, PODS, SYNC, Member, Watcher, WatchEvent
from fleet.placement.capacity import MemberCapacity
from fleet.placement.metrics import CAPACITY_EVENTS, FREE_NPUS, NODE_CLASSES
from fleet.placement.placer import Placer

__all__ = ["CapacityFeeder"]

log = logging.getLogger("fleet.placement.feeder")

_Apply = Callable[[Mapping[str, Any]], None]


def _pod_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def _node_name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


class CapacityFeeder:
    def __init__(
        self,
        placer: Placer,
        members: Mapping[str, Member],
        *,
        member_labels: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.placer = placer
        self.members = dict(members)
        self.lock = threading.RLock()
        self._labels = {m: dict(v) for m, v in (member_labels or {}).items()}
        self._watchers: list[Watcher] = []

    def start(self) -> None:
        for name, member in self.members.items():
            with self.lock:
                self.placer.add_member(MemberCapacity(name, self._labels.get(name)))
            for resource in (NODES, PODS):
                watcher = Watcher(member, resource, self._on_event)
                self._watchers.append(watcher)
                watcher.start()

    def wait_synced(self, timeout: float) -> bool:
        """Whether every watcher finished its first list within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        return all(w.wait_synced(max(0.0, deadline - time.monotonic())) for w in self._watchers)

    def stop(self) -> None:
        for watcher in self._watchers:
            watcher.stop()
        self._watchers.clear()

    def _on_event(self, event: WatchEvent) -> None:
        with self.lock:
            try:
                cap = self.placer.member(event.member)
            except KeyError:
                return
            if event.resource == NODES.name:
                self._apply(event, cap.upsert_node, lambda o: cap.remove_node(_node_name(o)))
            elif event.resource == PODS.name:
                self._apply(event, cap.upsert_pod, lambda o: cap.remove_pod(_pod_key(o)))
                confirmed = self.placer.confirm(event.member)
                for rid in confirmed:
                    log.info("event=hold_confirmed member=%s reservation=%s", event.member, rid)
            CAPACITY_EVENTS.labels(event.member, event.resource, event.type).inc()
            NODE_CLASSES.labels(event.member).set(cap.class_count)
            FREE_NPUS.labels(event.member).set(cap.free_total(NPU_RESOURCE))

    @staticmethod
    def _apply(event: WatchEvent, upsert: _Apply, remove: _Apply) -> None:
        if event.type == SYNC:
            for obj in event.vanished:
                remove(obj)
            for obj in event.objects:
                upsert(obj)
        elif event.object is not None:
            (remove if event.type == DELETED else upsert)(event.object)
