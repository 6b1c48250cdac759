"""The harness itself: the same commands on both Redis lanes, AOF survives a kill -9, and the
longest modules start first on every worker."""

from __future__ import annotations

import redis

from tests.support.ordering import longest_first, slice_sizes
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


def test_the_longest_modules_head_each_workers_slice_and_no_test_is_lost() -> None:
    """Under work stealing each worker starts on its share of the long modules, each module's
    tests together and in order, and every test runs once."""
    tests = [f"tests/fast_{i}.py::t" for i in range(20)]
    tests[3:3] = ["tests/b.py::one", "tests/b.py::two"]
    tests[10:10] = ["tests/a.py::one"]
    tests.append("tests/c.py::one")
    seconds = {"tests/a.py": 100.0, "tests/b.py": 60.0, "tests/c.py": 50.0}
    ordered = longest_first(tests, lambda t: t.split("::")[0], 3, seconds)
    assert sorted(ordered) == sorted(tests)
    sizes = slice_sizes(len(tests), 3)
    assert sizes == [8, 8, 8]
    heads = [ordered[0], ordered[8], ordered[16]]
    assert heads == ["tests/a.py::one", "tests/b.py::one", "tests/c.py::one"]
    assert ordered[9] == "tests/b.py::two"
    fast = [t for t in ordered if "fast" in t]
    assert fast == [t for t in tests if "fast" in t]
    assert longest_first(tests, lambda t: t.split("::")[0], 1, seconds) == tests
