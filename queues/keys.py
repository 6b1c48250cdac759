"""Every Redis key name of the quota engine, for Python and (through :meth:`Keys.lua`) for Lua, and
the key space every key set of a deployment derives from (:class:`KeySpace`).

All keys of one tree share one hash tag (``fleet:{quota}:...``), so every key a Lua script touches
lives in one hash slot and the scripts run unchanged on Redis Cluster. The scripts receive the
tree's ``meta`` key as ``KEYS[1]`` (which routes them to the right shard) and build the other names
with the functions :meth:`Keys.lua` generates from this module, so a key name is spelt once.

A deployment is one prefix (``fleet`` unless ``--key-prefix`` says otherwise): every key set
(the ledger's here, the fleet's objects, the dispatch roles', the API's, the reservations') and
the RQ queue names derive from one :class:`KeySpace`, so two deployments with different prefixes
share a Redis without seeing each other's data. The default prefix gives exactly the names Fleet
has always used, so existing data stays readable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, Final, Self

__all__ = [
    "DEFAULT_KEYS",
    "DEFAULT_PREFIX",
    "DEFAULT_SPACE",
    "DEFAULT_TAG",
    "KeySpace",
    "Keys",
    "lua_key",
    "lua_key_function",
    "lua_string",
    "prefix_problem",
]

#: The key prefix of a deployment that names none.
DEFAULT_PREFIX: Final = "fleet"
#: The hash tag the ledger, the objects and the dispatch roles' keys share (one Cluster slot).
DEFAULT_TAG: Final = "quota"

_FORBIDDEN: Final = re.compile(r"[{}:\s]")


def prefix_problem(prefix: str) -> str | None:
    """Why ``prefix`` cannot prefix a deployment's keys, or None. A brace would change the hash
    tag (Redis hashes the first ``{...}``), a colon would let one prefix's keys pass for
    another's (``a`` + ``:b:...`` is ``a:b`` + ``:...``), whitespace is a typo."""
    if not prefix:
        return "the key prefix must not be empty"
    bad = _FORBIDDEN.search(prefix)
    if bad is not None:
        return f"the key prefix {prefix!r} must not contain {bad.group()!r} (no braces, colons or whitespace)"
    return None


@dataclass(frozen=True)
class KeySpace:
    """One deployment's key space: its ``prefix`` and the Redis Cluster hash ``tag`` its keys
    share. Every key set is one (a subclass naming its :attr:`SECTION`), so the base name and its
    Lua spelling are written here once, and :meth:`within` derives any key set from any other."""

    prefix: str = DEFAULT_PREFIX
    tag: str = DEFAULT_TAG
    #: What follows the hash tag in every key of the set (``state:``, ``dispatch:``).
    SECTION: ClassVar[str] = ""

    def __post_init__(self) -> None:
        problem = prefix_problem(self.prefix)
        if problem is not None:
            raise ValueError(problem)

    @classmethod
    def within(cls, space: KeySpace) -> Self:
        """This key set in the deployment of ``space``: its prefix and hash tag."""
        return cls(prefix=space.prefix, tag=space.tag)

    def tagged(self, tag: str) -> str:
        """The base name of the keys under hash tag ``tag``: ``<prefix>:{<tag>}:<SECTION>``."""
        return f"{self.prefix}:{{{tag}}}:{self.SECTION}"

    @property
    def base(self) -> str:
        """What every key of the set starts with: ``<prefix>:{<tag>}:<SECTION>``."""
        return self.tagged(self.tag)

    def rq_queue(self, role: str) -> str:
        """The RQ queue of ``role`` (``propagate``): ``<prefix>-<role>``, ``fleet-propagate`` by default."""
        return f"{self.prefix}-{role}"

    def lua(self) -> str:
        """Lua locals that spell the set's names inside the scripts: ``BASE`` and :meth:`lua_names`."""
        return "\n".join([f"local BASE = {self.lua_base()}", *self.lua_names(), ""])

    def lua_base(self) -> str:
        """The Lua expression of ``BASE``: the base name as a literal."""
        return lua_string(self.base)

    def lua_names(self) -> list[str]:
        """The set's Lua definitions after ``BASE`` (:func:`lua_key`, :func:`lua_key_function`)."""
        return []


def lua_string(text: str) -> str:
    """``text`` as a Lua string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def lua_key(local: str, suffix: str) -> str:
    """``local K_X = BASE .. 'suffix'``: a fixed key of the set."""
    return f"local {local} = BASE .. {lua_string(suffix)}"


def lua_key_function(function: str, *parts: str) -> str:
    """A Lua function of the key ``BASE .. parts``: a part in quotes is literal (``'node:'``),
    a bare one names an argument (``name``); the arguments are the bare parts, in order."""
    args = [p for p in parts if not p.startswith("'")]
    body = " .. ".join(["BASE", *parts])
    return f"local function {function}({', '.join(args)}) return {body} end"


#: The key space of a deployment that names none: today's names.
DEFAULT_SPACE: Final = KeySpace()


@dataclass(frozen=True)
class Keys(KeySpace):
    """Key names for one quota tree; ``tag`` is the Redis Cluster hash tag they share."""

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

    def lua_names(self) -> list[str]:
        return [
            lua_key("K_META", "meta"),
            lua_key("K_NODES", "nodes"),
            lua_key("K_SEQ", "seq"),
            lua_key("K_PENDING", "pending"),
            lua_key("K_ADMITTED", "admitted"),
            lua_key("K_QVERSIONS", "qversions"),
            lua_key_function("k_node", "'node:'", "name"),
            lua_key_function("k_queue", "'queue:'", "name"),
            lua_key_function("k_classes", "'classes:'", "leaf"),
            lua_key_function("k_cqueue", "'cqueue:'", "leaf", "'|'", "cls"),
            lua_key_function("k_running", "'running:'", "leaf"),
        ]


#: The keys Fleet uses unless a test or a second deployment in one Redis asks for others.
DEFAULT_KEYS = Keys()
