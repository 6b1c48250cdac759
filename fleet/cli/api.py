"""``fleet api``: serve the fleet endpoint, the kube-compatible API users and admins talk to."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from fleet.cli.options import (
    kubeconfig_option,
    log_level_option,
    metrics_port_option,
    redis_option,
    setup_logging,
)

__all__ = ["api"]


@click.command()
@redis_option
@kubeconfig_option
@click.option(
    "--token-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help='Static token file (CSV: token,user,uid,"group1,group2"). Without it, auth is off.',
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8080, show_default=True, help="Port to listen on (0: any free).")
@metrics_port_option
@log_level_option
def api(
    *,
    redis_url: str,
    kubeconfig: Path | None,
    token_file: Path | None,
    host: str,
    port: int,
    metrics_port: int | None,
    log_level: str,
) -> None:
    """Serve the fleet endpoint (kubectl works against it) until SIGTERM or Ctrl-C.

    Group fleet:admins may do everything; group namespace:NS may submit, read and delete
    AscendJobs in NS. Several replicas may serve one Redis.
    """
    from fleet.api.auth import TokenFileError
    from fleet.api.process import run_api
    from fleet.members import MemberConfigError

    setup_logging(log_level)
    try:
        asyncio.run(
            run_api(
                redis_url,
                kubeconfig=kubeconfig,
                token_file=token_file,
                host=host,
                port=port,
                metrics_port=metrics_port,
            )
        )
    except (TokenFileError, MemberConfigError, OSError) as error:
        raise click.ClickException(str(error)) from None
