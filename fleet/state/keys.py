"""Every Redis key name of the fleet's object storage, for Python and (through :meth:`StateKeys.lua`)
for the Lua write script.

All keys carry the quota ledger's hash tag (``fleet:{quota}:state:...``), so the objects, the
ledger and the dispatcher's lease share one Redis Cluster slot: one script may check a fence and
write an object, and a MULTI may read a hash and the version counter together.

Per kind, named by :func:`kind_name` (``mindxdl.gitee.com/ascendjobs``, ``core/events``):

``objects:<kind>``
    Hash: ``namespace/name`` (``name`` for a cluster-scoped kind) -> the object's JSON.
``versions:<kind>``
    Hash: the same fields -> resourceVersion, so the script checks a precondition without JSON.
``changes:<kind>``
    Stream: one entry per change with ID ``<resourceVersion>-0`` (fields ``type``, ``object``,
    ``old``), trimmed to about ``history`` entries: what watches resume from.

And once:

``version``
    Counter: the one resourceVersion sequence of every kind.
``floors``
    Hash: kind -> the resourceVersion below which the kind's stream was trimmed (a watch or a
    continue token from an older version gets 410 Gone).
``lease:<name>``
    String: the fencing token of the current holder of a lease.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from queues import DEFAULT_KEYS

__all__ = ["DEFAULT_STATE_KEYS", "StateKeys", "field_name", "kind_name"]


def kind_name(key: tuple[str, str]) -> str:
    """``ResourceType.key`` (group, plural) as key names spell it: ``group/plural``, ``core/plural``."""
    group, plural = key
    return f"{group or 'core'}/{plural}"


def field_name(namespace: str | None, name: str) -> str:
    """The hash field of one object: ``namespace/name``, or ``name`` when cluster-scoped."""
    return f"{namespace}/{name}" if namespace else name


@dataclass(frozen=True)
class StateKeys:
    """Key names of the fleet's objects; ``tag`` is the Redis Cluster hash tag (the ledger's)."""

    prefix: str = DEFAULT_KEYS.prefix
    tag: str = DEFAULT_KEYS.tag

    @property
    def base(self) -> str:
        return f"{self.prefix}:{{{self.tag}}}:state:"

    @property
    def version(self) -> str:
        """Counter: the last resourceVersion handed out (all kinds share it)."""
        return self.base + "version"

    @property
    def floors(self) -> str:
        """Hash: kind -> every change of the kind after this resourceVersion is in its stream."""
        return self.base + "floors"

    def objects(self, kind: str) -> str:
        """Hash: field -> object JSON."""
        return f"{self.base}objects:{kind}"

    def versions(self, kind: str) -> str:
        """Hash: field -> resourceVersion."""
        return f"{self.base}versions:{kind}"

    def changes(self, kind: str) -> str:
        """Stream: ``<rv>-0`` -> type, object, old (the previous version's selector view)."""
        return f"{self.base}changes:{kind}"

    def lease(self, name: str) -> str:
        """String: the fencing token of the holder of lease ``name``."""
        return f"{self.base}lease:{name}"

    def lua(self) -> str:
        """Lua definitions that spell the same names inside the scripts."""
        return "\n".join(
            [
                f"local BASE = {_lua_string(self.base)}",
                "local K_VERSION = BASE .. 'version'",
                "local K_FLOORS = BASE .. 'floors'",
                "local function k_objects(kind) return BASE .. 'objects:' .. kind end",
                "local function k_versions(kind) return BASE .. 'versions:' .. kind end",
                "local function k_changes(kind) return BASE .. 'changes:' .. kind end",
                "",
            ]
        )


def _lua_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


#: The keys Fleet uses unless a test or a second deployment in one Redis asks for others.
DEFAULT_STATE_KEYS: Final = StateKeys()
