"""Read-only kinds whose objects are computed on every read: the serving core's ``Store`` for them.

Queues (from the quota ledger) and MemberClusters (from the kubeconfig and the syncer's health
hash) are not stored as objects: they are views of state that other roles keep in Redis, so they
are computed when read and can never disagree with it. :class:`ComputedKind` gives such a view
the Kubernetes verbs kubectl needs: get, list (selectors, paging) and watch; writes are 405.

Versions: a computed object carries the fleet's resourceVersion counter at the time it was read
(the counter every stored kind shares), so versions compare with the rest of the fleet's, and a
list's version is that of its moment.

Watch polls: every ``interval`` the view is computed again and compared, by a ``fingerprint`` of
each object that leaves out what changes on its own (the version, a probe's timestamp), with what
the watcher last saw; differences go out as ADDED, MODIFIED and DELETED. A watch from a version
older than the current counter cannot know what changed since, so it starts by sending every
object as MODIFIED (clients apply MODIFIED idempotently); from the current version it sends
nothing until something changes; without a version it sends the view as ADDED, like any watch.
A watch from a version the fleet has not reached waits up to ``fresh_wait`` for it, then ends with
``Too large resource version`` (504), as the stored kinds' watches do and kube-apiserver's watch
cache does, so that clients relist.
The cost is one computation per watcher per interval, which the few tools that watch these kinds
(``kubectl get queue -w``) can afford; an API replica's Redis connection is shared.

Computed fields of stored objects: a ``Queued`` job read by name (GET, hence ``kubectl describe
acjob NAME`` and ``fleet describe acjob NAME``) gets two status fields that are computed at that
moment and never stored (:func:`waiting_fields`):

* ``status.position``: its place in its leaf's queue, ``3 of 120 in queue root-team-a``;
* ``status.blocker``: what holds it now. The quota's exact refusal as the admission script would
  give it (``quota root/team-a: huawei.com/Ascend910 8 used + 4 requested exceeds max 8``), or
  ``can never be admitted: ...`` for a job larger than a ``max`` of its chain, or, when the quota
  would admit it, ``quota admits it; waiting for capacity or its turn: <its last pending
  message>`` (no fitting member, a reservation for a starving head or a preemptor, or simply
  jobs ahead of it).

The dispatcher writes the exact refusal only on the head of each refused request class; these
fields make every waiting job's answer exact when someone looks. They cost three small ledger
reads per GET (:func:`queues.job_wait`) and nothing for a list or a watch, which return the
stored objects as they are; a status write that sends them back has them dropped.
"""

from __future__ import annotations

import asyncio
import builtins
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

from fleet.apiserver import (
    ADDED,
    DELETED,
    FRESH_WAIT_SECONDS,
    MODIFIED,
    MethodNotAllowed,
    Obj,
    ObjectFilter,
    ResourceType,
    WatchEvent,
    bookmark,
    clone,
    decode_continue,
    not_found,
    parse_resource_version,
    select_page,
    version_reached,
)
from fleet.jobs import WAITING_FIELDS, Phase, WaitingFields, current_state, job_key, last_condition
from queues import Ledger, job_wait

__all__ = [
    "ComputedKind",
    "Fingerprint",
    "stable_uid",
    "waiting_fields",
    "without_waiting_fields",
]

#: What of an object a watch compares (the default leaves out only its resourceVersion).
Fingerprint = Callable[[Obj], Any]
_DEFAULT_INTERVAL: Final = 1.0


