"""The fleet's Kubernetes objects in Redis: AscendJobs and their status, Events, the quota tree
object, PropagationPolicies, MemberClusters, with the semantics of a Kubernetes API server.

The fleet endpoint (several stateless replicas), the dispatcher, the RQ workers and the syncers
all read and write these objects, so they live in Redis, and every one of them sees the same
objects, versions and changes. Two faces over one storage:

:class:`Objects` (:mod:`fleet.state.objects`)
    Synchronous, for the dispatcher, workers and syncers: get/list/create/update/delete,
    :meth:`~Objects.mutate` (read-modify-write with retries), :meth:`~Objects.changes` (the
    change feed after a version), fenced writes.
:class:`AsyncObjects` (:mod:`fleet.state.async_objects`)
    The serving core's ``Store`` over ``redis.asyncio``: what ``build_app`` serves on each API
    replica, with selectors, paging, watch and bookmarks.
Events (:mod:`fleet.state.events`)
    Kubernetes Events about fleet objects, aggregated as Kubernetes does (one Event per object,
    source, type and reason, with a count, the first and the last time and the latest message);
    what ``kubectl describe`` shows: :func:`record_event` (:func:`event_call` to send one with other writes),
    :func:`events_for`, :func:`delete_events_for`.

Key layout (:mod:`fleet.state.keys`)
    Under ``fleet:{quota}:state:``, per kind (``group/plural``: ``mindxdl.gitee.com/ascendjobs``,
    ``core/events``): ``objects:<kind>``, a hash from ``namespace/name`` (or ``name``) to the
    object's JSON; ``versions:<kind>``, the same fields to their resourceVersion, so the write
    script checks a precondition without decoding JSON; ``changes:<kind>``, a stream of changes;
    ``index:<kind>``, a sorted set of ``namespace\\0name`` at score 0 whose lexicographic order is
    list order; for Events also ``involved:<kind>``, of
    ``involvedName\\0involvedNamespace\\0namespace\\0name``. Once: ``version``, the counter every
    kind takes its resourceVersions from (one sequence, as in Kubernetes, so a list of one kind and
    a watch of another compare), ``floors`` (per kind, the version below which its stream was
    trimmed), ``lease:<name>`` for fencing tokens and ``reindex:<kind>`` (the lock of a rebuild of
    an involved index).

Lists cost their page
    A list page reads a window of ``index:<kind>`` from its continue token (``lua/page.lua``:
    ``ZRANGEBYLEX``, ``HMGET`` and the version counter in one atomic step) and, when selectors
    skip objects, further windows until the page is full; a namespace is a range of the index;
    ``kubectl describe``'s Events (a fieldSelector on ``involvedObject.name``) are a range of
    ``involved:core/events``. Neither reads nor decodes the rest of the kind (see
    :class:`~fleet.state.wire.PageRead`, which both faces drive). The indexes are kept by the
    write script in the step that writes the object; data stored before they existed is
    detected (``ZCARD != HLEN``, two O(1) reads in every page read) and indexed again: the kind's
    index in that read, in Lua; the involved index by Python (it must read the JSON) with
    ``lua/reindex.lua``, the API replica in the background, while lists fall back to reading the
    kind (or the namespace), so an upgrade needs no manual step.

Write path
    The semantics of server-set metadata (uid, creationTimestamp, generation, generateName, the
    status split, the kept fields, finalizers and deletionTimestamp) are the module-level functions
    of :mod:`fleet.apiserver.store` that MemoryStore uses too, so they live in one place. A write
    reads the current object, computes the new one with them, and hands it to ``lua/write.lua``,
    which in one atomic step checks the fence, checks that the object is still at the version read
    (or absent, for a create), takes the next version from the counter, writes both hashes and the
    kind's indexes and appends the change to the kind's stream. The object's JSON carries a
    per-write placeholder where its resourceVersion goes; the script substitutes the new version as
    plain text (no JSON in Lua). A precondition that fails means someone wrote in between: a
    conditional update (the caller sent a resourceVersion) gets ``Conflict``, an unconditional one
    or :meth:`Objects.mutate` reads again and retries, as the Kubernetes API server does.

Watch via streams
    Each change is a stream entry with ID ``<resourceVersion>-0`` holding the event type, the
    object as written (a deletion: its last state, at the deletion's version) and, for a
    MODIFIED, the previous version's selector view, so a watcher with a label selector turns
    a label change into ADDED or DELETED. Resuming from a version is ``XRANGE`` after
    ``<rv>-0``; waiting is ``XREAD BLOCK``. The stream is trimmed to about ``history`` entries
    (``MAXLEN ~``, whole stream nodes); when it is, the script records the floor, and a watch,
    a change feed or a continue token from an older version gets 410 Gone (the client lists
    again), never a silent gap. In an API replica one pump per kind reads the stream and fans
    changes out to its watchers (see :mod:`fleet.state.async_objects`).

Fencing
    A write may carry a :class:`queues.Fence`: a lease key and the token its writer holds. The
    script checks ``GET key == token`` before anything else and otherwise writes nothing; Python
    raises :class:`queues.Fenced`, the ledger's own (:mod:`queues.fencing`: one type each).
    The dispatcher's leader lease works this way (``fleet.dispatch.lease``), so a
    leader that stalled and lost its lease cannot write after its successor started, whatever
    its own clock says.

One slot
    Every key here carries the quota ledger's hash tag (``{quota}``), as do the ledger's and the
    dispatcher's keys. On Redis Cluster they all live in one slot, so one script can check the
    dispatcher's fence and write an object, a MULTI can read a hash together with the version
    counter (lists at an exact version), and nothing needs cross-slot transactions. The price is
    that this state does not shard across a cluster: it scales up (one Redis primary holds
    the fleet's objects, with replicas for reads and failover), which the design accepts.

The roles' own records
    Beside the objects, the records the roles share with the API and ``fleet up``, so that none
    of these readers imports a role: the dispatch roles' key names and RQ queues
    (:mod:`fleet.state.dispatch_keys`), a member's health as the syncer probed it
    (:mod:`fleet.state.member_health`) and its capacity as the dispatcher's feed saw it
    (:mod:`fleet.state.member_capacity`).
"""

