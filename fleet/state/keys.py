r"""Every Redis key name of the fleet's object storage, for Python and (through :meth:`StateKeys.lua`)
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
``index:<kind>``
    Sorted set, every member at score 0: one :func:`index_member` per object,
    ``namespace\0name`` (``name`` when cluster-scoped). Redis orders equal scores by the members'
    bytes, and ``\0`` sorts below every character a name or namespace may hold, so the set's
    lexicographic order is list order, ``(namespace, name)`` (a namespace that is a prefix of
    another, ``team`` and ``team-a``, comes first, as in Python; the field's ``/`` would sort
    after ``-`` and get it wrong). A page is a ``ZRANGEBYLEX`` window and an ``HMGET``; a
    namespace is the range ``[ns\0`` .. ``(ns\1``. Kept by the write script in the step that
    writes the object hash (ZADD when a field is new, ZREM when it goes). A read that finds
    ``ZCARD != HLEN`` (data written before the index existed, or by an older writer) reads the
    kind's hash instead, as lists did before the index, and has the index rebuilt
    (``lua/reindex.lua``, a batch at a time, so Redis is never blocked for long).
``deleting:<kind>``
    Set: the field of every object of the kind marked for deletion (``deletionTimestamp`` set),
    so that a reader after deletions (the syncer's resync of its finalizers) reads those, not a
    walk of 100,000 queued jobs (5 s of a syncer's CPU each time, issue 30). The write script
    adds the field in every write of a marked object and removes it with the object; a mark is
    never taken back. The index is complete once ``deleting-kept`` says so for the kind or for
    every kind. (A writer older than the index, in a rolling upgrade, marks without adding:
    the syncer still sees that mark on the change stream it follows.)
``involved:<kind>``
    Only for Events (:data:`INVOLVED_KINDS`). Sorted set at score 0 of :func:`involved_member`,
    ``involvedName\0involvedNamespace\0eventNamespace\0eventName``: the Events about one object
    are one lexicographic range (:func:`involved_range`), which is what ``kubectl describe`` asks
    for (a fieldSelector on ``involvedObject.name`` and ``.namespace``). The write script keeps it
    from members Python computes (it cannot read the compressed JSON), in every write of an
    Event; a read that finds it short falls back to reading the kind, and Python rebuilds it
    (``lua/reindex.lua`` adds only members whose object is still at the version Python read).

And once:

``version``
    Counter: the one resourceVersion sequence of every kind.
``floors``
    Hash: kind -> the resourceVersion below which the kind's stream was trimmed (a watch or a
    continue token from an older version gets 410 Gone).
``deleting-kept``
    Hash: kind -> ``1`` once the kind's ``deleting`` index holds every marked object, set by a
    rebuild of the index (data written before it existed); ``*`` -> ``1`` for every kind, set by
    the write script in the store's first write (every mark since went through it).
``reindex:<index>:<kind>``
    String: the token of the process rebuilding the kind's ``index`` or ``involved`` index, with a
    TTL (one rebuild at a time; a rebuilder that dies frees it so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final

from queues import KeyParts, KeySpace, key, key_function

__all__ = [
    "DEFAULT_STATE_KEYS",
    "DELETING_INDEX",
    "INVOLVED_INDEX",
    "INVOLVED_KINDS",
    "NAMES_INDEX",
    "StateKeys",
    "field_name",
    "index_member",
    "involved_member",
    "involved_range",
    "kind_name",
    "namespace_range",
]

#: Sorts below every character of a name or namespace: the separator of index members.
SEPARATOR: Final = "\0"
#: The kinds whose objects are indexed by their ``involvedObject`` (name, namespace).
INVOLVED_KINDS: Final = frozenset({"core/events"})
#: The names of a kind's indexes (their keys' prefixes): list order, and Events by object.
NAMES_INDEX: Final = "index"
INVOLVED_INDEX: Final = "involved"
#: The name of the index of the objects marked for deletion (its keys' prefix).
DELETING_INDEX: Final = "deleting"


def kind_name(key: tuple[str, str]) -> str:
    """``ResourceType.key`` (group, plural) as key names spell it: ``group/plural``, ``core/plural``."""
    group, plural = key
    return f"{group or 'core'}/{plural}"


def field_name(namespace: str | None, name: str) -> str:
    """The hash field of one object: ``namespace/name``, or ``name`` when cluster-scoped."""
    return f"{namespace}/{name}" if namespace else name


def index_member(namespace: str | None, name: str) -> bytes:
    r"""The object's member of ``index:<kind>``: ``namespace\0name``, or ``name`` (cluster-scoped).

    Its byte order is list order (:func:`fleet.state.objects.order`): for names and namespaces
    without ``\0``, comparing ``a\0b`` with ``c\0d`` byte-wise is comparing ``(a, b)`` with
    ``(c, d)``, and UTF-8 keeps the order of code points.
    """
    return (f"{namespace}{SEPARATOR}{name}" if namespace else name).encode()


def namespace_range(namespace: str) -> tuple[bytes, bytes]:
    """``ZRANGEBYLEX`` bounds of one namespace's members of ``index:<kind>``."""
    return b"[" + namespace.encode() + b"\0", b"(" + namespace.encode() + b"\1"


