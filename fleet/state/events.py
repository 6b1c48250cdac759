"""Kubernetes Events about fleet objects: what ``kubectl describe`` lists under Events.

:func:`record_event` writes a core/v1 Event in the involved object's namespace (``default`` for
a cluster-scoped object, as Kubernetes does), shaped as the API server's events are:
``involvedObject`` (apiVersion, kind, name, namespace, uid), ``reason``, ``message``, ``type``,
``firstTimestamp``/``lastTimestamp``, ``count``, ``source.component``, ``reportingComponent``.

Repeats are aggregated as Kubernetes' event recorder does: the Event's name is the object's name
and 16 hex digits of a hash of (object uid, reason, message), so a repeat meets the Event it
repeats and bumps its ``count`` and ``lastTimestamp`` instead of adding another. Most events
are first occurrences, so a create is tried first (one round trip, and many of them share one
pipeline in :func:`record_events`, or go with other writes in :func:`event_call`); its
``AlreadyExists`` turns it into the bump.

:func:`events_for` reads the Events of one object (a scan of the kind's hash for the object's
name prefix, filtered by uid), oldest first, which is what describe shows.
:func:`delete_events_for` removes them once the object itself is gone: Kubernetes bounds its
Events with a TTL, Fleet (on Redis 7.0, which cannot expire a hash field) by the life of the
object they are about, so they never outgrow the jobs that exist.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fleet.apiserver.errors import AlreadyExists
from fleet.apiserver.kinds import EVENT
from fleet.apiserver.resources import Obj
from fleet.apiserver.store import now_rfc3339
from fleet.connections import ScriptCall
from fleet.state.keys import field_name, kind_name
from fleet.state.objects import Fence, Objects
from fleet.state.wire import decode

__all__ = ["delete_events_for", "event_call", "event_name", "events_for", "record_event", "record_events"]


def event_name(involved: Obj, reason: str, message: str) -> str:
    """``<object-name>.<16 hex>``: the same for every repeat of (uid, reason, message)."""
    meta = involved.get("metadata") or {}
    digest = hashlib.sha256("\0".join((meta.get("uid", ""), reason, message)).encode()).hexdigest()
    return f"{meta['name']}.{digest[:16]}"


def _namespace(involved: Mapping[str, Any]) -> str:
    return str((involved.get("metadata") or {}).get("namespace") or "default")


def record_event(
    objects: Objects,
    involved: Obj,
    *,
    type: str = "Normal",
    reason: str,
    message: str,
    component: str,
    fence: Fence | None = None,
) -> None:
    """Record that ``reason``/``message`` happened to ``involved`` (a stored object)."""
    record_events(objects, [(involved, reason, message)], type=type, component=component, fence=fence)


def event_call(
    objects: Objects,
    involved: Obj,
    *,
    type: str = "Normal",
    reason: str,
    message: str,
    component: str,
    fence: Fence | None = None,
) -> tuple[ScriptCall, Callable[[Any], None]]:
    """:func:`record_event` in two halves, for a caller that sends the Event's create with other
    scripts' runs in one round trip (:func:`fleet.connections.run_scripts`): the create, and the
    function to give its reply (a repeat then bumps the Event it repeats, one more round trip)."""
    event = _new_event(involved, reason, message, type, component)
    call, result = objects.create_call(EVENT, event, fence=fence)

    def settle(reply: Any) -> None:
        try:
            result(reply)
        except AlreadyExists:
            _repeat(objects, event, fence)

    return call, settle


def record_events(
    objects: Objects,
    entries: Sequence[tuple[Obj, str, str]],
    *,
    type: str = "Normal",
    component: str,
    fence: Fence | None = None,
) -> None:
    """Record many (involved object, reason, message) at once: the first occurrences in one
    pipeline of creates, each repeat as a bump of the Event it repeats."""
    events = [_new_event(involved, reason, message, type, component) for involved, reason, message in entries]
    for event, result in zip(events, objects.create_many(EVENT, events, fence=fence), strict=True):
        if isinstance(result, AlreadyExists):
            _repeat(objects, event, fence)


def _new_event(involved: Obj, reason: str, message: str, type: str, component: str) -> Obj:
    meta = involved.get("metadata") or {}
    now = now_rfc3339()
    reference: dict[str, Any] = {
        "apiVersion": involved.get("apiVersion", ""),
        "kind": involved.get("kind", ""),
        "name": meta["name"],
        "uid": meta.get("uid", ""),
    }
    if meta.get("namespace"):
        reference["namespace"] = meta["namespace"]
    return {
        "metadata": {"name": event_name(involved, reason, message), "namespace": _namespace(involved)},
        "involvedObject": reference,
        "reason": reason,
        "message": message,
        "type": type,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": "",
    }


def _repeat(objects: Objects, event: Obj, fence: Fence | None) -> None:
    """Count one more occurrence of ``event`` (whose first one is stored, or was meanwhile)."""
    meta = event["metadata"]

    def bump(stored: Obj) -> Obj:
        stored["count"] = int(stored.get("count") or 1) + 1
        stored["lastTimestamp"] = now_rfc3339()
        stored["type"] = event["type"]
        return stored

    for _ in range(3):
        if objects.mutate(EVENT, meta["namespace"], meta["name"], bump, subresource=None, fence=fence):
            return
        try:
            objects.create(EVENT, event, fence=fence)  # deleted in between: first again
            return
        except AlreadyExists:
            continue


def events_for(objects: Objects, involved: Mapping[str, Any]) -> list[Obj]:
    """The Events about ``involved`` (matched by uid), oldest first, as describe lists them."""
    meta = involved.get("metadata") or {}
    uid = meta.get("uid")
    pattern = _glob_escape(field_name(_namespace(involved), meta["name"])) + ".*"
    key = objects.keys.objects(kind_name(EVENT.key))
    found: dict[bytes, Obj] = {}  # by field: a scan may return a field twice
    for field, raw in objects.client.hscan_iter(key, match=pattern, count=1000):
        event = decode(raw)
        if (event.get("involvedObject") or {}).get("uid") == uid:
            found[field] = event
    return sorted(
        found.values(), key=lambda e: (e.get("lastTimestamp") or "", int(e["metadata"]["resourceVersion"]))
    )


def delete_events_for(objects: Objects, involved: Mapping[str, Any]) -> int:
    """Delete the Events about ``involved`` (a removed object); returns how many went."""
    deleted = 0
    for event in events_for(objects, involved):
        meta = event["metadata"]
        if objects.delete(EVENT, meta.get("namespace"), meta["name"]) is not None:
            deleted += 1
    return deleted


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
