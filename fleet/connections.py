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

__all__ = ["DEFAULT_REDIS_URL", "ScriptCall", "redis_from_url", "run_script_many", "run_scripts"]

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


#: One run of a script to send later: the script, its keys, its args. A ledger or store method
#: that offers its write in this form lets a caller send it in one pipeline with others.
ScriptCall = tuple[Script, Sequence[Any], Sequence[Any]]

#: Per client, the scripts loaded through it: a pipeline's EVALSHAs go out once the script is.
_LOADED: weakref.WeakKeyDictionary[redis.Redis, set[str]] = weakref.WeakKeyDictionary()


def run_scripts(client: redis.Redis, calls: Sequence[ScriptCall]) -> list[Any]:
    """The replies of many script runs (of one script or several), in order, in one pipeline.

    The pipeline sends bare EVALSHAs: redis-py's script registration on a pipeline asks
    SCRIPT EXISTS first, a second round trip every time. Instead each script is loaded once per
    client before its first pipeline (fakeredis' TCP server drops the connection on a NOSCRIPT
    inside a pipeline, so that case is not left to happen on first use). A call that met
    NOSCRIPT anyway (Redis restarted without its scripts) did nothing, so it is run again
    through the loading path. One call goes without a pipeline. The calls are independent, not a
    transaction: each runs (or is run again) even when another failed; then the first other
    error is raised.
    """
    if len(calls) == 1:
        script, keys, args = calls[0]
        return [script(keys=keys, args=args)]
    if not calls:
        return []
    loaded = _LOADED.setdefault(client, set())
    for script, _, _ in calls:
        if script.sha not in loaded:
            client.script_load(script.script)
            loaded.add(script.sha)
    pipe = client.pipeline(transaction=False)
    for script, keys, args in calls:
        pipe.evalsha(script.sha, len(keys), *keys, *args)
    replies = list(pipe.execute(raise_on_error=False))
    failed: Exception | None = None
    for i, reply in enumerate(replies):
        if isinstance(reply, NoScriptError):
            script, keys, args = calls[i]
            replies[i] = script(keys=keys, args=args)
        elif isinstance(reply, Exception) and failed is None:
            failed = reply
    if failed is not None:
        raise failed
    return replies


def run_script_many(
    client: redis.Redis, script: Script, calls: Sequence[tuple[Sequence[Any], Sequence[Any]]]
) -> list[Any]:
    """The replies of many runs of ``script`` (each a (keys, args) pair) in one pipeline
    (:func:`run_scripts`)."""
    return run_scripts(client, [(script, keys, args) for keys, args in calls])
