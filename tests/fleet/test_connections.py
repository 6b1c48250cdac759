"""Scripts run in batches: one pipeline, loaded once per client, and still right after a flush."""

from __future__ import annotations

import redis

from fleet.connections import run_script_many
from fleet.local.embedded import FakeRedisThread

_INCR = "return redis.call('INCRBY', KEYS[1], ARGV[1])"


def test_a_batch_runs_every_call_in_order(redis_client: redis.Redis) -> None:
    script = redis_client.register_script(_INCR)
    assert run_script_many(redis_client, script, []) == []
    assert run_script_many(redis_client, script, [(["n"], [2]), (["n"], [3]), (["m"], [1])]) == [2, 5, 1]
    assert run_script_many(redis_client, script, [(["n"], [1])]) == [6]


def test_a_batch_after_redis_lost_its_scripts_runs_them_all_once(redis_client: redis.Redis) -> None:
    script = redis_client.register_script(_INCR)
    run_script_many(redis_client, script, [(["n"], [1]), (["n"], [1])])
    redis_client.script_flush()  # as a restart does
    assert run_script_many(redis_client, script, [(["n"], [10]), (["n"], [100])]) == [12, 112]
    assert int(redis_client.get("n") or 0) == 112  # each call applied exactly once


def test_a_first_batch_works_on_the_embedded_fakeredis_server() -> None:
    """fleet up without redis-server: fakeredis' TCP server drops a connection on NOSCRIPT in a
    pipeline, so the script must be loaded before the first batch."""
    server = FakeRedisThread()
    server.start()
    try:
        client = redis.Redis.from_url(server.url, socket_timeout=5)
        script = client.register_script(_INCR)
        assert run_script_many(client, script, [(["n"], [1]), (["n"], [2])]) == [1, 3]
        client.close()
    finally:
        server.stop()
