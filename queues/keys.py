"""Every Redis key name of the quota engine, for Python and (through :meth:`Keys.lua`) for Lua.

All keys of one tree share one hash tag (``fleet:{quota}:...``), so every key a Lua script touches
lives in one hash slot and the scripts run unchanged on Redis Cluster. The scripts receive the
tree's ``meta`` key as ``KEYS[1]`` (which routes them to the right shard) and build the other names
with the functions :meth:`Keys.lua` generates from this module, so a key name is spelt once.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_KEYS", "Keys"]


@dataclass(frozen=True)
class Keys:
    """Key names for one quota tree; ``tag`` is the Redis Cluster hash tag they share."""

    prefix: str = "fleet"
    tag: str = "quota"

    @property
    def base(self) -> str:
        return f"{self.prefix}:{{{self.tag}}}:"

    @property
    def meta(self) -> str:
        """Hash: ``version`` of the applied tree and its ``spec`` (JSON)."""
        return self.base + "meta"

    @property
    def nodes(self) -> str:
        """Set: names of the nodes of the applied tree."""
        return self.base + "nodes"

    @property
    def seq(self) -> str:
        """Counter: submission sequence, the tie-break between equal priorities."""
        return self.base + "seq"

    @property
    def pending(self) -> str:
        """Hash: pending job -> record (leaf, priority, sequence, request)."""
        return self.base + "pending"

    @property
    def admitted(self) -> str:
        """Hash: admitted job -> record; the ledger usage is rebuilt from."""
        return self.base + "admitted"

    @property
    def queue_versions(self) -> str:
        """Hash: leaf -> a number that changes whenever the leaf's queue does (a job queued,
        admitted, removed, or the classes rewritten); unique across leaves and time (from the
        ``qversion`` counter in ``meta``), so a reader that kept a leaf's heads knows when to
        read them again (:class:`queues.heads.HeadCache`)."""
        return self.base + "qversions"

    def node(self, name: str) -> str:
        """Hash: a node's limits (``max:<res>``, ``min:<res>``), its place in the tree, what its
        subtree uses and has pending (``used:<res>``, ``pending``) and what its children are owed
        (``due:<res>``); see ``queues/lua/common.lua``. One hash, so the admission check reads a
        node in one HMGET."""
        return f"{self.base}node:{name}"

    def queue(self, name: str) -> str:
        """Sorted set: the node's pending jobs, score -priority, member ``<seq><job>``."""
        return f"{self.base}queue:{name}"

    def classes(self, leaf: str) -> str:
        """Hash: the leaf's request classes with pending jobs -> how many (see :mod:`queues.heads`).

        A class is what a job asks of the resources some node of the tree limits (its *governed*
        request, ``huawei.com/Ascend910=8``; ``-`` for none): every job of a class gets the same
        quota answer at the same moment, so the dispatcher looks at the head of each class, not
        down a queue of jobs that would all be refused alike."""
        return f"{self.base}classes:{leaf}"

    def class_queue(self, leaf: str, cls: str) -> str:
        """Sorted set: the pending jobs of one request class of a leaf, as in :meth:`queue`."""
        return f"{self.base}cqueue:{leaf}|{cls}"

    def running(self, leaf: str) -> str:
        """Sorted set: the leaf's admitted jobs, score priority, member ``<recency><job>`` where
        recency is 16 digits that grow smaller with every admission: within a priority the most
        recently admitted sorts first, the order in which preemption takes its victims."""
        return f"{self.base}running:{leaf}"

    def lua(self) -> str:
        """Lua functions that spell the same names inside the scripts."""
        return "\n".join(
            [
                f"local BASE = {_lua_string(self.base)}",
                "local K_META = BASE .. 'meta'",
                "local K_NODES = BASE .. 'nodes'",
                "local K_SEQ = BASE .. 'seq'",
                "local K_PENDING = BASE .. 'pending'",
                "local K_ADMITTED = BASE .. 'admitted'",
                "local K_QVERSIONS = BASE .. 'qversions'",
                "local function k_node(name) return BASE .. 'node:' .. name end",
                "local function k_queue(name) return BASE .. 'queue:' .. name end",
                "local function k_classes(leaf) return BASE .. 'classes:' .. leaf end",
                "local function k_cqueue(leaf, cls) return BASE .. 'cqueue:' .. leaf .. '|' .. cls end",
                "local function k_running(leaf) return BASE .. 'running:' .. leaf end",
                "",
            ]
        )


def _lua_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


#: The keys Fleet uses unless a test or a second deployment in one Redis asks for others.
DEFAULT_KEYS = Keys()
