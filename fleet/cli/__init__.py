"""The ``fleet`` command: one entry point whose subcommands live in sibling modules.

Each ``fleet/cli/<group>.py`` defines a click command or group; it is registered here so that
``fleet --help`` lists everything a user or admin can type.
"""

from __future__ import annotations

import click

from fleet import __version__

__all__ = ["ROLES", "main"]

#: The subcommands that run as long-lived processes in a control-plane cluster, each a Deployment
#: of ``deploy/`` (the image's entry point is ``fleet``; a Deployment's args start with the role).
ROLES = ("api", "dispatcher", "worker", "syncer")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fleet")
def main() -> None:
    """Fleet: one queue for many NPU clusters."""


def _register() -> None:
    from fleet.cli import quota

    main.add_command(quota.quota)
    from fleet.cli.explain import explain

    main.add_command(explain)
    from fleet.cli.sim import sim

    main.add_command(sim)
    from fleet.cli.dispatch import dispatcher, syncer, worker

    main.add_command(dispatcher)
    main.add_command(worker)
    main.add_command(syncer)
    from fleet.cli.api import api

    main.add_command(api)
    from fleet.cli.user import clusters, describe, get, queues

    main.add_command(get)
    main.add_command(describe)
    main.add_command(queues)
    main.add_command(clusters)
    from fleet.cli.member import member

    main.add_command(member)
    from fleet.cli.up import up

    main.add_command(up)


_register()
