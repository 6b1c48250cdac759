"""What goes between Python and Redis: write arguments, script replies, stream entries, the
reads of a list page.

Shared by the sync :class:`~fleet.state.objects.Objects` and the async
:class:`~fleet.state.async_objects.AsyncObjects`, which differ only in how they wait for Redis: a list page
is a :class:`PageRead`, a state machine both drive (``while not read.done``: send what it asks
for, feed it the reply), so they page alike.

An object is stored as ``<resourceVersion>:<zlib-compressed compact JSON>``, in the object hash
and in the change stream alike. The resourceVersion is only known inside the script (it is the
counter's next value), so the script puts it in front of the blob Python compressed, and the
reader writes it back into ``metadata.resourceVersion``; no JSON is parsed in Lua. Compression
cuts an AscendJob to about a quarter (4.5 KB of JSON to 1.1 KB for the sample): at a million
queued jobs this is most of Redis' memory.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from fleet import fastjson
from fleet.apiserver import (
    MODIFIED,
    Obj,
    ObjectFilter,
    Page,
    ResourceType,
    already_exists,
    conflict,
    decode_continue,
    expired_continue,
    field_value,
    not_found,
    selector_view,
)
from fleet.state.keys import (
    DELETING_INDEX,
    INVOLVED_INDEX,
    INVOLVED_KINDS,
    NAMES_INDEX,
    StateKeys,
    field_name,
    index_member,
    involved_member,
    involved_range,
    kind_name,
    namespace_range,
)
from queues import Fence, Fenced

__all__ = [
    "DELETE",
    "PUT",
    "REINDEX_BATCH",
    "REINDEX_RETRY_S",
    "REINDEX_TTL_MS",
    "Change",
    "PageRead",
    "Write",
    "decode",
    "decode_entry",
    "encode",
    "involved_of",
    "order",
    "read_entries",
    "reindex_batch",
    "reindex_source",
    "text",
]

PUT: Final = "put"
DELETE: Final = "delete"


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


#: Deflate's preset dictionary, version 1: the keys and values Fleet's objects share (AscendJob,
#: Event, policies), so that even a small object compresses well. Stored blobs name the version
#: they were written with (their first byte); never change a published dictionary, add one.
_ZDICT_V1: Final = json.dumps(
    {
        "apiVersion": "mindxdl.gitee.com/v1",
        "kind": "AscendJob",
        "metadata": {
            "name": "",
            "namespace": "default",
            "uid": "",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "generation": 1,
            "labels": {
                "framework": "pytorch",
                "ring-controller.atlas": "ascend-910b",
                "tor-affinity": "null",
            },
            "annotations": {"huawei.com/schedule_policy": ""},
            "finalizers": ["fleet.io/dispatch"],
        },
        "spec": {
            "schedulerName": "volcano",
            "runPolicy": {"schedulingPolicy": {"minAvailable": 1, "queue": "default"}, "backoffLimit": 3},
            "successPolicy": "AllWorkers",
            "replicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {
                        "metadata": {"labels": {"ring-controller.atlas": "ascend-910b"}},
                        "spec": {
                            "nodeSelector": {"host-arch": "huawei-arm", "accelerator-type": "card-910b-2"},
                            "affinity": {
                                "podAntiAffinity": {
                                    "requiredDuringSchedulingIgnoredDuringExecution": [
                                        {
                                            "labelSelector": {
                                                "matchExpressions": [
                                                    {"key": "job-name", "operator": "In", "values": [""]}
                                                ]
                                            },
                                            "topologyKey": "kubernetes.io/hostname",
                                        }
                                    ]
                                }
                            },
                            "containers": [
                                {
                                    "name": "ascend",
                                    "image": "",
                                    "imagePullPolicy": "IfNotPresent",
                                    "env": [
                                        {
                                            "name": "XDL_IP",
                                            "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}},
                                        }
                                    ],
                                    "command": ["/bin/bash", "-c"],
                                    "args": [""],
                                    "ports": [{"containerPort": 2222, "name": "ascendjob-port"}],
                                    "resources": {
                                        "limits": {"huawei.com/Ascend910": 8},
                                        "requests": {"huawei.com/Ascend910": 8},
                                    },
                                    "volumeMounts": [
                                        {"name": "ascend-driver", "mountPath": "/usr/local/Ascend/driver"}
                                    ],
                                }
                            ],
                            "volumes": [
                                {"name": "ascend-driver", "hostPath": {"path": "/usr/local/Ascend/driver"}}
                            ],
                        },
                    },
                },
                "Worker": {},
            },
        },
        "status": {
            "conditions": [
                {
                    "type": "Queued",
                    "status": "True",
                    "reason": "Submitted",
                    "message": "",
                    "lastUpdateTime": "",
                    "lastTransitionTime": "",
                }
            ],
            "queue": "root-",
            "cluster": "member-",
            "attempt": 1,
            "replicaStatuses": {},
        },
        "involvedObject": {"apiVersion": "", "kind": "", "name": "", "uid": "", "namespace": ""},
        "reason": "Submitted",
        "message": "queued in ",
        "type": "Normal",
        "firstTimestamp": "",
        "lastTimestamp": "",
        "count": 1,
        "source": {"component": "fleet"},
        "reportingComponent": "fleet",
    },
    separators=(",", ":"),
).encode()
_V1: Final = b"1"


def encode(obj: Obj) -> bytes:
    """The blob the write script stores after the resourceVersion (which ``obj`` must not hold)."""
    packer = zlib.compressobj(6, zdict=_ZDICT_V1)
    return _V1 + packer.compress(fastjson.dumps(obj)) + packer.flush()


def decode(raw: Any) -> Obj:
    """An object as stored (``rv:blob``), with its resourceVersion put back."""
    data = raw if isinstance(raw, bytes) else str(raw).encode("latin-1")
    rv, _, blob = data.partition(b":")
    if blob[:1] != _V1:
        raise ValueError(f"stored object in an unknown encoding (version byte {blob[:1]!r})")
    unpacker = zlib.decompressobj(zdict=_ZDICT_V1)
    obj: Obj = fastjson.loads(unpacker.decompress(blob[1:]) + unpacker.flush())
    obj.setdefault("metadata", {})["resourceVersion"] = rv.decode()
    return obj


@dataclass(frozen=True)
class Write:
    """One call of the write script; :meth:`result` turns its reply into the stored object."""

    rt: ResourceType
    obj: Obj  # the object to store (for a delete: its last state); gets the new version
    op: str
    expected: str
    event: str
    old: Obj | None = None  # the previous version, for a MODIFIED (its selector view is kept)
    fence: Fence | None = None

    def keys_and_args(self, keys: StateKeys, history: int) -> tuple[list[str], list[str | int | bytes]]:
        meta = self.obj["metadata"]
        meta.pop("resourceVersion", None)
        body = encode(self.obj)
        old = b""
        if self.event == MODIFIED and self.old is not None:
            old = fastjson.dumps(selector_view(self.rt, self.old))
        fence_key, fence_token = self.fence or ("", "")
        args: list[str | int | bytes] = [
            self.op,
            kind_name(self.rt.key),
            field_name(meta.get("namespace") if self.rt.namespaced else None, meta["name"]),
            self.expected,
            body,
            self.event,
            history,
            fence_key,
            fence_token,
            old,
            "1" if meta.get("deletionTimestamp") else "",
        ]
        if kind_name(self.rt.key) in INVOLVED_KINDS:
            args.append(involved_of(self.obj))
            args.append(b"" if self.old is None else involved_of(self.old))
        return [keys.version], args

    def result(self, reply: Any) -> Obj:
        """The stored object (``obj`` with its new version), or the error the reply means."""
        status, value = text(reply[0]), text(reply[1])
        name = self.obj["metadata"]["name"]
        if status == "ok":
            self.obj["metadata"]["resourceVersion"] = value
            return self.obj
        if status == "fenced":
            assert self.fence is not None
            raise Fenced(
                f"fence {self.fence.key} no longer holds token {self.fence.token}: nothing was written"
            )
        if status == "exists":
            raise already_exists(self.rt, name)
        if status == "missing":
            raise not_found(self.rt, name)
        if status == "conflict":
            raise conflict(self.rt, name)
        raise RuntimeError(f"unexpected reply from the write script: {reply!r}")


@dataclass(frozen=True)
class Change:
    """One entry of a kind's change stream."""

    rv: int
    type: str
    object: Obj
    old: Obj | None  # the previous version's selector view (MODIFIED only)


