"""The objects marked for deletion, read without walking the kind: the deleting index.

A syncer reads the fleet jobs marked for deletion at its start and every ``resync_every``. With
100,000 queued jobs a walk of them cost it 5 s of CPU each time (issue 30); the index makes the
read cost what is marked. It must stay exact under every write, and a store written before it
existed must still give every marked object.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import redis

from fleet.apiserver import POD
from fleet.apiserver.resources import Obj
from fleet.state import Objects
from fleet.state import objects as objects_module
from fleet.state import wire as wire_module
from fleet.state.keys import DELETING_INDEX, kind_name
from fleet.state.wire import text

PODS = kind_name(POD.key)


def pod(name: str, *, held: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "team"}
    if held:
        metadata["finalizers"] = ["fleet.io/test"]
    return {"metadata": metadata, "spec": {}}


def release(objects: Objects, name: str) -> None:
    """Take the finalizer off: a marked object goes with it."""
    objects.mutate(
        POD, "team", name, lambda o: {**o, "metadata": {**o["metadata"], "finalizers": []}}, subresource=None
    )


def names(found: list[Obj]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in found)


def marked_in_store(client: redis.Redis, objects: Objects) -> list[str]:
    """What the kind's hash says is marked, read the slow way."""
    stored = client.hvals(objects.keys.objects(PODS))
    found = [wire_module.decode(raw) for raw in stored]
    return names([o for o in found if o["metadata"].get("deletionTimestamp")])


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many objects the sync store decodes, in ``[0]``."""
    count = [0]
    decode = wire_module.decode  # what the sync store imported

    def counted(raw: Any) -> Obj:
        count[0] += 1
        return decode(raw)

    monkeypatch.setattr(objects_module, "decode", counted)
    return count


def test_writes_keep_the_index_exactly(redis_client: redis.Redis) -> None:
    """Creates, marks, rewrites of marked objects and their going, in a random order: the index
    holds the marked objects' fields and nothing else, and the walk gives just them."""
    objects = Objects(redis_client)
    rng = random.Random(11)
    for _ in range(400):
        name = f"p{rng.randrange(30)}"
        current = objects.try_get(POD, "team", name)
        roll = rng.random()
        if current is None:
            objects.create(POD, pod(name, held=roll < 0.5))
        elif roll < 0.4:
            objects.delete(POD, "team", name)  # marked if held, else gone
        elif roll < 0.6 and current["metadata"].get("deletionTimestamp"):
            release(objects, name)
        else:
            objects.mutate(POD, "team", name, lambda o: {**o, "spec": {"step": 1}}, subresource=None)
    expected = marked_in_store(redis_client, objects)
    assert expected, "the sequence marked nothing: the test would prove nothing"
    index = sorted(text(f).split("/", 1)[1] for f in redis_client.smembers(objects.keys.deleting(PODS)))
    assert index == expected
    assert names(list(objects.walk_marked(POD))) == expected
    assert redis_client.hget(objects.keys.deleting_kept, "*") is not None  # the store's first write


def test_the_walk_reads_only_what_is_marked(redis_client: redis.Redis, decoded: list[int]) -> None:
    objects = Objects(redis_client)
    for i in range(300):
        objects.create(POD, pod(f"p{i:03}", held=i % 60 == 0))
    for i in range(0, 300, 60):
        objects.delete(POD, "team", f"p{i:03}")
    objects.delete(POD, "team", "p001")  # not held: gone, never marked
    decoded[0] = 0
    found = list(objects.walk_marked(POD, count=2))  # several steps of the index
    assert names(found) == ["p000", "p060", "p120", "p180", "p240"]
    assert decoded[0] == 5


def test_a_store_written_before_the_index_is_rebuilt_once(
    redis_client: redis.Redis, decoded: list[int]
) -> None:
    """An upgrade: marked objects the index never saw are found, the index is rebuilt from the
    kind and kept from then on; while another process rebuilds it the kind is walked instead."""
    objects = Objects(redis_client)
    for i in range(40):
        objects.create(POD, pod(f"p{i:02}", held=True))
    for i in (3, 17, 29):
        objects.delete(POD, "team", f"p{i:02}")
    redis_client.delete(objects.keys.deleting(PODS))  # as the old code left it
    redis_client.delete(objects.keys.deleting_kept)

    lock = objects.keys.reindex(DELETING_INDEX, PODS)
    redis_client.set(lock, "someone-else", px=60_000)
    decoded[0] = 0
    assert names(list(objects.walk_marked(POD))) == ["p03", "p17", "p29"]  # walked, all decoded
    assert decoded[0] == 40
    assert redis_client.hget(objects.keys.deleting_kept, PODS) is None

    redis_client.delete(lock)
    fresh = Objects(redis_client)  # a new process: no rebuild tried a while ago
    assert names(list(fresh.walk_marked(POD))) == ["p03", "p17", "p29"]
    assert redis_client.hget(objects.keys.deleting_kept, PODS) is not None
    assert redis_client.scard(objects.keys.deleting(PODS)) == 3
    decoded[0] = 0
    fresh.delete(POD, "team", "p05")
    assert names(list(fresh.walk_marked(POD))) == ["p03", "p05", "p17", "p29"]
    assert decoded[0] == 1 + 4  # the delete's read of p05, then the four marked ones


def test_a_rebuild_keeps_what_writers_change_meanwhile(redis_client: redis.Redis) -> None:
    """Objects marked, released or deleted between the rebuild's read of the kind and its
    batches end up in the index as their writers left them."""
    objects = Objects(redis_client)
    for i in range(10):
        objects.create(POD, pod(f"p{i}", held=True))
    for i in (1, 2, 3):
        objects.delete(POD, "team", f"p{i}")
    redis_client.delete(objects.keys.deleting(PODS))
    redis_client.delete(objects.keys.deleting_kept)
    script = objects._reindex
    interleaved: list[bool] = []

    def between(*, keys: list[str], args: list[Any]) -> Any:
        if text(args[2]) == "add" and not interleaved:
            interleaved.append(True)
            release(objects, "p1")  # read marked, gone now
            objects.delete(POD, "team", "p4")  # read unmarked, marked now
            objects.mutate(POD, "team", "p2", lambda o: {**o, "spec": {"s": 2}}, subresource=None)
        return script(keys=keys, args=args)

    objects._reindex = between  # type: ignore[assignment]
    assert objects.reindex(POD, DELETING_INDEX)
    assert interleaved
    index = sorted(text(f) for f in redis_client.smembers(objects.keys.deleting(PODS)))
    assert index == ["team/p2", "team/p3", "team/p4"]
    assert marked_in_store(redis_client, objects) == ["p2", "p3", "p4"]
    assert names(list(objects.walk_marked(POD))) == ["p2", "p3", "p4"]
