"""The Lua scripts, assembled once and registered once per Redis client (sync or asyncio).

Each script is ``fleet/state/lua/<name>.lua`` prefixed with the key names of
:class:`~fleet.state.keys.StateKeys`: ``write`` (every write of an object), ``page`` (every
read of a list page) and ``reindex`` (the rebuild of the Events' involved index). redis-py's
``Script`` sends ``EVALSHA`` and loads the body on ``NOSCRIPT`` by itself, so a Redis restart or
failover needs nothing from us.
"""

from __future__ import annotations

import weakref
from functools import cache
from importlib import resources

import redis
import redis.asyncio
from redis.commands.core import AsyncScript, Script

from fleet.state.keys import StateKeys

__all__ = ["async_script", "async_write_script", "script", "source", "write_script"]


@cache
def _read(name: str) -> str:
    return resources.files("fleet.state").joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")


def source(name: str, keys: StateKeys) -> str:
    """The full text of one script as Redis runs it."""
    return keys.lua() + _read(name)


_SYNC: weakref.WeakKeyDictionary[redis.Redis, dict[tuple[StateKeys, str], Script]] = (
    weakref.WeakKeyDictionary()
)
_ASYNC: weakref.WeakKeyDictionary[redis.asyncio.Redis, dict[tuple[StateKeys, str], AsyncScript]] = (
    weakref.WeakKeyDictionary()
)


def script(client: redis.Redis, keys: StateKeys, name: str) -> Script:
    """Script ``name`` registered on ``client`` (registered on first use, then reused)."""
    per_client = _SYNC.setdefault(client, {})
    found = per_client.get((keys, name))
    if found is None:
        found = per_client[keys, name] = client.register_script(source(name, keys))
    return found


def async_script(client: redis.asyncio.Redis, keys: StateKeys, name: str) -> AsyncScript:
    """Script ``name`` registered on an asyncio ``client``."""
    per_client = _ASYNC.setdefault(client, {})
    found = per_client.get((keys, name))
    if found is None:
        found = per_client[keys, name] = client.register_script(source(name, keys))
    return found


def write_script(client: redis.Redis, keys: StateKeys) -> Script:
    """The write script registered on ``client``."""
    return script(client, keys, "write")


def async_write_script(client: redis.asyncio.Redis, keys: StateKeys) -> AsyncScript:
    """The write script registered on an asyncio ``client``."""
    return async_script(client, keys, "write")
