"""The processes ``fleet up`` starts: each in its own process group, on a leash, logging to a file.

Why each of these:

Own process group
    A Ctrl-C in the terminal goes to the terminal's foreground process group. Were the children
    in it, every one would get SIGINT at once: Redis would exit first, and the dispatcher would
    spend its shutdown retrying a Redis that is gone. In a group of their own they hear only
    ``fleet up``, which stops them in order (the API and the roles, then the members, then
    Redis). ``process_group=0`` is set by the child before it runs anything, so it is safe in a
    process with threads (the in-process Redis is one), unlike a ``preexec_fn``.
On a leash
    If ``fleet up`` itself dies without stopping them (``kill -9``, a closed terminal), the kernel
    sends each child SIGTERM (Linux ``PR_SET_PDEATHSIG``), so nothing is left running. A short
    Python prelude sets it and then ``exec``\\s the real program, which keeps the setting; where
    ``prctl`` does not exist (macOS) the prelude just runs the program.
Log files
    stdout and stderr go to one file per child, started afresh on each run, so that a failure
    can be shown with the lines that explain it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = ["Child", "fleet_command", "free_port", "stop_all"]

#: Set PR_SET_PDEATHSIG (1) to SIGTERM, give up if the parent is already gone, exec the program.
_LEASH: Final = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None).prctl(1, int(signal.SIGTERM), 0, 0, 0)\n"
    "except (OSError, AttributeError):\n"
    "    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(0)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)

#: How a ``fleet`` subcommand is run with this interpreter (no reliance on PATH).
_FLEET: Final = "from fleet.cli import main; main(prog_name='fleet')"


def fleet_command(*args: str) -> list[str]:
    """The command line of ``fleet <args>`` run by the current interpreter."""
    return [sys.executable, "-c", _FLEET, *args]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class Child:
    """One child process: started, watched, restarted, and stopped by ``fleet up``.

    ``critical`` children hold state that a restart would lose (Redis, the simulated members):
    their death ends ``fleet up``; the others are restarted, at most ``max_restarts`` times a
    minute.
    """

    name: str
    argv: Sequence[str]
    log_path: Path
    critical: bool = False
    env: Mapping[str, str] | None = None
    max_restarts: int = 5
    process: subprocess.Popen[bytes] | None = None
    restarts: deque[float] = field(default_factory=deque)

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        mode = "ab" if self.restarts else "wb"
        env = {**os.environ, **(self.env or {}), "PYTHONUNBUFFERED": "1"}
        with self.log_path.open(mode) as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _LEASH, str(os.getpid()), *self.argv],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                process_group=0,
                close_fds=True,
            )

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def may_restart(self, now: float | None = None) -> bool:
        """Whether a restart is within budget (and count it when it is)."""
        if self.critical:
            return False
        now = time.monotonic() if now is None else now
        while self.restarts and now - self.restarts[0] > 60.0:
            self.restarts.popleft()
        if len(self.restarts) >= self.max_restarts:
            return False
        self.restarts.append(now)
        return True

    def _signal(self, sig: signal.Signals) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)  # the group: anything the child started goes too

    def terminate(self) -> None:
        """Ask the child to stop (SIGTERM); see :func:`stop_all` for the waiting."""
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def wait(self, timeout: float) -> bool:
        """True when the child has exited within ``timeout`` seconds."""
        if self.process is None:
            return True
        try:
            self.process.wait(max(timeout, 0.0))
        except subprocess.TimeoutExpired:
            return False
        return True

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def stop_all(children: Iterable[Child], timeout: float = 15.0) -> list[Child]:
    """SIGTERM every child at once, wait up to ``timeout``; SIGKILL the ones still running.

    Returns the children that had to be killed.
    """
    group = [c for c in children if c.alive]
    for child in group:
        child.terminate()
    deadline = time.monotonic() + timeout
    killed = []
    for child in group:
        if not child.wait(deadline - time.monotonic()):
            child.kill()
            child.wait(5.0)
            killed.append(child)
    return killed
