"""What goes between Python and Redis: write arguments, script replies, stream entries.

Shared by the sync :class:`~fleet.state.objects.Objects` and the async
:class:`~fleet.state.aio.RedisStore`, which differ only in how they wait for Redis.

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
from dataclasses import dataclass
from typing import Any, Final

from fleet import fastjson
from fleet.apiserver.resources import Obj, ResourceType
from fleet.apiserver.store import MODIFIED, already_exists, conflict, not_found, selector_view
from fleet.state.errors import Fenced
from fleet.state.keys import StateKeys, field_name, kind_name

__all__ = ["DELETE", "PUT", "Change", "Write", "decode", "decode_entry", "encode", "read_entries", "text"]

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
    fence: tuple[str, str] | None = None

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
            raise Fenced(f"fence {self.fence[0]} no longer holds token {self.fence[1]}: nothing was written")
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
