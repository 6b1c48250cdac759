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

import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Concatenate, Final, Generic, ParamSpec, Self, TypeVar, overload

__all__ = [
    "DEFAULT_KEYS",
    "DEFAULT_PREFIX",
    "DEFAULT_SPACE",
    "DEFAULT_TAG",
    "Key",
    "KeyFunction",
    "KeyParts",
    "KeySpace",
    "Keys",
    "key",
    "key_declarations",
    "key_function",
    "lua_string",
    "prefix_problem",
]

#: The key prefix of a deployment that names none.
DEFAULT_PREFIX: Final = "fleet"
#: The hash tag the ledger, the objects and the dispatch roles' keys share (one Cluster slot).
DEFAULT_TAG: Final = "quota"

_FORBIDDEN: Final = re.compile(r"[{}:\s]")

S = TypeVar("S", bound="KeySpace")
P = ParamSpec("P")


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
        """The set's Lua definitions after ``BASE``: one per key declared with a Lua name
        (:func:`key`, :func:`key_function`), in the order written."""
        found = (declaration.lua_definition(self) for _, declaration in key_declarations(type(self)))
        return [definition for definition in found if definition is not None]


def lua_string(text: str) -> str:
    """``text`` as a Lua string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


#: What a :func:`key_function` returns: the parts of the name after the set's base, its
#: arguments among literal text (``"cqueue:", leaf, "|", cls``).
KeyParts = tuple[str, ...]


class _LuaArgument(str):
    """An argument of a :func:`key_function` when its Lua function is written: a part that is
    one is spelt bare (the Lua argument), every other part as a literal."""


class Key(Generic[S]):
    """A fixed key of a set: ``base + suffix`` on an instance, the set's Lua local ``lua``
    (``local K_META = BASE .. 'meta'``) unless ``lua`` is None. Made by :func:`key`."""

    def __init__(self, suffix: Callable[[S], str], lua: str | None) -> None:
        self._suffix = suffix
        self.lua = lua
        self.__doc__ = suffix.__doc__

    @overload
    def __get__(self, keys: None, owner: type[S]) -> Self: ...
    @overload
    def __get__(self, keys: S, owner: type[S]) -> str: ...
    def __get__(self, keys: S | None, owner: type[S]) -> Self | str:
        if keys is None:
            return self
        return keys.base + self._suffix(keys)

    def lua_definition(self, keys: S) -> str | None:
        """``local K_X = BASE .. 'suffix'``, or None for a key the scripts do not name."""
        if self.lua is None:
            return None
        return f"local {self.lua} = BASE .. {lua_string(self._suffix(keys))}"


class KeyFunction(Generic[S, P]):
    """A key of a set named by arguments: ``base + parts`` on an instance, called with them,
    and the set's Lua function ``lua`` of the same arguments unless ``lua`` is None. Made by
    :func:`key_function`."""

    def __init__(self, parts: Callable[Concatenate[S, P], KeyParts], lua: str | None) -> None:
        self._parts = parts
        self.lua = lua
        self.__doc__ = parts.__doc__
        #: The arguments after ``self``, which the Lua function takes too.
        self.arguments = tuple(inspect.signature(parts).parameters)[1:]

    @overload
    def __get__(self, keys: None, owner: type[S]) -> Self: ...
    @overload
    def __get__(self, keys: S, owner: type[S]) -> Callable[P, str]: ...
    def __get__(self, keys: S | None, owner: type[S]) -> Self | Callable[P, str]:
        if keys is None:
            return self
        parts = self._parts

        def name(*args: P.args, **kwargs: P.kwargs) -> str:
            return keys.base + "".join(parts(keys, *args, **kwargs))

        name.__doc__ = self.__doc__
        return name

    def lua_definition(self, keys: S) -> str | None:
        """``local function k_x(a, b) return BASE .. 'x:' .. a .. '|' .. b end``, or None."""
        if self.lua is None:
            return None
        parts: Callable[..., KeyParts] = self._parts
        spelt = [
            p if isinstance(p, _LuaArgument) else lua_string(p)
            for p in parts(keys, *map(_LuaArgument, self.arguments))
        ]
        body = " .. ".join(["BASE", *spelt])
        return f"local function {self.lua}({', '.join(self.arguments)}) return {body} end"


def key(lua: str | None = None) -> Callable[[Callable[[S], str]], Key[S]]:
    """Declare a fixed key: the decorated method returns its suffix (and says in its docstring
    what Redis type it is), read as an attribute it is the key's name, and ``lua`` names its Lua
    local. The suffix is so spelt once for Python and the scripts."""

    def declare(suffix: Callable[[S], str]) -> Key[S]:
        return Key(suffix, lua)

    return declare


def key_function(
    lua: str | None = None,
) -> Callable[[Callable[Concatenate[S, P], KeyParts]], KeyFunction[S, P]]:
    """Declare a key named by arguments: the decorated method returns the parts after the base
    (:data:`KeyParts`), called it is the key's name, and ``lua`` names the Lua function of the
    same arguments."""

    def declare(parts: Callable[Concatenate[S, P], KeyParts]) -> KeyFunction[S, P]:
        return KeyFunction(parts, lua)

    return declare


def key_declarations(key_set: type[KeySpace]) -> Iterator[tuple[str, Key[Any] | KeyFunction[Any, Any]]]:
    """(attribute, declaration) of every key ``key_set`` declares, base classes first, each in
    the order written: what :meth:`KeySpace.lua_names` writes, and what a test walks."""
    for cls in reversed(key_set.__mro__):
        for name, attribute in vars(cls).items():
            if isinstance(attribute, (Key, KeyFunction)):
                yield name, attribute


#: The key space of a deployment that names none: today's names.
DEFAULT_SPACE: Final = KeySpace()


@dataclass(frozen=True)
class Keys(KeySpace):
    """Key names for one quota tree; ``tag`` is the Redis Cluster hash tag they share."""

    @key("K_META")
    def meta(self) -> str:
        """Hash: ``version`` of the applied tree and its ``spec`` (JSON)."""
        return "meta"

    @key("K_NODES")
    def nodes(self) -> str:
        """Set: names of the nodes of the applied tree."""
        return "nodes"

    @key("K_SEQ")
    def seq(self) -> str:
        """Counter: submission sequence, the tie-break between equal priorities."""
        return "seq"

    @key("K_PENDING")
    def pending(self) -> str:
        """Hash: pending job -> record (leaf, priority, sequence, request)."""
        return "pending"

    @key("K_ADMITTED")
    def admitted(self) -> str:
        """Hash: admitted job -> record; the ledger usage is rebuilt from."""
        return "admitted"

    @key("K_PARKED")
    def parked(self) -> str:
        """Hash: parked job -> its leaf and why, tab-separated: pending jobs taken out of line because they
        cannot run as things are (``fleet``: no member could ever hold them; ``quota``: a ``max``
        of their chain is below what they ask). Their records stay in :attr:`pending`; they are
        in neither their leaf's queue nor a class queue, and count in no ``pending`` or ``want``
        (``queues/lua/park.lua``), until they are put back (``unpark.lua``, and every tree
        change)."""
        return "parked"

    @key("K_QVERSIONS")
    def queue_versions(self) -> str:
        """Hash: leaf -> a number that changes whenever the leaf's queue does (a job queued,
        admitted, removed, or the classes rewritten); unique across leaves and time (from the
        ``qversion`` counter in ``meta``), so a reader that kept a leaf's heads knows when to
        read them again (:class:`queues.heads.HeadCache`)."""
        return "qversions"

    @key("K_WAKE")
    def wake(self) -> str:
        """List of at most one element, pushed when the ``epoch`` in :attr:`meta` moves and it is
        empty: an idle dispatcher blocks on it (``BLPOP``, :meth:`queues.Ledger.wait_for_change`)
        instead of reading the epoch fifty times a second."""
        return "wake"

    @key_function("k_node")
    def node(self, name: str) -> KeyParts:
        """Hash: a node's limits (``max:<res>``, ``min:<res>``), its place in the tree, what its
        subtree uses and has pending (``used:<res>``, ``pending``) and what its children are owed
        (``due:<res>``); see ``queues/lua/common.lua``. One hash, so the admission check reads a
        node in one HMGET."""
        return "node:", name

    @key_function("k_queue")
    def queue(self, name: str) -> KeyParts:
        """Sorted set: the node's pending jobs, score -priority, member ``<seq><job>``."""
        return "queue:", name

    @key_function("k_parked")
    def parked_queue(self, leaf: str) -> KeyParts:
        """Sorted set: the leaf's parked jobs (:attr:`parked`), as in :meth:`queue`."""
        return "parked:", leaf

    @key_function("k_classes")
    def classes(self, leaf: str) -> KeyParts:
        """Hash: the leaf's request classes with pending jobs -> how many (see :mod:`queues.heads`).

        A class is what a job asks of the resources some node of the tree limits (its *governed*
        request, ``huawei.com/Ascend910=8``; ``-`` for none): every job of a class gets the same
        quota answer at the same moment, so the dispatcher looks at the head of each class, not
        down a queue of jobs that would all be refused alike."""
        return "classes:", leaf

    @key_function("k_cqueue")
    def class_queue(self, leaf: str, cls: str) -> KeyParts:
        """Sorted set: the pending jobs of one request class of a leaf, as in :meth:`queue`."""
        return "cqueue:", leaf, "|", cls

    @key_function("k_running")
    def running(self, leaf: str) -> KeyParts:
        """Sorted set: the leaf's admitted jobs, score priority, member ``<recency><job>`` where
        recency is 16 digits that grow smaller with every admission: within a priority the most
        recently admitted sorts first, the order in which preemption takes its victims."""
        return "running:", leaf


#: The keys Fleet uses unless a test or a second deployment in one Redis asks for others.
DEFAULT_KEYS = Keys()
