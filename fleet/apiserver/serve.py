"""Running an app on uvicorn inside an existing event loop, startable and stoppable at will.

The simulator runs several members in one process and loop, each its own listener, and must be
able to take one member's listener down (clients get connection refused) and bring it back on the
same port over the same store. :class:`Server` does that: ``start()`` binds and returns once the
port accepts connections; ``stop()`` ends the app's watch streams, closes the listener and every
connection, and returns once the port is free. Signals are left to the owner of the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Generator
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette

__all__ = ["Server", "serve"]

log = logging.getLogger("fleet.apiserver.serve")


class _QuietServer(uvicorn.Server):
    """A uvicorn server that leaves signal handling to whoever owns the process."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class Server:
    """One listener for ``app`` on ``host:port``; restartable on the same port."""

    def __init__(
        self,
        app: Starlette,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        grace: int = 2,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.grace = grace
        #: (certificate chain, private key) PEM files: serve HTTPS (kubectl sends tokens only then).
        self.tls = tls
        self._server: _QuietServer | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    async def start(self) -> None:
        """Bind and serve; returns when the listener accepts connections (raises if it cannot bind)."""
        if self.running:
            return
        hub = getattr(self.app.state, "api_hub", None)
        if hub is not None:
            hub.reopen()
        config = uvicorn.Config(
            self.app,
            host=self.host,
            port=self.port,
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=self.grace,
            timeout_keep_alive=30,
            ssl_certfile=str(self.tls[0]) if self.tls else None,
            ssl_keyfile=str(self.tls[1]) if self.tls else None,
        )
        # Bind here rather than in uvicorn, whose bind failure is a SystemExit that would take
        # the whole process (and every other member in it) down.
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
        except OSError as error:
            sock.close()
            raise OSError(
                error.errno, f"cannot listen on {self.host}:{self.port}: {error.strerror}"
            ) from None
        self.port = int(sock.getsockname()[1])
        server = _QuietServer(config)
        self._server = server
        self._task = asyncio.create_task(
            server.serve(sockets=[sock]), name=f"uvicorn-{self.host}:{self.port}"
        )
        while not server.started:
            if self._task.done():
                failure = self._task.exception()
                self._task = None
                sock.close()
                raise OSError(f"cannot serve on {self.host}:{self.port}") from failure
            await asyncio.sleep(0.005)
        log.info("event=listening url=%s", self.url)

    async def stop(self) -> None:
        """Close the listener and all connections (open watches end); returns when the port is free."""
        server, task = self._server, self._task
        if server is None or task is None:
            return
        hub = getattr(self.app.state, "api_hub", None)
        if hub is not None:
            hub.close_all()
        server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=self.grace + 5)
        except TimeoutError:
            server.force_exit = True
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for connection in list(server.server_state.connections):
            transport: Any = getattr(connection, "transport", None)
            if transport is not None:
                transport.abort()
        self._server = None
        self._task = None
        log.info("event=stopped host=%s port=%d", self.host, self.port)

    async def __aenter__(self) -> Server:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def serve(app: Starlette, host: str, port: int, *, ready_event: asyncio.Event | None = None) -> None:
    """Serve ``app`` until cancelled; sets ``ready_event`` once the port accepts connections."""
    server = Server(app, host, port)
    await server.start()
    if ready_event is not None:
        ready_event.set()
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()
