"""The sync face of the fleet's object storage: :class:`Objects`, for the dispatcher, the RQ
workers and the syncers (plain threads and processes, no event loop).

Every write is one run of ``lua/write.lua`` (see :mod:`fleet.state`): the server-set metadata is
computed here by the same functions MemoryStore uses (:mod:`fleet.apiserver.store`), from the
current object read just before, and the script stores the result only if the object is still
at the version that was read. So an update is read-compute-write with optimistic concurrency:
a conditional write (the caller's object carries a resourceVersion) answers ``Conflict`` when
someone wrote in between; an unconditional one reads again and retries, as the Kubernetes API
server does. :meth:`Objects.mutate` is the retry loop callers want most: it hands the current
object to a function and writes what the function returns.

A write may carry a :class:`queues.Fence` (a lease key and the token the writer holds): the
script checks it first and writes nothing when the lease has moved on, raising
:class:`queues.Fenced`, as the quota ledger does.
"""

from __future__ import annotations

import builtins
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

import redis

from fleet.apiserver import (
    ADDED,
    DELETED,
    MODIFIED,
    AlreadyExists,
    Conflict,
    NotFound,
    Obj,
    ResourceType,
    WatchEvent,
    check_subresource,
    clone,
    conflict,
    deletion,
    new_object,
    not_found,
    parse_resource_version,
    too_old,
    update_target,
    updated_object,
    write_type,
)
from fleet.connections import ScriptCall, run_script_many
from fleet.state.keys import (
    DEFAULT_STATE_KEYS,
    DELETING_INDEX,
    INVOLVED_INDEX,
    INVOLVED_KINDS,
    NAMES_INDEX,
    StateKeys,
    field_name,
    kind_name,
)
from fleet.state.scripts import script, write_script
from fleet.state.wire import (
    DELETE,
    PUT,
    REINDEX_BATCH,
    REINDEX_RETRY_S,
    REINDEX_TTL_MS,
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

__all__ = ["Objects", "order"]

#: How often a write that lost a race re-reads and tries again before giving up with Conflict.
_RETRIES: Final = 100
#: Tries for a name from ``generateName`` that is not taken.
_NAME_TRIES: Final = 16


def _update_write(
    rt: ResourceType, current: Obj, obj: Obj, subresource: str | None, fence: Fence | None
) -> Write | None:
    """The write that updates ``current`` with ``obj``; None when it would change nothing."""
    new = updated_object(rt, current, obj, subresource=subresource)
    if new == current:
        return None
    event = write_type(new)
    op = DELETE if event == DELETED else PUT
    return Write(rt, new, op, current["metadata"]["resourceVersion"], event, current, fence)


def _change_write(
    rt: ResourceType,
    current: Obj,
    change: Callable[[Obj], Obj | None],
    subresource: str | None,
    fence: Fence | None,
) -> Write | None:
    """The write that stores what ``change`` makes of (a copy of) ``current``; None for none.

    For a status write only the status is deep-copied (and the metadata's top level): the rest
    is never written back, and copying a whole job's spec per status change is most of its cost.
    """
    if subresource == "status":
        copy = dict(current)
        copy["metadata"] = dict(current["metadata"])
        if "status" in current:
            copy["status"] = clone(current["status"])
        wanted = change(copy)
    else:
        wanted = change(clone(current))
    if wanted is None:
        return None
    meta = wanted.setdefault("metadata", {})
    meta["name"] = current["metadata"]["name"]
    if rt.namespaced:
        meta["namespace"] = current["metadata"]["namespace"]
    meta["resourceVersion"] = current["metadata"]["resourceVersion"]
    return _update_write(rt, current, wanted, subresource, fence)


def _fields(rt: ResourceType, names: Sequence[tuple[str | None, str]]) -> builtins.list[str]:
    """The hash fields of (namespace, name) pairs of kind ``rt``."""
    return [field_name(namespace if rt.namespaced else None, name) for namespace, name in names]


def _deleting(fields: Any) -> bool:
    """Whether a change-stream entry's fields say its object is marked for deletion."""
    return bool(fields.get(b"deleting") or fields.get("deleting"))


class Objects:
    """Fleet objects in Redis, read and written synchronously. Thread-safe as the client is."""

    def __init__(
        self, client: redis.Redis, keys: StateKeys = DEFAULT_STATE_KEYS, *, history: int = 10_000
    ) -> None:
        if history < 1:
            raise ValueError("history must be at least 1 change")
        self.client = client
        self.keys = keys
        self.history = history
        self._script = write_script(client, keys)
        self._page = script(client, keys, "page")
        self._reindex = script(client, keys, "reindex")
        #: (kind, index) -> when a rebuild of ours that did not complete may be tried again.
        self._reindex_due: dict[tuple[tuple[str, str], str], float] = {}

    # --- reads ---------------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        """The stored object; ``NotFound`` when there is none."""
        found = self.try_get(rt, namespace, name)
        if found is None:
            raise not_found(rt, name)
        return found

    def try_get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        field = field_name(namespace if rt.namespaced else None, name)
        raw = self.client.hget(self.keys.objects(kind_name(rt.key)), field)
        return None if raw is None else decode(raw)

    def get_many(
        self, rt: ResourceType, names: Sequence[tuple[str | None, str]]
    ) -> builtins.list[Obj | None]:
        """The stored objects named (namespace, name), None where there is none: one round trip."""
        if not names:
            return []
        raws = self.client.hmget(self.keys.objects(kind_name(rt.key)), _fields(rt, names))
        return [None if raw is None else decode(raw) for raw in raws]

    def get_many_kinds(
        self, reads: Sequence[tuple[ResourceType, Sequence[tuple[str | None, str]]]]
    ) -> builtins.list[builtins.list[Obj | None]]:
        """:meth:`get_many` for several kinds at once, in one round trip (a pipeline of one
        HMGET per kind): a reader of many kinds, such as the dispatcher looking for namesakes of
        other kinds, waits on Redis once, not once per kind."""
        asked = [i for i, (_, names) in enumerate(reads) if names]
        if len(asked) <= 1:
            return [self.get_many(rt, names) for rt, names in reads]
        pipe = self.client.pipeline(transaction=False)
        for i in asked:
            rt, names = reads[i]
            pipe.hmget(self.keys.objects(kind_name(rt.key)), _fields(rt, names))
        out: builtins.list[builtins.list[Obj | None]] = [[] for _ in reads]
        for i, raws in zip(asked, pipe.execute(), strict=True):
            out[i] = [None if raw is None else decode(raw) for raw in raws]
        return out

    def scan(self, rt: ResourceType, cursor: int, count: int) -> tuple[int, builtins.list[Obj]]:
        """One step of a cursor over every object of the kind (HSCAN of its hash): the next
        cursor (0 at the end) and about ``count`` objects, in no order. An object stored from the
        first step to the last is returned at least once (maybe twice); one created or deleted
        meanwhile may or may not be. For a walk over a kind too large to read at once without
        stopping the caller (the dispatcher's reconcile); a list is :meth:`list`."""
        cursor, found = self.client.hscan(self.keys.objects(kind_name(rt.key)), cursor, count=count)
        assert isinstance(found, dict)  # fields with their values (no NOVALUES)
        return int(cursor), [decode(raw) for raw in found.values()]

    def walk(self, rt: ResourceType, count: int = 500) -> Iterator[Obj]:
        """Every object of the kind, about ``count`` read at a time (:meth:`scan` to its end): a
        walk holds one slice in memory, and an object stored from its start to its end comes at
        least once."""
        cursor = 0
        while True:
            cursor, found = self.scan(rt, cursor, count)
            yield from found
            if not cursor:
                return

    def walk_marked(self, rt: ResourceType, count: int = 500) -> Iterator[Obj]:
        """Every object of the kind marked for deletion, about ``count`` read at a time: the
        fields of its deleting index (:mod:`fleet.state.keys`), then their objects. An index not
        complete yet (data written before it) is rebuilt first; while another process rebuilds
        it, every object of the kind is walked instead (:meth:`walk`). As with :meth:`scan`, an
        object marked from the first step to the last comes at least once."""
        kind = kind_name(rt.key)
        if not any(self.client.hmget(self.keys.deleting_kept, [kind, "*"])) and not self._reindex_now(
            rt, DELETING_INDEX
        ):
            yield from (obj for obj in self.walk(rt, count) if obj["metadata"].get("deletionTimestamp"))
            return
        objects = self.keys.objects(kind)
        fields = self.client.sscan_iter(self.keys.deleting(kind), count=count)
        while chunk := [field for _, field in zip(range(count), fields, strict=False)]:
            for raw in self.client.hmget(objects, chunk):
                if raw is not None:  # deleted since the index was read
                    yield decode(raw)

    def list(
        self, rt: ResourceType, namespace: str | None = None, *, label_selector: str | None = None
    ) -> tuple[builtins.list[Obj], str]:
        """The objects (in one namespace, or all), ordered by namespace and name, and the
        resourceVersion they were read at (a watch from it misses nothing).

        One namespace is one range of the kind's index (the other namespaces are neither read
        nor decoded); the whole kind is its hash, read with the counter in one MULTI.
        """
        items, version, _ = self.list_page(rt, namespace, label_selector=label_selector)
        return items, version

    def list_page(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> tuple[builtins.list[Obj], str, str | None]:
        """One page of a list, as the API serves it (:meth:`AsyncObjects.list
        <fleet.state.async_objects.AsyncObjects.list>`, the same reads): the objects, the list's
        resourceVersion, and the continue token for the next page (None at the end). A page
        costs what it holds (and what its selectors skip), not the kind; Events with a
        fieldSelector on ``involvedObject.name`` cost the Events of that object.
        """

        def new_read() -> PageRead:
            return PageRead(
                self.keys,
                rt,
                namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=limit,
                continue_token=continue_token,
            )

        read = self._drive(new_read())
        if read.unindexed and all([self._reindex_now(rt, index) for index in sorted(read.unindexed)]):
            read = self._drive(new_read())
        return read.result()

    def _drive(self, read: PageRead) -> PageRead:
        """Send the reads ``read`` asks for until it is done."""
        while not read.done:
            if read.whole:
                pipe = self.client.pipeline(transaction=True)
                pipe.hgetall(self.keys.objects(read.kind))
                pipe.get(self.keys.version)
                pipe.hget(self.keys.floors, read.kind)
                read.feed_whole(*pipe.execute())
            else:
                read.feed(self._page(keys=[self.keys.version], args=read.args()))
        return read

    def _reindex_now(self, rt: ResourceType, index: str) -> bool:
        """:meth:`reindex`, unless one of ours did not complete less than a while ago."""
        due = self._reindex_due.get((rt.key, index), 0.0)
        if time.monotonic() < due:
            return False
        done = self.reindex(rt, index)
        if not done:
            self._reindex_due[rt.key, index] = time.monotonic() + REINDEX_RETRY_S
        return done

    def reindex(self, rt: ResourceType, index: str = NAMES_INDEX) -> bool:
        """Rebuild one of the kind's indexes (:data:`~fleet.state.keys.NAMES_INDEX`,
        :data:`~fleet.state.keys.DELETING_INDEX`, or for Events
        :data:`~fleet.state.keys.INVOLVED_INDEX`) from its objects, a batch at a time,
        as a read that found it short asks: data written before the index existed. Writers go on
        meanwhile and keep their own members (``lua/reindex.lua``). True when the index is
        complete afterwards; False when another process is rebuilding it, when writers that do
        not keep it still run, or when the kind has no such index (reads then fall back to the
        kind's hash, which is what lists cost before the indexes)."""
        kind = kind_name(rt.key)
        if index == INVOLVED_INDEX and kind not in INVOLVED_KINDS:
            return False
        token = uuid.uuid4().hex
        keys = [self.keys.version]
        head: builtins.list[str | int | bytes] = [kind, index]
        if not self._reindex(keys=keys, args=[*head, "begin", token, REINDEX_TTL_MS]):
            return False
        source = reindex_source(self.keys, kind, index)
        cursor = 0
        while True:
            cursor, found = self.client.hscan(source, cursor, count=REINDEX_BATCH[index])
            batch = reindex_batch(index, found)
            if batch and not self._reindex(keys=keys, args=[*head, "add", token, REINDEX_TTL_MS, *batch]):
                return False
            if not cursor:
                break
        return bool(self._reindex(keys=keys, args=[*head, "end", token, REINDEX_TTL_MS]))

    def resource_version(self) -> str:
        """The last resourceVersion handed out (of any kind)."""
        return text(self.client.get(self.keys.version) or 0)

    # --- writes --------------------------------------------------------------------------------

    def _run(self, write: Write) -> Obj:
        keys, args = write.keys_and_args(self.keys, self.history)
        return write.result(self._script(keys=keys, args=args))

    def _run_many(self, writes: builtins.list[Write]) -> builtins.list[Any]:
        """The raw replies of many writes sent in one pipeline (each still atomic on its own)."""
        return run_script_many(
            self.client, self._script, [w.keys_and_args(self.keys, self.history) for w in writes]
        )

    def create(self, rt: ResourceType, obj: Obj, *, fence: Fence | None = None, copy: bool = True) -> Obj:
        """Store a new object with server-set metadata; ``AlreadyExists`` when the name is taken.

        ``status`` is stored as given: trusted writers create objects with their first status.
        ``copy=False``: the caller hands ``obj`` over (its top level and metadata are still
        copied, the rest is shared; :func:`~fleet.apiserver.new_object`).
        """
        generated = not (obj.get("metadata") or {}).get("name")
        for attempt in range(_NAME_TRIES if generated else 1):
            try:
                return self._run(Write(rt, new_object(rt, obj, copy=copy), PUT, "", ADDED, fence=fence))
            except AlreadyExists:
                if attempt == (_NAME_TRIES if generated else 1) - 1:
                    raise
        raise AssertionError("unreachable")

    def create_call(
        self, rt: ResourceType, obj: Obj, *, fence: Fence | None = None
    ) -> tuple[ScriptCall, Callable[[Any], Obj]]:
        """:meth:`create` of a named object as a script call, not sent, for a caller that sends
        it with other scripts' runs in one round trip of its own
        (:func:`fleet.connections.run_scripts`), and the function that reads its reply: the
        stored object, or ``AlreadyExists``."""
        write = Write(rt, new_object(rt, obj), PUT, "", ADDED, fence=fence)
        keys, args = write.keys_and_args(self.keys, self.history)
        return (self._script, keys, args), write.result

    def create_many(
        self, rt: ResourceType, objs: Sequence[Obj], *, fence: Fence | None = None
    ) -> builtins.list[Obj | AlreadyExists]:
        """:meth:`create` of many named objects in one pipeline: per object the stored one, or
        the ``AlreadyExists`` its name met. ``Fenced`` when the fence no longer holds."""
        writes = [Write(rt, new_object(rt, obj), PUT, "", ADDED, fence=fence) for obj in objs]
        out: builtins.list[Obj | AlreadyExists] = []
        for write, reply in zip(writes, self._run_many(writes), strict=True):
            try:
                out.append(write.result(reply))
            except AlreadyExists as error:
                out.append(error)
        return out

    def update(
        self, rt: ResourceType, obj: Obj, *, subresource: str | None = None, fence: Fence | None = None
    ) -> Obj:
        """Replace the object (or, with ``subresource="status"``, its status).

        ``Conflict`` when ``obj`` carries a resourceVersion that is no longer current; without
        one the update is unconditional. ``NotFound`` when the object does not exist. An update
        that changes nothing writes nothing and returns the stored object.
        """
        check_subresource(rt, subresource)
        namespace, name = update_target(rt, obj)
        conditional = bool((obj.get("metadata") or {}).get("resourceVersion"))
        for _ in range(_RETRIES):
            current = self.get(rt, namespace, name)
            write = _update_write(rt, current, obj, subresource, fence)
            if write is None:
                return current
            try:
                return self._run(write)
            except Conflict:
                if conditional:
                    raise
        raise conflict(rt, name)

    def mutate(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        change: Callable[[Obj], Obj | None],
        *,
        subresource: str | None = "status",
        fence: Fence | None = None,
        attempts: int = 20,
        current: Obj | None = None,
    ) -> Obj | None:
        """Read-modify-write with retries: ``change`` gets a copy of the current object and
        returns the object to store (it may change the copy and return it), or None to leave
        it as it is. (For a status write the copy is of the status and the metadata's top
        level; the spec is shared, to be read, not changed in place.) Returns the stored object
        after the change (the current one when ``change`` returned None), or None when the
        object does not exist (or vanished).

        With the default ``subresource="status"`` only the status is written; pass
        ``subresource=None`` to write the main resource (labels, finalizers, spec). ``Conflict``
        when ``attempts`` writes all lost a race. ``current``: the object as the caller just read
        it, used for the first try instead of reading it again (a stale one costs one retry).
        """
        check_subresource(rt, subresource)
        for _ in range(attempts):
            if current is None:
                current = self.try_get(rt, namespace, name)
            if current is None:
                return None
            write = _change_write(rt, current, change, subresource, fence)
            if write is None:
                return current
            try:
                return self._run(write)
            except Conflict:
                current = None
                continue
            except NotFound:
                return None
        raise conflict(rt, name)

    def mutate_many(
        self,
        rt: ResourceType,
        changes: Sequence[tuple[str | None, str, Callable[[Obj], Obj | None]]],
        *,
        subresource: str | None = "status",
        fence: Fence | None = None,
        currents: Sequence[Obj | None] | None = None,
    ) -> builtins.list[Obj | None]:
        """:meth:`mutate` of many objects in two round trips: one read of them all (none when
        the caller passes them as just read, ``currents``), one pipeline of their writes. A write
        that lost a race goes through :meth:`mutate` alone. Results are in the order of
        ``changes``."""
        check_subresource(rt, subresource)
        if currents is None:
            currents = self.get_many(rt, [(namespace, name) for namespace, name, _ in changes])
        results: builtins.list[Obj | None] = list(currents)
        writes: builtins.list[tuple[int, Write]] = []
        for i, ((_, _, change), current) in enumerate(zip(changes, currents, strict=True)):
            if current is not None:
                write = _change_write(rt, current, change, subresource, fence)
                if write is not None:
                    writes.append((i, write))
        retry: builtins.list[int] = []
        for (i, write), reply in zip(writes, self._run_many([w for _, w in writes]), strict=True):
            try:
                results[i] = write.result(reply)
            except Conflict:
                retry.append(i)
            except NotFound:
                results[i] = None
        for i in retry:
            namespace, name, change = changes[i]
            results[i] = self.mutate(rt, namespace, name, change, subresource=subresource, fence=fence)
        return results

    def delete(
        self, rt: ResourceType, namespace: str | None, name: str, *, fence: Fence | None = None
    ) -> Obj | None:
        """Delete the object, or while it has finalizers mark it with ``deletionTimestamp`` (it
        goes when an update removes the last finalizer). Returns the deleted or marked object,
        None when there was none."""
        for _ in range(_RETRIES):
            current = self.try_get(rt, namespace, name)
            if current is None:
                return None
            event, result = deletion(current)
            if event is None:
                return result
            op = DELETE if event == DELETED else PUT
            old = current if event == MODIFIED else None
            write = Write(rt, result, op, current["metadata"]["resourceVersion"], event, old, fence)
            try:
                return self._run(write)
            except Conflict:
                continue
            except NotFound:
                return None
        raise conflict(rt, name)

    # --- changes -------------------------------------------------------------------------------

    def changes(
        self,
        rt: ResourceType,
        since: str,
        *,
        block_ms: int = 1000,
        count: int = 500,
        deleting_only: bool = False,
    ) -> tuple[builtins.list[WatchEvent], str]:
        """The changes of the kind after resourceVersion ``since`` (at most ``count``, waiting up
        to ``block_ms`` for the first when there are none), and the version to resume from.

        ``Gone`` when changes after ``since`` have been trimmed from the history: list again.
        Events carry the object as stored by the change (DELETED: its last state).
        ``deleting_only``: only the changes that left an object marked for deletion (or deleted
        one so marked), the others skipped without being decoded.
        """
        start = parse_resource_version(str(since))
        kind = kind_name(rt.key)
        stream = self.keys.changes(kind)
        pipe = self.client.pipeline(transaction=True)
        pipe.xrange(stream, f"{start + 1}-0", "+", count=count)
        pipe.hget(self.keys.floors, kind)
        pipe.get(self.keys.version)
        entries, floor, version = pipe.execute()
        self._check_floor(start, floor)
        if not entries and block_ms > 0:
            entries = read_entries(self.client.xread({stream: f"{start}-0"}, count=count, block=block_ms))
            if entries:
                self._check_floor(start, self.client.hget(self.keys.floors, kind))
        if not entries:
            return [], str(max(start, int(version or 0)))
        last = str(int(text(entries[-1][0]).split("-", 1)[0]))
        if deleting_only:
            entries = [(i, fields) for i, fields in entries if _deleting(fields)]
        changes = [decode_entry(entry_id, fields) for entry_id, fields in entries]
        return [WatchEvent(c.type, c.object) for c in changes], last

    @staticmethod
    def _check_floor(start: int, floor: object) -> None:
        if floor is not None and start < int(text(floor)):
            raise too_old(start, int(text(floor)))
