"""Kubernetes Events about fleet objects: what ``kubectl describe`` lists under Events.

:func:`record_event` writes a core/v1 Event in the involved object's namespace (``default`` for
a cluster-scoped object, as Kubernetes does), shaped as the API server's events are:
``involvedObject`` (apiVersion, kind, name, namespace, uid), ``reason``, ``message``, ``type``,
``firstTimestamp``/``lastTimestamp``, ``count``, ``source.component``, ``reportingComponent``.

Repeats are aggregated as Kubernetes' event recorder aggregates them: one Event per object and
reason, with a count and the last time. The key is upstream's ``EventAggregatorByReasonFunc``
(k8s.io/client-go/tools/record/events_cache.go, used by the ``EventCorrelator`` every
client-go recorder runs): the source component, the involved object (kind, namespace, name,
uid, apiVersion), the type and the reason, and not the message. The Event's name is the object's
name and 16 hex digits of a hash of that key, so an occurrence meets the Event it repeats and
bumps it: ``count`` + 1, ``lastTimestamp`` now, ``message`` the latest one; ``firstTimestamp``
stays. A job refused for quota a thousand times, with a message that names the usage of the
moment each time, is one Event that says so, not a thousand.

Upstream differs in two details that do not fit a server-side store: its aggregator is a
per-process LRU cache that starts aggregating after 10 distinct messages in 10 minutes and
then writes a new Event whose message is prefixed ``(combined from similar events): ``; Fleet
aggregates from the first repeat, keeps the latest message as it is (so describe shows the
current reason), and since the Event is found by name in Redis every process (dispatcher
replicas across restarts, syncers, workers) aggregates into the same one.

Most events are first occurrences, so a create is tried first (one round trip, and many of
them share one pipeline in :func:`record_events`, or go with other writes in
:func:`event_call`); its ``AlreadyExists`` turns it into the bump.

:func:`events_for` reads the Events of one object (a range of the Events' involved index, see
:mod:`fleet.state.keys`, filtered by uid: the object's Events, not the kind's), oldest first,
which is what describe shows. :func:`delete_events_for` removes them once the object itself
is gone: Kubernetes bounds its Events with a TTL, Fleet (on Redis 7.0, which cannot expire a
hash field) by the life of the object they are about, so they never outgrow the jobs that exist.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fleet.apiserver import EVENT, AlreadyExists, Obj
from fleet.connections import ScriptCall
from fleet.state.objects import Objects
from fleet.timestamps import now_rfc3339
from queues import Fence

__all__ = ["delete_events_for", "event_call", "event_name", "events_for", "record_event", "record_events"]


def event_name(involved: Obj, reason: str, *, type: str = "Normal", component: str = "") -> str:
    """``<object-name>.<16 hex>``: the same for every occurrence of ``reason`` (of ``type``,
    reported by ``component``) about ``involved``, whatever its message: upstream's aggregation
    key (``EventAggregatorByReasonFunc``; see the module's docstring)."""
    meta = involved.get("metadata") or {}
    key = (
        component,
        "",  # source.host: Fleet's components do not report one
        str(involved.get("kind", "")),
        str(meta.get("namespace") or ""),
        str(meta["name"]),
        str(meta.get("uid", "")),
        str(involved.get("apiVersion", "")),
        type,
        reason,
        component,  # reportingController
        "",  # reportingInstance
    )
    digest = hashlib.sha256("\0".join(key).encode()).hexdigest()
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
    results = objects.create_many(EVENT, events, fence=fence)
    repeats = [e for e, result in zip(events, results, strict=True) if isinstance(result, AlreadyExists)]
    if len(repeats) == 1:
        _repeat(objects, repeats[0], fence)
    elif repeats:
        _repeat_many(objects, repeats, fence)


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
        "metadata": {
            "name": event_name(involved, reason, type=type, component=component),
            "namespace": _namespace(involved),
        },
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


def _bump(event: Obj) -> Callable[[Obj], Obj]:
    def bump(stored: Obj) -> Obj:
        stored["count"] = int(stored.get("count") or 1) + 1
        stored["lastTimestamp"] = now_rfc3339()
        stored["message"] = event["message"]
        stored["type"] = event["type"]
        return stored

    return bump


def _repeat_many(objects: Objects, events: Sequence[Obj], fence: Fence | None) -> None:
    """:func:`_repeat` of many Events: one read of them all and one pipeline of the bumps; one
    deleted meanwhile is recorded again on its own."""
    changes = [(e["metadata"]["namespace"], e["metadata"]["name"], _bump(e)) for e in events]
    stored = objects.mutate_many(EVENT, changes, subresource=None, fence=fence)
    for event, result in zip(events, stored, strict=True):
        if result is None:
            _repeat(objects, event, fence)


def _repeat(objects: Objects, event: Obj, fence: Fence | None) -> None:
    """Count one more occurrence of ``event`` (whose first one is stored, or was meanwhile): the
    stored Event takes its message and time; its first time stays."""
    meta = event["metadata"]
    bump = _bump(event)

    for _ in range(3):
        if objects.mutate(EVENT, meta["namespace"], meta["name"], bump, subresource=None, fence=fence):
            return
        try:
            objects.create(EVENT, event, fence=fence)  # deleted in between: first again
            return
        except AlreadyExists:
            continue


def events_for(objects: Objects, involved: Mapping[str, Any]) -> list[Obj]:
    """The Events about ``involved`` (matched by name, namespace and uid, in the namespace its
    Events go to), oldest first, as describe lists them: one range of the Events' involved
    index, whatever the kind holds (while that index is being rebuilt, the namespace)."""
    meta = involved.get("metadata") or {}
    selector = ",".join(
        (
            f"involvedObject.name={meta['name']}",
            f"involvedObject.namespace={meta.get('namespace') or ''}",
            f"involvedObject.uid={meta.get('uid') or ''}",
        )
    )
    found, _, _ = objects.list_page(EVENT, _namespace(involved), field_selector=selector)
    return sorted(found, key=lambda e: (e.get("lastTimestamp") or "", int(e["metadata"]["resourceVersion"])))


def delete_events_for(objects: Objects, involved: Mapping[str, Any]) -> int:
    """Delete the Events about ``involved`` (a removed object); returns how many went."""
    deleted = 0
    for event in events_for(objects, involved):
        meta = event["metadata"]
        if objects.delete(EVENT, meta.get("namespace"), meta["name"]) is not None:
            deleted += 1
    return deleted
