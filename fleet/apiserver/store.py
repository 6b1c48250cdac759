"""Storage behind the serving core: the :class:`Store` protocol and the in-memory :class:`MemoryStore`.

The protocol is what the HTTP handlers (and in-process controllers) need from storage, with the
Kubernetes semantics that belong to storage: one resourceVersion sequence, optimistic concurrency
(409 on a stale ``metadata.resourceVersion``), server-set metadata (uid, creationTimestamp,
generation, generateName), the ``status`` subresource split, finalizers, and watch with a bounded
history (410 Gone beyond it). Request-level policy (decoding, validation, create-time defaulting)
lives in the app, so trusted in-process writers such as the simulator's controllers may call the
store directly on the same event loop. The fleet endpoint will plug a Redis-backed store in here.

:class:`MemoryStore` keeps objects as plain JSON dicts. Every object handed out is a copy, so
callers may mutate what they get. A write notifies each watcher of its kind by putting the change
on the watcher's own queue (no per-event fan-out task), so many in-process watchers are cheap;
each watcher filters by namespace and selectors itself, turning selector transitions into
ADDED/DELETED as Kubernetes does.

The server-set metadata semantics are module-level functions (:func:`new_object`,
:func:`updated_object`, :func:`deletion`, :func:`write_type`) that every store calls, so
MemoryStore and the Redis stores of :mod:`fleet.state` cannot drift apart: a store only decides
how to read the current object and how to write the result atomically. The watch and list
helpers (:class:`ObjectFilter`, :func:`selector_view`, :class:`Page` and :func:`select_page`, the
continue tokens) are shared the same way.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import marshal
import random
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from fleet.apiserver.errors import AlreadyExists, BadRequest, Conflict, Gone, Invalid, NotFound
from fleet.apiserver.resources import Obj, ResourceType
from fleet.apiserver.selectors import FieldSelector, LabelSelector
from fleet.timestamps import now_rfc3339

__all__ = [
    "ADDED",
    "BOOKMARK",
    "DELETED",
    "ERROR",
    "MODIFIED",
    "MemoryStore",
    "ObjectFilter",
    "Page",
    "Store",
    "WatchEvent",
    "already_exists",
    "bookmark",
    "check_subresource",
    "clone",
    "conflict",
    "decode_continue",
    "deletion",
    "encode_continue",
    "expired_continue",
    "generate_name",
    "new_object",
    "not_found",
    "parse_resource_version",
    "select_page",
    "selector_view",
    "too_old",
    "update_target",
    "updated_object",
    "write_type",
]

ADDED: Final = "ADDED"
MODIFIED: Final = "MODIFIED"
DELETED: Final = "DELETED"
BOOKMARK: Final = "BOOKMARK"
ERROR: Final = "ERROR"

DEFAULT_NAMESPACES: Final = ("default", "kube-system", "kube-public")
_NAMESPACES_KEY: Final = ("", "namespaces")
_GENERATE_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"  # what Kubernetes uses for generateName
_RNG: Final = random.Random()
#: Metadata an update of the main resource cannot change.
_KEPT_ON_UPDATE: Final = (
    "uid",
    "creationTimestamp",
    "namespace",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)


@dataclass(frozen=True)
class WatchEvent:
    """One watch event; ``object`` is the watcher's own copy (a bookmark carries only metadata)."""

    type: str
    object: Obj


class Store(Protocol):
    """What the serving core needs from storage. All methods run on the server's event loop."""

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj: ...

    async def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> tuple[list[Obj], str, str | None]: ...

    async def create(self, rt: ResourceType, obj: Obj, *, dry_run: bool = False) -> Obj: ...

    async def update(
        self, rt: ResourceType, obj: Obj, *, subresource: str | None = None, dry_run: bool = False
    ) -> Obj: ...

    async def delete(
        self, rt: ResourceType, namespace: str | None, name: str, *, dry_run: bool = False
    ) -> Obj: ...

    def watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        bookmark_interval: float | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Changes as events; an event's object may be shared with other watchers: read-only."""
        ...


def clone(value: Any) -> Any:
    """A deep copy of a JSON value.

    ``marshal`` copies dicts, lists and scalars in C, an order of magnitude faster than
    ``copy.deepcopy`` and twice as fast as a Python walk; values it cannot handle (an in-process
    caller's own types) fall back to the walk.
    """
    try:
        return marshal.loads(marshal.dumps(value))
    except ValueError:
        return _walk_clone(value)