def involved_member(involved_name: str, involved_namespace: str, namespace: str, name: str) -> bytes:
    r"""An Event's member of ``involved:core/events``: the involved object's name and namespace
    (``""`` when it has none), then the Event's own ``index_member``."""
    return SEPARATOR.join((involved_name, involved_namespace, namespace, name)).encode()


def involved_range(involved_name: str, involved_namespace: str | None) -> tuple[bytes, bytes]:
    """``ZRANGEBYLEX`` bounds of the Events about objects named ``involved_name`` (in
    ``involved_namespace``, or in any namespace when None)."""
    prefix = involved_name.encode() + b"\0"
    if involved_namespace is not None:
        prefix += involved_namespace.encode() + b"\0"
    return b"[" + prefix, b"(" + prefix[:-1] + b"\1"


@dataclass(frozen=True)
class StateKeys(KeySpace):
    """Key names of the fleet's objects; ``tag`` is the Redis Cluster hash tag (the ledger's)."""

    SECTION: ClassVar[str] = "state:"

    @key("K_VERSION")
    def version(self) -> str:
        """Counter: the last resourceVersion handed out (all kinds share it)."""
        return "version"

    @key("K_FLOORS")
    def floors(self) -> str:
        """Hash: kind -> every change of the kind after this resourceVersion is in its stream."""
        return "floors"

    @key_function("k_objects")
    def objects(self, kind: str) -> KeyParts:
        """Hash: field -> object JSON."""
        return "objects:", kind

    @key_function("k_versions")
    def versions(self, kind: str) -> KeyParts:
        """Hash: field -> resourceVersion."""
        return "versions:", kind

    @key_function("k_changes")
    def changes(self, kind: str) -> KeyParts:
        """Stream: ``<rv>-0`` -> type, object, old (the previous version's selector view)."""
        return "changes:", kind

    @key_function("k_index")
    def index(self, kind: str) -> KeyParts:
        """Sorted set (score 0): :func:`index_member` of every object, in list order."""
        return "index:", kind

    @key_function("k_involved")
    def involved(self, kind: str) -> KeyParts:
        """Sorted set (score 0): :func:`involved_member` of every Event (kinds of
        :data:`INVOLVED_KINDS` only)."""
        return "involved:", kind

    @key_function("k_deleting")
    def deleting(self, kind: str) -> KeyParts:
        """Set: the field of every object of the kind marked for deletion (complete once
        :attr:`deleting_kept` says so)."""
        return "deleting:", kind

    @key("K_DELETING_KEPT")
    def deleting_kept(self) -> str:
        """Hash: kind (or ``*``, every kind) -> ``1`` once the kind's :meth:`deleting` index is
        complete."""
        return "deleting-kept"

    @key_function("k_reindex")
    def reindex(self, index: str, kind: str) -> KeyParts:
        """String: the token of the process rebuilding index ``index`` (:data:`NAMES_INDEX`,
        :data:`INVOLVED_INDEX` or :data:`DELETING_INDEX`) of ``kind``, with a TTL."""
        return "reindex:", index, ":", kind

    def lua_names(self) -> list[str]:
        return [
            *super().lua_names(),
            # index_member() and its inverse, over the hash field (namespace/name or name)
            "local function index_member(field)",
            "  local at = string.find(field, '/', 1, true)",
            "  if not at then return field end",
            "  return string.sub(field, 1, at - 1) .. '\\0' .. string.sub(field, at + 1)",
            "end",
            "local function member_field(member)",
            "  local at = string.find(member, '\\0', 1, true)",
            "  if not at then return member end",
            "  return string.sub(member, 1, at - 1) .. '/' .. string.sub(member, at + 1)",
            "end",
        ]


#: The keys Fleet uses unless a test or a second deployment in one Redis asks for others.
DEFAULT_STATE_KEYS: Final = StateKeys()
