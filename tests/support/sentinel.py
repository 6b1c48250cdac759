"""A Redis primary, its replica and three Sentinels, all ``redis-server`` processes on loopback.

:class:`SentinelSet` is what production runs in miniature: the sentinels monitor the primary
under the service name :data:`SERVICE` (quorum 2, down after :data:`DOWN_AFTER_MS`), and
:attr:`SentinelSet.url` is the ``redis+sentinel://`` URL every Fleet role is given. Killing the
primary (:meth:`SentinelSet.kill_primary`) makes the sentinels promote the replica.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Final

import redis

from tests.support.net import free_port, wait_for_port
from tests.support.redis_server import REDIS_SERVER, RedisServer

__all__ = ["DOWN_AFTER_MS", "SERVICE", "SentinelSet"]

SERVICE: Final = "fleet"
DOWN_AFTER_MS: Final = 1000


class SentinelSet:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        (directory / "primary").mkdir(parents=True)
        (directory / "replica").mkdir()
        self.primary = RedisServer(directory / "primary", appendfsync="everysec")
        self.replica: RedisServer | None = None
        self.sentinel_ports: list[int] = []
        self._sentinels: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def start(self) -> None:
        assert REDIS_SERVER is not None
        self.primary.start()
        self.replica = RedisServer(
            self.directory / "replica", appendfsync="everysec", replicaof=self.primary.port
        )
        self.replica.start()
        for n in range(3):
            port = free_port()
            conf = self.directory / f"sentinel-{n}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.directory}\n"
                f"logfile {self.directory / f'sentinel-{n}.log'}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 2\n"
                f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {SERVICE} 10000\n"
                f"sentinel parallel-syncs {SERVICE} 1\n"
            )
            process = subprocess.Popen([REDIS_SERVER, str(conf), "--sentinel"], stdout=subprocess.DEVNULL)
            self._sentinels.append(process)
            self.sentinel_ports.append(port)
            wait_for_port(port)
        self.wait(
            lambda: self._replicas_known() >= 1 and self._sentinels_known() >= 2, "the sentinels to settle"
        )

    def _ask(self, *command: str) -> object:
        client = redis.Redis(host="127.0.0.1", port=self.sentinel_ports[0], socket_timeout=2)
        try:
            return client.execute_command(*command)  # type: ignore[no-untyped-call]
        finally:
            client.close()

    def _replicas_known(self) -> int:
        return len(self._ask("SENTINEL", "REPLICAS", SERVICE))  # type: ignore[arg-type]

    def _sentinels_known(self) -> int:
        return len(self._ask("SENTINEL", "SENTINELS", SERVICE))  # type: ignore[arg-type]

    def primary_port(self) -> int:
        host_port = self._ask("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
        return int(host_port[1])  # type: ignore[index]

    def kill_primary(self) -> None:
        self.primary.kill9()

    def wait(self, done: object, what: str, timeout: float = 30.0) -> None:
        assert callable(done)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if done():
                    return
            except redis.RedisError:
                pass
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.1)

    def stop(self) -> None:
        for process in self._sentinels:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()
        if self.replica is not None:
            self.replica.stop()
        self.primary.stop()
