"""Where ``fleet up`` keeps its files: one state directory (``./.fleet`` by default).

::

    .fleet/
      up.lock              held while a fleet up runs here (a second one is refused)
      redis/               the embedded redis-server's append-only file (kept across runs)
      logs/<child>.log     each child's output, started afresh on every run
      members.kubeconfig   the simulator's kubeconfig: the members, as the roles see them
      tokens.csv           the fleet API's token file (one admin token, new on every run)
      prometheus.yml       scrape targets of this run's processes, for a local Prometheus
      tls/                 the fleet API's certificate and key (a new CA on every run)
      topology.yaml        the topology with --job-seconds applied (only when given)

Only ``redis/`` outlives a run; ``--fresh`` removes it too.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = ["Layout", "StateDirBusy"]


class StateDirBusy(RuntimeError):
    """Another ``fleet up`` runs with this state directory."""


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def redis(self) -> Path:
        return self.root / "redis"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def members_kubeconfig(self) -> Path:
        return self.root / "members.kubeconfig"

    @property
    def tokens(self) -> Path:
        return self.root / "tokens.csv"

    @property
    def topology(self) -> Path:
        return self.root / "topology.yaml"

    @property
    def tls(self) -> Path:
        return self.root / "tls"

    @property
    def prometheus(self) -> Path:
        return self.root / "prometheus.yml"

    @property
    def lock_path(self) -> Path:
        return self.root / "up.lock"

    def log(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def lock(self) -> IO[str]:
        """Hold the directory for this process (released when the returned file is closed)."""
        self.root.mkdir(parents=True, exist_ok=True)
        handle = self.lock_path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            handle.close()
            raise StateDirBusy(
                f"another fleet up (pid {holder}) is running with {self.root}; stop it first"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        return handle

    def prepare(self, *, fresh: bool) -> None:
        """Clear what belongs to an earlier run (and, with ``fresh``, the Redis data too)."""
        for path in (self.members_kubeconfig, self.tokens, self.prometheus, self.topology):
            path.unlink(missing_ok=True)
        shutil.rmtree(self.tls, ignore_errors=True)
        if fresh:
            shutil.rmtree(self.redis, ignore_errors=True)
        self.logs.mkdir(parents=True, exist_ok=True)
