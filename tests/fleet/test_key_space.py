"""One key space per deployment: every key set and RQ queue name derives from its prefix, the
default prefix keeps the names existing data lives under, and a bad prefix is refused by name."""

from __future__ import annotations

from collections.abc import Iterator

import fakeredis
import pytest
from click.testing import CliRunner

from fleet.cli import main
from fleet.dispatch.context import Context
from fleet.endpoint.app import build_fleet_api
from fleet.endpoint.keys import ApiKeys
from fleet.placement import ReservationKeys
from fleet.state import EVICT_QUEUE, PROPAGATE_QUEUE, PURGE_QUEUE, DispatchKeys, StateKeys
from queues import DEFAULT_SPACE, KeyFunction, Keys, KeySpace, key_declarations

KEY_SETS: tuple[type[KeySpace], ...] = (Keys, StateKeys, DispatchKeys, ApiKeys, ReservationKeys)


def key_names(keys: KeySpace) -> Iterator[tuple[str, str]]:
    """(attribute, key name) for every key the set declares (:func:`queues.key_declarations`),
    a key function called with placeholder arguments; a member's names for the reservations."""
    if isinstance(keys, ReservationKeys):
        yield from key_names(keys.member("x"))
        return
    for name, declaration in key_declarations(type(keys)):
        value = getattr(keys, name)
        if isinstance(declaration, KeyFunction):
            value = value(*[f"x{i}" for i in range(len(declaration.arguments))])
        yield name, value


@pytest.mark.parametrize("key_set", KEY_SETS, ids=lambda c: c.__name__)
def test_every_key_of_a_deployment_carries_its_prefix(key_set: type[KeySpace]) -> None:
    keys = key_set.within(KeySpace(prefix="blue"))
    names = dict(key_names(keys))
    assert len(names) >= 2, names  # the walk found the set's keys
    for attribute, name in names.items():
        assert name.startswith("blue:{"), (attribute, name)
    assert "fleet" not in "".join(names.values())
    if "KEYS[1]" not in keys.lua():  # the reservations' scripts are given their member's base
        assert keys.lua().startswith("local BASE = 'blue:{"), keys.lua()


def test_the_default_prefix_keeps_todays_names() -> None:
    assert Keys().meta == "fleet:{quota}:meta"
    assert Keys().node("root") == "fleet:{quota}:node:root"
    assert StateKeys().objects("core/events") == "fleet:{quota}:state:objects:core/events"
    assert DispatchKeys().lease == "fleet:{quota}:dispatch:lease"
    assert DispatchKeys().inflight == "fleet:{quota}:dispatch:inflight"
    assert ApiKeys().tree_lock == "fleet:{quota}:api:tree-lock"
    assert ReservationKeys().member("m1").held == "fleet:{res:m1}:held"
    assert ReservationKeys().member_base("m1") == "fleet:{res:m1}:"
    assert [DispatchKeys().queue(q) for q in (PROPAGATE_QUEUE, EVICT_QUEUE, PURGE_QUEUE)] == [
        "fleet-propagate",
        "fleet-evict",
        "fleet-purge",
    ]
    assert Keys().lua().startswith("local BASE = 'fleet:{quota}:'")


def test_a_context_derives_every_key_set_and_queue_from_its_space() -> None:
    client = fakeredis.FakeRedis()
    blue = Context(client, space=KeySpace(prefix="blue"))
    assert blue.keys == DispatchKeys(prefix="blue")
    assert blue.objects.keys == StateKeys(prefix="blue")
    assert blue.ledger.keys == Keys(prefix="blue")
    assert blue.reservations.keys == ReservationKeys(prefix="blue")
    assert [q.name for q in (blue.queue, blue.evict_queue, blue.purge_queue)] == [
        "blue-propagate",
        "blue-evict",
        "blue-purge",
    ]
    default = Context(client)
    assert default.space == DEFAULT_SPACE
    assert default.queue.name == "fleet-propagate"


@pytest.mark.parametrize("prefix", ["", "a:b", "a{b", "a}b", "a b", "a\tb"])
def test_a_prefix_no_key_may_carry_is_refused(prefix: str) -> None:
    with pytest.raises(ValueError, match="key prefix"):
        KeySpace(prefix=prefix)
    with pytest.raises(ValueError, match="key prefix"):
        DispatchKeys(prefix=prefix)


@pytest.mark.parametrize(
    "command",
    [["api"], ["dispatcher"], ["worker"], ["syncer"], ["quota", "queues"], ["member", "remove", "m1"]],
    ids=" ".join,
)
def test_the_commands_refuse_a_bad_prefix_naming_the_option(command: list[str]) -> None:
    result = CliRunner().invoke(main, [*command, "--key-prefix", "team:a"])
    assert result.exit_code == 2, result.output
    assert "--key-prefix" in result.output and "':'" in result.output


def test_the_prefix_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEET_KEY_PREFIX", "bad prefix")
    result = CliRunner().invoke(main, ["worker"])
    assert result.exit_code == 2, result.output
    assert "--key-prefix" in result.output


def test_an_api_replica_works_in_its_space() -> None:
    server = fakeredis.FakeServer()
    client = fakeredis.FakeRedis(server=server)
    aclient = fakeredis.FakeAsyncRedis(server=server)
    replica = build_fleet_api(client, aclient, space=KeySpace(prefix="blue"))
    assert replica.ledger.keys == Keys(prefix="blue")
    assert replica.objects.keys == StateKeys(prefix="blue")
