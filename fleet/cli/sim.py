"""``fleet sim``: run simulated member clusters, and ``fleet sim fault`` to break them while they run."""

from __future__ import annotations

import json
import logging
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

import click

from fleet.cli import loop
from fleet.sim import (
    DEFAULT_TOPOLOGY,
    FAULTS,
    KubeconfigError,
    TopologyError,
    control_endpoint,
    load_topology,
    run_simulator,
)

__all__ = ["sim"]

_LOG_FORMAT = "%(asctime)s level=%(levelname)s logger=%(name)s %(message)s"


@click.group("sim", invoke_without_command=True)
@click.option(
    "--topology",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=f"Topology YAML (default: {DEFAULT_TOPOLOGY.name} in config/).",
)
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Kubeconfig file to write (one context per member).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address every listener binds.")
@click.option(
    "--base-port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="First member's port; the others follow, then the control port. 0: any free ports.",
)
@click.option("--control-port", type=click.IntRange(0, 65535), default=None, help="Control endpoint port.")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
)
@click.pass_context
def sim(  # noqa: PLR0917 (click passes options positionally)
    ctx: click.Context,
    topology: Path | None,
    kubeconfig: Path | None,
    host: str,
    base_port: int,
    control_port: int | None,
    log_level: str,
) -> None:
    """Run the topology's simulated member clusters in the foreground until SIGTERM or Ctrl-C."""
    if ctx.invoked_subcommand is not None:
        return
    if kubeconfig is None:
        raise click.UsageError("--kubeconfig: the path of the kubeconfig to write is required")
    try:
        loaded = load_topology(topology)
    except TopologyError as exc:
        raise click.BadParameter(str(exc), param_hint="--topology") from None
    logging.basicConfig(level=log_level.upper(), format=_LOG_FORMAT, stream=sys.stderr)
    try:
        loop.run(run_simulator(loaded, kubeconfig, host=host, base_port=base_port, control_port=control_port))
    except OSError as exc:
        raise click.ClickException(f"cannot serve: {exc}") from None


@sim.command("fault")
@click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=lambda: os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or "fleet.kubeconfig",
    show_default="$KUBECONFIG or ./fleet.kubeconfig",
    help="A kubeconfig naming the simulator's members: the one `fleet up` or `fleet sim` wrote.",
)
@click.option("--always", is_flag=True, help="fail-job: fail every run, not only the next one.")
@click.option("--job", "job", metavar="NS/NAME", help="refuse-create: refuse only this job's creates.")
@click.option(
    "--fast-probes",
    is_flag=True,
    help="slow: answer the health endpoints (/readyz...) at once, as an API server with slow storage does.",
)
@click.argument("member")
@click.argument("fault", type=click.Choice(list(FAULTS)))
@click.argument("value", required=False)
def fault(  # noqa: PLR0917 (click passes options positionally)
    kubeconfig: Path,
    always: bool,
    job: str | None,
    fast_probes: bool,
    member: str,
    fault: str,
    value: str | None,
) -> None:
    """Inject FAULT into MEMBER of a running simulator: down|up|503|ok|slow MS [--fast-probes]|
    node-notready NODE|node-ready NODE|fail-job NS/NAME [--always]|refuse-create invalid|forbidden|
    webhook|policy|no-crd [--job NS/NAME]|wipe (ok ends every fault; wipe rebuilds the member
    empty, as a member restored from nothing)."""
    wanted = FAULTS[fault]
    if wanted is not None and not value:
        raise click.UsageError(f"{fault} needs {wanted}")
    if wanted is None and value:
        raise click.UsageError(f"{fault} takes no argument (got {value!r})")
    body: dict[str, object] = {"fault": fault}
    if fault == "slow":
        try:
            body["ms"] = int(value or "")
        except ValueError:
            raise click.BadParameter(
                f"{value!r} is not a whole number of milliseconds", param_hint="MS"
            ) from None
        if fast_probes:
            body["probes"] = False
    elif fault in ("node-notready", "node-ready"):
        body["node"] = value
    elif fault == "fail-job":
        body["job"] = value
        body["always"] = always
    elif fault == "refuse-create":
        body["refusal"] = value
        if job:
            body["job"] = job
    try:
        url = control_endpoint(kubeconfig, member)
    except KubeconfigError as exc:
        raise click.ClickException(str(exc)) from None
    request = urllib.request.Request(
        f"{url}/members/{member}/faults",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = json.loads(exc.read() or b"{}").get("error", exc.reason)
        raise click.ClickException(f"{member}: {detail}") from None
    except urllib.error.URLError as exc:
        raise click.ClickException(
            f"the simulator's control endpoint {url} is not reachable: {exc.reason}"
        ) from None
    click.echo(json.dumps(answer, sort_keys=True))
