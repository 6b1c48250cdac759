"""The Lua scripts of the object storage, loaded through :mod:`queues.lua_scripts` (once per Redis
client, sync or asyncio).

Each script is ``fleet/state/lua/<name>.lua`` prefixed with the key names of
:class:`~fleet.state.keys.StateKeys`: ``write`` (every write of an object), ``page`` (every
read of a list page) and ``reindex`` (the rebuild of the Events' involved index).
"""

from __future__ import annotations

import redis
import redis.asyncio
from redis.commands.core import AsyncScript, Script

from fleet.state.keys import StateKeys
from queues import async_lua_script, lua_script, lua_source

__all__ = ["async_script", "async_write_script", "script", "source", "write_script"]

_PACKAGE = "fleet.state"


def source(name: str, keys: StateKeys) -> str:
    """The full text of one script as Redis runs it."""
    return lua_source(_PACKAGE, name, keys.lua())


def script(client: redis.Redis, keys: StateKeys, name: str) -> Script:
    """Script ``name`` registered on ``client`` (registered on first use, then reused)."""
    return lua_script(client, _PACKAGE, name, keys.lua())


def async_script(client: redis.asyncio.Redis, keys: StateKeys, name: str) -> AsyncScript:
    """Script ``name`` registered on an asyncio ``client``."""
    return async_lua_script(client, _PACKAGE, name, keys.lua())


def write_script(client: redis.Redis, keys: StateKeys) -> Script:
    """The write script registered on ``client``."""
    return script(client, keys, "write")


def async_write_script(client: redis.asyncio.Redis, keys: StateKeys) -> AsyncScript:
    """The write script registered on an asyncio ``client``."""
    return async_script(client, keys, "write")
