"""The in-memory store: the simulator's members and the unit tests keep their objects here.

:class:`MemoryStore` keeps objects as plain JSON dicts, with the semantics every store shares
(:mod:`fleet.apiserver.store`). Every object handed out is a copy, so callers may mutate what they
get. A write notifies each watcher of its kind by putting the change on the watcher's own queue
(no per-event fan-out task), so many in-process watchers are cheap; each watcher filters by
namespace and selectors itself, turning selector transitions into ADDED/DELETED as Kubernetes
does.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import deque
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Final

from fleet.apiserver.errors import NotFound
from fleet.apiserver.resources import Obj, ResourceType
from fleet.apiserver.store import (
    ADDED,
    DELETED,
    FRESH_WAIT_SECONDS,
    MODIFIED,
    ObjectFilter,
    WatchEvent,
    already_exists,
    bookmark,
    check_subresource,
    clone,
    decode_continue,
    deletion,
    expired_continue,
    new_object,
    not_found,
    parse_resource_version,
    select_page,
    too_old,
    update_target,
    updated_object,
    version_reached,
    write_type,
)
from fleet.timestamps import now_rfc3339

__all__ = ["DEFAULT_NAMESPACES", "MemoryStore"]

#: The namespaces a new cluster has.
DEFAULT_NAMESPACES: Final = ("default", "kube-system", "kube-public")
_NAMESPACES_KEY: Final = ("", "namespaces")


@dataclass(frozen=True)
class _Change:
    rv: int
    key: tuple[str, str]
    type: str
    obj: Obj  # the stored snapshot after the change (for DELETED: the last state)
    old: Obj | None  # the state before a MODIFIED


@dataclass(eq=False)
class _Watcher:
    queue: asyncio.Queue[_Change] = field(default_factory=asyncio.Queue)


class MemoryStore:
    """Objects in memory; one resourceVersion counter; ``history`` changes kept for watch resume."""

    def __init__(self, *, history: int = 10_000, require_namespaces: bool = True) -> None:
        if history < 1:
            raise ValueError("history must be at least 1 change")
        self._objects: dict[tuple[str, str], dict[str, dict[str, Obj]]] = {}
        self._rv = 0
        self._history: deque[_Change] = deque(maxlen=history)
        self._floor = 0  # every change with rv > floor is still in history
        self._watchers: dict[tuple[str, str], set[_Watcher]] = {}
        self._require_namespaces = require_namespaces
        self._rng = random.Random()
        #: How long a watch from a version not reached yet waits for it (then 504, too_large).
        self.fresh_wait = FRESH_WAIT_SECONDS

    @classmethod
    def with_default_namespaces(cls, *, history: int = 10_000) -> MemoryStore:
        """A store holding ``default``, ``kube-system`` and ``kube-public``, as a new cluster does."""
        store = cls(history=history)
        for name in DEFAULT_NAMESPACES:
            store._write(
                _NAMESPACES_KEY,
                ADDED,
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": name, "uid": str(uuid.uuid4()), "creationTimestamp": now_rfc3339()},
                    "spec": {"finalizers": ["kubernetes"]},
                    "status": {"phase": "Active"},
                },
                None,
            )
        return store

    # --- introspection -------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The latest resourceVersion handed out."""
        return self._rv

    async def _version_now(self) -> int:
        return self._rv

    def watcher_count(self, rt: ResourceType) -> int:
        return len(self._watchers.get(rt.key, ()))

    # --- internals -----------------------------------------------------------------------------

    def _bucket(self, key: tuple[str, str], namespace: str) -> dict[str, Obj]:
        return self._objects.setdefault(key, {}).setdefault(namespace, {})

    def _find(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        found = self._objects.get(rt.key, {}).get(namespace or "", {}).get(name)
        if found is None:
            raise not_found(rt, name)
        return found

    def _write(self, key: tuple[str, str], kind: str, obj: Obj, old: Obj | None) -> None:
        """Store (or drop, for DELETED) ``obj`` under a new resourceVersion and notify watchers."""
        self._rv += 1
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self._rv)
        bucket = self._bucket(key, meta.get("namespace") or "")
        if kind == DELETED:
            bucket.pop(meta["name"], None)
        else:
            bucket[meta["name"]] = obj
        if len(self._history) == self._history.maxlen:
            self._floor = self._history[0].rv
        change = _Change(self._rv, key, kind, obj, old)
        self._history.append(change)
        for watcher in self._watchers.get(key, ()):
            watcher.queue.put_nowait(change)

    def _namespace_must_exist(self, rt: ResourceType, namespace: str) -> None:
        if not self._require_namespaces or not rt.namespaced:
            return
        if namespace not in self._objects.get(_NAMESPACES_KEY, {}).get("", {}):
            raise NotFound(
                f'namespaces "{namespace}" not found',
                details={"name": namespace, "kind": "namespaces"},
            )

    # --- the Store protocol --------------------------------------------------------------------

    async def get(self, rt: ResourceType, namespace: str | None, name: str, *, copy: bool = True) -> Obj:
        """The object; ``copy=False``: the stored object itself, read-only (see :meth:`create`)."""
        found = self._find(rt, namespace, name)
        return clone(found) if copy else found

    async def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> tuple[list[Obj], str, str | None]:
        flt = ObjectFilter(rt, namespace, label_selector, field_selector)
        list_rv = self._rv
        start: tuple[str, str] | None = None
        if continue_token:
            list_rv, start = decode_continue(continue_token)
            if list_rv < self._floor:
                raise expired_continue()
        buckets = self._objects.get(rt.key, {})
        if namespace is not None:
            namespaces = [namespace] if namespace in buckets else []
        else:
            namespaces = sorted(buckets)
        pinned = flt.fields.value_of("metadata.name")

        def candidates() -> Iterable[Obj]:
            for ns in namespaces:
                bucket = buckets[ns]
                if pinned is None:
                    yield from (bucket[name] for name in sorted(bucket))
                elif pinned in bucket:
                    yield bucket[pinned]

        items, token = select_page(candidates(), flt, limit=limit, start=start, list_rv=list_rv)
        return [clone(obj) for obj in items], str(list_rv), token

    async def create(self, rt: ResourceType, obj: Obj, *, dry_run: bool = False, copy: bool = True) -> Obj:
        """Create ``obj``. ``copy=False`` is for trusted in-process writers: ``obj`` is handed over
        (the caller must not touch it again) and the stored object comes back, read-only; no
        copies either way. Writers that create much (the simulator's operator) save most of a
        write's cost so."""
        namespace = ((obj.get("metadata") or {}).get("namespace") or "") if rt.namespaced else ""
        if namespace:
            self._namespace_must_exist(rt, namespace)
        bucket = self._objects.get(rt.key, {}).get(namespace, {})
        new = new_object(rt, obj, name_taken=bucket.__contains__, rng=self._rng, copy=copy)
        name = new["metadata"]["name"]
        if name in bucket:
            raise already_exists(rt, name)
        if dry_run:
            return new
        self._write(rt.key, ADDED, new, None)
        return clone(new) if copy else new

    async def update(
        self,
        rt: ResourceType,
        obj: Obj,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        copy: bool = True,
    ) -> Obj:
        """Update with ``obj``; ``copy=False`` as for :meth:`create` (handed over, read-only back)."""
        check_subresource(rt, subresource)
        namespace, name = update_target(rt, obj)
        current = self._find(rt, namespace, name)
        new = updated_object(rt, current, obj, subresource=subresource, copy=copy)
        if new == current:
            return clone(current) if copy else current
        if dry_run:
            return new
        self._write(rt.key, write_type(new), new, current)
        return clone(new) if copy else new

    async def delete(
        self, rt: ResourceType, namespace: str | None, name: str, *, dry_run: bool = False
    ) -> Obj:
        current = self._find(rt, namespace if rt.namespaced else None, name)
        if dry_run:
            preview: Obj = clone(current)
            return preview
        kind, result = deletion(current)
        if kind is None:
            return result
        if kind == DELETED and rt.key == _NAMESPACES_KEY:
            self._delete_namespace_contents(name)
        self._write(rt.key, kind, result, current if kind == MODIFIED else None)
        written: Obj = clone(result)
        return written

    def _delete_namespace_contents(self, namespace: str) -> None:
        for key, buckets in list(self._objects.items()):
            for obj in list(buckets.get(namespace, {}).values()):
                self._write(key, DELETED, clone(obj), None)

    async def watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        bookmark_interval: float | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Changes after ``resource_version`` (or ADDED for the current state when unset or 0)."""
        flt = ObjectFilter(rt, namespace, label_selector, field_selector)
        start = None if resource_version in (None, "", "0") else parse_resource_version(str(resource_version))
        if start is not None and start < self._floor:
            raise too_old(start, self._floor)
        if start is not None and start > self._rv:
            # Not reached yet: wait for it as the watch cache does, then answer 504 (too_large).
            await version_reached(self._version_now, start, self.fresh_wait, poll=0.05)
        # Snapshot and subscribe without yielding in between, so no change falls in a gap.
        if start is None:
            backlog = [
                _Change(int(obj["metadata"]["resourceVersion"]), rt.key, ADDED, obj, None)
                for ns in sorted(self._objects.get(rt.key, {}))
                for _, obj in sorted(self._objects[rt.key][ns].items())
            ]
        else:
            backlog = [c for c in self._history if c.rv > start and c.key == rt.key]
        watcher = _Watcher()
        self._watchers.setdefault(rt.key, set()).add(watcher)
        loop = asyncio.get_running_loop()
        seen = start if start is not None else self._rv  # every change up to it has been handled
        next_bookmark = loop.time() + bookmark_interval if bookmark_interval else None
        try:
            for change in backlog:
                seen = max(seen, change.rv)
                event = flt.event(change.type, change.obj, change.old)
                if event is not None:
                    yield event
            while True:
                if not watcher.queue.empty() and (next_bookmark is None or loop.time() < next_bookmark):
                    # Under load a change is usually waiting: take it without the task and timer
                    # that awaiting the queue with a bookmark deadline costs per event.
                    change = watcher.queue.get_nowait()
                elif next_bookmark is None:
                    change = await watcher.queue.get()
                else:
                    try:
                        change = await asyncio.wait_for(
                            watcher.queue.get(), max(0.0, next_bookmark - loop.time())
                        )
                    except TimeoutError:
                        next_bookmark = loop.time() + (bookmark_interval or 0)
                        # With the queue drained, everything up to the store's version is handled.
                        mark = self._rv if watcher.queue.empty() else seen
                        yield bookmark(rt, mark)
                        continue
                seen = max(seen, change.rv)
                event = flt.event(change.type, change.obj, change.old)
                if event is not None:
                    yield event
        finally:
            self._watchers[rt.key].discard(watcher)
