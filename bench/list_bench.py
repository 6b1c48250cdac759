"""What a list page costs with many Events stored: paged lists and describe's Events, by index.

    .venv/bin/python -m bench.list_bench [--events 100000] [--per-job 5] [--repeat 5]

A private ``redis-server`` (tests/support, AOF off) holds ``--events`` Events about
``events / per-job`` AscendJobs in three namespaces, written through :class:`fleet.state.Objects`
(so with the indexes the write script keeps). Then, timed (wall clock, client and server on one
machine; the median of ``--repeat`` runs):

* ``page``: ``AsyncObjects.list(events, limit=500)``, what ``kubectl get events --chunk-size=500``
  asks first; ``continued``: the page after it (its continue token); ``namespace_page``: 500 of
  one namespace; ``selective_page``: 50 Events of one reason that 1 in 10 has;
* ``describe``: ``AsyncObjects.list`` with describe's fieldSelector (``involvedObject.name``,
  ``.namespace``, ``.uid``) in the job's namespace; ``events_for``: the sync face's read of one
  job's Events (the syncer's, on deletion);
* the same requests the way the code before the indexes read them (``*_whole``): ``HGETALL`` of
  the kind and the counter in one MULTI, decode everything, sort, page (the previous
  ``AsyncObjects.list``), and ``HSCAN MATCH <ns>/<name>.*`` (the previous ``events_for``);
* the upgrade, with the indexes deleted as data from before them has none: a page and a describe
  while they are missing (``*_unindexed``: the kind's hash is read, the store starts rebuilding
  them in the background), and the one-time rebuilds (``Objects.reindex``, a batch at a time):
  ``rebuild_index`` (from the hash's fields) and ``rebuild_involved`` (decoding every Event);
* the indexes' memory (``MEMORY USAGE``) beside the object hash's.

Ends with one JSON line of the figures (milliseconds, bytes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import redis
import redis.asyncio

from fleet.apiserver import EVENT
from fleet.apiserver.resources import Obj
from fleet.apiserver.store import ObjectFilter, decode_continue, select_page
from fleet.state import AsyncObjects, Objects, events_for
from fleet.state.keys import INVOLVED_INDEX, NAMES_INDEX, kind_name
from fleet.state.objects import order
from fleet.state.wire import decode, text
from tests.support.redis_server import RedisServer

NAMESPACES = ("team-a", "team-b", "team-c")


def _fill(objects: Objects, count: int, per_job: int) -> None:
    jobs = max(1, count // per_job)
    batch: list[Obj] = []
    for i in range(count):
        job = i % jobs
        ns = NAMESPACES[job % len(NAMESPACES)]
        reason = "Preempted" if i % 10 == 3 else "QuotaExceeded"
        batch.append(
            {
                "metadata": {"name": f"job-{job}.{i:08x}", "namespace": ns},
                "involvedObject": {
                    "apiVersion": "mindxdl.gitee.com/v1",
                    "kind": "AscendJob",
                    "name": f"job-{job}",
                    "namespace": ns,
                    "uid": f"uid-{job}",
                },
                "reason": reason,
                "message": f"quota root/a: cpu {i % 10} used + 2 requested exceeds max 10",
                "type": "Normal",
                "count": 1,
                "source": {"component": "fleet-dispatcher"},
            }
        )
        if len(batch) == 1000:
            objects.create_many(EVENT, batch)
            batch = []
    if batch:
        objects.create_many(EVENT, batch)


async def _whole_list(
    client: redis.asyncio.Redis,
    objects: Objects,
    namespace: str | None,
    *,
    label_selector: str | None = None,
    field_selector: str | None = None,
    limit: int | None = None,
    continue_token: str | None = None,
) -> tuple[list[Obj], str, str | None]:
    """The list as ``AsyncObjects.list`` read it before the indexes (git history: one MULTI of
    HGETALL and the counter, every object decoded and sorted, then paged)."""
    flt = ObjectFilter(EVENT, namespace, label_selector, field_selector)
    start = None
    list_rv = None
    if continue_token:
        list_rv, start = decode_continue(continue_token)
    pipe = client.pipeline(transaction=True)
    pipe.hgetall(objects.keys.objects(kind_name(EVENT.key)))
    pipe.get(objects.keys.version)
    found, version = await pipe.execute()
    if list_rv is None:
        list_rv = int(version or 0)
    prefix = f"{namespace}/" if namespace else None
    candidates = [decode(raw) for key, raw in found.items() if prefix is None or text(key).startswith(prefix)]
    candidates.sort(key=order)
    items, token = select_page(candidates, flt, limit=limit, start=start, list_rv=list_rv)
    return items, str(list_rv), token


def _whole_events_for(objects: Objects, involved: Obj) -> list[Obj]:
    """``events_for`` as it was: an HSCAN of the kind for the object's name prefix."""
    meta = involved["metadata"]
    key = objects.keys.objects(kind_name(EVENT.key))
    found = {}
    for field, raw in objects.client.hscan_iter(
        key, match=f"{meta['namespace']}/{meta['name']}.*", count=1000
    ):
        event = decode(raw)
        if event["involvedObject"]["uid"] == meta["uid"]:
            found[field] = event
    return list(found.values())


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


