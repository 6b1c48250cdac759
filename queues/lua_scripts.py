"""The one loader of Fleet's Lua scripts: each is a file, ``<package>/lua/<name>.lua`` (package
data, shipped in the wheel), read once and registered once per Redis client (sync or asyncio).

A script may be prefixed with a ``prelude``: the key names of its key set
(:meth:`queues.KeySpace.lua`), constants, shared functions (``common.lua``). The registered
scripts are cached per client in weak-keyed maps, so a client that goes frees its scripts: a
cached script refers to its client weakly (redis-py's ``Script`` keeps its client, which would
keep the map's key alive for ever); whoever runs it holds the client.
redis-py's ``Script`` sends ``EVALSHA`` and loads the body on ``NOSCRIPT`` by itself, so a Redis
restart or failover needs nothing from us.
"""

from __future__ import annotations

import weakref
from functools import cache
from importlib import resources

import redis
import redis.asyncio
from redis.commands.core import AsyncScript, Script

__all__ = ["async_lua_script", "lua_script", "lua_source", "read_lua"]

#: (package, name, prelude) of a registered script.
_Key = tuple[str, str, str]

_SYNC: weakref.WeakKeyDictionary[redis.Redis, dict[_Key, Script]] = weakref.WeakKeyDictionary()
_ASYNC: weakref.WeakKeyDictionary[redis.asyncio.Redis, dict[_Key, AsyncScript]] = weakref.WeakKeyDictionary()


@cache
def read_lua(package: str, name: str) -> str:
    """The text of ``<package>/lua/<name>.lua``."""
    return resources.files(package).joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")


def lua_source(package: str, name: str, prelude: str = "") -> str:
    """The full text of one script as Redis runs it: ``prelude``, then the file."""
    return prelude + read_lua(package, name)


def lua_script(client: redis.Redis, package: str, name: str, prelude: str = "") -> Script:
    """Script ``name`` of ``package`` after ``prelude``, registered on ``client`` on first use."""
    per_client = _SYNC.setdefault(client, {})
    key = (package, name, prelude)
    found = per_client.get(key)
    if found is None:
        found = per_client[key] = client.register_script(lua_source(package, name, prelude))
        found.registered_client = weakref.proxy(client)
    return found


def async_lua_script(client: redis.asyncio.Redis, package: str, name: str, prelude: str = "") -> AsyncScript:
    """Script ``name`` of ``package`` after ``prelude``, registered on an asyncio ``client``."""
    per_client = _ASYNC.setdefault(client, {})
    key = (package, name, prelude)
    found = per_client.get(key)
    if found is None:
        found = per_client[key] = client.register_script(lua_source(package, name, prelude))
        found.registered_client = weakref.proxy(client)
    return found
