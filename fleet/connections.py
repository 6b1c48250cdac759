"""Redis connections for Fleet's long-running processes, built in one place.

Every process must survive Redis going away and coming back (a restart from its AOF, a
failover): the client retries a failed command with exponential backoff for about half a minute
before the error reaches the caller, and checks an idle connection before reusing it.

Every role takes its Redis as one URL, in redis-py's form: ``redis://[[user]:password@]host:port/db``,
or ``rediss://`` for TLS with the certificate options as query arguments
(``?ssl_ca_certs=/etc/fleet/redis-ca.crt&ssl_certfile=...&ssl_keyfile=...&ssl_cert_reqs=required``).
A password in it is a secret: whatever shows the URL (a log line, an error, a summary) shows
:func:`mask_url` of it, and :func:`check_url` says what is wrong with a malformed one without
repeating any part of it that might be the password.

Through Redis Sentinel: ``redis+sentinel://[[user]:password@]host:port[,host:port...]/SERVICE[/db]``
names the sentinels (26379 when a port is left out) and the monitored service (the ``monitor``
name of ``sentinel.conf``); the user and password are the data nodes' (``?sentinel_password=``
for sentinels that demand one). The client asks the sentinels for the current primary and asks
again whenever a connection fails or the node it reaches has turned replica (redis-py's
``SentinelConnectionPool``), so a failover looks like any other Redis restart: the retries
above carry a command across it. redis-py has no URL for Sentinel; the scheme is the one
Kombu and others use for the same thing.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qs, unquote, urlsplit

import redis
import redis.asyncio
import redis.asyncio.sentinel
import redis.sentinel
from redis.backoff import ExponentialBackoff
from redis.commands.core import Script
from redis.connection import parse_url
from redis.exceptions import NoScriptError
from redis.retry import Retry

__all__ = [
    "DEFAULT_REDIS_URL",
    "MASK",
    "ONE_SHOT_RETRIES",
    "SENTINEL_SCHEME",
    "ScriptCall",
    "SentinelURL",
    "async_redis_from_url",
    "check_url",
    "mask_url",
    "parse_sentinel_url",
    "redis_from_url",
    "run_script_many",
    "run_scripts",
]

DEFAULT_REDIS_URL: Final = "redis://127.0.0.1:6379/0"
#: The URL scheme of a Redis reached through Sentinel (see the module).
SENTINEL_SCHEME: Final = "redis+sentinel"
_SENTINEL_PORT: Final = 26379

#: What stands for a password (or another secret) in a URL that is shown.
MASK: Final = "***"

#: Query arguments whose value is a secret (redis-py passes ``password``, ``ssl_password`` on).
_SECRET_ARGUMENT: Final = re.compile(r"(?i)([?&][^=&#]*(?:password|passwd|secret|token)[^=&#]*=)[^&#]*")


def mask_url(url: str) -> str:
    """``url`` with its password (and any secret query argument) replaced by ``***``.

    Robust to URLs that do not parse: the user part runs to the last ``@``, so a password with an
    unencoded ``/``, ``?``, ``#`` or ``@`` is masked whole (at worst more than the password is).
    """
    scheme, separator, rest = url.partition("://")
    if not separator:
        return url
    at = rest.rfind("@")
    if at >= 0:
        userinfo, after = rest[:at], rest[at + 1 :]
        user, colon, _password = userinfo.partition(":")
        rest = f"{user}:{MASK}@{after}" if colon else rest
    return f"{scheme}://{_SECRET_ARGUMENT.sub(lambda m: m.group(1) + MASK, rest)}"


@dataclass(frozen=True)
class SentinelURL:
    """A parsed ``redis+sentinel://`` URL."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None


