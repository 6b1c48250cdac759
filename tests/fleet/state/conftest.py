"""Store lanes for the conformance tests: MemoryStore, AsyncObjects on fakeredis, AsyncObjects on Redis 7.

``async with lane.replicas(n) as stores`` makes the stores on the running event loop. A Redis lane
makes ``n`` AsyncObjects, each with its own client, over one Redis, as separate API replicas
would be; the memory lane hands out its one store ``n`` times (a process has one).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

import fakeredis
import pytest
import redis
import redis.asyncio

from fleet.apiserver import MemoryStore, Store
from fleet.state.async_objects import AsyncObjects


class Lane(Protocol):
    name: str

    def replicas(
        self, count: int = 1, *, history: int = 10_000
    ) -> AbstractAsyncContextManager[list[Store]]: ...


class MemoryLane:
    name = "memory"

    @asynccontextmanager
    async def replicas(self, count: int = 1, *, history: int = 10_000) -> AsyncIterator[list[Store]]:
        yield [MemoryStore(history=history, require_namespaces=False)] * count


class RedisLane:
    def __init__(self, name: str, sync: redis.Redis) -> None:
        self.name = name
        self.sync = sync

    def client(self) -> redis.asyncio.Redis:
        """A new asyncio client of the lane's Redis (call it on the loop that will use it)."""
        kwargs = self.sync.connection_pool.connection_kwargs
        if isinstance(self.sync, fakeredis.FakeRedis):
            return fakeredis.aioredis.FakeRedis(server=kwargs["server"])
        return redis.asyncio.Redis(host=kwargs["host"], port=kwargs["port"])

    @asynccontextmanager
    async def replicas(self, count: int = 1, *, history: int = 10_000) -> AsyncIterator[list[Store]]:
        stores = [AsyncObjects(self.client(), history=history, block_ms=100) for _ in range(count)]
        try:
            yield list(stores)
        finally:
            for store in stores:
                await store.close()
                await store.client.aclose()


def _redis_lane(request: pytest.FixtureRequest, name: str) -> RedisLane:
    sync: redis.Redis = request.getfixturevalue("fake_redis" if name == "fakeredis" else "real_redis")
    return RedisLane(name, sync)


@pytest.fixture(params=["memory", "fakeredis", "redis"])
def lane(request: pytest.FixtureRequest) -> Lane:
    return MemoryLane() if request.param == "memory" else _redis_lane(request, request.param)


@pytest.fixture(params=["fakeredis", "redis"])
def redis_lane(request: pytest.FixtureRequest) -> RedisLane:
    return _redis_lane(request, request.param)
