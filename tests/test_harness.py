"""The Redis harness itself: the same commands on both lanes, and AOF survives a kill -9."""

from __future__ import annotations

import redis

from tests.support.redis_server import RedisServer


def test_lua_runs_on_both_lanes(redis_client: redis.Redis) -> None:
    script = redis_client.register_script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
    assert script(keys=["n"], args=[3]) == 3
    assert script(keys=["n"], args=[4]) == 7


def test_acknowledged_writes_survive_kill9(redis_server: RedisServer) -> None:
    client = redis_server.client()
    for i in range(100):
        client.rpush("log", i)
    redis_server.kill9()
    redis_server.start()
    assert redis_server.client().llen("log") == 100