def _walk_clone(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _walk_clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk_clone(v) for v in value]
    return value


def _meta(obj: Obj) -> dict[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
        obj["metadata"] = meta
    return meta


def _spec_part(obj: Obj) -> dict[str, Any]:
    """What ``generation`` tracks: everything but metadata, status and the type fields."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


# --- errors as every store words them -----------------------------------------------------------


def _details(rt: ResourceType, name: str) -> dict[str, Any]:
    return {"name": name, "group": rt.group, "kind": rt.plural}


def not_found(rt: ResourceType, name: str) -> NotFound:
    return NotFound(f'{rt.qualified} "{name}" not found', details=_details(rt, name))


def already_exists(rt: ResourceType, name: str) -> AlreadyExists:
    return AlreadyExists(f'{rt.qualified} "{name}" already exists', details=_details(rt, name))


def conflict(rt: ResourceType, name: str) -> Conflict:
    return Conflict(
        f'Operation cannot be fulfilled on {rt.qualified} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        details=_details(rt, name),
    )


def too_old(start: int, floor: int) -> Gone:
    """The 410 of a watch from a version older than the retained history."""
    return Gone(f"too old resource version: {start} ({floor + 1})")


def expired_continue() -> Gone:
    return Gone(
        "The provided continue parameter is too old to display a consistent list result. "
        "You can start a new list without the continue parameter."
    )


# --- server-set metadata: the one definition every store uses ---------------------------------


def generate_name(prefix: str, rng: random.Random) -> str:
    """``prefix`` and five characters of the alphabet Kubernetes uses for ``generateName``."""
    return prefix + "".join(rng.choice(_GENERATE_ALPHABET) for _ in range(5))


def new_object(
    rt: ResourceType,
    obj: Obj,
    *,
    name_taken: Callable[[str], bool] | None = None,
    rng: random.Random | None = None,
    copy: bool = True,
) -> Obj:
    """The object a create stores (a copy of ``obj``): type fields, scope, name, server metadata.

    Sets apiVersion and kind; requires a namespace for a namespaced kind and drops it for a
    cluster-scoped one; picks a name from ``generateName`` when there is none (avoiding names
    ``name_taken`` reports, when the store can tell cheaply; otherwise the store retries on
    ``AlreadyExists``); drops resourceVersion and the deletion fields; sets a new uid,
    creationTimestamp and generation 1. ``status`` is kept: the API resets it on create as request
    policy, trusted in-process writers may create with one. Raises ``Invalid``. The
    resourceVersion is the store's to set when it writes. ``copy=False``: ``obj`` is handed over
    (only its top level and metadata are copied, the rest is shared).
    """
    new: Obj = clone(obj) if copy else {**obj, "metadata": dict(obj.get("metadata") or {})}
    new["apiVersion"] = rt.api_version
    new["kind"] = rt.kind
    meta = _meta(new)
    if rt.namespaced:
        if not meta.get("namespace"):
            raise Invalid(f"{rt.kind} is namespaced: metadata.namespace is required")
    else:
        meta.pop("namespace", None)
    if not meta.get("name"):
        prefix = meta.get("generateName")
        if not prefix:
            raise Invalid(f"{rt.kind}: metadata.name or metadata.generateName is required")
        rng = rng or _RNG
        candidate = generate_name(prefix, rng)
        for _ in range(15):
            if name_taken is None or not name_taken(candidate):
                break
            candidate = generate_name(prefix, rng)
        meta["name"] = candidate
    for server_field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
        meta.pop(server_field, None)
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = now_rfc3339()
    meta["generation"] = 1
    return new


def check_subresource(rt: ResourceType, subresource: str | None) -> None:
    """``NotFound`` for a subresource the kind does not serve (only ``status`` exists)."""
    if subresource not in (None, "status"):
        raise NotFound(f"the server could not find the requested resource ({subresource} subresource)")
    if subresource == "status" and not rt.has_status:
        raise NotFound(f"the server could not find the requested resource ({rt.qualified}/status)")


def update_target(rt: ResourceType, obj: Obj) -> tuple[str | None, str]:
    """The (namespace, name) an update of ``obj`` addresses; ``Invalid`` without a name."""
    meta_in = obj.get("metadata") or {}
    name = meta_in.get("name")
    if not name:
        raise Invalid(f"{rt.kind}: metadata.name is required for an update")
    return (meta_in.get("namespace") if rt.namespaced else None), str(name)


def updated_object(
    rt: ResourceType, current: Obj, obj: Obj, *, subresource: str | None = None, copy: bool = True
) -> Obj:
    """What an update of ``current`` with ``obj`` stores (a new object; neither input changes).

    ``Conflict`` when ``obj`` carries a resourceVersion other than the current one (none means
    unconditional). The ``status`` subresource replaces only status; the main resource keeps
    the current status (for kinds that have the subresource) and the server-owned metadata
    (uid, creationTimestamp, namespace, deletion fields), and bumps ``generation`` when anything
    but metadata and status changed. The result carries the current resourceVersion: when it
    equals ``current`` the update is a no-op and nothing should be written. ``copy=False``:
    ``obj`` is handed over and its parts are shared, not copied.
    """
    check_subresource(rt, subresource)
    cur_meta = current["metadata"]
    wanted_rv = (obj.get("metadata") or {}).get("resourceVersion")
    if wanted_rv and str(wanted_rv) != cur_meta["resourceVersion"]:
        raise conflict(rt, cur_meta["name"])
    # Stored objects are never changed in place, so the parts an update keeps are shared with
    # ``current`` rather than copied; only what the caller passed in is copied.
    if subresource == "status":
        new: Obj = dict(current)
        new["metadata"] = dict(cur_meta)
        if "status" in obj:
            new["status"] = clone(obj["status"]) if copy else obj["status"]
        else:
            new.pop("status", None)
    else:
        new = clone(obj) if copy else {**obj, "metadata": dict(obj.get("metadata") or {})}
        new["apiVersion"] = rt.api_version
        new["kind"] = rt.kind
        if rt.has_status:
            if "status" in current:
                new["status"] = current["status"]
            else:
                new.pop("status", None)
        meta = _meta(new)
        for kept in _KEPT_ON_UPDATE:
            if kept in cur_meta:
                meta[kept] = cur_meta[kept]
            else:
                meta.pop(kept, None)
        meta["generation"] = cur_meta.get("generation", 1)
        if _spec_part(new) != _spec_part(current):
            meta["generation"] = meta["generation"] + 1
    new["metadata"]["resourceVersion"] = cur_meta["resourceVersion"]
    return new


def write_type(new: Obj) -> str:
    """How an update is written: ``DELETED`` when it removed the last finalizer of an object being
    deleted (the object goes), ``MODIFIED`` otherwise."""
    meta = new["metadata"]
    return DELETED if meta.get("deletionTimestamp") and not meta.get("finalizers") else MODIFIED


def deletion(current: Obj) -> tuple[str | None, Obj]:
    """What deleting ``current`` writes, as (event type, object), the object a new copy.

    ``(DELETED, current)`` without finalizers; ``(MODIFIED, marked)`` with finalizers, marked
    with ``deletionTimestamp`` (the object stays until the finalizers are removed); ``(None,
    current)`` when it is already marked: nothing to write.
    """
    meta = current["metadata"]
    if not meta.get("finalizers"):
        return DELETED, clone(current)
    if meta.get("deletionTimestamp"):
        return None, clone(current)
    marked: Obj = clone(current)
    marked["metadata"]["deletionTimestamp"] = now_rfc3339()
    marked["metadata"]["deletionGracePeriodSeconds"] = 0
    return MODIFIED, marked


# --- list and watch helpers -------------------------------------------------------------------


def selector_view(rt: ResourceType, obj: Obj) -> Obj:
    """The part of ``obj`` that selectors read (name, namespace, labels, the kind's field
    selector paths): enough to tell whether a previous version matched a watcher's selectors
    without keeping the whole previous object."""
    meta = obj.get("metadata") or {}
    view: Obj = {"metadata": {k: meta[k] for k in ("name", "namespace", "labels") if k in meta}}
    for path in rt.field_selectors:
        value: Any = obj
        parts = path.split(".")
        for part in parts:
            if not isinstance(value, dict) or part not in value:
                break
            value = value[part]
        else:
            node = view
            for part in parts[:-1]:
                node = node.setdefault(part, {})
                if not isinstance(node, dict):
                    break
            else:
                node[parts[-1]] = clone(value)
    return view


class ObjectFilter:
    """A watcher's or a list's namespace and selectors, parsed once."""

    def __init__(
        self, rt: ResourceType, namespace: str | None, labels: str | None, fields: str | None
    ) -> None:
        self.namespace = namespace
        self.labels = LabelSelector.parse(labels)
        self.fields = FieldSelector.parse(fields, rt.supported_field_selectors)
        self.everything = namespace is None and not self.labels and not self.fields

    def matches(self, obj: Obj) -> bool:
        if self.everything:
            return True
        meta = obj.get("metadata", {})
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        return self.labels.matches(meta.get("labels")) and self.fields.matches(obj)

    def event(self, type: str, obj: Obj, old: Obj | None) -> WatchEvent | None:
        """The event this watcher sees for a change, if any (selector transitions included).

        ``old`` is the previous version of a MODIFIED object (or its :func:`selector_view`). The
        event carries ``obj`` itself, shared with every other watcher of the change: watch events
        are read-only (copy one with :func:`clone` to change it). A change reaches every watcher,
        so one copy per watcher was most of what a write cost.
        """
        now = self.matches(obj)
        if type != MODIFIED or old is None:
            return WatchEvent(type, obj) if now else None
        before = self.matches(old)
        if now and before:
            return WatchEvent(MODIFIED, obj)
        if now:
            return WatchEvent(ADDED, obj)
        if before:
            return WatchEvent(DELETED, obj)
        return None


def bookmark(rt: ResourceType, resource_version: int | str) -> WatchEvent:
    """A bookmark: every change up to ``resource_version`` has been sent."""
    meta = {"resourceVersion": str(resource_version)}
    return WatchEvent(BOOKMARK, {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta})


def parse_resource_version(value: str, parameter: str = "resourceVersion") -> int:
    try:
        rv = int(value)
    except ValueError:
        raise BadRequest(f"{parameter}: {value!r} is not a valid resource version") from None
    if rv < 0:
        raise BadRequest(f"{parameter}: {value!r} is not a valid resource version")
    return rv


def encode_continue(rv: int, namespace: str, name: str) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": [namespace, name]}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode()


def decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        rv = int(data["rv"])
        namespace, name = data["start"]
        return rv, (str(namespace), str(name))
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise BadRequest("continue key is not valid: the continue parameter is malformed") from None


class Page:
    """One list page being filled, one object at a time: the definition of paging that
    :func:`select_page` applies to a sequence and that a store reading its objects in windows
    (:mod:`fleet.state`) applies window by window, so both page alike.

    Offer the objects in (namespace, name) order; :meth:`offer` says when the page is full (a
    further matching object exists, so a continue token follows). ``limit`` None or 0 means no
    limit; a negative one is a ``BadRequest``.
    """

    def __init__(self, flt: ObjectFilter, *, limit: int | None, start: tuple[str, str] | None) -> None:
        if limit is not None and limit < 0:
            raise BadRequest(f"limit: {limit} must not be negative")
        self.flt = flt
        self.limit = limit
        self.start = start
        self.items: list[Obj] = []
        #: Set when a matching object beyond the page was seen: the list continues.
        self.full = False

    def offer(self, obj: Obj) -> bool:
        """Take ``obj`` if it belongs on the page; True once the page is full (stop offering)."""
        meta = obj["metadata"]
        if self.start is not None and (meta.get("namespace") or "", meta["name"]) <= self.start:
            return False
        if not self.flt.matches(obj):
            return False
        if self.limit and len(self.items) == self.limit:
            self.full = True
            return True
        self.items.append(obj)
        return False

    def token(self, list_rv: int) -> str | None:
        """The continue token after this page (None when the list ends with it)."""
        if not self.full:
            return None
        last = self.items[-1]["metadata"]
        return encode_continue(list_rv, last.get("namespace") or "", last["name"])


def select_page(
    objects: Iterable[Obj],
    flt: ObjectFilter,
    *,
    limit: int | None,
    start: tuple[str, str] | None,
    list_rv: int,
) -> tuple[list[Obj], str | None]:
    """One page of a list: the objects (given in (namespace, name) order) after ``start`` that
    match, at most ``limit`` of them, and the continue token when more may follow. The objects
    are returned as given (a store clones them when it must)."""
    page = Page(flt, limit=limit, start=start)
    for obj in objects:
        if page.offer(obj):
            break
    return page.items, page.token(list_rv)


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

    def watcher_count(self, rt: ResourceType) -> int:
        return len(self._watchers.get(rt.key, ()))

    def object_count(self, rt: ResourceType) -> int:
        return sum(len(names) for names in self._objects.get(rt.key, {}).values())

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
