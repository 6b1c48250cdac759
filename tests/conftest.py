"""Shared fixtures: Redis in two lanes (fakeredis and a private real redis-server).

``redis_client`` is parametrised over both lanes so that one test proves the same behaviour (and
the same Lua) on fakeredis and on real Redis. With ``CI=true`` a missing ``redis-server`` fails
the run instead of skipping the real lane. ``round_trips`` counts the requests a test's process
sends to Redis.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fakeredis
import pytest
import redis
from hypothesis import settings
from redis.connection import AbstractConnection

from tests.support.ordering import longest_first
from tests.support.redis_server import REDIS_SERVER, RedisServer

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

# The suite is a gate: its property tests replay the same draws on every run, so a run fails only
# for a change, never for a draw no run made before. ``make explore`` draws new examples to look
# for counterexamples; one it finds is pinned with ``@example`` or a plain test.
settings.register_profile("gate", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "gate"))


@pytest.hookimpl(trylast=True)  # after the deselections (-m, -k): the slices are of what runs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist worksteal`` the longest modules start first, one share per worker
    (:mod:`tests.support.ordering`): none starts late and ends the run alone."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and config.getoption("dist", "no") == "worksteal":
        items[:] = longest_first(items, lambda item: item.nodeid.split("::", 1)[0], workers)


def _require_redis_server() -> None:
    if REDIS_SERVER is None:
        if IN_CI:
            pytest.fail("redis-server is not installed; CI must run the real-Redis lane")
        pytest.skip("redis-server is not installed")


@pytest.fixture(scope="session")
def redis_server_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real redis-server shared by the tests of a session (flushed per test)."""
    _require_redis_server()
    server = RedisServer(tmp_path_factory.mktemp("redis-session"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A real redis-server of this test's own, which it may kill -9 and restart."""
    _require_redis_server()
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def real_redis(redis_server_session: RedisServer) -> Iterator[redis.Redis]:
    client = redis_server_session.client()
    client.flushall()
    yield client
    client.flushall()
    client.close()


@pytest.fixture
def fake_redis() -> Iterator[redis.Redis]:
    server = fakeredis.FakeServer()
    client = fakeredis.FakeRedis(server=server)
    yield client
    client.close()


@pytest.fixture(params=["fakeredis", "redis"])
def redis_client(request: pytest.FixtureRequest) -> redis.Redis:
    """The same test on fakeredis (fast lane) and on a real redis-server (integration lane)."""
    fixture = "fake_redis" if request.param == "fakeredis" else "real_redis"
    client: redis.Redis = request.getfixturevalue(fixture)
    return client


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many requests the process sends to Redis (a pipeline is one), in ``[0]``."""
    count = [0]
    send = AbstractConnection.send_packed_command

    def counted(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
        count[0] += 1
        send(self, command, check_health)  # type: ignore[no-untyped-call]

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counted)
    yield count
