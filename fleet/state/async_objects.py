"""The async face of the fleet's object storage: :class:`AsyncObjects`, the serving core's ``Store``.

The fleet endpoint runs as several stateless replicas, each with an AsyncObjects over one Redis:
what one replica writes, the others list and watch. Writes run the same script as the sync
:class:`~fleet.state.objects.Objects` and compute server-set metadata with the same functions
as MemoryStore (:mod:`fleet.apiserver.store`), so the three stores cannot disagree.

Lists read what their page holds, not the kind: a page is windows of the kind's index in list
order (``lua/page.lua``: ``ZRANGEBYLEX`` from the continue token's position, ``HMGET``, with the
version counter in the same atomic step), decoded and filtered until the page is full; the
Events of one object (``kubectl describe``) are one range of the Events' involved index. See
:class:`~fleet.state.wire.PageRead`, which the sync :meth:`Objects.list_page
<fleet.state.objects.Objects.list_page>` drives too, and :class:`~fleet.apiserver.store.Page`,
the paging MemoryStore applies. The list's resourceVersion is read with its first window;
continue tokens carry it, and once the kind's history has moved past it, 410. A list without a
limit of a whole kind reads the kind's hash and the counter in one MULTI, as it always did.
When an index is found short (objects stored before it existed), the list reads the kind's hash
instead, as lists did before the indexes, and the store rebuilds the index in the background, a
batch at a time.

Watch: each kind's change stream is read by one *pump* task per store (per API replica), not
by every watcher: the pump blocks on ``XREAD`` and puts each change on the queue of every
watcher of the kind, as MemoryStore notifies its watchers, so a thousand ``kubectl get -w``
cost one Redis connection per kind. A new watcher subscribes first and then reads its start:
the current objects (one MULTI with the counter) for a watch without a version, or the stream
after its version (``XRANGE`` and the kind's floor in one MULTI, 410 Gone when older) otherwise.
Changes it then receives from the pump at or below what it has read are skipped, so there is
no gap and no duplicate. Each watcher applies its own namespace and selectors; a MODIFIED entry
carries the previous version's selector view, so a label change turns into ADDED or DELETED
for a selecting watcher as Kubernetes does. Bookmarks carry the newest version the watcher
is known to have seen everything up to: after an idle ``XREAD`` the pump knows that every change
up to the counter it read before blocking has been delivered.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import random
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Final

import redis
import redis.asyncio

from fleet.apiserver import (
    ADDED,
    DELETED,
    FRESH_WAIT_SECONDS,
    MODIFIED,
    AlreadyExists,
    Conflict,
    Obj,
    ObjectFilter,
    ResourceType,
    WatchEvent,
    already_exists,
    bookmark,
    check_subresource,
    conflict,
    deletion,
    new_object,
    not_found,
    parse_resource_version,
    too_old,
    update_target,
    updated_object,
    version_reached,
    write_type,
)
from fleet.state.keys import (
    DEFAULT_STATE_KEYS,
    INVOLVED_INDEX,
    INVOLVED_KINDS,
    NAMES_INDEX,
    StateKeys,
    field_name,
    kind_name,
)
from fleet.state.scripts import async_script, async_write_script
from fleet.state.wire import (
    DELETE,
    PUT,
    REINDEX_BATCH,
    REINDEX_RETRY_S,
    REINDEX_TTL_MS,
    Change,
    PageRead,
    Write,
    decode,
    decode_entry,
    order,
    read_entries,
    reindex_batch,
    reindex_source,
    text,
)
from queues import Fence

__all__ = ["AsyncObjects"]

log = logging.getLogger("fleet.state")

_RETRIES: Final = 100
_NAME_TRIES: Final = 16
#: Entries one pump read takes at most.
_PUMP_COUNT: Final = 1000


@dataclass(eq=False)
class _Pump:
    """The one reader of a kind's change stream in this store; fans changes out to watchers."""

    kind: str
    #: Every change of the kind up to ``position`` has been handed to the watchers.
    position: int = 0
    #: Like ``position``, but also counting versions of other kinds (for bookmarks).
    safe: int = 0
    #: Set when the pump fell behind the retained history (its watchers get 410).
    floor: int = 0
    watchers: set[asyncio.Queue[Change | None]] = field(default_factory=set)
    task: asyncio.Task[None] | None = None
    #: Set when the last watcher left or the store closes: the pump ends at its next step
    #: even if a cancellation reached it as a connection error.
    stopped: bool = False


