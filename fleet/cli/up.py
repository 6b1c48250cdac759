"""``fleet up``: the whole fleet on this machine in the foreground (see :mod:`fleet.local.up`)."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path

import click

from fleet.cli.options import log_level_option, redis_url_checked, setup_logging

__all__ = ["up"]

log = logging.getLogger("fleet.local")


@click.command()
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("fleet.kubeconfig"),
    show_default=True,
    help="Kubeconfig to write once ready: contexts fleet (current) and one per member; removed on exit.",
)
@click.option(
    "--redis",
    "redis_url",
    default=None,
    callback=redis_url_checked,
    help="Redis URL to use (default: an embedded one); it may hold a password (never shown) and be "
    "rediss:// (see fleet api --help).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Fleet API (HTTPS) port; 0: any free one.",
)
@click.option(
    "--topology",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Simulated members (default: config/topology.yaml).",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".fleet"),
    show_default=True,
    help="Logs, token file, the embedded Redis' data.",
)
@click.option("--fresh", is_flag=True, help="Start with empty Redis data (the embedded Redis only).")
@click.option(
    "--job-seconds",
    type=click.FloatRange(min=0),
    default=None,
    help="How long a simulated job runs before it succeeds (default: the topology's "
    "jobDurationSeconds, 600 in config/topology.yaml: long enough to walk through the README).",
)
@click.option(
    "--ready-timeout", type=click.FloatRange(min=1), default=120.0, show_default=True, help="Seconds to wait."
)
@log_level_option
def up(
    *,
    kubeconfig: Path,
    redis_url: str | None,
    port: int,
    topology: Path | None,
    state_dir: Path,
    fresh: bool,
    job_seconds: float | None,
    ready_timeout: float,
    log_level: str,
) -> None:
    """Run Redis, simulated members, syncer, worker, dispatcher and the fleet API until Ctrl-C."""
    from fleet.local import KubeconfigInTheWay, LocalFleet, StateDirBusy, UpError, UpSettings
    from fleet.sim import TopologyError

    setup_logging(log_level)
    settings = UpSettings(
        kubeconfig=kubeconfig,
        redis_url=redis_url,
        topology=topology,
        port=port,
        state_dir=state_dir,
        fresh=fresh,
        ready_timeout=ready_timeout,
        log_level=log_level,
        job_seconds=job_seconds,
    )
    stop = threading.Event()

    def handler(signum: int, _frame: object) -> None:
        # Why not KeyboardInterrupt: the run must reach its own stop path, in order, every time.
        log.info("event=stopping signal=%s", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    try:
        LocalFleet(settings, echo=click.echo).run(stop)
    except (UpError, KubeconfigInTheWay, StateDirBusy, TopologyError) as error:
        raise click.ClickException(str(error)) from None
    click.echo("Fleet stopped.")
