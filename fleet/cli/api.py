"""``fleet api``: serve the fleet endpoint, the kube-compatible API users and admins talk to."""

from __future__ import annotations

from pathlib import Path

import click

from fleet.cli import loop
from fleet.cli.options import (
    key_prefix_option,
    kubeconfig_option,
    log_level_option,
    metrics_port_option,
    redis_option,
    setup_logging,
)
from queues import KeySpace

__all__ = ["api"]


@click.command()
@redis_option
@key_prefix_option
@kubeconfig_option
@click.option(
    "--token-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help='Static token file (CSV: token,user,uid,"group1,group2"). Without it, auth is off.',
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8080, show_default=True, help="Port to listen on (0: any free).")
@click.option(
    "--tls-cert-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="PEM certificate (chain) to serve HTTPS with; kubectl sends bearer tokens only over HTTPS.",
)
@click.option(
    "--tls-private-key-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="PEM private key of --tls-cert-file.",
)
@click.option(
    "--durability",
    type=click.Choice(["none", "aof", "replicas"]),
    default="none",
    show_default=True,
    help="What a submission waits for before it is acknowledged. none: Redis' reply (durable when "
    "Redis runs with appendfsync always, as fleet up's does); aof: WAITAOF 1 <replicas> (Redis 7.2+: "
    "the AOF fsynced); replicas: WAIT <replicas> (that many replicas have it).",
)
@click.option(
    "--durable-replicas",
    type=click.IntRange(min=0),
    default=None,
    help="Replicas that must confirm a submission (replicas: default 1; aof: default 0).",
)
@click.option(
    "--durability-timeout",
    type=click.FloatRange(min=0.001),
    default=1.0,
    show_default=True,
    help="Seconds a submission waits for the confirmation before it is answered 504.",
)
@metrics_port_option
@log_level_option
def api(
    *,
    redis_url: str,
    space: KeySpace,
    kubeconfig: Path | None,
    token_file: Path | None,
    host: str,
    port: int,
    metrics_port: int | None,
    metrics_host: str,
    tls_cert_file: Path | None,
    tls_private_key_file: Path | None,
    durability: str,
    durable_replicas: int | None,
    durability_timeout: float,
    log_level: str,
) -> None:
    """Serve the fleet endpoint (kubectl works against it) until SIGTERM or Ctrl-C.

    Group fleet:admins may do everything; group namespace:NS may submit, read and delete
    AscendJobs in NS. Several replicas may serve one Redis.
    """
    from fleet.endpoint import TokenFileError, run_api
    from fleet.jobs import Durability, DurabilityUnavailable
    from fleet.members import MemberConfigError

    if (tls_cert_file is None) != (tls_private_key_file is None):
        raise click.UsageError("--tls-cert-file and --tls-private-key-file go together")
    tls = (tls_cert_file, tls_private_key_file) if tls_cert_file and tls_private_key_file else None
    replicas = durable_replicas if durable_replicas is not None else int(durability == "replicas")
    try:
        wait = Durability(durability, replicas, durability_timeout)  # type: ignore[arg-type]
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    setup_logging(log_level)
    try:
        loop.run(
            run_api(
                redis_url,
                kubeconfig=kubeconfig,
                token_file=token_file,
                host=host,
                port=port,
                metrics_port=metrics_port,
                metrics_host=metrics_host,
                tls=tls,
                durability=wait,
                space=space,
            )
        )
    except (TokenFileError, MemberConfigError, DurabilityUnavailable, OSError) as error:
        raise click.ClickException(str(error)) from None
