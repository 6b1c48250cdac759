"""Scripts run in batches (of one script or several): one pipeline, loaded once per client, and
still right after a flush."""

from __future__ import annotations

import pytest
import redis

from fleet.connections import ScriptCall, run_script_many, run_scripts
from fleet.local.embedded import FakeRedisThread

_INCR = "return redis.call('INCRBY', KEYS[1], ARGV[1])"
_APPEND = "return redis.call('APPEND', KEYS[1], ARGV[1])"


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


def test_runs_of_different_scripts_share_one_pipeline_in_order(redis_client: redis.Redis) -> None:
    incr, append = redis_client.register_script(_INCR), redis_client.register_script(_APPEND)
    calls: list[ScriptCall] = [
        (incr, ["n"], [2]),
        (append, ["s"], ["ab"]),
        (incr, ["n"], [3]),
        (append, ["s"], ["c"]),
    ]
    assert run_scripts(redis_client, calls) == [2, 2, 5, 3]
    redis_client.script_flush()  # as a restart does: each call still runs exactly once
    assert run_scripts(redis_client, calls) == [7, 5, 10, 6]
    assert (redis_client.get("n"), redis_client.get("s")) == (b"10", b"abcabc")


def test_a_failing_run_does_not_stop_the_others(redis_client: redis.Redis) -> None:
    incr, append = redis_client.register_script(_INCR), redis_client.register_script(_APPEND)
    redis_client.set("s", "text")
    with pytest.raises(redis.ResponseError):
        run_scripts(redis_client, [(incr, ["s"], [1]), (append, ["s"], ["!"]), (incr, ["n"], [1])])
    assert (redis_client.get("s"), redis_client.get("n")) == (b"text!", b"1")
