"""The Kubernetes protobuf encoding, read for the few built-in kinds kubectl only sends that way.

kubectl's typed clients (``kubectl auth can-i``, ``kubectl auth whoami``) post built-in kinds as
``application/vnd.kubernetes.protobuf`` and do not fall back to JSON on a 415, though they accept
JSON answers. The encoding (Kubernetes docs, "Kubernetes Protobuf encoding" in
``docs/reference/using-api/api-concepts``): the magic bytes ``k8s\\x00``, then a
``runtime.Unknown`` message (``typeMeta`` 1 with ``apiVersion`` 1 and ``kind`` 2, ``raw`` 2: the
object's own message). Each kind's message is read by a table of its field numbers, taken from
the ``generated.proto`` files of ``k8s.io/api`` (``authorization/v1``, ``authentication/v1``);
only the string and message fields those kinds carry are needed, other fields are skipped by
their wire type, so a newer client's extra fields do no harm.
"""

from __future__ import annotations

from typing import Any, Final, Union

from fleet.apiserver.errors import BadRequest

__all__ = ["MEDIA_TYPE", "decode"]

MEDIA_TYPE: Final = "application/vnd.kubernetes.protobuf"
_MAGIC: Final = b"k8s\x00"

#: Field number -> (JSON name, message table, or ``None`` for a string).
Table = dict[int, tuple[str, Union["Table", None]]]

_OBJECT_META: Final[Table] = {1: ("name", None), 2: ("generateName", None), 3: ("namespace", None)}
_RESOURCE_ATTRIBUTES: Final[Table] = {
    1: ("namespace", None),
    2: ("verb", None),
    3: ("group", None),
    4: ("version", None),
    5: ("resource", None),
    6: ("subresource", None),
    7: ("name", None),
}
_NON_RESOURCE_ATTRIBUTES: Final[Table] = {1: ("path", None), 2: ("verb", None)}
#: The messages of the kinds read here, by kind.
KINDS: Final[dict[str, Table]] = {
    "SelfSubjectAccessReview": {
        1: ("metadata", _OBJECT_META),
        2: (
            "spec",
            {
                1: ("resourceAttributes", _RESOURCE_ATTRIBUTES),
                2: ("nonResourceAttributes", _NON_RESOURCE_ATTRIBUTES),
            },
        ),
    },
    "SelfSubjectRulesReview": {1: ("metadata", _OBJECT_META), 2: ("spec", {1: ("namespace", None)})},
    "SelfSubjectReview": {1: ("metadata", _OBJECT_META)},
}
_UNKNOWN: Final[Table] = {1: ("typeMeta", {1: ("apiVersion", None), 2: ("kind", None)}), 2: ("raw", None)}


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise BadRequest("the protobuf body is truncated")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _fields(data: bytes) -> list[tuple[int, bytes]]:
    """The length-delimited fields of one message, in order (other wire types skipped)."""
    out: list[tuple[int, bytes]] = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, at = _varint(data, at)
        elif wire == 1:
            at += 8
        elif wire == 5:
            at += 4
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise BadRequest("the protobuf body is truncated")
            out.append((number, data[at : at + size]))
            at += size
        else:
            raise BadRequest(f"the protobuf body has an unsupported wire type {wire}")
    return out


def _message(data: bytes, table: Table, *, raw: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, value in _fields(data):
        entry = table.get(number)
        if entry is None:
            continue
        name, sub = entry
        if sub is not None:
            out[name] = _message(value, sub)
        elif raw and name == "raw":
            out[name] = value
        else:
            try:
                out[name] = value.decode()
            except UnicodeDecodeError:
                raise BadRequest(f"the protobuf body's {name} is not UTF-8") from None
    return out


def decode(data: bytes, kind: str) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object of ``kind`` (one of :data:`KINDS`)."""
    table = KINDS.get(kind)
    if table is None:
        raise BadRequest(f"{kind} cannot be sent as {MEDIA_TYPE}; send application/json")
    if not data.startswith(_MAGIC):
        raise BadRequest("the protobuf body does not start with the Kubernetes magic number")
    unknown = _message(data[len(_MAGIC) :], _UNKNOWN, raw=True)
    type_meta = unknown.get("typeMeta") or {}
    if type_meta.get("kind") not in (None, "", kind):
        raise BadRequest(
            f"the kind in the data ({type_meta.get('kind')}) does not match the expected kind ({kind})"
        )
    obj = _message(unknown.get("raw") or b"", table)
    return {"apiVersion": type_meta.get("apiVersion", ""), "kind": kind, **obj}