def decode_entry(entry_id: Any, fields: Any) -> Change:
    values = {text(k): v for k, v in fields.items()}
    old = values.get("old") or b""
    return Change(
        int(text(entry_id).split("-", 1)[0]),
        text(values["type"]),
        decode(values["object"]),
        fastjson.loads(old) if old else None,
    )


def read_entries(reply: Any) -> list[Any]:
    """The entries of the one stream an XREAD asked for (RESP2 list or RESP3 map), [] on timeout."""
    if not reply:
        return []
    if isinstance(reply, dict):
        (found,) = reply.values()
        return list(found[0] if found and isinstance(found[0], list) else found)
    return list(reply[0][1])


def involved_of(event: Obj) -> bytes:
    """An Event's member of its kind's involved index, read as field selectors read the fields
    (so the index's ranges and the selector's matching agree)."""
    meta = event.get("metadata") or {}
    return involved_member(
        field_value(event, "involvedObject.name"),
        field_value(event, "involvedObject.namespace"),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


#: How many objects one rebuild step of an index reads and sends, per index: the Events'
#: involved index decodes each of them, the kind's index reads only their fields.
REINDEX_BATCH: Final = {NAMES_INDEX: 2000, INVOLVED_INDEX: 500, DELETING_INDEX: 500}
#: The rebuild's lock lives this long without a step (a rebuilder that died frees it so).
REINDEX_TTL_MS: Final = 60_000
#: After a rebuild that did not complete (another ran, or writers that do not keep the index
#: are still at work, as in a rolling upgrade), a store tries again no sooner than this.
REINDEX_RETRY_S: Final = 30.0


def reindex_source(keys: StateKeys, kind: str, index: str) -> str:
    """The hash a rebuild of ``index`` scans: the objects (the Events' involved index and the
    deleting index need their JSON) or their versions (the kind's index needs only the fields)."""
    return keys.versions(kind) if index == NAMES_INDEX else keys.objects(kind)


def reindex_batch(index: str, found: Any) -> list[bytes]:
    """``lua/reindex.lua``'s ``add`` arguments for what ``HSCAN`` of :func:`reindex_source` found
    (field -> value): the fields, per Event its field, resourceVersion and involved member, or
    per object marked for deletion its field and resourceVersion."""
    args: list[bytes] = []
    for field, raw in found.items():
        name = field if isinstance(field, bytes) else str(field).encode()
        if index == NAMES_INDEX:
            args.append(name)
            continue
        data = raw if isinstance(raw, bytes) else str(raw).encode("latin-1")
        if index == INVOLVED_INDEX:
            args += [name, data.partition(b":")[0], involved_of(decode(data))]
        elif decode(data).get("metadata", {}).get("deletionTimestamp"):
            args += [name, data.partition(b":")[0]]
    return args


#: The first window of a page is its limit (and one more, to tell whether the list goes on);
#: when a selector skips objects, each further window doubles, up to this many objects.
WINDOW_MAX: Final = 2000

# How a page is read (PageRead.mode).
_WHOLE: Final = "whole"  # the kind's hash and the counter in one MULTI (a list without limit)
_RANGE: Final = "range"  # windows of index:<kind>
_INVOLVED: Final = "involved"  # the Events about one object, from involved:<kind>
_FIELDS: Final = "fields"  # named objects (a fieldSelector on metadata.name)


class PageRead:
    """The reads of one list page, as a state machine the sync and the async store drive alike.

    ``while not read.done``: when :attr:`whole`, send ``HGETALL`` of the kind's objects, ``GET``
    of the counter and ``HGET`` of its floor in one MULTI and pass the replies to
    :meth:`feed_whole`; otherwise run ``lua/page.lua`` with :meth:`args` and pass the reply to
    :meth:`feed`. Then :meth:`result` is the page: (items, the list's resourceVersion, the
    continue token). Paging itself is :class:`fleet.apiserver.store.Page`, which MemoryStore's
    :func:`~fleet.apiserver.store.select_page` applies too.

    What is read, by the request:

    - ``metadata.name`` pinned, with a namespace (or a cluster-scoped kind): those fields;
    - Events with ``involvedObject.name`` pinned (what ``kubectl describe`` asks): the range of
      ``involved:core/events`` for that name (and namespace, when pinned too), all of it: the
      Events of one object, not of the kind;
    - a limit, or a namespace: windows of ``index:<kind>`` in list order, from the continue
      token's position (exclusive) within the namespace's range; the first window is the limit
      and one more, so a page without selectors is one read, and a page whose selectors skip
      objects reads more windows (each twice the last, up to :data:`WINDOW_MAX`) until it is
      full or the range ends. Without a limit, the namespace's range is one read;
    - otherwise (the whole kind, no limit), the object hash as before: it is all read anyway;
      and so while an index is short (:attr:`unindexed`: data from before it; the store has it
      rebuilt): what the list cost before the indexes, objects outside the page not decoded.

    The first read of a list also reads the version counter, atomically with its objects: a
    page that is one read (no selector, or a whole namespace, or named objects) is exactly the
    state at the list's resourceVersion. Further windows of a selective page show the objects as
    they are when read, as continued pages always have (objects created after the list's
    version show up in later pages if they sort after the token): an object is never returned
    twice or out of order, because the windows are disjoint ranges of one order.
    """

    def __init__(
        self,
        keys: StateKeys,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> None:
        self.keys = keys
        self.rt = rt
        self.kind = kind_name(rt.key)
        self.flt = ObjectFilter(rt, namespace, label_selector, field_selector)
        self.token_rv: int | None = None
        start: tuple[str, str] | None = None
        if continue_token:
            self.token_rv, start = decode_continue(continue_token)
        self.page = Page(self.flt, limit=limit, start=start)
        self.limit = limit or None
        self.list_rv: int | None = self.token_rv
        self.done = False
        #: The indexes found short (not complete): this read fell back to the kind's hash, and
        #: the store has them rebuilt.
        self.unindexed: set[str] = set()
        self._first = True
        fields = self.flt.fields
        ns = namespace if rt.namespaced else None
        if ns is None and rt.namespaced:
            ns = fields.value_of("metadata.namespace")
        self._namespace = ns
        self._name = fields.value_of("metadata.name")
        self._start_member = (
            None if start is None else index_member(start[0] if rt.namespaced else None, start[1])
        )
        self._window = 0
        self._low = self._high = b""
        involved = fields.value_of("involvedObject.name") if self.kind in INVOLVED_KINDS else None
        if self._name is not None and (ns is not None or not rt.namespaced):
            self.mode = _FIELDS
        elif involved is not None:
            self.mode = _INVOLVED
            self._low, self._high = involved_range(involved, fields.value_of("involvedObject.namespace"))
        else:
            self._range()

    def _range(self) -> None:
        """Read windows of ``index:<kind>`` (or, for the whole kind without limit, or while the
        index is short, its hash)."""
        whole = self._namespace is None and self._name is None and self.limit is None
        if whole or NAMES_INDEX in self.unindexed:
            self.mode = _WHOLE
            return
        self.mode = _RANGE
        low, high = namespace_range(self._namespace) if self._namespace is not None else (b"-", b"+")
        if self._start_member is not None and (low == b"-" or self._start_member >= low[1:]):
            low = b"(" + self._start_member
        self._low, self._high = low, high
        self._window = -1 if self.limit is None or self._name is not None else self.limit + 1

    @property
    def whole(self) -> bool:
        """Whether the next read is the MULTI of the whole kind (:meth:`feed_whole`)."""
        return self.mode == _WHOLE

    def args(self) -> list[str | int | bytes]:
        """The arguments of the next ``lua/page.lua`` call (its keys: the version counter)."""
        if self.mode == _FIELDS:
            assert self._name is not None
            return [self.kind, _FIELDS, field_name(self._namespace, self._name)]
        if self.mode == _INVOLVED:
            return [self.kind, _INVOLVED, self._low, self._high]
        return [self.kind, _RANGE, self._low, self._high, self._window, self._name or ""]

    def _version(self, version: Any, floor: Any) -> None:
        """The list's version from its first read; 410 for a continue token past the floor."""
        if not self._first:
            return
        self._first = False
        if self.token_rv is None:
            self.list_rv = int(version or 0)
        elif floor is not None and self.token_rv < int(text(floor)):
            raise expired_continue()

    def feed(self, reply: Any) -> None:
        """Take the reply of the page script called with :meth:`args`."""
        version, floor, status, members, values = reply
        if text(status) == "unindexed":
            # The index is short (data older than it, or a rebuild under way): read the kind's
            # index, or its hash, instead; the version comes with the first read of objects.
            self.unindexed.add(INVOLVED_INDEX if self.mode == _INVOLVED else NAMES_INDEX)
            if self.token_rv is not None:
                self._version(version, floor)
            self._range()
            return
        self._version(version, floor)
        if self.mode != _RANGE:
            objects = [decode(raw) for raw in values if raw is not None]
            if self.mode == _INVOLVED:
                objects.sort(key=order)
            self._offer(objects)
            self.done = True
            return
        self._offer(decode(raw) for raw in values if raw is not None)
        if self.page.full or self._window == -1 or len(members) < self._window:
            self.done = True
            return
        self._low = b"(" + members[-1]
        self._window = min(self._window * 2, max(WINDOW_MAX, self._window))

    def feed_whole(self, found: Any, version: Any, floor: Any) -> None:
        """Take the replies of the MULTI (``HGETALL`` of the objects, the counter, the floor)."""
        self._version(version, floor)
        start = self._start_member
        prefix = None if self._namespace is None else self._namespace.encode() + b"\0"
        ordered = sorted(((_member(field), raw) for field, raw in found.items()), key=lambda pair: pair[0])
        self._offer(
            decode(raw)
            for member, raw in ordered
            if (start is None or member > start) and (prefix is None or member.startswith(prefix))
        )
        self.done = True

    def _offer(self, objects: Iterable[Obj]) -> None:
        for obj in objects:
            if self.page.offer(obj):
                return

    def result(self) -> tuple[list[Obj], str, str | None]:
        """The page: its objects, the list's resourceVersion, the continue token (or None)."""
        assert self.done and self.list_rv is not None
        return self.page.items, str(self.list_rv), self.page.token(self.list_rv)


def _member(field: Any) -> bytes:
    """The index member of a hash field (``namespace/name`` -> ``namespace\\0name``)."""
    data = field if isinstance(field, bytes) else str(field).encode()
    return data.replace(b"/", b"\0", 1)


def order(obj: Obj) -> tuple[str, str]:
    """List order: namespace, then name (cluster-scoped objects have namespace ``""``); the
    byte order of :func:`~fleet.state.keys.index_member` is the same."""
    meta = obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])
