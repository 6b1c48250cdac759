"""A fleet API replica on a loopback port, in a thread of the test process.

:class:`FleetApiThread` serves :func:`fleet.endpoint.app.build_fleet_api` over the Redis a sync
client points at (fakeredis or a real redis-server): the sync client is the replica's, and an
asyncio client to the same Redis is made on the server's own loop. Several threads over one
Redis are several replicas. ``kubeconfig()`` writes a kubeconfig for kubectl, with a bearer
token when given; :func:`official_client` makes the official ``kubernetes`` client from it.
:func:`keyspace` reads a whole Redis, to show that a refused request changed nothing.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import Coroutine, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import fakeredis
import redis
import redis.asyncio
from kubernetes import client as kube_client
from kubernetes import config as kube_config

from fleet.apiserver import Server
from fleet.endpoint.app import FleetApi, build_fleet_api
from fleet.endpoint.auth import Identity
from fleet.endpoint.members import MemberNames
from fleet.local.tls import make_certificates
from tests.support.net import free_port

T = TypeVar("T")


def async_twin(client: redis.Redis) -> redis.asyncio.Redis:
    """An asyncio client of the Redis ``client`` talks to (call it on the loop that uses it)."""
    kwargs = client.connection_pool.connection_kwargs
    if isinstance(client, fakeredis.FakeRedis):
        return fakeredis.aioredis.FakeRedis(server=kwargs["server"])
    return redis.asyncio.Redis(host=kwargs["host"], port=kwargs["port"], db=kwargs.get("db", 0))


class FleetApiThread:
    def __init__(
        self,
        client: redis.Redis,
        *,
        tokens: Mapping[str, Identity] | None = None,
        members: MemberNames = list,
        poll_interval: float = 0.2,
        bookmark_interval: float = 0.5,
        tls: bool = False,
        fresh_wait: float = 3.0,
    ) -> None:
        self.client = client
        #: How long a list or watch from a version not reached waits (kube-apiserver: 3 s).
        self._fresh_wait = fresh_wait
        #: With ``tls``, served over HTTPS with a private CA's certificate (kubectl sends bearer
        #: tokens only over HTTPS); ``kubeconfig()`` then carries the CA.
        self.certificates = make_certificates("127.0.0.1") if tls else None
        self._tls_dir: tempfile.TemporaryDirectory[str] | None = None
        self.port = free_port()
        self._tokens = tokens
        self._members = members
        self._poll_interval = poll_interval
        self._bookmark_interval = bookmark_interval
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"fleet-api-{self.port}", daemon=True
        )
        self.replica: FleetApi
        self.server: Server
        self._aclient: redis.asyncio.Redis

    @property
    def url(self) -> str:
        return f"{'https' if self.certificates else 'http'}://127.0.0.1:{self.port}"

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(timeout)

    async def _setup(self) -> None:
        self._aclient = async_twin(self.client)
        self.replica = build_fleet_api(
            self.client,
            self._aclient,
            members=self._members,
            tokens=self._tokens,
            poll_interval=self._poll_interval,
            bookmark_interval=self._bookmark_interval,
            block_ms=100,
            fresh_wait=self._fresh_wait,
        )
        files = None
        if self.certificates is not None:
            self._tls_dir = tempfile.TemporaryDirectory(prefix="fleet-api-tls-")
            files = self.certificates.write(Path(self._tls_dir.name))
        self.server = Server(self.replica.app, "127.0.0.1", self.port, grace=1, tls=files)
        await self.server.start()

    async def _teardown(self) -> None:
        await self.server.stop()
        await self.replica.close()
        await self._aclient.aclose()
        if self._tls_dir is not None:
            self._tls_dir.cleanup()

    def start(self) -> FleetApiThread:
        self._thread.start()
        self.call(self._setup())
        return self

    def close(self) -> None:
        try:
            self.call(self._teardown())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()

    def __enter__(self) -> FleetApiThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def kubeconfig(self, path: Path, *, token: str | None = None, context: str = "fleet") -> Path:
        user = f"  user:\n    token: {token}\n" if token else "  user: {}\n"
        path.write_text(
            "apiVersion: v1\n"
            "kind: Config\n"
            f"current-context: {context}\n"
            "clusters:\n"
            f"- name: {context}\n"
            f"  cluster:\n    server: {self.url}\n"
            + (f"    certificate-authority-data: {self.certificates.ca_data}\n" if self.certificates else "")
            + "users:\n"
            f"- name: {context}\n"
            f"{user}"
            "contexts:\n"
            f"- name: {context}\n"
            f"  context:\n    cluster: {context}\n    user: {context}\n    namespace: default\n"
        )
        return path


def official_client(
    api: FleetApiThread, directory: Path, *, token: str | None = None
) -> kube_client.ApiClient:
    """The official ``kubernetes`` client, configured from a kubeconfig for ``api`` (written in
    ``directory``), as a user's program reaches the fleet endpoint."""
    path = api.kubeconfig(directory / f"fleet-{api.port}.kubeconfig", token=token)
    return kube_config.new_client_from_config(config_file=str(path), context="fleet")  # type: ignore[no-untyped-call,no-any-return]


def keyspace(client: redis.Redis) -> dict[Any, Any]:
    """Every key with its whole value: the state a refused request must leave alone."""
    state: dict[Any, Any] = {}
    for key in sorted(client.keys("*")):
        kind = client.type(key)
        if kind == b"string":
            state[key] = client.get(key)
        elif kind == b"hash":
            state[key] = client.hgetall(key)
        elif kind == b"zset":
            state[key] = client.zrange(key, 0, -1, withscores=True)
        elif kind == b"set":
            state[key] = client.smembers(key)
        elif kind == b"list":
            state[key] = client.lrange(key, 0, -1)
        elif kind == b"stream":
            state[key] = client.xrange(key)
        else:
            state[key] = kind
    return state
