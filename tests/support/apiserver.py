"""A serving-core API server on a loopback port, in a thread of the test process.

``ApiServerThread`` runs its own event loop in a daemon thread with a :class:`MemoryStore` and the
member registry; tests drive it over HTTP (the ``kubernetes`` client, kubectl) and may run
coroutines on its loop (``call``) to reach the store directly, as in-process controllers do.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client

from fleet.apiserver import MemoryStore, Registry, Server, build_app, member_registry
from tests.support.net import free_port

T = TypeVar("T")


class ApiServerThread:
    def __init__(
        self, *, registry: Registry | None = None, history: int = 10_000, bookmark_interval: float = 0.5
    ):
        self.registry = registry or member_registry()
        self.port = free_port()
        self._history = history
        self._bookmark_interval = bookmark_interval
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"apiserver-{self.port}", daemon=True
        )
        self.store: MemoryStore
        self.server: Server

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        """Run ``coro`` on the server's loop and return its result."""
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(timeout)

    async def _setup(self) -> None:
        self.store = MemoryStore.with_default_namespaces(history=self._history)
        app = build_app(self.registry, self.store, bookmark_interval=self._bookmark_interval)
        self.server = Server(app, "127.0.0.1", self.port, grace=1)
        await self.server.start()

    def start(self) -> ApiServerThread:
        self._thread.start()
        self.call(self._setup())
        return self

    def stop_listener(self) -> None:
        self.call(self.server.stop())

    def start_listener(self) -> None:
        self.call(self.server.start())

    def close(self) -> None:
        try:
            self.call(self.server.stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()

    def api_client(self) -> client.ApiClient:
        configuration = client.Configuration(host=self.url)
        return client.ApiClient(configuration)

    def write_kubeconfig(self, path: Path, context: str = "sim") -> Path:
        path.write_text(kubeconfig(self.url, context))
        return path


def kubeconfig(url: str, context: str = "sim") -> str:
    """A kubeconfig with one context, no authentication, for ``url``."""
    return (
        "apiVersion: v1\n"
        "kind: Config\n"
        f"current-context: {context}\n"
        "clusters:\n"
        f"- name: {context}\n"
        f"  cluster:\n    server: {url}\n"
        "users:\n"
        f"- name: {context}\n"
        "  user: {}\n"
        "contexts:\n"
        f"- name: {context}\n"
        f"  context:\n    cluster: {context}\n    user: {context}\n    namespace: default\n"
    )
