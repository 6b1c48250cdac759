"""``fleet api`` as a process: build the replica, serve it until SIGTERM or SIGINT, exit cleanly.

What the process logs at start says how it is exposed: the address, whether authentication is on
(without a token file every request is served, which is for local use only), how many members
the kubeconfig names. Each request is one structured line (``event=request ... code= user=``),
written by the serving core at debug level, which this process turns on for that logger.
Prometheus metrics are on the API port at ``/metrics`` (authenticated like any request) and,
with ``metrics_port``, on a separate plain listener for a scraper without a token.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from pathlib import Path

from prometheus_client import start_http_server

from fleet import gc_tuning
from fleet.apiserver import Server
from fleet.connections import async_redis_from_url, mask_url, redis_from_url
from fleet.endpoint.app import build_fleet_api
from fleet.endpoint.auth import ADMIN_GROUP, TokenFile
from fleet.endpoint.members import members_from
from fleet.jobs import Durability, check_server
from queues import DEFAULT_SPACE, KeySpace

__all__ = ["async_redis_from_url", "run_api"]  # async_redis_from_url: re-exported from fleet.connections

log = logging.getLogger("fleet.api")

#: A request retries a lost Redis connection briefly, then answers 503 (clients retry).
_RETRIES = 3


async def run_api(
    redis_url: str,
    *,
    kubeconfig: Path | None = None,
    token_file: Path | None = None,
    host: str = "127.0.0.1",
    port: int = 8080,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    tls: tuple[Path, Path] | None = None,
    stop: asyncio.Event | None = None,
    durability: Durability | None = None,
    space: KeySpace = DEFAULT_SPACE,
) -> None:
    """Serve the fleet endpoint until ``stop`` is set (by default: SIGTERM or SIGINT), in the keys
    of ``space`` (``--key-prefix``).

    ``durability`` says what a submission waits for before it is acknowledged
    (:mod:`fleet.jobs.durability`); one the server cannot give raises
    :class:`~fleet.jobs.durability.DurabilityUnavailable` before anything is served."""
    durability = durability or Durability()
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, _stopper(stop, signum))
    logging.getLogger("fleet.apiserver").setLevel(logging.DEBUG)  # the per-request lines
    logging.getLogger("fleet.apiserver.serve").setLevel(logging.INFO)
    tokens = TokenFile(token_file) if token_file is not None else None
    members = members_from(kubeconfig)
    log.info("event=connecting role=api redis=%s prefix=%s", mask_url(redis_url), space.prefix)
    client = redis_from_url(redis_url, retries=_RETRIES)
    try:
        check_server(client, durability)
    except BaseException:
        client.close()
        raise
    log.info("event=durability mode=%s acknowledged_after=%r", durability.mode, durability.describe())
    aclient = async_redis_from_url(redis_url)
    replica = build_fleet_api(
        client, aclient, members=members, tokens=tokens, durability=durability, space=space
    )
    server = Server(replica.app, host, port, grace=2, tls=tls)
    try:
        await server.start()
        gc_tuning.tune()
        if tokens is None:
            log.warning(
                "event=auth_disabled message=no --token-file: every request is served without "
                "authentication; use this for local work only"
            )
        else:
            admins = sum(1 for i in tokens.users().values() if i.admin)
            log.info(
                "event=auth_enabled tokens=%d admins=%d admin_group=%s reloaded_on_change=%s",
                len(tokens.tokens()),
                admins,
                ADMIN_GROUP,
                tokens.path,
            )
        if metrics_port is not None:
            start_http_server(metrics_port, addr=metrics_host, registry=replica.app.state.metrics_registry)
            log.info("event=metrics_listening host=%s port=%d", metrics_host, metrics_port)
        log.info(
            "event=api_started url=%s members=%d kubeconfig=%s",
            server.url,
            len(members()),
            kubeconfig or "-",
        )
        await stop.wait()
    finally:
        await server.stop()
        await replica.close()
        await aclient.aclose()
        client.close()
        log.info("event=api_stopped")


def _stopper(stop: asyncio.Event, signum: int) -> Callable[[], None]:
    def handler() -> None:
        log.info("event=stopping signal=%s", signal.Signals(signum).name)
        stop.set()

    return handler
