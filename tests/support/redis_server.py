"""A private ``redis-server`` for the integration lane: free loopback port, AOF on, kill -9.

The crash and persistence tests need a Redis they may kill without touching anyone else's, so
each :class:`RedisServer` owns a temporary directory and a port. ``appendfsync always`` makes
every acknowledged write durable, which is what the crash tests assert about.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import redis

from tests.support.net import free_port, wait_for_port

REDIS_SERVER = shutil.which("redis-server")


class RedisServer:
    """One ``redis-server`` process that can be killed and restarted on the same port and data."""

    def __init__(self, directory: Path, *, appendonly: bool = True) -> None:
        if REDIS_SERVER is None:
            raise RuntimeError("redis-server is not installed")
        self.directory = directory
        self.port = free_port()
        self.appendonly = appendonly
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self, **kwargs: object) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)  # type: ignore[arg-type]

    def start(self) -> None:
        assert REDIS_SERVER is not None
        args = [
            REDIS_SERVER,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", "always",
            "--daemonize", "no",
            "--logfile", str(self.directory / "redis.log"),
        ]  # fmt: skip
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port)
        deadline = time.monotonic() + 10
        while True:  # AOF loading answers LOADING until done
            try:
                self.client().ping()
                return
            except redis.exceptions.BusyLoadingError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def kill9(self) -> None:
        """Crash the server: SIGKILL, no shutdown save."""
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def restart(self) -> None:
        self.kill9()
        self.start()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill9()
            self.proc = None