def parse_sentinel_url(url: str) -> SentinelURL:
    """The parts of a ``redis+sentinel://`` URL; :class:`ValueError` (never naming the
    password) when one is missing or wrong."""
    parts = urlsplit(url)
    if parts.scheme != SENTINEL_SCHEME:
        raise ValueError(f"not a {SENTINEL_SCHEME}:// URL")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    username, colon, password = userinfo.partition(":")
    sentinels: list[tuple[str, int]] = []
    for address in hosts.split(","):
        host, _, port = address.strip().rpartition(":") if ":" in address else (address.strip(), "", "")
        if not host:
            raise ValueError(
                "no sentinel host:port (a password with '/', '?', '#' or '@' must be percent-encoded)"
            )
        if port and not port.isdigit():
            raise ValueError(f"sentinel {host}: port must be a number")
        sentinels.append((host, int(port) if port else _SENTINEL_PORT))
    path = [p for p in parts.path.split("/") if p]
    if not path or len(path) > 2:
        raise ValueError("the path must be /SERVICE or /SERVICE/DB (SERVICE: the name sentinels monitor)")
    if len(path) == 2 and not path[1].isdigit():
        raise ValueError("the database after the service name must be a number")
    query = parse_qs(parts.query)
    unknown = sorted(set(query) - {"sentinel_password"})
    if unknown:
        raise ValueError(f"unknown query argument {unknown[0]!r} (known: sentinel_password)")
    return SentinelURL(
        sentinels=tuple(sentinels),
        service=unquote(path[0]),
        db=int(path[1]) if len(path) == 2 else 0,
        username=unquote(username) or None if userinfo else None,
        password=unquote(password) if colon else None,
        sentinel_password=query["sentinel_password"][0] if "sentinel_password" in query else None,
    )


def check_url(url: str) -> str | None:
    """Why redis-py cannot use ``url`` (the URL shown masked), or ``None`` when it can."""
    if url.startswith(SENTINEL_SCHEME + "://"):
        try:
            parse_sentinel_url(url)
        except ValueError as error:
            return f"{mask_url(url)}: {error}"
        return None
    try:
        parse_url(url)  # type: ignore[no-untyped-call]
    except ValueError as error:
        text = str(error)
        if "Port" in text:  # urllib's words repeat what it took for the port: maybe the password
            text = "no valid host:port (a password with '/', '?', '#' or '@' in it must be percent-encoded)"
        return f"{mask_url(url)}: {text}"
    return None


#: Retries for a one-shot command (``fleet quota apply``, ``fleet member remove``): a person at a
#: terminal is told within a second that Redis does not answer, rather than after half a minute;
#: the long-running roles keep the default and ride through a restart.
ONE_SHOT_RETRIES: Final = 3


def redis_from_url(url: str, *, retries: int = 12) -> redis.Redis:
    """A client of ``url`` that retries through a Redis restart or failover (see the module)."""
    problem = check_url(url)
    if problem is not None:
        raise ValueError(f"invalid Redis URL {problem}")
    options: dict[str, Any] = {
        "retry": Retry(ExponentialBackoff(cap=4.0, base=0.05), retries),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
        "health_check_interval": 10,
        "socket_connect_timeout": 2.0,
        "socket_keepalive": True,
    }
    if url.startswith(SENTINEL_SCHEME + "://"):
        where = parse_sentinel_url(url)
        sentinel = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
            list(where.sentinels),
            sentinel_kwargs={"password": where.sentinel_password, "socket_connect_timeout": 2.0,
                             "socket_timeout": 2.0},
            socket_connect_timeout=2.0,
        )  # fmt: skip
        client: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
            where.service, db=where.db, username=where.username, password=where.password, **options
        )
        return client
    return redis.Redis.from_url(url, **options)


def async_redis_from_url(url: str, *, retries: int = 12) -> redis.asyncio.Redis:
    """The asyncio twin of :func:`redis_from_url` (the API's watches and reads)."""
    from redis.asyncio.retry import Retry as AsyncRetry

    options: dict[str, Any] = {
        "retry": AsyncRetry(ExponentialBackoff(cap=1.0, base=0.05), retries),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
        "health_check_interval": 10,
        "socket_connect_timeout": 2.0,
        "socket_keepalive": True,
    }
    if url.startswith(SENTINEL_SCHEME + "://"):
        where = parse_sentinel_url(url)
        sentinel = redis.asyncio.sentinel.Sentinel(  # type: ignore[no-untyped-call]
            list(where.sentinels),
            sentinel_kwargs={"password": where.sentinel_password, "socket_connect_timeout": 2.0,
                             "socket_timeout": 2.0},
            socket_connect_timeout=2.0,
        )  # fmt: skip
        client: redis.asyncio.Redis = sentinel.master_for(
            where.service, db=where.db, username=where.username, password=where.password, **options
        )
        return client
    return redis.asyncio.Redis.from_url(url, **options)


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
