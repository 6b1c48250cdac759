"""A serving-core API server on a loopback port, in a thread of the test process.

``ApiServerThread`` runs its own event loop in a daemon thread with a :class:`MemoryStore` and the
member registry; tests drive it over HTTP (the ``kubernetes`` client, kubectl) and may run
coroutines on its loop (``call``) to reach the store directly, as in-process controllers do.
``store_factory`` serves another store instead (a Redis store, say): an async context manager
entered on the server's loop, as ``backend``, and exited when the server closes.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client

from fleet.apiserver import MemoryStore, Registry, Server, Store, build_app
from fleet.sim import member_registry
from tests.support.net import free_port

T = TypeVar("T")


class ApiServerThread:
    def __init__(
        self,
        *,
        registry: Registry | None = None,
        history: int = 10_000,
        bookmark_interval: float = 0.5,
        store_factory: Callable[[], AbstractAsyncContextManager[Store]] | None = None,
    ):
        self.registry = registry or member_registry()
        self._store_factory = store_factory
        self._store_context: AbstractAsyncContextManager[Store] | None = None
        self.port = free_port()
        self._history = history
        self._bookmark_interval = bookmark_interval
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"apiserver-{self.port}", daemon=True
        )
        self.store: MemoryStore  # the default store (not set with a store_factory)
        self.backend: Store  # the store served
        self.server: Server

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        """Run ``coro`` on the server's loop and return its result."""
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(timeout)

    async def _setup(self) -> None:
        if self._store_factory is None:
            self.store = MemoryStore.with_default_namespaces(history=self._history)
            self.backend = self.store
        else:
            self._store_context = self._store_factory()
            self.backend = await self._store_context.__aenter__()
        app = build_app(self.registry, self.backend, bookmark_interval=self._bookmark_interval)
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
            if self._store_context is not None:
                self.call(self._store_context.__aexit__(None, None, None))
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
