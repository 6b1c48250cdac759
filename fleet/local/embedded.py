"""The Redis ``fleet up`` brings when none is given: nothing to install either way.

With a ``redis-server`` binary on PATH it runs a private one: loopback only, a free port, its
append-only file in the state directory (so queued jobs and the quota ledger survive a restart of
``fleet up``, as they would a restart of a real Redis), fsynced before every reply
(``appendfsync always``: an acknowledged submission survives a crash of Redis, see
:mod:`fleet.jobs.durability`). Without one it serves
``fakeredis`` over TCP from a thread of the ``fleet up`` process (``fakeredis.TcpFakeServer``,
with Lua through ``lupa``): every Fleet process speaks to it as to a real Redis, but the state
lives only as long as ``fleet up`` does.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Final, Protocol

import redis

from fleet.connections import mask_url
from fleet.local.children import Child, free_port

__all__ = ["EmbeddedRedis", "FakeRedisThread", "RedisServerProcess", "start_embedded_redis"]

_START_TIMEOUT: Final = 30.0


class EmbeddedRedis(Protocol):
    @property
    def url(self) -> str: ...

    @property
    def description(self) -> str:
        """One line for the user: what it is and where its data lives."""
        ...

    def stop(self) -> None: ...


def wait_for_redis(url: str, timeout: float, alive: Child | None = None) -> None:
    """Return once ``url`` answers PING (an AOF being loaded answers LOADING until done)."""
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=2.0)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                client.ping()
                return
            except (redis.ConnectionError, redis.BusyLoadingError, redis.TimeoutError) as error:
                if alive is not None and not alive.alive:
                    raise RuntimeError(
                        f"redis-server exited with code {alive.returncode}:\n{alive.tail()}"
                    ) from None
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"Redis at {mask_url(url)} did not answer in {timeout:g}s: {error}"
                    ) from None
                time.sleep(0.05)
    finally:
        client.close()


class RedisServerProcess:
    """A private ``redis-server`` child with AOF in ``directory``."""

    def __init__(self, binary: str, directory: Path, log_path: Path, host: str = "127.0.0.1") -> None:
        self.directory = directory
        self.host = host
        self.port = free_port(host)
        directory.mkdir(parents=True, exist_ok=True)
        argv = [
            binary,
            "--bind", host,
            "--port", str(self.port),
            "--dir", str(directory.resolve()),
            "--appendonly", "yes",
            "--appendfsync", "always",
            "--save", "",
            "--daemonize", "no",
            "--protected-mode", "yes",
        ]  # fmt: skip
        self.child = Child("redis", argv, log_path, critical=True)

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    @property
    def description(self) -> str:
        return f"redis-server on {self.host}:{self.port} (append-only file in {self.directory})"

    def start(self) -> None:
        self.child.start()
        try:
            wait_for_redis(self.url, _START_TIMEOUT, alive=self.child)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self.child.terminate()  # redis-server flushes its AOF on SIGTERM
        if not self.child.wait(15.0):
            self.child.kill()
            self.child.wait(5.0)


class FakeRedisThread:
    """``fakeredis`` over TCP, served from a thread of this process; in memory only."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        try:
            import lupa  # type: ignore[import-untyped]  # noqa: F401  (fakeredis runs Lua through it)
            from fakeredis import TcpFakeServer
        except ImportError as exc:
            raise RuntimeError(
                "no redis-server on PATH and fakeredis with Lua is not installed: "
                "install redis-server, or pip install 'fleet[local]'"
            ) from exc
        self.host = host
        self.server = TcpFakeServer((host, 0), server_type="redis")
        self.server.RequestHandlerClass = _handler_with_plain_addresses()
        # A connection thread may sit in a blocking command (an RQ worker's BLPOP) long after its
        # client is gone; the data dies with this process anyway, so do not wait for them.
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, name="fakeredis", daemon=True
        )

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    @property
    def description(self) -> str:
        return f"fakeredis on {self.host}:{self.port} (in memory: no redis-server on PATH)"

    def start(self) -> None:
        self.thread.start()
        wait_for_redis(self.url, _START_TIMEOUT)

    def stop(self) -> None:
        self.server.shutdown()  # ends serve_forever and tells every connection to finish
        self.server.server_close()  # closes the listener and joins the connection threads
        self.thread.join(10.0)


class _HostPort:
    """A socket that names its ends ``host:port``, as Redis' CLIENT INFO does, during setup only."""

    def __init__(self, sock: object) -> None:
        self._sock = sock

    def __getattr__(self, name: str) -> object:
        return getattr(self._sock, name)

    def getsockname(self) -> str:
        host, port = self._sock.getsockname()[:2]  # type: ignore[attr-defined]
        return f"{host}:{port}"

    def getpeername(self) -> str:
        host, port = self._sock.getpeername()[:2]  # type: ignore[attr-defined]
        return f"{host}:{port}"


def _handler_with_plain_addresses() -> type:
    """fakeredis' TCP handler, but with CLIENT INFO's ``addr`` and ``laddr`` as Redis writes them.

    fakeredis puts the socket's address tuples there as Python reprs (``addr=('127.0.0.1', 5)``),
    whose space breaks redis-py's CLIENT INFO parser, and RQ workers ask CLIENT INFO at start.
    """
    from fakeredis._clients._tcp_server import TCPFakeRequestHandler

    class Handler(TCPFakeRequestHandler):
        def setup(self) -> None:
            real = self.request
            self.request = _HostPort(real)  # becomes self.connection in StreamRequestHandler.setup
            try:
                super().setup()
            finally:
                self.request = self.connection = real

    return Handler


def start_embedded_redis(directory: Path, log_path: Path, host: str = "127.0.0.1") -> EmbeddedRedis:
    """A running embedded Redis: ``redis-server`` when installed, else ``fakeredis``."""
    binary = shutil.which("redis-server")
    embedded: RedisServerProcess | FakeRedisThread
    embedded = RedisServerProcess(binary, directory, log_path, host) if binary else FakeRedisThread(host)
    embedded.start()
    return embedded