class AsyncObjects:
    """The serving core's ``Store`` over Redis (``redis.asyncio``); one per API replica."""

    def __init__(
        self,
        client: redis.asyncio.Redis,
        keys: StateKeys = DEFAULT_STATE_KEYS,
        *,
        history: int = 10_000,
        block_ms: int = 1000,
        fresh_wait: float = FRESH_WAIT_SECONDS,
    ) -> None:
        if history < 1:
            raise ValueError("history must be at least 1 change")
        self.client = client
        #: How long a watch from a version not reached yet waits for it (then 504, too_large).
        self.fresh_wait = fresh_wait
        self.keys = keys
        self.history = history
        self.block_ms = block_ms
        self._script = async_write_script(client, keys)
        self._page = async_script(client, keys, "page")
        self._reindex = async_script(client, keys, "reindex")
        self._reindexing: dict[tuple[str, str], asyncio.Task[bool]] = {}
        #: (kind, index) -> loop time after which a rebuild that did not complete may run again.
        self._reindex_due: dict[tuple[str, str], float] = {}
        self._pumps: dict[str, _Pump] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        self._rng = random.Random()

    # --- reads ---------------------------------------------------------------------------------

    async def _read(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        field_ = field_name(namespace if rt.namespaced else None, name)
        raw = await self.client.hget(self.keys.objects(kind_name(rt.key)), field_)
        return None if raw is None else decode(raw)

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        found = await self._read(rt, namespace, name)
        if found is None:
            raise not_found(rt, name)
        return found

    async def resource_version(self) -> str:
        return text(await self.client.get(self.keys.version) or 0)

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
        read = PageRead(
            self.keys,
            rt,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
            continue_token=continue_token,
        )
        while not read.done:
            if read.whole:
                pipe = self.client.pipeline(transaction=True)
                pipe.hgetall(self.keys.objects(read.kind))
                pipe.get(self.keys.version)
                pipe.hget(self.keys.floors, read.kind)
                read.feed_whole(*await pipe.execute())
            else:
                read.feed(await self._page(keys=[self.keys.version], args=read.args()))
        for index in read.unindexed:
            self._start_reindex(rt, index)
        return read.result()

    def _start_reindex(self, rt: ResourceType, index: str) -> None:
        """Rebuild one of the kind's indexes in the background: one rebuild per index and store
        at a time, and not again for a while after one (if the index is short again so soon,
        writers that do not keep it are still at work: a rolling upgrade)."""
        key = (kind_name(rt.key), index)
        task = self._reindexing.get(key)
        if task is not None and not task.done():
            return
        if asyncio.get_running_loop().time() < self._reindex_due.get(key, 0.0):
            return
        self._reindexing[key] = asyncio.create_task(
            self._reindex_task(rt, index), name=f"fleet-state-reindex:{index}:{key[0]}"
        )

    async def _reindex_task(self, rt: ResourceType, index: str) -> bool:
        done = await self.reindex(rt, index)
        self._reindex_due[kind_name(rt.key), index] = asyncio.get_running_loop().time() + REINDEX_RETRY_S
        return done

    async def reindex(self, rt: ResourceType, index: str = NAMES_INDEX) -> bool:
        """:meth:`Objects.reindex <fleet.state.objects.Objects.reindex>` on this store's client,
        yielding to the loop between batches."""
        kind = kind_name(rt.key)
        if index == INVOLVED_INDEX and kind not in INVOLVED_KINDS:
            return False
        token = uuid.uuid4().hex
        keys = [self.keys.version]
        head: builtins.list[str | int | bytes] = [kind, index]
        try:
            if not await self._reindex(keys=keys, args=[*head, "begin", token, REINDEX_TTL_MS]):
                return False
            source = reindex_source(self.keys, kind, index)
            cursor = 0
            while True:
                cursor, found = await self.client.hscan(source, cursor, count=REINDEX_BATCH[index])
                batch = reindex_batch(index, found)
                args = [*head, "add", token, REINDEX_TTL_MS, *batch]
                if batch and not await self._reindex(keys=keys, args=args):
                    return False
                if not cursor:
                    break
            done = bool(await self._reindex(keys=keys, args=[*head, "end", token, REINDEX_TTL_MS]))
            log.info("event=state_reindexed kind=%s index=%s complete=%s", kind, index, done)
            return done
        except (redis.RedisError, OSError) as error:
            log.warning("event=state_reindex_error kind=%s index=%s error=%r", kind, index, error)
            return False
        except Exception:  # a background task: say why; lists keep falling back to the kind
            log.exception("event=state_reindex_error kind=%s index=%s", kind, index)
            return False

    # --- writes --------------------------------------------------------------------------------

    async def _run(self, write: Write) -> Obj:
        keys, args = write.keys_and_args(self.keys, self.history)
        return write.result(await self._script(keys=keys, args=args))

    async def create(
        self, rt: ResourceType, obj: Obj, *, dry_run: bool = False, fence: Fence | None = None
    ) -> Obj:
        generated = not (obj.get("metadata") or {}).get("name")
        tries = _NAME_TRIES if generated else 1
        for attempt in range(tries):
            new = new_object(rt, obj, rng=self._rng)
            if dry_run:
                meta = new["metadata"]
                if await self._read(rt, meta.get("namespace"), meta["name"]) is not None:
                    raise already_exists(rt, meta["name"])
                return new
            try:
                return await self._run(Write(rt, new, PUT, "", ADDED, fence=fence))
            except AlreadyExists:
                if attempt == tries - 1:
                    raise
        raise AssertionError("unreachable")

    async def update(
        self,
        rt: ResourceType,
        obj: Obj,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        fence: Fence | None = None,
    ) -> Obj:
        check_subresource(rt, subresource)
        namespace, name = update_target(rt, obj)
        conditional = bool((obj.get("metadata") or {}).get("resourceVersion"))
        for _ in range(_RETRIES):
            current = await self.get(rt, namespace, name)
            new = updated_object(rt, current, obj, subresource=subresource)
            if new == current or dry_run:
                return new
            event = write_type(new)
            op = DELETE if event == DELETED else PUT
            write = Write(rt, new, op, current["metadata"]["resourceVersion"], event, current, fence)
            try:
                return await self._run(write)
            except Conflict:
                if conditional:
                    raise
        raise conflict(rt, name)

    async def delete(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        *,
        dry_run: bool = False,
        fence: Fence | None = None,
    ) -> Obj:
        for _ in range(_RETRIES):
            current = await self.get(rt, namespace, name)
            if dry_run:
                return current
            event, result = deletion(current)
            if event is None:
                return result
            op = DELETE if event == DELETED else PUT
            old = current if event == MODIFIED else None
            write = Write(rt, result, op, current["metadata"]["resourceVersion"], event, old, fence)
            try:
                return await self._run(write)
            except Conflict:
                continue
        raise conflict(rt, name)

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
        """Changes after ``resource_version`` (or ADDED for the current state when unset or 0)."""
        flt = ObjectFilter(rt, namespace, label_selector, field_selector)
        start = None if resource_version in (None, "", "0") else parse_resource_version(str(resource_version))
        pump = await self._subscribe(rt)
        queue: asyncio.Queue[Change | None] = asyncio.Queue()
        pump.watchers.add(queue)
        loop = asyncio.get_running_loop()
        try:
            # Subscribed first, then read the start: nothing can fall between the two.
            if start is None:
                backlog, seen = await self._snapshot(rt)
            else:
                await version_reached(self.resource_version, start, self.fresh_wait)
                backlog, seen = await self._since(rt, start), start
            for change in backlog:
                seen = max(seen, change.rv)
                event = flt.event(change.type, change.object, change.old)
                if event is not None:
                    yield event
            next_bookmark = loop.time() + bookmark_interval if bookmark_interval else None
            while True:
                if next_bookmark is None:
                    item = await queue.get()
                else:
                    try:
                        item = await asyncio.wait_for(queue.get(), max(0.0, next_bookmark - loop.time()))
                    except TimeoutError:
                        next_bookmark = loop.time() + (bookmark_interval or 0)
                        yield bookmark(rt, max(seen, pump.safe) if queue.empty() else seen)
                        continue
                if item is None:
                    raise too_old(seen, pump.floor)
                if item.rv <= seen:
                    continue
                seen = item.rv
                event = flt.event(item.type, item.object, item.old)
                if event is not None:
                    yield event
        finally:
            self._unsubscribe(pump, queue)

    async def _snapshot(self, rt: ResourceType) -> tuple[builtins.list[Change], int]:
        pipe = self.client.pipeline(transaction=True)
        pipe.hgetall(self.keys.objects(kind_name(rt.key)))
        pipe.get(self.keys.version)
        found, version = await pipe.execute()
        objs = sorted((decode(raw) for raw in found.values()), key=order)
        changes = [Change(int(obj["metadata"]["resourceVersion"]), ADDED, obj, None) for obj in objs]
        return changes, int(version or 0)

    async def _since(self, rt: ResourceType, start: int) -> builtins.list[Change]:
        kind = kind_name(rt.key)
        pipe = self.client.pipeline(transaction=True)
        pipe.hget(self.keys.floors, kind)
        pipe.xrange(self.keys.changes(kind), f"{start + 1}-0", "+")
        floor, entries = await pipe.execute()
        if floor is not None and start < int(text(floor)):
            raise too_old(start, int(text(floor)))
        return [decode_entry(entry_id, fields) for entry_id, fields in entries]

    async def _subscribe(self, rt: ResourceType) -> _Pump:
        kind = kind_name(rt.key)
        pump = self._pumps.get(kind)
        if pump is None or pump.task is None or pump.task.done():
            version = int(await self.client.get(self.keys.version) or 0)
            pump = self._pumps.get(kind)  # another watcher may have started one meanwhile
            if pump is None or pump.task is None or pump.task.done():
                pump = self._pumps[kind] = _Pump(kind, position=version, safe=version)
                pump.task = asyncio.create_task(self._pump(pump), name=f"fleet-state-pump:{kind}")
        return pump

    def _unsubscribe(self, pump: _Pump, queue: asyncio.Queue[Change | None]) -> None:
        pump.watchers.discard(queue)
        if not pump.watchers and self._pumps.get(pump.kind) is pump:
            del self._pumps[pump.kind]
            self._stop(pump)

    def _stop(self, pump: _Pump) -> None:
        pump.stopped = True
        if pump.task is not None and not pump.task.done():
            pump.task.cancel()
            self._stopping.add(pump.task)
            pump.task.add_done_callback(self._stopping.discard)

    async def _pump(self, pump: _Pump) -> None:
        stream = self.keys.changes(pump.kind)
        backoff = 0.05
        while not pump.stopped:
            try:
                pipe = self.client.pipeline(transaction=False)
                pipe.get(self.keys.version)
                pipe.hget(self.keys.floors, pump.kind)
                version, floor = await pipe.execute()
                if floor is not None and pump.position < int(text(floor)):
                    # Fell behind the retained history (Redis was away a long time): the
                    # watchers cannot be served without a gap, so they end with 410.
                    pump.floor = int(text(floor))
                    for queue in pump.watchers:
                        queue.put_nowait(None)
                    pump.position = pump.safe = int(version or 0)
                    continue
                reply = await self.client.xread(
                    {stream: f"{pump.position}-0"}, count=_PUMP_COUNT, block=self.block_ms
                )
                entries = read_entries(reply)
                if entries:
                    for entry_id, fields in entries:
                        change = decode_entry(entry_id, fields)
                        for queue in pump.watchers:
                            queue.put_nowait(change)
                        pump.position = change.rv
                    pump.safe = max(pump.safe, pump.position)
                else:
                    # Nothing after our position while we blocked: every change up to the
                    # counter read before blocking has been delivered.
                    pump.safe = max(pump.safe, pump.position, int(version or 0))
                backoff = 0.05
            except asyncio.CancelledError:
                raise
            except (redis.RedisError, OSError) as error:
                log.warning("event=state_pump_error kind=%s error=%r", pump.kind, error)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    async def close(self) -> None:
        """Stop the stream readers (open watches stop receiving changes) and any index rebuild;
        call before closing the client."""
        rebuilds, self._reindexing = list(self._reindexing.values()), {}
        for rebuild in rebuilds:
            rebuild.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await rebuild
        pumps, self._pumps = list(self._pumps.values()), {}
        for pump in pumps:
            self._stop(pump)
        for task in list(self._stopping):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def watcher_count(self, rt: ResourceType) -> int:
        pump = self._pumps.get(kind_name(rt.key))
        return 0 if pump is None else len(pump.watchers)
