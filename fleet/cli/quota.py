"""``fleet quota``: check, apply and look at the ElasticQuotaTree.

``validate`` needs nothing but the file, so an admin (or CI) can check a tree before it goes
anywhere. ``apply`` and ``queues`` talk to the Redis that holds the quota ledger
(``--redis`` or ``FLEET_REDIS_URL``).
"""

from __future__ import annotations

from pathlib import Path

import click
import redis

from queues import (
    ApplyRefused,
    Ledger,
    Severity,
    TreeInvalid,
    check,
    format_views,
    load,
    queue_views,
)

__all__ = ["quota"]

_REDIS = click.option(
    "--redis",
    "redis_url",
    envvar="FLEET_REDIS_URL",
    default="redis://127.0.0.1:6379/0",
    show_default=True,
    help="Redis holding the quota ledger (env FLEET_REDIS_URL).",
)
_FILE = click.option(
    "-f",
    "--filename",
    "path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The ElasticQuotaTree YAML.",
)


@click.group()
def quota() -> None:
    """Work with the ElasticQuotaTree."""


def _report(path: Path) -> bool:
    """Print every problem of the file; True when none is an error."""
    _, problems = check(path.read_text(encoding="utf-8"))
    for problem in problems:
        click.echo(f"{problem.severity}: {problem}", err=problem.severity is Severity.ERROR)
    return not any(p.severity is Severity.ERROR for p in problems)


@quota.command()
@_FILE
def validate(path: Path) -> None:
    """Check a tree: errors and warnings, exit 1 when there is an error."""
    if not _report(path):
        raise SystemExit(1)
    click.echo(f"{path}: valid")


@quota.command()
@_FILE
@_REDIS
@click.option("--expected-version", type=int, default=None, help="Refuse unless this version is applied.")
def apply(path: Path, redis_url: str, expected_version: int | None) -> None:
    """Validate a tree and make it the quota tree, keeping the usage of running jobs."""
    if not _report(path):
        raise SystemExit(1)
    tree, _ = load(path.read_text(encoding="utf-8"))
    client = redis.Redis.from_url(redis_url)
    try:
        applied = Ledger(client).apply(tree, expected_version=expected_version)
    except (ApplyRefused, TreeInvalid) as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(1) from None
    except redis.RedisError as exc:
        click.echo(f"error: redis at {redis_url}: {exc}", err=True)
        raise SystemExit(1) from None
    finally:
        client.close()
    state = "applied" if applied.changed else "unchanged"
    click.echo(f"elasticquotatree {state}, version {applied.version}")


@quota.command()
@_REDIS
def queues(redis_url: str) -> None:
    """The queue of every tree node with its usage, admitted and pending jobs."""
    client = redis.Redis.from_url(redis_url)
    try:
        click.echo(format_views(queue_views(Ledger(client))))
    except redis.RedisError as exc:
        click.echo(f"error: redis at {redis_url}: {exc}", err=True)
        raise SystemExit(1) from None
    finally:
        client.close()
