"""The ``fleet`` command: one entry point whose subcommands live in sibling modules.

Each ``fleet/cli/<group>.py`` defines a click command or group; :data:`COMMANDS` names it here,
with its one-line help, so that ``fleet --help`` lists everything a user or admin can type.

A subcommand's module is imported only when that subcommand runs (:class:`LazyGroup`): the roles
pull in the ``kubernetes`` client, Redis, RQ, Starlette and the simulator, which together take
seconds to import, and ``fleet --help`` or ``fleet get`` need none of that (issue 33, req. 7:
``fleet --help`` within 0.5 s, ``fleet get`` within 1 s; ``docs/benchmarks.md`` has the
figures). ``tests/fleet/cli/test_start_time.py`` holds the help lines equal to the commands' own
and the modules each start imports.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Final, NamedTuple

import click

from fleet import __version__

__all__ = ["COMMANDS", "ROLES", "LazyGroup", "main"]

#: The subcommands that run as long-lived processes in a control-plane cluster, each a Deployment
#: of ``deploy/`` (the image's entry point is ``fleet``; a Deployment's args start with the role).
ROLES = ("api", "dispatcher", "worker", "syncer")


class Lazy(NamedTuple):
    """Where a subcommand lives, and its one-line help (what ``fleet --help`` shows)."""

    module: str
    attribute: str
    summary: str


#: Every subcommand: name -> module, the click object in it, and its short help.
COMMANDS: Final[dict[str, Lazy]] = {
    "api": Lazy(
        "fleet.cli.api", "api", "Serve the fleet endpoint (kubectl works against it) until SIGTERM or Ctrl-C."
    ),
    "clusters": Lazy(
        "fleet.cli.user",
        "clusters",
        "The member clusters: ready or not (and why), since when, their free and allocatable NPUs per "
        "accelerator type, and how many nodes have how many NPUs free (``2x8``: two nodes with 8).",
    ),
    "describe": Lazy("fleet.cli.user", "describe", "Show one object of the fleet in detail."),
    "dispatcher": Lazy(
        "fleet.cli.dispatch",
        "dispatcher",
        "Admit, place and propagate queued jobs (one leader at a time; others stand by).",
    ),
    "explain": Lazy(
        "fleet.cli.explain",
        "explain",
        "Say whether the fleet would take a job now and where it would run, or why not.",
    ),
    "get": Lazy("fleet.cli.user", "get", "List objects of the fleet."),
    "logs": Lazy("fleet.cli.logs", "logs", "The logs of JOB's pods ([KIND/]NAME) in the member it runs on."),
    "member": Lazy("fleet.cli.member", "member", "Prepare member clusters for Fleet."),
    "queues": Lazy(
        "fleet.cli.user",
        "queues",
        "The queue of every quota tree node: its limits and use, what it borrows beyond its min and "
        "lends of it, the share that orders it among its siblings, its admitted and waiting jobs.",
    ),
    "quota": Lazy("fleet.cli.quota", "quota", "Work with the ElasticQuotaTree."),
    "sim": Lazy(
        "fleet.cli.sim",
        "sim",
        "Run the topology's simulated member clusters in the foreground until SIGTERM or Ctrl-C.",
    ),
    "syncer": Lazy(
        "fleet.cli.dispatch",
        "syncer",
        "Mirror member status to the fleet, probe members, fail over, purge, finish deletions.",
    ),
    "up": Lazy(
        "fleet.cli.up",
        "up",
        "Run Redis, simulated members, syncer, worker, dispatcher and the fleet API until Ctrl-C.",
    ),
    "worker": Lazy(
        "fleet.cli.dispatch",
        "worker",
        "Create and purge member copies (an RQ worker on the propagation queue).",
    ),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported when one of them is looked up by name.

    ``fleet --help`` lists :data:`COMMANDS` from their help lines alone; shell completion and
    ``fleet NAME`` import the one module named.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        lazy = COMMANDS.get(cmd_name)
        if lazy is None:
            return None
        command = getattr(importlib.import_module(lazy.module), lazy.attribute)
        assert isinstance(command, click.Command), lazy
        self.commands[cmd_name] = command
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            if name in self.commands:
                text = self.commands[name].get_short_help_str(limit)
            else:
                # click's own shortening, of the help line alone
                text = click.Command(name, help=COMMANDS[name].summary).get_short_help_str(limit)
            rows.append((name, text))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fleet")
def main() -> None:
    """Fleet: one queue for many NPU clusters."""
    if os.environ.get("FLEET_PROFILE"):
        _profile_to(os.environ["FLEET_PROFILE"])


def _profile_to(where: str) -> None:
    """Profile this process's CPU time until it exits, into ``where/<command>-<pid>.prof`` (pstats).

    For finding a role's cost under a benchmark (issue 30): py-spy cannot attach on every
    machine (ptrace), and the harnesses that start the roles pass the environment on. With
    yappi installed every thread is profiled (a syncer works in its watch threads); without it,
    cProfile sees the main thread only. CPU time, not wall: a role waiting on Redis costs nothing.
    """
    import atexit
    import time
    from pathlib import Path

    directory = Path(where)
    command = next((arg for arg in sys.argv[1:] if not arg.startswith("-")), "fleet")
    path = directory / f"{command}-{os.getpid()}.prof"
    directory.mkdir(parents=True, exist_ok=True)
    try:
        import yappi  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except ImportError:
        import cProfile

        profile = cProfile.Profile(time.process_time)

        def dump() -> None:
            profile.disable()
            profile.dump_stats(path)

        atexit.register(dump)
        profile.enable()
        return

    def dump_all_threads() -> None:
        yappi.stop()
        yappi.get_func_stats().save(str(path), type="pstat")

    yappi.set_clock_type("cpu")
    atexit.register(dump_all_threads)
    yappi.start()
