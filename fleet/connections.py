"""Redis connections for Fleet's long-running processes, built in one place.

Every process must survive Redis going away and coming back (a restart from its AOF, a
failover): the client retries a failed command with exponential backoff for about half a minute
before the error reaches the caller, and checks an idle connection before reusing it.
"""

from __future__ import annotations

from typing import Final

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

__all__ = ["DEFAULT_REDIS_URL", "redis_from_url"]

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
