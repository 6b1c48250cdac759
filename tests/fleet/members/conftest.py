"""Fixtures: a real member API server (the serving core over HTTP) and a Member pointed at it.

:class:`MemberServer` is the core's test server with two additions: it requires the bearer token
of the test kubeconfig (so the client's credentials are really exercised), and a
:class:`~tests.fleet.members.faults.FaultPlan` in front of the app scripts 503s, 429s and
refusals. Its listener can go down (connection refused) and come back on the same port with the
same store, and tests may write to the store directly while it is down.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet.apiserver import MemoryStore, Server, TokenAuthenticator, build_app
from fleet.apiserver.resources import ResourceType
from fleet.members import Member, MemberSettings, load_members
from fleet.members.guard import CircuitBreaker, State
from tests.fleet.members.faults import FaultMiddleware, FaultPlan
from tests.fleet.members.kubeconfig import TOKEN, write_kubeconfig
from tests.support.apiserver import ApiServerThread

#: Short timeouts and backoffs so that retry and reconnect tests take a fraction of a second.
FAST = MemberSettings(
    connect_timeout=1.0,
    request_timeout=5.0,
    attempts=3,
    backoff_initial=0.02,
    backoff_max=0.1,
    probe_timeout=0.5,
    watch_timeout_seconds=30,
    watch_read_timeout=10.0,
    watch_backoff_initial=0.02,
    watch_backoff_max=0.2,
    breaker_reset=0.3,
)


def state_of(breaker: CircuitBreaker) -> State:
    """A breaker's state now (a call, so that type checkers do not narrow it across calls)."""
    return breaker.state


class MemberServer(ApiServerThread):
    """The serving core on a loopback port, behind token auth and a fault plan."""

    def __init__(self, *, history: int = 10_000, bookmark_interval: float = 0.5) -> None:
        super().__init__(history=history, bookmark_interval=bookmark_interval)
        self.faults = FaultPlan()

    async def _setup(self) -> None:
        self.store = MemoryStore.with_default_namespaces(history=self._history)
        app = build_app(
            self.registry,
            self.store,
            authenticator=TokenAuthenticator({TOKEN: "fleet"}),
            bookmark_interval=self._bookmark_interval,
        )
        app.add_middleware(FaultMiddleware, plan=self.faults)
        self.server = Server(app, "127.0.0.1", self.port, grace=1)
        await self.server.start()

    # Direct store access, as an in-process controller (or a test) writes while clients are away.
    def create(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        return self.call(self.store.create(rt, obj))

    def update(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        return self.call(self.store.update(rt, obj))

    def delete(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        return self.call(self.store.delete(rt, namespace, name))


@pytest.fixture
def member_server() -> Iterator[MemberServer]:
    server = MemberServer()
    server.start()
    yield server
    server.close()


def member_for(server: MemberServer, directory: Path, settings: MemberSettings = FAST) -> Member:
    path = write_kubeconfig(directory / "kubeconfig", {"m1": server.url})
    return load_members(path, settings=settings)["m1"]


@pytest.fixture
def member(member_server: MemberServer, tmp_path: Path) -> Iterator[Member]:
    member = member_for(member_server, tmp_path)
    yield member
    member.close()
