"""``fleet api``: serve the fleet endpoint, the kube-compatible API users and admins talk to."""

from __future__ import annotations

from pathlib import Path

import click

from fleet.cli import loop
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
    tls_cert_file: Path | None,
    tls_private_key_file: Path | None,
    log_level: str,
) -> None:
    """Serve the fleet endpoint (kubectl works against it) until SIGTERM or Ctrl-C.

    Group fleet:admins may do everything; group namespace:NS may submit, read and delete
    AscendJobs in NS. Several replicas may serve one Redis.
    """
    from fleet.api.auth import TokenFileError
    from fleet.api.process import run_api
    from fleet.members import MemberConfigError

    if (tls_cert_file is None) != (tls_private_key_file is None):
        raise click.UsageError("--tls-cert-file and --tls-private-key-file go together")
    tls = (tls_cert_file, tls_private_key_file) if tls_cert_file and tls_private_key_file else None
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
                tls=tls,
            )
        )
    except (TokenFileError, MemberConfigError, OSError) as error:
        raise click.ClickException(str(error)) from None
