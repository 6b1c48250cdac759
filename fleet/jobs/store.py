"""The fleet's jobs of every kind in :class:`fleet.state.Objects`, by job key.

Each kind is stored under its own identity (:func:`fleet.kinds.fleet_kind`); the dispatcher,
workers and syncer name jobs by key (:func:`fleet.workloads.job_key`, which carries the kind), so
these helpers read and write a batch of keys of mixed kinds with one round trip per kind, results
in the order asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from fleet.apiserver import Obj, ResourceType
from fleet.kinds import FLEET_JOB_KINDS, fleet_kind
from fleet.state import Objects
from fleet.workloads import JobRef, WorkloadAdapter, job_ref
from queues import Fence

__all__ = [
    "Change",
    "get_jobs",
    "iter_jobs",
    "job_kind",
    "list_jobs",
    "mutate_job",
    "mutate_jobs",
    "try_get_job",
    "walk_jobs",
    "walk_marked_jobs",
]

Change = Callable[[Obj], Obj | None]

_KINDS: dict[int, ResourceType] = {}


def job_kind(adapter: WorkloadAdapter) -> ResourceType:
    """The fleet's resource for ``adapter``'s kind."""
    found = _KINDS.get(id(adapter))
    if found is None:
        found = _KINDS[id(adapter)] = fleet_kind(adapter)
    return found


def _groups(refs: Sequence[JobRef]) -> dict[int, tuple[ResourceType, list[int]]]:
    """Positions of ``refs`` per kind (keyed by the adapter's id, as adapters are singletons)."""
    groups: dict[int, tuple[ResourceType, list[int]]] = {}
    for i, ref in enumerate(refs):
        groups.setdefault(id(ref.adapter), (job_kind(ref.adapter), []))[1].append(i)
    return groups


def get_jobs(objects: Objects, keys: Sequence[str]) -> list[Obj | None]:
    """The stored jobs named by ``keys`` (None where there is none), in one round trip."""
    refs = [job_ref(key) for key in keys]
    out: list[Obj | None] = [None] * len(refs)
    groups = list(_groups(refs).values())
    reads = [(rt, [refs[i].names for i in positions]) for rt, positions in groups]
    for (_, positions), found in zip(groups, objects.get_many_kinds(reads), strict=True):
        for i, obj in zip(positions, found, strict=True):
            out[i] = obj
    return out


def iter_jobs(objects: Objects, keys: Sequence[str], batch: int = 500) -> Iterator[Obj]:
    """The stored jobs named by ``keys`` (those that exist), ``batch`` a round trip: a reader
    of many holds one batch at a time."""
    for start in range(0, len(keys), batch):
        yield from (obj for obj in get_jobs(objects, keys[start : start + batch]) if obj is not None)


def try_get_job(objects: Objects, key: str) -> Obj | None:
    ref = job_ref(key)
    return objects.try_get(job_kind(ref.adapter), ref.namespace, ref.name)


def mutate_job(
    objects: Objects,
    key: str,
    change: Change,
    *,
    subresource: str | None = "status",
    fence: Fence | None = None,
    current: Obj | None = None,
) -> Obj | None:
    """:meth:`fleet.state.Objects.mutate` of the job named by ``key``."""
    ref = job_ref(key)
    return objects.mutate(
        job_kind(ref.adapter),
        ref.namespace,
        ref.name,
        change,
        subresource=subresource,
        fence=fence,
        current=current,
    )


def mutate_jobs(
    objects: Objects,
    changes: Sequence[tuple[str, Change]],
    *,
    subresource: str | None = "status",
    fence: Fence | None = None,
    currents: Sequence[Obj | None] | None = None,
) -> list[Obj | None]:
    """:meth:`fleet.state.Objects.mutate_many` over jobs of any kinds, by key; results in order."""
    refs = [job_ref(key) for key, _ in changes]
    out: list[Obj | None] = [None] * len(refs)
    for rt, positions in _groups(refs).values():
        batch = [(refs[i].namespace, refs[i].name, changes[i][1]) for i in positions]
        given = [currents[i] for i in positions] if currents is not None else None
        stored = objects.mutate_many(rt, batch, subresource=subresource, fence=fence, currents=given)
        for i, obj in zip(positions, stored, strict=True):
            out[i] = obj
    return out


def walk_jobs(objects: Objects, count: int = 500) -> Iterator[Obj]:
    """Every fleet job of every kind, read about ``count`` at a time (:meth:`Objects.walk`): a
    walk holds one slice in memory, where a list of 100,000 jobs held 1.5 GB. A job stored from
    the walk's start to its end comes at least once (maybe twice); one created or deleted
    meanwhile may or may not: read the resourceVersion first to follow the changes from there."""
    for rt in FLEET_JOB_KINDS:
        yield from objects.walk(rt, count)


def walk_marked_jobs(objects: Objects) -> Iterator[Obj]:
    """Every fleet job marked for deletion, of every kind (:meth:`Objects.walk_marked`): what
    the jobs marked cost to read, not what the queue holds."""
    for rt in FLEET_JOB_KINDS:
        yield from objects.walk_marked(rt)


def list_jobs(objects: Objects) -> tuple[list[Obj], str]:
    """Every fleet job of every kind, and the resourceVersion read before the first kind was
    listed (a change stream followed from it misses nothing of any kind)."""
    items: list[Any] = []
    first = ""
    for rt in FLEET_JOB_KINDS:
        found, version = objects.list(rt)
        first = first or version
        items += found
    return items, first