from typing import TYPE_CHECKING, Final

from fleet.lazy_face import lazy_face

if TYPE_CHECKING:
    from fleet.state.async_objects import AsyncObjects
    from fleet.state.copies import Copies, CopyEntry
    from fleet.state.dispatch_keys import (
        DEFAULT_DISPATCH_KEYS,
        EVICT_QUEUE,
        PROPAGATE_QUEUE,
        PURGE_QUEUE,
        DispatchKeys,
    )
    from fleet.state.events import (
        delete_events_for,
        event_call,
        event_name,
        events_for,
        record_event,
        record_events,
    )
    from fleet.state.keys import DEFAULT_STATE_KEYS, StateKeys, kind_name
    from fleet.state.member_capacity import OBSERVED as CAPACITY_OBSERVED
    from fleet.state.member_capacity import parse_capacity, parse_capacity_nodes
    from fleet.state.member_health import MemberHealth, read_health, write_health
    from fleet.state.member_health import parse as parse_health
    from fleet.state.member_taints import (
        NO_EXECUTE,
        NO_SCHEDULE,
        UNSCHEDULABLE_TAINT,
        parse_taints,
        read_taints,
        scheduling,
        unschedulable,
        write_taints,
    )
    from fleet.state.objects import Objects
    from fleet.state.wire import text

# The face is lazy (PEP 562): a name is imported from its module when first used, so that
# importing one name does not import the whole package (the CLI starts fast, issue 33).
_FACE: Final[dict[str, tuple[str, str]]] = {
    "NO_EXECUTE": ("fleet.state.member_taints", "NO_EXECUTE"),
    "NO_SCHEDULE": ("fleet.state.member_taints", "NO_SCHEDULE"),
    "UNSCHEDULABLE_TAINT": ("fleet.state.member_taints", "UNSCHEDULABLE_TAINT"),
    "parse_taints": ("fleet.state.member_taints", "parse_taints"),
    "read_taints": ("fleet.state.member_taints", "read_taints"),
    "scheduling": ("fleet.state.member_taints", "scheduling"),
    "unschedulable": ("fleet.state.member_taints", "unschedulable"),
    "write_taints": ("fleet.state.member_taints", "write_taints"),
    "AsyncObjects": ("fleet.state.async_objects", "AsyncObjects"),
    "Copies": ("fleet.state.copies", "Copies"),
    "CopyEntry": ("fleet.state.copies", "CopyEntry"),
    "DEFAULT_DISPATCH_KEYS": ("fleet.state.dispatch_keys", "DEFAULT_DISPATCH_KEYS"),
    "EVICT_QUEUE": ("fleet.state.dispatch_keys", "EVICT_QUEUE"),
    "PROPAGATE_QUEUE": ("fleet.state.dispatch_keys", "PROPAGATE_QUEUE"),
    "PURGE_QUEUE": ("fleet.state.dispatch_keys", "PURGE_QUEUE"),
    "DispatchKeys": ("fleet.state.dispatch_keys", "DispatchKeys"),
    "delete_events_for": ("fleet.state.events", "delete_events_for"),
    "event_call": ("fleet.state.events", "event_call"),
    "event_name": ("fleet.state.events", "event_name"),
    "events_for": ("fleet.state.events", "events_for"),
    "record_event": ("fleet.state.events", "record_event"),
    "record_events": ("fleet.state.events", "record_events"),
    "DEFAULT_STATE_KEYS": ("fleet.state.keys", "DEFAULT_STATE_KEYS"),
    "StateKeys": ("fleet.state.keys", "StateKeys"),
    "kind_name": ("fleet.state.keys", "kind_name"),
    "CAPACITY_OBSERVED": ("fleet.state.member_capacity", "OBSERVED"),
    "parse_capacity": ("fleet.state.member_capacity", "parse_capacity"),
    "parse_capacity_nodes": ("fleet.state.member_capacity", "parse_capacity_nodes"),
    "MemberHealth": ("fleet.state.member_health", "MemberHealth"),
    "read_health": ("fleet.state.member_health", "read_health"),
    "write_health": ("fleet.state.member_health", "write_health"),
    "parse_health": ("fleet.state.member_health", "parse"),
    "Objects": ("fleet.state.objects", "Objects"),
    "text": ("fleet.state.wire", "text"),
}


lazy_face(__name__, _FACE)


__all__ = [
    "CAPACITY_OBSERVED",
    "DEFAULT_DISPATCH_KEYS",
    "DEFAULT_STATE_KEYS",
    "EVICT_QUEUE",
    "NO_EXECUTE",
    "NO_SCHEDULE",
    "PROPAGATE_QUEUE",
    "PURGE_QUEUE",
    "UNSCHEDULABLE_TAINT",
    "AsyncObjects",
    "Copies",
    "CopyEntry",
    "DispatchKeys",
    "MemberHealth",
    "Objects",
    "StateKeys",
    "delete_events_for",
    "event_call",
    "event_name",
    "events_for",
    "kind_name",
    "parse_capacity",
    "parse_capacity_nodes",
    "parse_health",
    "parse_taints",
    "read_health",
    "read_taints",
    "record_event",
    "record_events",
    "scheduling",
    "text",
    "unschedulable",
    "write_health",
    "write_taints",
]
