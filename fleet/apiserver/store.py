"""Storage semantics behind the serving core: the :class:`Store` protocol and what every store
must do the same way.

The protocol is what the HTTP handlers (and in-process controllers) need from storage, with the
Kubernetes semantics that belong to storage: one resourceVersion sequence, optimistic concurrency
(409 on a stale ``metadata.resourceVersion``), server-set metadata (uid, creationTimestamp,
generation, generateName), the ``status`` subresource split, finalizers, and watch with a bounded
history (410 Gone beyond it). Request-level policy (decoding, validation, create-time defaulting)
lives in the app, so trusted in-process writers such as the simulator's controllers may call a
store directly on the same event loop.

The server-set metadata semantics are module-level functions (:func:`new_object`,
:func:`updated_object`, :func:`deletion`, :func:`write_type`) that every store calls, so the
in-memory store (:mod:`fleet.apiserver.memory`) and the Redis stores of :mod:`fleet.state` cannot
drift apart: a store only decides how to read the current object and how to write the result
atomically. The watch and list helpers (:class:`ObjectFilter`, :func:`selector_view`,
:class:`Page` and :func:`select_page`, the continue tokens) are shared the same way.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import marshal
import random
import threading
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Generic, Protocol, TypeVar

from fleet.apiserver.errors import (
    AlreadyExists,
    BadRequest,
    Cause,
    Conflict,
    Gone,
    Invalid,
    NotFound,
    Timeout,
)
from fleet.apiserver.resources import Obj, ResourceType
from fleet.apiserver.selectors import FieldSelector, LabelSelector
from fleet.timestamps import now_rfc3339

__all__ = [
    "ADDED",
    "BOOKMARK",
    "DELETED",
    "ERROR",
    "FRESH_WAIT_SECONDS",
    "MODIFIED",
    "TOO_LARGE_CAUSE",
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
    "too_large",
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


#: A JSON value and its copy's type.
_T = TypeVar("_T")
_K = TypeVar("_K")
_V = TypeVar("_V")


def clone(value: _T) -> _T:
    """A deep copy of a JSON value.

    ``marshal`` copies dicts, lists and scalars in C, an order of magnitude faster than
    ``copy.deepcopy`` and twice as fast as a Python walk; values it cannot handle (an in-process
    caller's own types) fall back to the walk.
    """
    raw: Any = value
    try:
        copied: _T = marshal.loads(marshal.dumps(raw))
    except ValueError:
        copied = _walk_clone(value)
    return copied


def content_digest(value: Any) -> bytes | None:
    """16 bytes naming a value's content, for the memories that answer again for the same
    content (a pod template's verdict, a job's): a hash of its ``marshal`` form, which tells
    apart every type a judge might (a list from a tuple, ``1`` from ``True`` and ``1.0``, key
    order included); ``None`` for a value marshal refuses (any type but the exact built-in ones),
    which is then judged each time. Marshal's version 2, which writes no back-references and no
    interning: from version 3 on its bytes follow the objects' reference counts as well as their
    content, so one content could name itself two ways (and be judged again)."""
    try:
        data = marshal.dumps(value, 2)
    except ValueError:
        return None
    return hashlib.blake2b(data, digest_size=16).digest()


class Memory(Generic[_K, _V]):
    """The last ``size`` answers of a pure judge, by key (usually a :func:`content_digest`),
    the least recently used forgotten first; safe across threads (the API judges in a pool)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._answers: OrderedDict[_K, _V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: _K) -> _V | None:
        with self._lock:
            known = self._answers.get(key)
            if known is not None:
                self._answers.move_to_end(key)
            return known

    def put(self, key: _K, answer: _V) -> None:
        with self._lock:
            self._answers[key] = answer
            while len(self._answers) > self.size:
                self._answers.popitem(last=False)


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


#: How long a read from a version the store has not reached yet waits for it (kube-apiserver's
#: watch cache ``blockTimeout``, ``waitUntilFreshAndBlock``), before :func:`too_large`.
FRESH_WAIT_SECONDS: Final = 3.0
#: The cause type client-go looks for (``metav1.CauseTypeResourceVersionTooLarge``).
TOO_LARGE_CAUSE: Final = "ResourceVersionTooLarge"


def too_large(requested: int, current: int) -> Timeout:
    """What a read (a list, a watch) from a version the store has not reached answers, as
    kube-apiserver's ``storage.NewTooLargeResourceVersionError`` does: 504 ``Timeout``, ``Timeout:
    Too large resource version: <requested>, current: <current>``, one cause of type
    ``ResourceVersionTooLarge``, ``retryAfterSeconds`` 1. client-go's reflector
    (``isTooLargeResourceVersionError``) and the Python client's watch then relist (the reflector
    from scratch, as it does after 410 Gone) rather than wait for a version that may never come:
    at the fleet it means the store lost history (Redis restored from an older snapshot), and
    waiting would silently skip the changes in between."""
    return Timeout(
        f"Timeout: Too large resource version: {requested}, current: {current}",
        causes=[Cause("", "Too large resource version", TOO_LARGE_CAUSE)],
        details={"retryAfterSeconds": 1},
    )


async def version_reached(
    current: Callable[[], Awaitable[int | str | None]], start: int, wait: float, *, poll: float = 0.1
) -> None:
    """Return once ``current()`` (the store's version, as a number or its text; none counts as
    0) is at least ``start``; after ``wait`` seconds without it, raise :func:`too_large`: the
    wait of a watch or list from a version a store has not reached yet (kube-apiserver's
    ``waitUntilFreshAndBlock``), one rule for every store."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while (now := int(await current() or 0)) < start:
        if loop.time() >= deadline:
            raise too_large(start, now)
        await asyncio.sleep(min(poll, max(0.0, deadline - loop.time())))


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
