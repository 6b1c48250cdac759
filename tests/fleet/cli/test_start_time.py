"""The CLI imports only what a command needs (issue 33, req. 7: ``fleet --help`` within 0.5 s,
``fleet get`` within 1 s; the figures are in docs/benchmarks.md).

Import time is what a start costs, and it is decided by which modules a command pulls in, which
a test can hold exactly while a stopwatch on a shared machine cannot: each check runs a fresh
interpreter and reads ``sys.modules`` after the command's entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import click
import pytest

from fleet.cli import COMMANDS, main

#: What the roles need and the everyday commands do not: each takes a tenth of a second or more.
ROLE_LIBRARIES = {"redis", "rq", "starlette", "uvicorn", "fakeredis", "jinja2", "uvloop", "cryptography"}


def imported_after(code: str) -> set[str]:
    """The top-level packages (and fleet's modules) a fresh interpreter holds after ``code``."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    modules = json.loads(done.stdout.strip().splitlines()[-1])
    return {m for m in modules if m.startswith(("fleet.", "queues"))} | {m.split(".")[0] for m in modules}


def test_fleet_help_imports_no_subcommand() -> None:
    code = (
        "import sys\nfrom fleet.cli import main\n"
        "try:\n    main(['--help'], prog_name='fleet')\nexcept SystemExit:\n    pass"
    )
    found = imported_after(code)
    assert not found & (ROLE_LIBRARIES | {"kubernetes", "yaml", "pydantic"}), found
    assert {m for m in found if m.startswith(("fleet.", "queues"))} == {"fleet.cli"}


def test_fleet_get_imports_no_role_library() -> None:
    found = imported_after(
        "from fleet.cli import main\n"
        "try:\n    main(['get', 'acjob', '--help'], prog_name='fleet')\nexcept SystemExit:\n    pass"
    )
    # Nor the kubernetes client (half a second): it reads the endpoint over urllib3 (cli/client.py).
    assert not found & (ROLE_LIBRARIES | {"kubernetes"}), found & (ROLE_LIBRARIES | {"kubernetes"})
    # Member access and the quota engine's ledger only when a command asks for them (-M, queues).
    assert not {"fleet.members.watch", "fleet.members.access", "queues.ledger", "fleet.apiserver.app"} & found


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_help_lines_are_the_commands_own(name: str) -> None:
    command = main.get_command(click.Context(main), name)
    assert command is not None
    assert command.name == name
    assert COMMANDS[name].summary == command.get_short_help_str(limit=10_000)


def test_fleet_help_lists_every_command() -> None:
    runner_out = subprocess.run(
        [sys.executable, "-c", "from fleet.cli import main; main(prog_name='fleet')", "--help"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    listed = [line.split()[0] for line in runner_out.split("Commands:", 1)[1].splitlines() if line.strip()]
    assert listed == sorted(COMMANDS)


def test_shell_completion_completes_lazily_registered_commands() -> None:
    """The README documents click's completion; it must see the lazily imported subcommands."""

    def complete(words: str, cword: int) -> str:
        env = {**os.environ, "COMP_WORDS": words, "COMP_CWORD": str(cword)}
        env["_FLEET_COMPLETE"] = "bash_complete"
        command = [sys.executable, "-c", "from fleet.cli import main; main(prog_name='fleet')"]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        return done.stdout

    assert "plain,get" in complete("fleet ge", 1)
    assert "plain,cordon" in complete("fleet member co", 2)
