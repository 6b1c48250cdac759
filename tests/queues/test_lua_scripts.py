"""The one Lua loader: a script file is registered once per client, and forgotten with it."""

from __future__ import annotations

import gc
import weakref

import fakeredis

from queues import lua_script, lua_source, read_lua
from queues.lua_scripts import _SYNC


def test_a_script_is_registered_once_per_client_and_prelude() -> None:
    client, other = fakeredis.FakeRedis(), fakeredis.FakeRedis()
    first = lua_script(client, "queues", "requeue")
    assert lua_script(client, "queues", "requeue") is first
    assert lua_script(other, "queues", "requeue") is not first
    prefixed = lua_script(client, "queues", "requeue", "-- prelude\n")
    assert prefixed is not first and prefixed.script == "-- prelude\n" + read_lua("queues", "requeue")
    assert first.script == lua_source("queues", "requeue")


def test_a_client_that_goes_frees_its_scripts() -> None:
    client = fakeredis.FakeRedis()
    lua_script(client, "queues", "release")
    assert client in _SYNC
    gone = weakref.ref(client)
    before = len(_SYNC)
    del client
    gc.collect()
    assert gone() is None  # the cache did not keep the client alive
    # Its entry went with it (other tests' clients collected now may go too: at least one fewer).
    assert len(_SYNC) <= before - 1