def stable_uid(rt: ResourceType, name: str) -> str:
    """The same uid for the same computed object, in every replica and across restarts."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{rt.group}/{rt.plural}/{name}"))


def _without_version(obj: Obj) -> Obj:
    copy: Obj = clone(obj)
    copy.get("metadata", {}).pop("resourceVersion", None)
    return copy


class ComputedKind:
    """A ``Store`` for one read-only kind whose objects ``compute`` returns (cluster-scoped).

    ``version`` returns the fleet's current resourceVersion; every object read gets it.
    """

    def __init__(
        self,
        rt: ResourceType,
        compute: Callable[[], Awaitable[builtins.list[Obj]]],
        version: Callable[[], Awaitable[str]],
        *,
        fingerprint: Fingerprint = _without_version,
        interval: float = _DEFAULT_INTERVAL,
        fresh_wait: float = FRESH_WAIT_SECONDS,
    ) -> None:
        self.rt = rt
        self._compute = compute
        self._version = version
        self._fingerprint = fingerprint
        self.interval = interval
        #: How long a watch from a version not reached yet waits for it (then 504, too_large).
        self.fresh_wait = fresh_wait

    async def snapshot(self) -> tuple[int, builtins.list[Obj]]:
        """The fleet's version and every object, by name, each carrying that version."""
        version = await self._version()
        objects = sorted(await self._compute(), key=lambda o: str(o["metadata"]["name"]))
        for obj in objects:
            obj.setdefault("apiVersion", self.rt.api_version)
            obj.setdefault("kind", self.rt.kind)
            meta = obj.setdefault("metadata", {})
            meta.setdefault("uid", stable_uid(self.rt, str(meta["name"])))
            meta["resourceVersion"] = version
        return int(version or 0), objects

    def _refuse(self, verb: str) -> MethodNotAllowed:
        return MethodNotAllowed(
            f"{self.rt.qualified} is read-only (computed by Fleet): {verb} is not supported"
        )

    # --- reads ---------------------------------------------------------------------------------

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        _, objects = await self.snapshot()
        for obj in objects:
            if obj["metadata"]["name"] == name:
                return obj
        raise not_found(rt, name)

    async def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> tuple[builtins.list[Obj], str, str | None]:
        flt = ObjectFilter(rt, None, label_selector, field_selector)
        start: tuple[str, str] | None = None
        if continue_token:
            _, start = decode_continue(continue_token)
        version, objects = await self.snapshot()
        items, token = select_page(objects, flt, limit=limit, start=start, list_rv=version)
        return items, str(version), token

    # --- writes --------------------------------------------------------------------------------

    async def create(self, rt: ResourceType, obj: Obj, *, dry_run: bool = False) -> Obj:
        raise self._refuse("create")

    async def update(
        self, rt: ResourceType, obj: Obj, *, subresource: str | None = None, dry_run: bool = False
    ) -> Obj:
        raise self._refuse("update")

    async def delete(
        self, rt: ResourceType, namespace: str | None, name: str, *, dry_run: bool = False
    ) -> Obj:
        raise self._refuse("delete")

    # --- watch ---------------------------------------------------------------------------------

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
        flt = ObjectFilter(rt, None, label_selector, field_selector)
        start = None if resource_version in (None, "", "0") else parse_resource_version(str(resource_version))
        loop = asyncio.get_running_loop()
        if start is not None:
            await version_reached(self._version, start, self.fresh_wait)
        version, objects = await self.snapshot()
        seen = {obj["metadata"]["name"]: obj for obj in objects if flt.matches(obj)}
        if start is None or start < version:
            first = ADDED if start is None else MODIFIED
            for obj in seen.values():
                yield WatchEvent(first, clone(obj))
        next_bookmark = loop.time() + bookmark_interval if bookmark_interval else None
        next_poll = loop.time() + self.interval
        while True:
            due = next_poll if next_bookmark is None else min(next_poll, next_bookmark)
            await asyncio.sleep(max(0.0, due - loop.time()))
            moment = loop.time()
            if next_bookmark is not None and moment >= next_bookmark:
                next_bookmark = moment + (bookmark_interval or 0)
                yield bookmark(rt, version)
            if moment < next_poll:
                continue
            next_poll = moment + self.interval
            version, objects = await self.snapshot()
            now = {obj["metadata"]["name"]: obj for obj in objects if flt.matches(obj)}
            for name, obj in now.items():
                before = seen.get(name)
                if before is None:
                    yield WatchEvent(ADDED, clone(obj))
                elif self._fingerprint(before) != self._fingerprint(obj):
                    yield WatchEvent(MODIFIED, clone(obj))
            for name, obj in seen.items():
                if name not in now:
                    gone: Obj = clone(obj)
                    gone["metadata"]["resourceVersion"] = str(version)
                    yield WatchEvent(DELETED, gone)
            seen = now


# --- computed fields of a Queued job -------------------------------------------------------------


def waiting_fields(ledger: Ledger, obj: Obj) -> WaitingFields:
    """``status.position`` and ``status.blocker`` of a ``Queued`` job, computed now; empty for a
    job in any other state or not pending in the ledger. Synchronous: run it in a worker thread."""
    if current_state(obj) != Phase.QUEUED:
        return {}
    wait = job_wait(ledger, job_key(obj))
    if wait is None:
        return {}
    last = last_condition(obj) or {}
    return {"position": wait.where, "blocker": wait.blocker(str(last.get("message") or ""))}


def without_waiting_fields(obj: Obj) -> Obj:
    """``obj`` without the computed fields in its status (a copy when it had them)."""
    status = obj.get("status")
    if not isinstance(status, dict) or not any(f in status for f in WAITING_FIELDS):
        return obj
    return {**obj, "status": {k: v for k, v in status.items() if k not in WAITING_FIELDS}}
