"""The Lua scripts of the ledger, loaded through :mod:`queues.lua_scripts` (once per Redis client).

Each script is ``queues/lua/<name>.lua`` prefixed with the key names of :class:`queues.keys.Keys`,
the constants the Python side also uses, and ``common.lua`` (the admission check, record format,
exact sums).
"""

from __future__ import annotations

from dataclasses import dataclass

import redis
from redis.commands.core import Script

from queues.keys import Keys
from queues.lua_scripts import lua_script, lua_source, read_lua
from queues.quantity import MAX_JOBS
from queues.tree import IMPLICIT_ROOT

__all__ = ["LAYOUT", "Scripts", "scripts_for"]

#: The shape of the derived node fields the scripts keep (``queues/lua/common.lua``): 2 = what a
#: leaf's pending jobs ask for (``want:<r>``, leaves only) and what an inner node's children could
#: take (``kids:<r>``). A ledger kept in an older shape is recomputed once
#: (:meth:`queues.Ledger.upgrade`); a ledger's first job records the current shape in meta.
LAYOUT = 2

NAMES = ("enqueue", "admit", "release", "requeue", "apply", "rebuild", "heads", "park", "unpark")


def _prelude(keys: Keys) -> str:
    constants = (
        f"local MAX_JOBS = '{MAX_JOBS}'\nlocal IMPLICIT_ROOT = '{IMPLICIT_ROOT}'\nlocal LAYOUT = '{LAYOUT}'\n"
    )
    return keys.lua() + constants + read_lua("queues", "common") + "\n"


def source(name: str, keys: Keys) -> str:
    """The full text of one script as Redis runs it."""
    return lua_source("queues", name, _prelude(keys))


@dataclass(frozen=True)
class Scripts:
    enqueue: Script
    admit: Script
    release: Script
    requeue: Script
    apply: Script
    rebuild: Script
    heads: Script
    park: Script
    unpark: Script


def scripts_for(client: redis.Redis, keys: Keys) -> Scripts:
    """The registered scripts for ``client`` (registered on first use, then reused)."""
    prelude = _prelude(keys)
    return Scripts(*(lua_script(client, "queues", name, prelude) for name in NAMES))
