"""Bodies kubectl sends as Kubernetes protobuf, for the built-in kinds it writes that way.

kubectl's typed commands (``kubectl create configmap|secret|service|namespace|priorityclass``,
and ``kubectl auth can-i`` and ``whoami``, which do not fall back to JSON on a 415) encode the
object as
``application/vnd.kubernetes.protobuf``: the magic ``k8s\\x00`` then a ``runtime.Unknown``
(``typeMeta`` 1, ``raw`` 2; ``k8s.io/apimachinery/pkg/runtime/generated.proto``) whose ``raw``
is the object's message (``k8s.io/api/core/v1/generated.proto``). This decodes the fields those
commands set into the JSON shape the rest of the server handles, by the field numbers of those
``.proto`` files: ObjectMeta (name, generateName, namespace, labels, annotations), ConfigMap,
Secret, Service (spec: ports, selector, clusterIP(s), type, external IPs and name, session
affinity) and Namespace; PriorityClass (``kubectl create priorityclass``; ``scheduling/v1``:
value, globalDefault, description, preemptionPolicy); and the self reviews (``k8s.io/api``
``authorization/v1`` and ``authentication/v1``): SelfSubjectAccessReview, SelfSubjectRulesReview
and SelfSubjectReview.
Fields a reader does not know are skipped by their wire type, so a newer client's extra fields
do no harm. Empty strings, zeros and ``false`` are what a Go marshaller writes for unset fields,
and are dropped as JSON's ``omitempty`` would, except a PriorityClass's ``value``, which JSON
writes even when 0. Any other kind is answered 415.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any, Final

__all__ = ["CONTENT_TYPE", "ProtobufError", "decode"]

CONTENT_TYPE: Final = "application/vnd.kubernetes.protobuf"
_MAGIC: Final = b"k8s\x00"


class ProtobufError(ValueError):
    """A body that is not a Kubernetes protobuf object this server can read."""


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ProtobufError("truncated varint")
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value): an int for varints, bytes for length-delimited fields."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            yield number, value
        elif wire == 2:
            size, i = _varint(data, i)
            if i + size > len(data):
                raise ProtobufError("truncated field")
            yield number, data[i : i + size]
            i += size
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")


def _text(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise ProtobufError("expected a string")
    return value.decode("utf-8")


def _entry(value: int | bytes) -> tuple[str, bytes]:
    if not isinstance(value, bytes):
        raise ProtobufError("expected a map entry")
    key, item = "", b""
    for number, part in _fields(value):
        if number == 1:
            key = _text(part)
        elif number == 2 and isinstance(part, bytes):
            item = part
    return key, item


def _message(value: int | bytes, reader: Callable[[bytes], dict[str, Any]]) -> dict[str, Any]:
    if not isinstance(value, bytes):
        raise ProtobufError("expected a message")
    return reader(value)


def _meta(data: bytes) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    names = {1: "name", 2: "generateName", 3: "namespace"}
    for number, value in _fields(data):
        if number in names and (text := _text(value)):
            meta[names[number]] = text
        elif number in (11, 12):
            key, item = _entry(value)
            meta.setdefault("labels" if number == 11 else "annotations", {})[key] = item.decode("utf-8")
    return meta


def _configmap(data: bytes) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for number, value in _fields(data):
        if number == 1:
            obj["metadata"] = _message(value, _meta)
        elif number == 2:
            key, item = _entry(value)
            obj.setdefault("data", {})[key] = item.decode("utf-8")
        elif number == 3:
            key, item = _entry(value)
            obj.setdefault("binaryData", {})[key] = base64.b64encode(item).decode()
        elif number == 4 and value:
            obj["immutable"] = True
    return obj


def _secret(data: bytes) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for number, value in _fields(data):
        if number == 1:
            obj["metadata"] = _message(value, _meta)
        elif number == 2:
            key, item = _entry(value)
            obj.setdefault("data", {})[key] = base64.b64encode(item).decode()
        elif number == 3 and (text := _text(value)):
            obj["type"] = text
        elif number == 4:
            key, item = _entry(value)
            obj.setdefault("stringData", {})[key] = item.decode("utf-8")
        elif number == 5 and value:
            obj["immutable"] = True
    return obj


def _int_or_string(data: bytes) -> int | str:
    kind, number, text = 0, 0, ""
    for field, value in _fields(data):
        if field == 1 and isinstance(value, int):
            kind = value
        elif field == 2 and isinstance(value, int):
            number = value
        elif field == 3:
            text = _text(value)
    return text if kind == 1 else number


def _port(data: bytes) -> dict[str, Any]:
    port: dict[str, Any] = {}
    for number, value in _fields(data):
        if number == 1 and (text := _text(value)):
            port["name"] = text
        elif number == 2 and (text := _text(value)):
            port["protocol"] = text
        elif number in (3, 5) and isinstance(value, int) and value:
            port["port" if number == 3 else "nodePort"] = value
        elif number == 4 and isinstance(value, bytes):
            target = _int_or_string(value)
            if target not in (0, ""):
                port["targetPort"] = target
        elif number == 6 and (text := _text(value)):
            port["appProtocol"] = text
    return port


def _service_spec(data: bytes) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    strings = {3: "clusterIP", 4: "type", 7: "sessionAffinity", 10: "externalName"}
    lists = {5: "externalIPs", 18: "clusterIPs"}
    for number, value in _fields(data):
        if number == 1:
            spec.setdefault("ports", []).append(_message(value, _port))
        elif number == 2:
            key, item = _entry(value)
            spec.setdefault("selector", {})[key] = item.decode("utf-8")
        elif number in strings and (text := _text(value)):
            spec[strings[number]] = text
        elif number in lists:
            spec.setdefault(lists[number], []).append(_text(value))
    return spec


def _service(data: bytes) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for number, value in _fields(data):
        if number == 1:
            obj["metadata"] = _message(value, _meta)
        elif number == 2:
            obj["spec"] = _message(value, _service_spec)
    return obj


def _namespace(data: bytes) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for number, value in _fields(data):
        if number == 1:
            obj["metadata"] = _message(value, _meta)
    return obj


def _int32(value: int | bytes) -> int:
    """A varint-encoded ``int32``: negative numbers come sign-extended to 64 bits."""
    if not isinstance(value, int):
        raise ProtobufError("expected an integer")
    return value - (1 << 64) if value >= 1 << 63 else value


def _priority_class(data: bytes) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for number, value in _fields(data):
        if number == 1:
            obj["metadata"] = _message(value, _meta)
        elif number == 2:
            obj["value"] = _int32(value)
        elif number == 3 and value:
            obj["globalDefault"] = True
        elif number == 4 and (text := _text(value)):
            obj["description"] = text
        elif number == 5 and (text := _text(value)):
            obj["preemptionPolicy"] = text
    return obj


Reader = Callable[[bytes], dict[str, Any]]


def _record(strings: dict[int, str], messages: dict[int, tuple[str, Reader]] | None = None) -> Reader:
    """A reader of a message of string fields and nested messages, by field number."""

    def read(data: bytes) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for number, value in _fields(data):
            if number in strings and (text := _text(value)):
                out[strings[number]] = text
            elif messages and number in messages:
                name, reader = messages[number]
                out[name] = _message(value, reader)
        return out

    return read


_RESOURCE_ATTRIBUTES: Final = _record(
    {1: "namespace", 2: "verb", 3: "group", 4: "version", 5: "resource", 6: "subresource", 7: "name"}
)
_ACCESS_REVIEW: Final = _record(
    {},
    {
        1: ("metadata", _meta),
        2: (
            "spec",
            _record(
                {},
                {
                    1: ("resourceAttributes", _RESOURCE_ATTRIBUTES),
                    2: ("nonResourceAttributes", _record({1: "path", 2: "verb"})),
                },
            ),
        ),
    },
)
_RULES_REVIEW: Final = _record({}, {1: ("metadata", _meta), 2: ("spec", _record({1: "namespace"}))})
_SELF_REVIEW: Final = _record({}, {1: ("metadata", _meta)})

_READERS: Final[dict[tuple[str, str], Reader]] = {
    ("v1", "ConfigMap"): _configmap,
    ("v1", "Secret"): _secret,
    ("v1", "Service"): _service,
    ("v1", "Namespace"): _namespace,
    ("scheduling.k8s.io/v1", "PriorityClass"): _priority_class,
    **{(f"authorization.k8s.io/{v}", "SelfSubjectAccessReview"): _ACCESS_REVIEW for v in ("v1", "v1beta1")},
    **{(f"authorization.k8s.io/{v}", "SelfSubjectRulesReview"): _RULES_REVIEW for v in ("v1", "v1beta1")},
    **{
        (f"authentication.k8s.io/{v}", "SelfSubjectReview"): _SELF_REVIEW
        for v in ("v1", "v1beta1", "v1alpha1")
    },
}


def decode(raw: bytes) -> dict[str, Any]:
    """The JSON shape of a protobuf-encoded object of a kind this module reads; raises
    :class:`ProtobufError` (unreadable, or a kind it does not read)."""
    if not raw.startswith(_MAGIC):
        raise ProtobufError("the body does not start with the Kubernetes protobuf prefix")
    api_version = kind = ""
    payload = b""
    for number, value in _fields(raw[len(_MAGIC) :]):
        if number == 1 and isinstance(value, bytes):
            for field, part in _fields(value):
                if field == 1:
                    api_version = _text(part)
                elif field == 2:
                    kind = _text(part)
        elif number == 2 and isinstance(value, bytes):
            payload = value
    reader = _READERS.get((api_version, kind))
    if reader is None:
        raise ProtobufError(
            f"{kind or 'this kind'} ({api_version or 'no apiVersion'}) is not read as protobuf here"
        )
    try:
        obj = reader(payload)
    except UnicodeDecodeError:
        raise ProtobufError("a string field is not UTF-8") from None
    return {"apiVersion": api_version, "kind": kind, **obj}
