"""AsyncObjects beyond the Store conformance: watches outlive a Redis crash (and writes survive it),
and a watch that fell behind the retained history ends with 410 rather than skip changes."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio

from fleet.apiserver import Gone, WatchEvent
from fleet.state import DEFAULT_STATE_KEYS, AsyncObjects, Objects
from tests.fleet.state.conftest import RedisLane
from tests.support.kinds import ASCENDJOB
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.integration


def job(name: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {}}


def test_a_watch_continues_across_a_redis_crash_and_restart(redis_server: RedisServer) -> None:
    objects = Objects(redis_server.client())

    async def scenario() -> None:
        client = redis.asyncio.Redis(host="127.0.0.1", port=redis_server.port)
        store = AsyncObjects(client, block_ms=100)
        try:
            events = store.watch(ASCENDJOB, "default", resource_version=objects.resource_version())
            first = asyncio.ensure_future(anext(events))
            before = await asyncio.to_thread(objects.create, ASCENDJOB, job("before"))
            assert (await asyncio.wait_for(first, 5)).object == before
            await asyncio.to_thread(redis_server.restart)  # kill -9; AOF brings the writes back
            after = await asyncio.to_thread(Objects(redis_server.client()).create, ASCENDJOB, job("after"))
            assert int(after["metadata"]["resourceVersion"]) == int(before["metadata"]["resourceVersion"]) + 1
            event: WatchEvent = await asyncio.wait_for(anext(events), 15)
            assert event.object == after
            assert await store.get(ASCENDJOB, "default", "before") == before
            await events.aclose()  # type: ignore[attr-defined]
        finally:
            await store.close()
            await client.aclose()

    asyncio.run(scenario())


def test_a_watch_that_fell_behind_the_history_ends_with_410(redis_lane: RedisLane) -> None:
    objects = Objects(redis_lane.sync)

    async def scenario() -> None:
        async with redis_lane.replicas() as (store,):
            events = store.watch(ASCENDJOB, "default", resource_version=objects.resource_version())
            pending = asyncio.ensure_future(anext(events))
            created = await asyncio.to_thread(objects.create, ASCENDJOB, job("a"))
            assert (await asyncio.wait_for(pending, 5)).object == created
            # As if the stream had been trimmed past this replica while it could not read it.
            floors = DEFAULT_STATE_KEYS.floors
            await asyncio.to_thread(redis_lane.sync.hset, floors, "mindxdl.gitee.com/ascendjobs", 10**9)
            with pytest.raises(Gone, match="too old resource version"):
                await asyncio.wait_for(anext(events), 5)

    asyncio.run(scenario())
