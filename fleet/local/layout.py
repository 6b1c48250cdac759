"""Where ``fleet up`` keeps its files: one state directory (``./.fleet`` by default).

::

    .fleet/
      up.lock              held while a fleet up runs here (a second one is refused)
      redis/               the embedded redis-server's append-only file (kept across runs)
      logs/<child>.log     each child's output, started afresh on every run
      members.kubeconfig   the simulator's kubeconfig: the members, as the roles see them
      redis.url            the Redis URL of the running fleet (owner-only; it may hold a password):
                           how `fleet member remove` and `fleet quota queues` find the fleet's
                           Redis without --redis or $FLEET_REDIS_URL, while the run holds up.lock
      tokens.csv           the fleet API's token file: fleet up's admin and team-a tokens (new on
                           every run) and any line a user added (kept; read again on change)
      prometheus.yml       scrape targets of this run's processes, for a local Prometheus
      tls/                 the fleet API's certificate and key (a new CA on every run)
      topology.yaml        the topology with --job-seconds applied (only when given)

Only ``redis/`` and the lines a user added to ``tokens.csv`` outlive a run; ``--fresh`` (``make
up FRESH=1``) removes ``redis/`` too, and every start says what it resumed from it
(:mod:`~fleet.local.resumed`).
"""

from __future__ import annotations

import fcntl
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = ["Layout", "StateDirBusy", "running_redis_url"]


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
    def redis_url(self) -> Path:
        return self.root / "redis.url"

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
        for path in (self.members_kubeconfig, self.prometheus, self.topology, self.redis_url):
            path.unlink(missing_ok=True)
        shutil.rmtree(self.tls, ignore_errors=True)
        if fresh:
            shutil.rmtree(self.redis, ignore_errors=True)
        self.logs.mkdir(parents=True, exist_ok=True)


def running_redis_url(state_dir: Path) -> str | None:
    """The Redis URL of the ``fleet up`` running with ``state_dir``, or None when none runs there
    (its ``up.lock`` is free) or it has not started Redis yet."""
    layout = Layout(state_dir)
    if not layout.lock_path.exists() or not layout.redis_url.exists():
        return None
    with layout.lock_path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # held: a fleet up runs here
            try:
                return layout.redis_url.read_text().strip() or None
            except OSError:
                return None
        fcntl.flock(handle, fcntl.LOCK_UN)
        return None  # a stale file of a run that ended
