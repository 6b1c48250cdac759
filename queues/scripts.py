"""The Lua scripts of the ledger, assembled once and registered once per Redis client.

Each script is ``queues/lua/<name>.lua`` prefixed with the key names of :class:`queues.keys.Keys`,
the constants the Python side also uses, and ``common.lua`` (the admission check, record format,
exact sums). redis-py's :class:`~redis.commands.core.Script` sends ``EVALSHA`` and loads the body on
``NOSCRIPT`` by itself, so a Redis restart or failover needs nothing from us.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from functools import cache
from importlib import resources

import redis
from redis.commands.core import Script

from queues.keys import Keys
from queues.quantity import MAX_JOBS
from queues.tree import IMPLICIT_ROOT

__all__ = ["LAYOUT", "Scripts", "scripts_for"]

#: The shape of the derived node fields the scripts keep (``queues/lua/common.lua``): 2 = what a
#: leaf's pending jobs ask for (``want:<r>``, leaves only) and what an inner node's children could
#: take (``kids:<r>``). A ledger kept in an older shape is recomputed once
#: (:meth:`queues.Ledger.upgrade`); a ledger's first job records the current shape in meta.
LAYOUT = 2

NAMES = ("enqueue", "admit", "release", "requeue", "apply", "rebuild", "heads")


@cache
def _read(name: str) -> str:
    return resources.files("queues").joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")


def source(name: str, keys: Keys) -> str:
    """The full text of one script as Redis runs it."""
    constants = (
        f"local MAX_JOBS = '{MAX_JOBS}'\nlocal IMPLICIT_ROOT = '{IMPLICIT_ROOT}'\nlocal LAYOUT = '{LAYOUT}'\n"
    )
    return keys.lua() + constants + _read("common") + "\n" + _read(name)


@dataclass(frozen=True)
class Scripts:
    enqueue: Script
    admit: Script
    release: Script
    requeue: Script
    apply: Script
    rebuild: Script
    heads: Script


_CACHE: weakref.WeakKeyDictionary[redis.Redis, dict[Keys, Scripts]] = weakref.WeakKeyDictionary()


def scripts_for(client: redis.Redis, keys: Keys) -> Scripts:
    """The registered scripts for ``client`` (registered on first use, then reused)."""
    per_client = _CACHE.setdefault(client, {})
    found = per_client.get(keys)
    if found is None:
        found = Scripts(*(client.register_script(source(name, keys)) for name in NAMES))
        per_client[keys] = found
    return found
