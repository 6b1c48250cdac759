"""Request bodies: how large, how deep and how aliased a body the API decodes. One home for the limits.

Every body the serving core accepts (objects in JSON or YAML, the three patch types, delete
options) goes through :func:`read_limited` and :func:`decode`; a patched object goes through
:func:`check_object` before it is written. What a hostile body can cost is bounded here, and every
refusal is a 4xx ``Status``, never a 5xx:

* **Size.** :data:`MAX_BODY_BYTES` is 3 MiB for every content type, read in chunks, never kept
  past the limit, and refused with 413 ``RequestEntityTooLarge``. That is the Kubernetes API
  server's ``MaxRequestBodyBytes`` (``k8s.io/apiserver/pkg/server/config.go``:
  ``int64(3 * 1024 * 1024)``, twice the 1.5 MB a request to etcd may carry), which
  ``limitedReadBody`` (``pkg/endpoints/handlers/rest.go``) enforces with a 413 "limit is 3145728".
* **Decoded size.** A decoded or patched object may not be larger, encoded as JSON, than
  :data:`MAX_OBJECT_BYTES` (also 3 MiB): a YAML body cannot grow past what a JSON body could
  carry by aliases, nor an object by patches (413). JSON patches follow
  ``pkg/endpoints/handlers/patch.go``: at most :data:`MAX_JSON_PATCH_OPERATIONS` (10000)
  operations (413 "The allowed maximum operations in a JSON patch is 10000, got N"), and at most
  :data:`JSON_PATCH_MAX_COPY_BYTES` copied by ``copy`` operations (``JSONPatchMaxCopyBytes``,
  3 MiB, in the same ``config.go``; json-patch's ``AccumulatedCopySizeLimit``).
* **Depth.** Kubernetes stops JSON at 10000 levels (``sigs.k8s.io/json``,
  ``internal/golang/encoding/json/scanner.go``: ``maxNestingDepth = 10000``, "exceeded max
  depth") and YAML there too (``go.yaml.in/yaml/v2`` ``scannerc.go``: ``max_flow_level`` and
  ``max_indents`` 10000, "exceeded max depth of 10000"). Go's decoders are iterative; Python's
  copy, merge, validation and serialisation code is recursive under a recursion limit of 1000
  frames, and orjson encodes at most 254 levels. So Fleet's limit, :data:`MAX_DEPTH`, is 100
  levels of objects and arrays (the deepest sample, an AscendJob with a pod template, nests 14):
  deeper is a 400 ``BadRequest`` naming the limit, whatever the content type.
* **YAML aliases.** Counted before anything is built, from the parser's events, as
  ``sigs.k8s.io/yaml``'s decoder (``go.yaml.in/yaml/v2`` ``decode.go``, the CVE-2019-11253
  fix) counts them: once more than 100 of more than 1000 decoded nodes came through aliases,
  their share may not pass ``allowedAliasRatio`` (99% up to 400000 nodes, falling to 10% at
  4000000), else 400 "document contains excessive aliasing". An anchor used inside itself is a
  400 ("anchor 'x' value contains itself"), as is an alias whose expansion nests past
  :data:`MAX_DEPTH`; an expansion past :data:`MAX_OBJECT_BYTES` is a 413. Only then is the
  document built, by PyYAML's safe loader (libyaml's when present) with timestamps kept as the
  strings they were (as ``sigs.k8s.io/yaml`` keeps them) and re-encoded as JSON: keys become
  strings as ``YAMLToJSON`` makes them, shared (aliased) parts become copies, and a value JSON
  cannot hold (``!!binary``, ``!!set``) is a 400.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Final

import orjson
import yaml
from yaml.constructor import ConstructorError, SafeConstructor

from fleet import fastjson
from fleet.apiserver.errors import BadRequest, RequestEntityTooLarge

__all__ = [
    "JSON_PATCH_MAX_COPY_BYTES",
    "MAX_BODY_BYTES",
    "MAX_DEPTH",
    "MAX_JSON_PATCH_OPERATIONS",
    "MAX_OBJECT_BYTES",
    "YAML_TYPES",
    "check_depth",
    "check_object",
    "decode",
    "decode_json",
    "decode_yaml",
    "drain",
    "encoded_size",
    "read_limited",
    "too_deep",
]

#: ``MaxRequestBodyBytes`` of the Kubernetes API server: every request body, any content type.
MAX_BODY_BYTES: Final = 3 * 1024 * 1024
#: A decoded (YAML aliases expanded) or patched object, encoded as JSON.
MAX_OBJECT_BYTES: Final = 3 * 1024 * 1024
#: Levels of nested objects and arrays (``{}`` is one level, ``{"a": []}`` two).
MAX_DEPTH: Final = 100
#: ``maxJSONPatchOperations`` of the API server's patch handler.
MAX_JSON_PATCH_OPERATIONS: Final = 10_000
#: ``JSONPatchMaxCopyBytes``: what the ``copy`` operations of one JSON patch may copy in all.
JSON_PATCH_MAX_COPY_BYTES: Final = 3 * 1024 * 1024
YAML_TYPES: Final = frozenset({"application/yaml", "application/x-yaml", "text/yaml"})

#: How much of a body over the limit is read and dropped before the 413 (see :func:`read_limited`).
_DRAIN_BYTES: Final = 4 * MAX_BODY_BYTES
# go.yaml.in/yaml/v2 decode.go: the alias budget.
_ALIAS_RATIO_LOW: Final = 400_000
_ALIAS_RATIO_HIGH: Final = 4_000_000


def too_deep() -> BadRequest:
    return BadRequest(f"the request body is nested too deeply: exceeded max depth of {MAX_DEPTH}")


def _too_large(what: str, limit: int) -> RequestEntityTooLarge:
    return RequestEntityTooLarge(f"{what} is too large: limit is {limit}")


async def read_limited(
    chunks: AsyncIterator[bytes], content_length: str | None, *, expects_continue: bool = False
) -> bytes:
    """The body from ``chunks``, refused (413) when it passes :data:`MAX_BODY_BYTES`.

    Nothing is kept past the limit. A client that waits for ``100 Continue`` before sending a
    declared ``Content-Length`` over the limit is refused before it sends anything. Otherwise the
    rest of a body over the limit is read and dropped, up to :data:`_DRAIN_BYTES`, before the
    answer: a client that writes its whole body before reading (Python's ``urllib`` with
    ``Connection: close``) then reads the 413 instead of a reset connection. Beyond that the answer
    comes at once (as the Kubernetes API server's Go server, which drops 256 KiB and then closes).
    """
    declared = (
        int(content_length) if content_length is not None and content_length.strip().isdigit() else None
    )
    if declared is not None and declared > MAX_BODY_BYTES and (expects_continue or declared > _DRAIN_BYTES):
        raise _too_large("the request body", MAX_BODY_BYTES)
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            if size > _DRAIN_BYTES:
                break
            continue
        parts.append(chunk)
    if size > MAX_BODY_BYTES or (declared is not None and declared > MAX_BODY_BYTES):
        raise _too_large("the request body", MAX_BODY_BYTES)
    return b"".join(parts)


async def drain(chunks: AsyncIterator[bytes], content_length: str | None) -> None:
    """Read and drop a body that was not read (a request refused before its body mattered), up
    to :data:`_DRAIN_BYTES`, so that a client that writes its whole body before reading the
    answer gets it rather than a reset connection. A longer declared body is left alone."""
    if content_length is not None and content_length.strip().isdigit() and int(content_length) > _DRAIN_BYTES:
        return
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > _DRAIN_BYTES:
            return


def decode(raw: bytes, media_type: str) -> Any:
    """The value of a body of ``media_type`` (YAML for :data:`YAML_TYPES`, else JSON), checked."""
    if media_type in YAML_TYPES:
        return decode_yaml(raw, media_type)
    return decode_json(raw, media_type)


def decode_json(raw: bytes, media_type: str = "application/json") -> Any:
    try:
        value = fastjson.loads(raw)
    except RecursionError:  # past orjson's 1024 levels, the standard library's fallback recursed
        raise too_deep() from None
    except ValueError as error:
        raise BadRequest(f"the request body is not valid {media_type}: {error}") from None
    if _may_nest_past(raw, MAX_DEPTH):
        check_depth(value)
    return value


def _may_nest_past(raw: bytes, limit: int) -> bool:
    """Whether a JSON text could hold objects and arrays nested past ``limit`` levels: not when it
    has no more than ``limit`` opening brackets in all, since each level of the decoded value
    opened with one of its own (those inside strings only add to the count). Counting bytes in C
    spares a typical job, which opens a few dozen, the walk of :func:`check_depth`."""
    return raw.count(b"{") + raw.count(b"[") > limit


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """``BadRequest`` when ``value`` nests objects and arrays more than ``limit`` levels deep.

    Iterative, so that it holds for any depth.
    """
    if not isinstance(value, dict | list):
        return
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise too_deep()
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))


def encoded_size(value: Any) -> int:
    """Bytes of ``value`` as compact JSON (``value`` no deeper than :data:`MAX_DEPTH`)."""
    return len(fastjson.dumps(value))


def check_object(value: Any, what: str = "the object") -> None:
    """A patched object: no deeper than :data:`MAX_DEPTH` (400), no larger than
    :data:`MAX_OBJECT_BYTES` (413)."""
    check_depth(value)
    if encoded_size(value) > MAX_OBJECT_BYTES:
        raise _too_large(what, MAX_OBJECT_BYTES)


# --- YAML ---------------------------------------------------------------------------------------

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _key_text(key: Any) -> str | None:
    """A mapping key as ``YAMLToJSON`` writes it (``true``, ``null``, ``1``); ``None``: no key."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, int | float):
        return fastjson.dumps(key).decode()
    return None


class _Loader(_BaseLoader):  # type: ignore[misc]
    """The safe loader, with timestamps left as the strings they were and mapping keys made
    strings while the mapping is built (so that ``1`` and ``true`` stay two keys), as
    ``sigs.k8s.io/yaml`` does."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[str, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise ConstructorError(
                None, None, f"expected a mapping node, but found {node.id}", node.start_mark
            )
        self.flatten_mapping(node)
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = _key_text(self.construct_object(key_node, deep=True))
            if key is None:
                raise ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    "found unacceptable key",
                    key_node.start_mark,
                )
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


_Loader.add_constructor("tag:yaml.org,2002:timestamp", SafeConstructor.construct_scalar)


def _allowed_alias_ratio(decodes: int) -> float:
    """``allowedAliasRatio`` of go.yaml.in/yaml/v2 ``decode.go``."""
    if decodes <= _ALIAS_RATIO_LOW:
        return 0.99
    if decodes >= _ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decodes - _ALIAS_RATIO_LOW) / (_ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW)


class _Frame:
    """An open collection while counting: its anchor, nodes decoded within, height, JSON bytes."""

    __slots__ = ("anchor", "decodes", "height", "size")

    def __init__(self, anchor: str | None) -> None:
        self.anchor = anchor
        self.decodes = 1
        self.height = 1
        self.size = 2


def _check_yaml(raw: bytes) -> None:
    """Depth, aliasing and expanded size of a YAML stream, from its events (nothing is built).

    Counts as go-yaml's decoder does: every node decoded, once per alias that reaches it, and
    those reached through an alias apart. The alias ratio only rises while an alias expands and
    the allowed ratio only falls as the count grows, so checking after each alias is checking
    after each node. ``size`` estimates the expanded JSON (a scalar's text and a separator).
    """
    stack: list[_Frame] = []
    anchors: dict[str, tuple[int, int, int]] = {}  # anchor -> (decodes, height, size)
    decodes = aliased = size = 0
    for event in yaml.parse(raw, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            stack.append(_Frame(event.anchor))
            if len(stack) > MAX_DEPTH:
                raise too_deep()
            decodes += 1
            size += 2
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            frame = stack.pop()
            node = (frame.decodes, frame.height, frame.size)
            if frame.anchor is not None:
                anchors[frame.anchor] = node
        elif isinstance(event, yaml.ScalarEvent):
            node = (1, 0, len(event.value) + 1)
            decodes += 1
            size += node[2]
            if event.anchor is not None:
                anchors[event.anchor] = node
        elif isinstance(event, yaml.AliasEvent):
            name = event.anchor
            if any(frame.anchor == name for frame in stack):
                raise BadRequest(f"the request body is not valid YAML: anchor '{name}' value contains itself")
            if name not in anchors:
                raise BadRequest(f"the request body is not valid YAML: unknown anchor '{name}' referenced")
            target_decodes, height, target_size = anchors[name]
            node = (1 + target_decodes, height, target_size)
            decodes += 1 + target_decodes
            aliased += target_decodes
            size += target_size
            if len(stack) + height > MAX_DEPTH:
                raise too_deep()
            if aliased > 100 and decodes > 1000 and aliased / decodes > _allowed_alias_ratio(decodes):
                raise BadRequest("the request body is not valid YAML: document contains excessive aliasing")
            if size > MAX_OBJECT_BYTES:
                raise _too_large("the YAML body with its aliases expanded", MAX_OBJECT_BYTES)
        else:  # stream and document events
            if isinstance(event, yaml.DocumentStartEvent):
                decodes += 1
            continue
        if stack:
            parent = stack[-1]
            parent.decodes += node[0]
            parent.height = max(parent.height, node[1] + 1)
            parent.size += node[2]


def decode_yaml(raw: bytes, media_type: str = "application/yaml") -> Any:
    """One YAML document as JSON values, after :func:`_check_yaml` (see the module's notes)."""
    try:
        _check_yaml(raw)
        value = yaml.load(raw, Loader=_Loader)
    except yaml.YAMLError as error:
        if "nesting depth" in str(getattr(error, "problem", "")):  # libyaml's own stop, at 1000
            raise too_deep() from None
        raise BadRequest(f"the request body is not valid {media_type}: {error}") from None
    except RecursionError:  # pragma: no cover - _check_yaml bounds the depth first
        raise too_deep() from None
    try:
        encoded = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:
        try:  # integers beyond 64 bits; what neither can write is not JSON
            encoded = json.dumps(value, separators=(",", ":")).encode()
        except (TypeError, ValueError) as error:
            raise BadRequest(f"the request body is not valid {media_type}: {error}") from None
    if len(encoded) > MAX_OBJECT_BYTES:
        raise _too_large("the YAML body with its aliases expanded", MAX_OBJECT_BYTES)
    return fastjson.loads(encoded)
