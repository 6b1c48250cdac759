"""What :meth:`fleet.jobs.durability.Durability.confirm` sends and how it reads the answers
(the real commands run in tests/fleet/endpoint/test_durability.py; ``WAITAOF`` needs Redis 7.2, so
its replies are given here)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from fleet.jobs.durability import Durability, DurabilityUnavailable, NotDurable, check_server


class _Pipeline:
    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.sent: list[tuple[Any, ...]] = []

    def __enter__(self) -> _Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def set(self, key: str, value: str) -> None:
        self.sent.append(("SET", key, value))

    def execute_command(self, *args: Any) -> None:
        self.sent.append(args)

    def execute(self) -> list[Any]:
        if isinstance(self.reply, Exception):
            raise self.reply
        return [True, self.reply]


class _Client:
    def __init__(self, reply: Any, info: dict[str, Any] | None = None) -> None:
        self.pipe = _Pipeline(reply)
        self._info = info or {}

    def pipeline(self, transaction: bool = True) -> _Pipeline:
        assert transaction is False  # one connection, no MULTI: WAIT cannot run inside one
        return self.pipe

    def info(self, section: str) -> dict[str, Any]:
        return self._info

    def config_get(self, name: str) -> dict[str, str]:
        return {name: self._info.get(name, "yes")}


def _confirm(durability: Durability, reply: Any) -> list[tuple[Any, ...]]:
    client = _Client(reply)
    durability.confirm(client, "marker")  # type: ignore[arg-type]
    return client.pipe.sent


def test_none_sends_nothing() -> None:
    client = _Client(None)
    Durability().confirm(client, "marker")  # type: ignore[arg-type]
    assert client.pipe.sent == []


def test_aof_waits_on_a_marker_written_on_the_same_connection() -> None:
    sent = _confirm(Durability("aof", 0, 0.25), [1, 0])
    assert sent == [("SET", "marker", "1"), ("WAITAOF", 1, 0, 250)]
    assert _confirm(Durability("aof", 1, 1.0), [1, 1])[1] == ("WAITAOF", 1, 1, 1000)


@pytest.mark.parametrize(
    ("durability", "reply", "said"),
    [
        (Durability("aof", 0, 1.0), [0, 0], "local 0/1"),
        (Durability("aof", 2, 1.0), [1, 1], "replicas 1/2"),
        (Durability("replicas", 2, 1.0), 1, "1 of 2 replicas"),
        (Durability("replicas", 1, 1.0), redis.ConnectionError("gone"), "ConnectionError"),
    ],
)
def test_what_is_not_confirmed_raises(durability: Durability, reply: Any, said: str) -> None:
    with pytest.raises(NotDurable, match=said):
        _confirm(durability, reply)


def test_replicas_waits_for_them() -> None:
    assert _confirm(Durability("replicas", 2, 0.5), 2)[1] == ("WAIT", 2, 500)


def test_settings_that_mean_nothing_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1 replica"):
        Durability("replicas", 0)
    with pytest.raises(ValueError, match="one of"):
        Durability("fsync")  # type: ignore[arg-type]


def test_aof_needs_a_server_with_waitaof_and_its_aof_on() -> None:
    with pytest.raises(DurabilityUnavailable, match=r"7\.2 or newer"):
        check_server(_Client(None, {"redis_version": "7.0.15"}), Durability("aof"))  # type: ignore[arg-type]
    with pytest.raises(DurabilityUnavailable, match="appendonly yes"):
        check_server(
            _Client(None, {"redis_version": "7.2.4", "appendonly": "no"}),  # type: ignore[arg-type]
            Durability("aof"),
        )
    check_server(_Client(None, {"redis_version": "7.2.4"}), Durability("aof"))  # type: ignore[arg-type]
    check_server(_Client(None, {"redis_version": "6.2.0"}), Durability("replicas", 1))  # type: ignore[arg-type]
