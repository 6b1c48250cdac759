"""Keeps the placer's member capacity current from the member access layer's watches.

One :class:`~fleet.members.Watcher` per member for nodes and one for pods; every event is applied
to that member's :class:`~fleet.placement.capacity.MemberCapacity` (which stays pure), and after
pod events the member's holds whose pods are now bound are ended (what one read of a stream
brought is applied as one batch, with one check of the holds). Watch callbacks run on the
watchers' threads, so the feeder and the decision loop share :attr:`CapacityFeeder.lock`: hold
it around :meth:`Placer.place` and :meth:`Placer.place_many`.

A member's capacity counts only once both its nodes and its pods have been listed
(:attr:`MemberCapacity.listed`): before that, a member that is unreachable or slow to answer
offers nothing, and decisions go on with the members that did answer. :meth:`wait_settled` is
how long a starting dispatcher waits: until each member was listed or failed to be, never for
an unreachable member to come back. Members come and go at run time (:meth:`add`,
:meth:`remove`): the dispatcher follows its members' kubeconfig.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
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
        #: Called (outside the lock) after a read of a member's stream changed its capacity.
        self.on_change: Callable[[], None] | None = None
        self._labels = {m: dict(v) for m, v in (member_labels or {}).items()}
        #: Member -> its nodes and pods watchers.
        self._watchers: dict[str, list[Watcher]] = {}
        #: Member -> the resources (nodes, pods) whose first list it has had.
        self._listed: dict[str, set[str]] = {}

    def start(self) -> None:
        for name, member in list(self.members.items()):
            self.add(member, self._labels.get(name))

    def add(self, member: Member, labels: Mapping[str, str] | None = None) -> None:
        """Watch ``member`` (a member added to the fleet, or given new credentials): it offers
        capacity once its nodes and pods are listed."""
        self.remove(member.name)
        with self.lock:
            self.members[member.name] = member
            self._labels[member.name] = dict(labels or {})
            self.placer.add_member(MemberCapacity(member.name, labels, listed=False))
        watchers = [Watcher(member, r, self._on_event, on_batch=self._on_batch) for r in (NODES, PODS)]
        self._watchers[member.name] = watchers
        for watcher in watchers:
            watcher.start()

    def remove(self, name: str) -> None:
        """Stop watching ``name`` and take its capacity out of the placer (a member let go)."""
        for watcher in self._watchers.pop(name, []):
            watcher.stop()
        with self.lock:
            self.members.pop(name, None)
            self._listed.pop(name, None)
            self.placer.remove_member(name)

    def wait_synced(self, timeout: float) -> bool:
        """Whether every watcher finished its first list within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        return all(w.wait_synced(max(0.0, deadline - time.monotonic())) for w in self._all_watchers())

    def wait_settled(self, timeout: float, *, skip: Collection[str] = ()) -> list[str]:
        """Wait until every member but ``skip`` was listed or failed a first attempt (each
        watcher's first list succeeded or failed), at most ``timeout`` seconds. Returns the
        members whose capacity is not known (for now they offer nothing)."""
        deadline = time.monotonic() + timeout
        for watcher in self._all_watchers():
            if watcher.member.name not in skip:
                watcher.wait_tried(max(0.0, deadline - time.monotonic()))
        with self.lock:
            return [cap.name for cap in self.placer.members() if not cap.listed]

    def stop(self) -> None:
        for watcher in self._all_watchers():
            watcher.stop()
        self._watchers.clear()

    def _all_watchers(self) -> list[Watcher]:
        return [w for each in list(self._watchers.values()) for w in each]

    def _on_event(self, event: WatchEvent) -> None:
        self._on_batch([event])

    def _on_batch(self, events: list[WatchEvent]) -> None:
        """The events of one read of a member's stream, applied under one hold of the lock; the
        member's holds checked against its bound pods once after them."""
        changed = False
        with self.lock:
            member, resource = events[0].member, events[0].resource
            try:
                cap = self.placer.member(member)
            except KeyError:
                return
            before = cap.version
            if events[0].type == SYNC:
                self._listed.setdefault(member, set()).add(resource)
            counted: dict[str, int] = {}
            for event in events:
                if resource == NODES.name:
                    self._apply(event, cap.upsert_node, lambda o: cap.remove_node(_node_name(o)))
                elif resource == PODS.name:
                    self._apply(event, cap.upsert_pod, lambda o: cap.remove_pod(_pod_key(o)))
                counted[event.type] = counted.get(event.type, 0) + 1
            for kind, n in counted.items():  # one labelled child a type, not one a pod
                CAPACITY_EVENTS.labels(member, resource, kind).inc(n)
            if not cap.listed and self._listed.get(member, set()) >= {NODES.name, PODS.name}:
                cap.mark_listed()
                log.info("event=capacity_listed member=%s", member)
            if resource == PODS.name:
                for rid in self.placer.confirm(member):
                    log.info("event=hold_confirmed member=%s reservation=%s", member, rid)
            NODE_CLASSES.labels(member).set(cap.class_count)
            FREE_NPUS.labels(member).set(cap.free_total(NPU_RESOURCE))
            changed = cap.version != before
        if changed and self.on_change is not None:
            self.on_change()

    @staticmethod
    def _apply(event: WatchEvent, upsert: _Apply, remove: _Apply) -> None:
        if event.type == SYNC:
            for obj in event.vanished:
                remove(obj)
            for obj in event.objects:
                upsert(obj)
        elif event.object is not None:
            (remove if event.type == DELETED else upsert)(event.object)
