"""Every job of every kind, as rows in memory: what the console lists, filters and counts.

A list page filtered by state or member, or a count of the jobs on each member, would otherwise
read every stored job (10,000 jobs are tens of megabytes of JSON). So the console keeps one row
per job, the way a Kubernetes informer keeps its cache: it lists each job kind once, then
follows the kind's watch from that list's version (one change stream per kind for the whole
replica, shared with every other watcher: :class:`fleet.state.AsyncObjects`). A watch that
fails (Redis away, 410 Gone) lists again and replaces that kind's rows. Filtering and paging
are then a pass over at most some tens of thousands of small tuples. The index starts with the
first console request, so a replica that never serves the console never pays for it.

A row holds what lists show: kind, namespace, name, state, member, queue, priority, created,
and the message of its last condition; the state and fields are read through :mod:`fleet.jobs`'
readers, so a change of how the status is written carries over. Whether a user may see a row is
not decided here (:mod:`fleet.endpoint.console.access` filters by the API's authorizer).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from fleet.apiserver import ADDED, DELETED, ERROR, MODIFIED, ResourceType
from fleet.cancelling import cancel_and_wait
from fleet.jobs import cluster_of, current_state, job_queue_of, last_condition, status_of
from fleet.kinds import FLEET_JOB_KINDS
from fleet.state import AsyncObjects

__all__ = ["JobIndex", "Row"]

log = logging.getLogger("fleet.endpoint.console")

#: Seconds before a failed watch lists its kind again.
_RETRY: Final = 1.0


@dataclass(frozen=True)
class Row:
    """One job as lists show it."""

    rt: ResourceType
    namespace: str
    name: str
    uid: str
    state: str
    member: str
    queue: str
    priority: int
    created: str
    message: str

    @property
    def kind(self) -> str:
        return self.rt.kind


def row_of(rt: ResourceType, obj: Mapping[str, Any]) -> Row:
    meta = obj.get("metadata") or {}
    last = last_condition(obj) or {}
    priority = status_of(obj).get("priority")
    return Row(
        rt=rt,
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        state=current_state(obj) or "",
        member=cluster_of(obj) or "",
        queue=job_queue_of(obj) or "",
        priority=int(priority) if isinstance(priority, int) else 0,
        created=str(meta.get("creationTimestamp") or ""),
        message=str(last.get("message") or ""),
    )


class JobIndex:
    """The rows of every job kind of ``store``, kept current (see the module docstring)."""

    def __init__(self, store: AsyncObjects, kinds: Iterable[ResourceType] = FLEET_JOB_KINDS) -> None:
        self.store = store
        self.kinds = tuple(kinds)
        self._rows: dict[tuple[str, str], dict[tuple[str, str], Row]] = {rt.key: {} for rt in self.kinds}
        self._tasks: list[asyncio.Task[None]] = []
        self._listed: dict[tuple[str, str], asyncio.Event] = {}
        #: Bumped on every change: what the console's live updates compare.
        self.generation = 0
        self._changed: asyncio.Condition | None = None

    # ---- life -----------------------------------------------------------------------------------

    def start(self) -> None:
        """Start following every kind (idempotent; call on the serving loop)."""
        if self._tasks:
            return
        self._changed = asyncio.Condition()
        for rt in self.kinds:
            self._listed[rt.key] = asyncio.Event()
            self._tasks.append(asyncio.create_task(self._follow(rt), name=f"console-index-{rt.plural}"))

    async def ready(self, timeout: float = 10.0) -> None:
        """Wait (at most ``timeout`` seconds) until every kind was listed once."""
        self.start()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                for event in self._listed.values():
                    await event.wait()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:  # again while one runs on: a cancel lost in a Redis call
            with contextlib.suppress(asyncio.CancelledError, Exception):  # each is awaited
                await cancel_and_wait(task)
        self._tasks.clear()

    # ---- reads ----------------------------------------------------------------------------------

    def rows(self) -> Iterator[Row]:
        for rows in self._rows.values():
            yield from rows.values()

    def find(self, rt: ResourceType, namespace: str, name: str) -> Row | None:
        return self._rows.get(rt.key, {}).get((namespace, name))

    async def wait_change(self, generation: int, timeout: float) -> int:
        """The generation once it passed ``generation`` (or as it is after ``timeout`` seconds)."""
        self.start()
        assert self._changed is not None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait_for(lambda: self.generation != generation)
        return self.generation

    # ---- following ------------------------------------------------------------------------------

    async def _bump(self) -> None:
        self.generation += 1
        assert self._changed is not None
        async with self._changed:
            self._changed.notify_all()

    async def _follow(self, rt: ResourceType) -> None:
        while True:
            try:
                await self._list_and_watch(rt)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # Redis away, a 410: list again after a pause
                log.info("event=console_index_relist kind=%s error=%r", rt.plural, error)
            await asyncio.sleep(_RETRY)

    async def _list_and_watch(self, rt: ResourceType) -> None:
        items, version, _ = await self.store.list(rt, None)
        self._rows[rt.key] = {(r.namespace, r.name): r for r in (row_of(rt, obj) for obj in items)}
        self._listed[rt.key].set()
        await self._bump()
        events = self.store.watch(rt, None, resource_version=version)
        try:
            async for event in events:
                if event.type == ERROR:
                    raise RuntimeError(f"watch ended: {event.object.get('message')}")
                if event.type not in (ADDED, MODIFIED, DELETED):
                    continue
                row = row_of(rt, event.object)
                rows = self._rows[rt.key]
                if event.type == DELETED:
                    rows.pop((row.namespace, row.name), None)
                else:
                    rows[(row.namespace, row.name)] = row
                await self._bump()
        finally:
            with contextlib.suppress(Exception):
                await events.aclose()  # type: ignore[attr-defined]


def select(
    rows: Iterable[Row],
    *,
    keep: Callable[[Row], bool],
    namespace: str = "",
    kind: str = "",
    state: str = "",
    member: str = "",
    name: str = "",
) -> list[Row]:
    """The rows ``keep`` lets through that match every filter given (``name``: a substring),
    newest first."""
    needle = name.strip().lower()
    found = [
        r
        for r in rows
        if (not namespace or r.namespace == namespace)
        and (not kind or r.rt.plural == kind)
        and (not state or r.state == state)
        and (not member or r.member == member)
        and (not needle or needle in r.name.lower())
        and keep(r)
    ]
    found.sort(key=lambda r: (r.created, r.namespace, r.name), reverse=True)
    return found
