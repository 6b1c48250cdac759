"""Lists cost what their page costs: paging over the kind's index, describe's Events over the
Events' involved index, the same results as MemoryStore, and data from before the indexes.

The semantics tests run on the three lanes (MemoryStore, AsyncObjects on fakeredis and on Redis 7);
the cost tests count what the Redis stores decode and receive, which with the old whole-hash
reads grew with the kind.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
import redis.asyncio

from fleet.apiserver import EVENT, NODE, POD, Store
from fleet.apiserver.resources import Obj, ResourceType
from fleet.state import Objects, events_for, record_event
from fleet.state import async_objects as async_objects_module
from fleet.state import events as events_module
from fleet.state import objects as objects_module
from fleet.state import wire as wire_module
from fleet.state.async_objects import AsyncObjects
from fleet.state.keys import INVOLVED_INDEX, NAMES_INDEX, kind_name
from fleet.state.wire import text
from tests.fleet.state.conftest import Lane, RedisLane


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())  # type: ignore[arg-type]


def pod(name: str, namespace: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "labels": dict(labels)}, "spec": {}}


def key(obj: Obj) -> tuple[str, str]:
    return (obj["metadata"].get("namespace") or "", obj["metadata"]["name"])


async def pages(
    store: Store, rt: ResourceType, namespace: str | None, limit: int, **selectors: str
) -> tuple[list[list[tuple[str, str]]], str]:
    """Every page of a list, as keys, and the version its first page reported."""
    out: list[list[tuple[str, str]]] = []
    token: str | None = None
    first_rv = ""
    while True:
        items, rv, token = await store.list(rt, namespace, limit=limit, continue_token=token, **selectors)
        first_rv = first_rv or rv
        assert rv == first_rv  # every page reports the list's version
        out.append([key(o) for o in items])
        if token is None:
            return out, first_rv


# Namespaces one of which is a prefix of others, followed by characters below and above "/":
# list order is (namespace, name), not the order of the "namespace/name" strings.
NAMESPACES = ("team", "team-a", "team0", "teamz", "a")
NAMES = ("x", "x-1", "x.1", "x0", "y", "w-2.b")


def test_pages_return_every_object_once_in_list_order(lane: Lane) -> None:
    async def scenario() -> None:
        async with lane.replicas() as (store,):
            for ns in NAMESPACES:
                for name in NAMES:
                    await store.create(POD, pod(name, ns))
            for name in ("n", "n-1", "n.1", "n1", "m"):
                await store.create(NODE, {"metadata": {"name": name}})
            expected = sorted((ns, name) for ns in NAMESPACES for name in NAMES)
            for limit in (1, 4, 7, 30, 31, 100):
                got, _ = await pages(store, POD, None, limit)
                assert [k for page in got for k in page] == expected
                assert all(len(page) == limit for page in got[:-1])
                for ns in NAMESPACES:
                    got, _ = await pages(store, POD, ns, limit)
                    assert [k for page in got for k in page] == [k for k in expected if k[0] == ns]
            got, _ = await pages(store, NODE, None, 2)
            assert [k for page in got for k in page] == [("", n) for n in ("m", "n", "n-1", "n.1", "n1")]
            everything, _, token = await store.list(POD, None)
            assert [key(o) for o in everything] == expected and token is None
            in_team, _, _ = await store.list(POD, "team")
            assert [key(o) for o in in_team] == [k for k in expected if k[0] == "team"]
            # metadata.namespace narrows the list as the namespace does
            pinned, _, _ = await store.list(POD, None, field_selector="metadata.namespace=team-a", limit=3)
            assert [key(o) for o in pinned] == [k for k in expected if k[0] == "team-a"][:3]
            named, _, _ = await store.list(POD, None, field_selector="metadata.name=x-1")
            assert [key(o) for o in named] == [(ns, "x-1") for ns in sorted(NAMESPACES)]

    run(scenario)


def test_objects_created_and_deleted_between_pages(lane: Lane) -> None:
    async def scenario() -> None:
        async with lane.replicas(2) as (one, two):
            for i in range(10):
                await one.create(POD, pod(f"p{i}", "team"))
            first, rv, token = await two.list(POD, "team", limit=4)
            assert [key(o)[1] for o in first] == ["p0", "p1", "p2", "p3"]
            await one.create(POD, pod("p10", "team"))  # sorts before the token's p3: not seen
            await one.create(POD, pod("p35", "team"))  # after it: seen
            await one.create(POD, pod("p99", "team-a"))  # another namespace: not in this list
            await one.delete(POD, "team", "p5")  # gone before its page: not seen
            await one.delete(POD, "team", "p2")  # already listed
            rest: list[str] = []
            while token:
                page, page_rv, token = await two.list(POD, "team", limit=4, continue_token=token)
                assert page_rv == rv
                rest += [key(o)[1] for o in page]
            assert rest == ["p35", "p4", "p6", "p7", "p8", "p9"]

    run(scenario)


def test_selectors_that_skip_most_objects_still_fill_pages(lane: Lane) -> None:
    async def scenario() -> None:
        async with lane.replicas() as (store,):
            picked = []
            for i in range(400):
                labels = {"pick": "yes"} if i % 37 == 5 else {"pick": "no"}
                made = await store.create(POD, pod(f"p{i:03}", "team", **labels))
                if labels["pick"] == "yes":
                    picked.append(key(made))
            got, _ = await pages(store, POD, "team", 3, label_selector="pick=yes")
            assert [len(page) for page in got] == [3, 3, 3, 2]
            assert [k for page in got for k in page] == picked
            got, _ = await pages(store, POD, None, 4, label_selector="pick=nobody")
            assert got == [[]]

    run(scenario)


def test_lists_of_one_objects_events_as_describe_asks(lane: Lane) -> None:
    async def scenario() -> None:
        async with lane.replicas() as (store,):
            made = []
            for i, (ns, name, uid) in enumerate(
                [("team", "a", "u1"), ("team", "a", "u0"), ("team", "ab", "u2"), ("other", "a", "u3")]
            ):
                for reason in ("Queued", "Admitted"):
                    involved = {"kind": "AscendJob", "name": name, "namespace": ns, "uid": uid}
                    event = {
                        "metadata": {"name": f"z{i}-{reason}", "namespace": ns},
                        "involvedObject": involved,
                        "reason": reason,
                    }
                    made.append(await store.create(EVENT, event))
            # a node's Event: in "default", its involvedObject without a namespace
            node = {"kind": "Node", "name": "a", "uid": "n1"}
            await store.create(
                EVENT, {"metadata": {"name": "a.n", "namespace": "default"}, "involvedObject": node}
            )

            async def names(namespace: str | None, selector: str, **kw: Any) -> list[str]:
                items, _, _ = await store.list(EVENT, namespace, field_selector=selector, **kw)
                return [o["metadata"]["name"] for o in items]

            describe = "involvedObject.name=a,involvedObject.namespace=team,involvedObject.uid=u1"
            assert await names("team", describe) == ["z0-Admitted", "z0-Queued"]
            assert await names("team", "involvedObject.name=a,involvedObject.namespace=team") == [
                "z0-Admitted",
                "z0-Queued",
                "z1-Admitted",
                "z1-Queued",
            ]
            assert await names(None, "involvedObject.name=a") == [
                "a.n",
                "z3-Admitted",
                "z3-Queued",
                "z0-Admitted",
                "z0-Queued",
                "z1-Admitted",
                "z1-Queued",
            ]
            assert await names(None, "involvedObject.name=a,involvedObject.namespace=") == ["a.n"]
            assert await names(None, "involvedObject.name=a,reason=Queued,involvedObject.namespace=team") == [
                "z0-Queued",
                "z1-Queued",
            ]
            page, _, token = await store.list(EVENT, "team", field_selector="involvedObject.name=a", limit=3)
            assert [o["metadata"]["name"] for o in page] == ["z0-Admitted", "z0-Queued", "z1-Admitted"]
            assert token is not None
            assert await names("team", "involvedObject.name=a", continue_token=token) == ["z1-Queued"]
            assert await names("team", "involvedObject.name=nobody") == []
            # an Event whose involved object changes moves in the index
            moved = made[0]
            moved["involvedObject"] = {**moved["involvedObject"], "name": "ab"}
            await store.update(EVENT, moved)
            assert await names("team", "involvedObject.name=ab,involvedObject.namespace=team") == [
                "z0-Queued",
                "z2-Admitted",
                "z2-Queued",
            ]
            await store.delete(EVENT, "team", "z2-Queued")
            assert await names("team", "involvedObject.name=ab") == ["z0-Queued", "z2-Admitted"]
            assert await names("team", describe) == ["z0-Admitted"]

    run(scenario)


# --- what a page costs ----------------------------------------------------------------------


@dataclass
class Costs:
    decoded: int = 0
    received: int = 0

    def reset(self) -> None:
        self.decoded = self.received = 0


def _size(value: Any) -> int:
    if isinstance(value, bytes | str):
        return len(value)
    if isinstance(value, list | tuple):
        return sum(_size(v) for v in value)
    if isinstance(value, dict):
        return sum(_size(k) + _size(v) for k, v in value.items())
    return 8


@pytest.fixture
def costs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Costs]:
    """Objects decoded (every module that decodes) and reply bytes received from Redis."""
    found = Costs()
    decode = wire_module.decode

    def counted(raw: Any) -> Obj:
        found.decoded += 1
        return decode(raw)

    for module in (wire_module, async_objects_module, objects_module, events_module):
        if hasattr(module, "decode"):
            monkeypatch.setattr(module, "decode", counted)
    yield found


def count_replies(monkeypatch: pytest.MonkeyPatch, client: Any, found: Costs) -> None:
    """Add every reply the connections of ``client`` read (pipelines included) to ``found``."""
    cls = client.connection_pool.connection_class
    read = cls.read_response
    if asyncio.iscoroutinefunction(read):

        async def aread(self: Any, *args: Any, **kwargs: Any) -> Any:
            reply = await read(self, *args, **kwargs)
            found.received += _size(reply)
            return reply

        monkeypatch.setattr(cls, "read_response", aread)
    else:

        def sread(self: Any, *args: Any, **kwargs: Any) -> Any:
            reply = read(self, *args, **kwargs)
            found.received += _size(reply)
            return reply

        monkeypatch.setattr(cls, "read_response", sread)


KIND_SIZE = 3000


def fill_events(objects: Objects, count: int = KIND_SIZE) -> None:
    """``count`` Events about 1000 jobs in three namespaces; job-7 in team-a has three."""
    batch = []
    for i in range(count):
        job = i % 1000
        ns = ("team-a", "team-b", "team-c")[job % 3]
        involved = {"kind": "AscendJob", "name": f"job-{job}", "namespace": ns, "uid": f"u{job}"}
        batch.append(
            {
                "metadata": {"name": f"job-{job}.{i:06}", "namespace": ns},
                "involvedObject": involved,
                "reason": "QuotaExceeded",
                "message": f"quota root/a: cpu {i % 10} used + 2 requested exceeds max 10",
            }
        )
        if len(batch) == 500:
            objects.create_many(EVENT, batch)
            batch = []
    objects.create_many(EVENT, batch)


DESCRIBE = "involvedObject.name=job-7,involvedObject.namespace=team-b,involvedObject.uid=u7"


def test_a_page_reads_what_it_holds_not_the_kind(
    redis_lane: RedisLane, costs: Costs, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = Objects(redis_lane.sync)
    fill_events(objects)
    whole = _size(redis_lane.sync.hgetall(objects.keys.objects(kind_name(EVENT.key))))

    async def scenario() -> None:
        async with redis_lane.replicas() as (store,):
            assert isinstance(store, AsyncObjects)
            count_replies(monkeypatch, store.client, costs)
            await store.list(EVENT, None, limit=1)  # scripts loaded, connection made
            costs.reset()
            first, _, token = await store.list(EVENT, None, limit=50)
            assert len(first) == 50 and token
            assert costs.decoded <= 51 and costs.received < whole / 20
            costs.reset()
            second, _, token = await store.list(EVENT, None, limit=50, continue_token=token)
            assert len(second) == 50 and key(second[0]) > key(first[-1])
            assert costs.decoded <= 51 and costs.received < whole / 20
            costs.reset()
            in_namespace, _, _ = await store.list(EVENT, "team-c", limit=50)
            assert {key(o)[0] for o in in_namespace} == {"team-c"}
            assert costs.decoded <= 51 and costs.received < whole / 20
            costs.reset()
            described, _, _ = await store.list(EVENT, "team-b", field_selector=DESCRIBE)
            assert [o["metadata"]["name"] for o in described] == [
                "job-7.000007",
                "job-7.001007",
                "job-7.002007",
            ]
            assert costs.decoded == 3 and costs.received < whole / 200

    run(scenario)
    count_replies(monkeypatch, redis_lane.sync, costs)
    costs.reset()
    job7 = {"metadata": {"name": "job-7", "namespace": "team-b", "uid": "u7"}}
    assert len(events_for(objects, job7)) == 3
    assert costs.decoded == 3 and costs.received < whole / 200
    costs.reset()
    page, _, token = objects.list_page(EVENT, "team-a", limit=20)
    assert len(page) == 20 and token and costs.decoded == 21
    costs.reset()
    items, _ = objects.list(EVENT, "team-a")  # a namespace: the others are neither read nor decoded
    assert len(items) == 1002  # jobs 0, 3, ..., 999: three Events each
    assert costs.decoded == len(items) and costs.received < whole / 2


def test_lists_read_data_stored_before_the_indexes(redis_lane: RedisLane, costs: Costs) -> None:
    """An upgrade: objects written before the indexes existed list as they always did (from the
    kind's hash, objects outside the page not decoded), and the first reads have the indexes
    rebuilt (in the background for the API, inline for the sync face), after which lists read
    the indexes again."""
    sync = redis_lane.sync
    objects = Objects(sync)
    keys = objects.keys
    fill_events(objects, 600)
    for i in range(30):
        objects.create(POD, pod(f"p{i:02}", "team" if i % 2 else "team-a"))
    events, pods = kind_name(EVENT.key), kind_name(POD.key)
    sync.delete(keys.index(events), keys.involved(events), keys.index(pods))  # as the old code left it
    expected_pods = sorted((("team" if i % 2 else "team-a"), f"p{i:02}") for i in range(30))

    async def scenario() -> None:
        async with redis_lane.replicas() as (store,):
            assert isinstance(store, AsyncObjects)
            got, _ = await pages(store, POD, None, 7)
            assert [k for page in got for k in page] == expected_pods
            got, _ = await pages(store, POD, "team", 4)
            assert [k for page in got for k in page] == [k for k in expected_pods if k[0] == "team"]
            costs.reset()
            page, _, _ = await store.list(EVENT, None, limit=10)
            assert len(page) == 10 and costs.decoded == 11  # the hash is read, not decoded
            described, _, _ = await store.list(EVENT, "team-b", field_selector=DESCRIBE)
            assert [o["metadata"]["name"] for o in described] == ["job-7.000007"]
            assert len(store._reindexing) == 3  # one rebuild per index, however many reads
            for task in list(store._reindexing.values()):
                assert await task
            assert sync.zcard(keys.index(pods)) == 30
            assert sync.zcard(keys.index(events)) == sync.zcard(keys.involved(events)) == 600
            costs.reset()
            described, _, _ = await store.list(EVENT, "team-b", field_selector=DESCRIBE)
            assert [o["metadata"]["name"] for o in described] == ["job-7.000007"]
            assert costs.decoded == 1
            got, _ = await pages(store, POD, None, 7)
            assert [k for page in got for k in page] == expected_pods

    run(scenario)
    # A short index (an older writer added objects), or one with an entry too many, is rebuilt.
    sync.zrem(keys.index(pods), b"team\0p01")
    sync.zadd(keys.index(pods), {b"team\0gone": 0})
    sync.zadd(keys.index(pods), {b"team\0gone2": 0})
    items, _, _ = objects.list_page(POD, "team", limit=100)
    assert [key(o) for o in items] == [k for k in expected_pods if k[0] == "team"]
    assert sync.zcard(keys.index(pods)) == 30
    assert sorted(sync.zrange(keys.index(pods), 0, -1)) == sync.zrange(keys.index(pods), 0, -1)
    assert b"team\0gone" not in sync.zrange(keys.index(pods), 0, -1)
    sync.delete(keys.involved(events))
    job7 = {"metadata": {"name": "job-7", "namespace": "team-b", "uid": "u7"}}
    assert [e["metadata"]["name"] for e in events_for(objects, job7)] == ["job-7.000007"]
    assert sync.zcard(keys.involved(events)) == 600


def test_a_rebuild_runs_once_at_a_time_and_writers_go_on_meanwhile(redis_lane: RedisLane) -> None:
    sync = redis_lane.sync
    objects = Objects(sync)
    fill_events(objects, 50)
    events = kind_name(EVENT.key)
    sync.delete(objects.keys.involved(events))
    sync.set(objects.keys.reindex(INVOLVED_INDEX, events), "someone-else", px=60_000)
    assert not objects.reindex(EVENT, INVOLVED_INDEX)
    # meanwhile reads fall back to the kind and stay right
    job8 = {"metadata": {"name": "job-8", "namespace": "team-c", "uid": "u8"}}
    assert [e["metadata"]["name"] for e in events_for(objects, job8)] == ["job-8.000008"]
    sync.delete(objects.keys.reindex(INVOLVED_INDEX, events))
    assert objects.reindex(EVENT, INVOLVED_INDEX)
    assert sync.zcard(objects.keys.involved(events)) == 50

    # A rebuild interleaved with writes: what the writers change between the rebuild's reads
    # and its batches stays indexed as the writers left it.
    sync.delete(objects.keys.index(events), objects.keys.involved(events))
    script = objects._reindex
    interleaved_in: list[str] = []

    def interleaved(*, keys: list[str], args: list[Any]) -> Any:
        index = text(args[1])
        if text(args[2]) == "add" and index not in interleaved_in:
            interleaved_in.append(index)
            if index == NAMES_INDEX:
                objects.delete(EVENT, "team-a", "job-0.000000")  # read before, gone now
                objects.create(EVENT, {"metadata": {"name": "late", "namespace": "team-a"}, "reason": "R"})
            else:
                moved = objects.get(EVENT, "team-c", "job-8.000008")
                moved["involvedObject"]["name"] = "job-9"
                objects.update(EVENT, moved)  # read before, rewritten now: indexed by the writer
                # rewritten with the same member: the writer indexes it too
                objects.mutate(EVENT, "team-b", "job-1.000001", lambda e: {**e, "count": 2}, subresource=None)
                objects.delete(EVENT, "team-a", "job-3.000003")
                objects.create(EVENT, {"metadata": {"name": "later", "namespace": "team-a"}, "reason": "R"})
        return script(keys=keys, args=args)

    objects._reindex = interleaved  # type: ignore[assignment]
    assert objects.reindex(EVENT, NAMES_INDEX) and objects.reindex(EVENT, INVOLVED_INDEX)
    assert interleaved_in == [NAMES_INDEX, INVOLVED_INDEX]
    assert sync.zcard(objects.keys.index(events)) == sync.zcard(objects.keys.involved(events)) == 50
    job9 = {"metadata": {"name": "job-9", "namespace": "team-c", "uid": "u8"}}
    assert [e["metadata"]["name"] for e in events_for(objects, job9)] == ["job-8.000008"]
    assert events_for(objects, job8) == []
    job1 = {"metadata": {"name": "job-1", "namespace": "team-b", "uid": "u1"}}
    assert [e["count"] for e in events_for(objects, job1)] == [2]
    names = [key(o)[1] for o in objects.list_page(EVENT, "team-a", limit=100)[0]]
    assert "late" in names and "later" in names and "job-3.000003" not in names
    assert "late" in names and "job-0.000000" not in names


def test_writes_keep_the_indexes_exactly(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    rng = random.Random(7)
    job = objects.create(POD, pod("job", "team"))
    for step in range(300):
        name = f"p{rng.randrange(40)}"
        if rng.random() < 0.6:
            if objects.try_get(POD, "team", name) is None:
                objects.create(POD, pod(name, "team", step=str(step)))
            else:
                objects.mutate(POD, "team", name, lambda o: {**o, "spec": {"s": 1}}, subresource=None)
        else:
            objects.delete(POD, "team", name)
        record_event(objects, job, reason=f"R{step % 5}", message=f"m{step}", component="c")
    for rt in (POD, EVENT):
        kind = kind_name(rt.key)
        stored = [f for f in redis_client.hkeys(objects.keys.objects(kind)) if isinstance(f, bytes)]
        members = redis_client.zrange(objects.keys.index(kind), 0, -1)
        assert sorted(f.replace(b"/", b"\0", 1) for f in stored) == members
    assert redis_client.zcard(objects.keys.involved(kind_name(EVENT.key))) == 5
