"""Redis connections for Fleet's long-running processes, built in one place.

Every process must survive Redis going away and coming back (a restart from its AOF, a
failover): the client retries a failed command with exponential backoff for about half a minute
before the error reaches the caller, and checks an idle connection before reusing it.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any, Final

import redis
from redis.backoff import ExponentialBackoff
from redis.commands.core import Script
from redis.exceptions import NoScriptError
from redis.retry import Retry

__all__ = ["DEFAULT_REDIS_URL", "redis_from_url", "run_script_many"]

DEFAULT_REDIS_URL: Final = "redis://127.0.0.1:6379/0"


def redis_from_url(url: str, *, retries: int = 12) -> redis.Redis:
    return redis.Redis.from_url(
        url,
        retry=Retry(ExponentialBackoff(cap=4.0, base=0.05), retries),
        retry_on_error=[redis.ConnectionError, redis.TimeoutError],
        health_check_interval=10,
        socket_connect_timeout=2.0,
        socket_keepalive=True,
    )


#: Per client, the scripts loaded through it: a pipeline's EVALSHAs go out once the script is.
_LOADED: weakref.WeakKeyDictionary[redis.Redis, set[str]] = weakref.WeakKeyDictionary()


def run_script_many(
    client: redis.Redis, script: Script, calls: Sequence[tuple[Sequence[Any], Sequence[Any]]]
) -> list[Any]:
    """The replies of many runs of ``script`` (each a (keys, args) pair) in one pipeline.

    The pipeline sends bare EVALSHAs: redis-py's script registration on a pipeline asks
    SCRIPT EXISTS first, a second round trip every time. Instead the script is loaded once per
    client before its first pipeline (fakeredis' TCP server drops the connection on a NOSCRIPT
    inside a pipeline, so that case is not left to happen on first use). A call that met
    NOSCRIPT anyway (Redis restarted without its scripts) did nothing, so it is run again
    through the loading path. One call goes without a pipeline. Other errors are raised.
    """
    if len(calls) == 1:
        keys, args = calls[0]
        return [script(keys=keys, args=args)]
    if not calls:
        return []
    loaded = _LOADED.setdefault(client, set())
    if script.sha not in loaded:
        client.script_load(script.script)
        loaded.add(script.sha)
    pipe = client.pipeline(transaction=False)
    for keys, args in calls:
        pipe.evalsha(script.sha, len(keys), *keys, *args)
    replies = list(pipe.execute(raise_on_error=False))
    for i, reply in enumerate(replies):
        if isinstance(reply, NoScriptError):
            keys, args = calls[i]
            replies[i] = script(keys=keys, args=args)
        elif isinstance(reply, Exception):
            raise reply
    return replies
