"""Options and set-up shared by the commands that run Fleet's processes."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

import click
from prometheus_client import start_http_server

from fleet.connections import DEFAULT_REDIS_URL, check_url
from queues import DEFAULT_PREFIX, KeySpace, prefix_problem

__all__ = [
    "LOG_FORMAT",
    "fleet_redis",
    "fleet_redis_option",
    "key_prefix_option",
    "kubeconfig_option",
    "log_level_option",
    "metrics_port_option",
    "on_termination",
    "redis_option",
    "redis_url_checked",
    "serve_metrics",
    "setup_logging",
]

#: One structured line per event: ``key=value`` pairs after the time, level and logger.
LOG_FORMAT: Final = "%(asctime)s level=%(levelname)s logger=%(name)s %(message)s"

F = TypeVar("F", bound=Callable[..., Any])


def setup_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT, stream=sys.stderr, force=True)


def redis_url_checked(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A click callback: refuse a Redis URL redis-py cannot use, without repeating its password."""
    if value is None:
        return None
    problem = check_url(value)
    if problem is not None:
        raise click.BadParameter(problem)
    return value


def redis_option(f: F) -> F:
    # The default is shown as its recipe, never as the value: $FLEET_REDIS_URL may hold a password.
    return click.option(
        "--redis",
        "redis_url",
        default=lambda: os.environ.get("FLEET_REDIS_URL", DEFAULT_REDIS_URL),
        show_default="$FLEET_REDIS_URL or " + DEFAULT_REDIS_URL,
        callback=redis_url_checked,
        help="Redis URL of the fleet's state: redis://[[user]:password@]host:port/db, or rediss:// "
        "for TLS with ssl_ca_certs, ssl_certfile, ssl_keyfile, ssl_cert_reqs as query arguments. "
        "Prefer $FLEET_REDIS_URL for a URL with a password (a command line is visible to others).",
    )(f)


def fleet_redis_option(f: F) -> F:
    """``--redis`` and ``--state-dir`` for the admin commands that read or change the fleet's
    Redis (``fleet member remove``, ``fleet quota queues``): found as the roles find it, or from
    the ``fleet up`` running here; never a guessed default (:func:`fleet_redis`)."""
    f = click.option(
        "--state-dir",
        "up_state_dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=Path(".fleet"),
        show_default=True,
        help="The state directory of a running `fleet up`: its Redis, when neither --redis nor "
        "$FLEET_REDIS_URL is given.",
    )(f)
    return click.option(
        "--redis",
        "redis_url",
        default=lambda: os.environ.get("FLEET_REDIS_URL"),
        show_default="$FLEET_REDIS_URL, else the Redis of the fleet up running with --state-dir",
        callback=redis_url_checked,
        help="Redis URL of the fleet's state, as its roles are given it ($FLEET_REDIS_URL keeps a "
        "password off the command line).",
    )(f)


def fleet_redis(redis_url: str | None, state_dir: Path) -> str:
    """The fleet's Redis: ``--redis`` or ``$FLEET_REDIS_URL`` (what the roles are given), else
    the one of the ``fleet up`` running with ``state_dir``; a usage error saying so otherwise
    (a guessed ``localhost:6379`` may be another deployment's, or another program's, Redis)."""
    if redis_url:
        return redis_url
    from fleet.local import running_redis_url

    found = running_redis_url(state_dir)
    if found:
        return found
    raise click.UsageError(
        "which Redis is the fleet's? Pass --redis URL or set $FLEET_REDIS_URL (the URL its roles "
        f"use), or run this where a `fleet up` runs (none runs with state directory {state_dir}); "
        "no default is guessed"
    )


def key_space_checked(_ctx: click.Context, param: click.Parameter, value: str) -> KeySpace:
    """A click callback: the deployment's key space, refusing a prefix no key may carry."""
    problem = prefix_problem(value)
    if problem is not None:
        raise click.BadParameter(problem, param=param)
    return KeySpace(prefix=value)


def key_prefix_option(f: F) -> F:
    """``--key-prefix`` (``$FLEET_KEY_PREFIX``), passed on as ``space``: the deployment's key space.
    Every process of a deployment must be given the same one; the default gives Fleet's usual
    key and queue names."""
    return click.option(
        "--key-prefix",
        "space",
        default=lambda: os.environ.get("FLEET_KEY_PREFIX", DEFAULT_PREFIX),
        show_default="$FLEET_KEY_PREFIX or " + DEFAULT_PREFIX,
        callback=key_space_checked,
        help="Prefix of every Redis key and RQ queue of this deployment (no braces, colons or "
        "whitespace): deployments with different prefixes share a Redis without seeing each other. "
        "Give every process of a deployment the same one.",
    )(f)


def kubeconfig_option(f: F) -> F:
    return click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False, path_type=Path),
        default=lambda: os.environ.get("FLEET_KUBECONFIG"),
        help="Kubeconfig with one context per member cluster (a context named fleet is skipped).",
    )(f)


def metrics_port_option(f: F) -> F:
    """``--metrics-port`` and ``--metrics-host``: loopback by default; a pod scraped by Prometheus
    listens on ``0.0.0.0`` (the manifests in ``deploy/`` say so)."""
    f = click.option(
        "--metrics-host",
        default="127.0.0.1",
        show_default=True,
        help="Address the metrics listener binds (0.0.0.0 in a pod that Prometheus scrapes).",
    )(f)
    return click.option(
        "--metrics-port", type=int, default=None, help="Serve Prometheus metrics on METRICS_HOST:PORT."
    )(f)


def log_level_option(f: F) -> F:
    return click.option(
        "--log-level",
        type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
        default="info",
        show_default=True,
    )(f)


def serve_metrics(port: int | None, host: str = "127.0.0.1") -> None:
    if port is not None:
        start_http_server(port, addr=host)


def on_termination(stop: threading.Event) -> None:
    """Set ``stop`` on SIGTERM or SIGINT (the process then winds down cleanly)."""

    def handler(signum: int, _frame: object) -> None:
        logging.getLogger("fleet").info("event=stopping signal=%s", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
