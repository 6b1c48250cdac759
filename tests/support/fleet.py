"""Fleet's own processes (``fleet dispatcher``, ``fleet worker``, ``fleet syncer``) for tests.

:class:`FleetProcesses` starts each role as a real subprocess against a Redis URL and a members'
kubeconfig, can kill -9 or restart any of them, and stops them all (SIGTERM, then SIGKILL) on
exit. Logs go to files in the given directory and are attached to assertion messages by
:meth:`FleetProcesses.logs`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["FleetProcesses", "Role"]

_STOP_TIMEOUT = 15.0


@dataclass
class Role:
    name: str
    args: list[str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class FleetProcesses:
    redis_url: str
    kubeconfig: Path
    directory: Path
    roles: dict[str, Role] = field(default_factory=dict)

    def start(self, name: str, command: str, *extra: str) -> Role:
        """Start ``fleet <command>`` as role ``name`` (for example ``worker-2``)."""
        args = [
            sys.executable,
            "-c",
            "from fleet.cli import main; main(prog_name='fleet')",
            command,
            "--redis",
            self.redis_url,
            "--kubeconfig",
            str(self.kubeconfig),
            *extra,
        ]
        role = Role(name, args, self.directory / f"{name}.log")
        self.roles[name] = role
        self._spawn(role)
        return role

    def _spawn(self, role: Role) -> None:
        with role.log_path.open("ab") as log:
            role.process = subprocess.Popen(
                role.args, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"}
            )

    def kill9(self, name: str) -> None:
        role = self.roles[name]
        if role.process is not None and role.process.poll() is None:
            os.kill(role.process.pid, signal.SIGKILL)
            role.process.wait()

    def restart(self, name: str) -> None:
        role = self.roles[name]
        self.kill9(name)
        role.restarts += 1
        self._spawn(role)

    def terminate(self, name: str, timeout: float = _STOP_TIMEOUT) -> int:
        """SIGTERM the role and wait; returns its exit code (SIGKILL after ``timeout``)."""
        role = self.roles[name]
        if role.process is None:
            return 0
        if role.process.poll() is None:
            role.process.send_signal(signal.SIGTERM)
            try:
                role.process.wait(timeout)
            except subprocess.TimeoutExpired:
                role.process.kill()
                role.process.wait()
        return int(role.process.returncode)

    def stop(self) -> None:
        for name in list(self.roles):
            self.terminate(name)

    def logs(self, tail: int = 40) -> str:
        out = []
        for role in self.roles.values():
            lines = role.log_path.read_text(errors="replace").splitlines() if role.log_path.exists() else []
            out.append(f"--- {role.name} (restarts {role.restarts}) ---\n" + "\n".join(lines[-tail:]))
        return "\n".join(out)