async def _timed(repeat: int, call: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    samples = []
    result = None
    for _ in range(repeat):
        began = time.perf_counter()
        result = await call()
        samples.append(time.perf_counter() - began)
    return _median_ms(samples), result


def _timed_sync(repeat: int, call: Callable[[], Any]) -> tuple[float, Any]:
    samples = []
    result = None
    for _ in range(repeat):
        began = time.perf_counter()
        result = call()
        samples.append(time.perf_counter() - began)
    return _median_ms(samples), result


async def _measure(server: RedisServer, args: argparse.Namespace) -> dict[str, Any]:
    sync = server.client()
    objects = Objects(sync, history=1000)
    began = time.perf_counter()
    _fill(objects, args.events, args.per_job)
    filled = time.perf_counter() - began
    kind = kind_name(EVENT.key)
    jobs = max(1, args.events // args.per_job)
    job = jobs // 2
    ns = NAMESPACES[job % len(NAMESPACES)]
    involved = {"metadata": {"name": f"job-{job}", "namespace": ns, "uid": f"uid-{job}"}}
    describe = f"involvedObject.name=job-{job},involvedObject.namespace={ns},involvedObject.uid=uid-{job}"
    figures: dict[str, Any] = {
        "events": args.events,
        "jobs": jobs,
        "fill_s": round(filled, 1),
        "objects_bytes": sync.memory_usage(objects.keys.objects(kind)),
        "index_bytes": sync.memory_usage(objects.keys.index(kind)),
        "involved_bytes": sync.memory_usage(objects.keys.involved(kind)),
    }
    aclient = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
    store = AsyncObjects(aclient)
    try:
        r = args.repeat
        whole_r = max(1, min(r, 3))
        figures["page_ms"], (first, _, token) = await _timed(r, lambda: store.list(EVENT, None, limit=500))
        assert len(first) == 500 and token
        figures["continued_ms"], (second, _, _) = await _timed(
            r, lambda: store.list(EVENT, None, limit=500, continue_token=token)
        )
        assert order(second[0]) > order(first[-1])
        figures["namespace_page_ms"], _ = await _timed(r, lambda: store.list(EVENT, ns, limit=500))
        figures["selective_page_ms"], (picked, _, _) = await _timed(
            r, lambda: store.list(EVENT, None, field_selector="reason=Preempted", limit=50)
        )
        assert len(picked) == 50
        figures["describe_ms"], (described, _, _) = await _timed(
            r, lambda: store.list(EVENT, ns, field_selector=describe)
        )
        figures["events_for_ms"], mine = _timed_sync(r, lambda: events_for(objects, involved))
        assert len(described) == len(mine) == args.per_job

        figures["page_whole_ms"], (old_first, _, old_token) = await _timed(
            whole_r, lambda: _whole_list(aclient, objects, None, limit=500)
        )
        assert [order(o) for o in old_first] == [order(o) for o in first]
        figures["continued_whole_ms"], _ = await _timed(
            whole_r, lambda: _whole_list(aclient, objects, None, limit=500, continue_token=old_token)
        )
        figures["namespace_page_whole_ms"], _ = await _timed(
            whole_r, lambda: _whole_list(aclient, objects, ns, limit=500)
        )
        figures["selective_page_whole_ms"], _ = await _timed(
            whole_r, lambda: _whole_list(aclient, objects, None, field_selector="reason=Preempted", limit=50)
        )
        figures["describe_whole_ms"], (old_described, _, _) = await _timed(
            whole_r, lambda: _whole_list(aclient, objects, ns, field_selector=describe)
        )
        figures["events_for_whole_ms"], old_mine = _timed_sync(
            whole_r, lambda: _whole_events_for(objects, involved)
        )
        assert len(old_described) == len(old_mine) == args.per_job

        # The upgrade: data written before the indexes existed.
        sync.delete(objects.keys.index(kind), objects.keys.involved(kind))
        figures["page_unindexed_ms"], _ = await _timed(1, lambda: store.list(EVENT, None, limit=500))
        figures["describe_unindexed_ms"], _ = await _timed(
            1, lambda: store.list(EVENT, ns, field_selector=describe)
        )
        for task in list(store._reindexing.values()):  # the store's background rebuilds
            assert await task
        sync.delete(objects.keys.index(kind), objects.keys.involved(kind))
        figures["rebuild_index_ms"], done = _timed_sync(1, lambda: objects.reindex(EVENT, NAMES_INDEX))
        assert done
        figures["rebuild_involved_ms"], done = _timed_sync(1, lambda: objects.reindex(EVENT, INVOLVED_INDEX))
        assert done
        figures["describe_reindexed_ms"], _ = await _timed(
            r, lambda: store.list(EVENT, ns, field_selector=describe)
        )
    finally:
        await store.close()
        await aclient.aclose()
        sync.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--per-job", type=int, default=5, help="Events per job")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleet-list-bench-") as tmp:
        server = RedisServer(Path(tmp), appendonly=False)
        server.start()
        try:
            figures = asyncio.run(_measure(server, args))
        finally:
            server.stop()
    for name, value in figures.items():
        print(f"{name:>26}: {value}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
