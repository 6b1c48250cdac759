"""Unknown and duplicate fields, and what ``fieldValidation`` makes of them, as kube-apiserver does.

kubectl sends ``fieldValidation=Strict`` for ``--validate=strict`` (its default), ``Warn`` for
``--validate=warn`` and ``Ignore`` for ``--validate=false``; a request without the parameter gets
the server's default, ``Warn`` (``fieldValidation`` in ``k8s.io/apiserver``
``pkg/endpoints/handlers/rest.go``); any other value is a 400 naming the supported ones. The
rules and wording below are the API server's, as its handlers (``create.go``, ``update.go``,
``patch.go``) and the integration test that pins them down
(``test/integration/apiserver/field_validation_test.go`` in kubernetes/kubernetes) have them:

* **What is found.** Unknown fields: what the kind's schema does not declare, found by pruning
  (:func:`fleet.apiserver.schema.prune`), reported as ``unknown field "spec.foo"`` with the full
  path. Duplicate fields of a JSON body: ``duplicate field "spec.paused"``; of a YAML body:
  go-yaml's ``line 12: key "paused" already set in map``, gathered under
  ``yaml: unmarshal errors:``. In a JSON patch, its operations' own fields:
  ``json patch unknown field "[0].foo"``, ``json patch duplicate field "[1].path"``. Duplicates
  are looked for only under ``Strict`` and ``Warn``.
* **In what order.** A custom resource (a kind without strategic merge patch, :attr:`builtin`
  false) as apiextensions decodes it: the body's duplicates, then ``metadata``'s unknown fields,
  then the others sorted by path. A built-in kind as its typed decoder meets them: a JSON body
  in the body's own order, everything else (YAML bodies, patched objects) in the order of sorted
  keys. A patch reports its own body's findings first.
* **What happens.** ``Strict``: nothing is written and the request is refused: a create or update
  with a 400 ``BadRequest``, ``<Kind> in version "<v>" cannot be handled as a <Kind>: strict
  decoding error: <findings>`` (no details, as ``transformDecodeError`` answers); a merge or JSON
  patch with a 422 ``Invalid`` whose one cause is the field ``patch``, ``Invalid value:
  "<patched object as JSON>": strict decoding error: <findings>`` (a strategic merge patch shows
  the patch as Go prints a map), which kubectl prints as ``The request is invalid: patch: ...``.
  ``Warn``: each finding is a ``Warning`` header (``299 - "unknown field \\"spec.foo\\""``; a YAML
  finding split one per line), the unknown fields are dropped and the rest is written.
  ``Ignore``: the unknown fields are dropped silently.
* **Server-side apply** refuses an unknown field whatever the directive, as structured-merge-diff
  does before anything is merged: ``failed to create typed patch object (<ns>/<name>;
  <group>/<version>, Kind=<Kind>): .spec.foo: field not declared in schema``. Kubernetes answers
  that with a 500 (kubernetes/kubernetes#122480, #139253); Fleet answers 400 ``BadRequest`` with
  the same text, as the proposed fix (#139255) does, since bad input is never a 5xx here. Its
  body's duplicate keys: ``Strict`` refuses with ``error strict decoding YAML: error converting
  YAML to JSON: yaml: unmarshal errors: ...``, ``Warn`` warns per line.

A Secret's values are never quoted: where the API server would print the patched object, its
``format: byte``/``password`` values are shown as ``<redacted>``.
"""

from __future__ import annotations

import decimal
import json
import math
from collections.abc import Mapping
from typing import Any, Final

import yaml

from fleet.apiserver import schema as schemas
from fleet.apiserver.bodies import YAML_TYPES
from fleet.apiserver.errors import BadRequest, Cause, Invalid
from fleet.apiserver.resources import Obj, ResourceType

__all__ = [
    "DIRECTIVES",
    "IGNORE",
    "STRICT",
    "WARN",
    "applied_duplicates",
    "body_findings",
    "check_applied",
    "directive",
    "go_value",
    "json_duplicates",
    "json_patch_findings",
    "object_findings",
    "patch_findings",
    "refuse_patch",
    "settle",
    "shown",
    "warning_header",
    "warnings",
    "yaml_duplicates",
]

STRICT: Final = "Strict"
WARN: Final = "Warn"
IGNORE: Final = "Ignore"
DIRECTIVES: Final = (IGNORE, STRICT, WARN)
#: Kubernetes caps a warning's text; a longer one is cut rather than refused.
_MAX_WARNING: Final = 2048
_YAML_ERRORS: Final = "yaml: unmarshal errors:\n"
#: The fields of a JSON patch operation (``jsonPatchOp`` in ``patch.go``).
_PATCH_OP_FIELDS: Final = frozenset({"op", "path", "from", "value"})


def directive(value: str | None) -> str:
    """The request's ``fieldValidation``: ``Warn`` when absent, else one of :data:`DIRECTIVES`."""
    if value is None or value == "":
        return WARN
    if value not in DIRECTIVES:
        supported = ", ".join(f'"{d}"' for d in DIRECTIVES)
        raise BadRequest(f'fieldValidation: Unsupported value: "{value}": supported values: {supported}')
    return value


def warning_header(text: str) -> str:
    """``299 - "text"``: a ``Warning`` header's value, with quotes and backslashes escaped and the
    text kept to printable ASCII."""
    clean = "".join(c if " " <= c <= "~" else " " for c in text)[:_MAX_WARNING]
    escaped = clean.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'


def warnings(findings: list[str]) -> list[str]:
    """The warnings of ``Warn``: one per finding, go-yaml's gathered ones one per line
    (``parseYAMLWarnings`` in ``rest.go``)."""
    out: list[str] = []
    for finding in findings:
        for prefix in ("error converting YAML to JSON: " + _YAML_ERRORS, _YAML_ERRORS):
            if finding.startswith(prefix):
                out += [line.strip() for line in finding[len(prefix) :].split("\n")]
                break
        else:
            out.append(finding)
    return out


def _quote(text: str) -> str:
    """A string as Go's ``%q`` writes it (close enough: JSON's escapes, UTF-8 kept)."""
    return json.dumps(text, ensure_ascii=False)


# --- duplicates ---------------------------------------------------------------------------------


class _Pairs(dict[str, Any]):
    """A JSON object as decoded, with the keys it held more than once."""

    __slots__ = ("dups",)

    def __init__(self) -> None:
        super().__init__()
        self.dups: list[str] = []


def _pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object as ``json`` decodes it; a :class:`_Pairs` only when it repeats a key."""
    plain = dict(items)
    if len(plain) == len(items):
        return plain
    out = _Pairs()
    for key, value in items:
        if key in out:
            out.dups.append(key)
        out[key] = value
    return out


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _duplicate_paths(value: Any, path: str, out: list[str]) -> None:
    if isinstance(value, dict):
        repeated = value.dups if isinstance(value, _Pairs) else []
        for key, child in value.items():
            out += [_join(path, key)] * repeated.count(key)
            _duplicate_paths(child, _join(path, key), out)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _duplicate_paths(item, f"{path}[{index}]", out)


def json_duplicates(raw: bytes) -> list[str]:
    """The paths of the keys a JSON body repeats, in the body's order (the first place each
    was met); empty for a body that is not JSON.

    Every create asks, so the decode itself says whether any object repeated a key: the paths
    are walked for only such a body (a walk of every body's tree cost a third of the scan)."""
    repeated = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        plain = dict(items)
        if len(plain) == len(items):
            return plain
        nonlocal repeated
        repeated = True
        return _pairs(items)

    try:
        value = json.loads(raw, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return []
    out: list[str] = []
    if repeated:
        _duplicate_paths(value, "", out)
    return out


def yaml_duplicates(raw: bytes) -> list[str]:
    """go-yaml's strict complaints about a YAML body's repeated keys, in the body's order:
    ``line 12: key "paused" already set in map`` (the line of the repeated key, from 1)."""
    try:
        root = yaml.compose(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return []
    out: list[str] = []
    stack: list[yaml.Node] = [root] if root is not None else []
    seen_nodes: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:  # an alias: one node, read once
            continue
        seen_nodes.add(id(node))
        children: list[yaml.Node] = []
        if isinstance(node, yaml.MappingNode):
            keys: set[tuple[str, str]] = set()
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    key = (key_node.tag, key_node.value)
                    if key in keys:
                        shown = _quote(key_node.value) if key_node.tag.endswith(":str") else key_node.value
                        out.append(f"line {key_node.start_mark.line + 1}: key {shown} already set in map")
                    keys.add(key)
                children.append(value_node)
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        stack += reversed(children)
    return out


def _yaml_error(lines: list[str]) -> list[str]:
    """go-yaml's complaints gathered as the one error it returns (none when there are none)."""
    return [_YAML_ERRORS + "\n".join(f"  {line}" for line in lines)] if lines else []


def json_patch_findings(raw: bytes) -> list[str]:
    """A JSON patch's operations decoded strictly: ``json patch unknown field "[0].foo"`` and
    ``json patch duplicate field "[1].path"``, in the patch's order."""
    try:
        value = json.loads(raw, object_pairs_hook=_pairs)
    except (ValueError, RecursionError):
        return []
    if not isinstance(value, list):
        return []
    out: list[str] = []
    for index, op in enumerate(value):
        if not isinstance(op, dict):
            continue
        repeated = op.dups if isinstance(op, _Pairs) else []
        for key in op:
            out += [f'json patch duplicate field "[{index}].{key}"'] * repeated.count(key)
            if key not in _PATCH_OP_FIELDS:
                out.append(f'json patch unknown field "[{index}].{key}"')
    return out


# --- an object's findings -----------------------------------------------------------------------


def _document_order(value: Any, path: str, order: dict[str, int]) -> None:
    if isinstance(value, dict):
        for key, child in value.items():
            order.setdefault(_join(path, key), len(order))
            _document_order(child, _join(path, key), order)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _document_order(item, f"{path}[{index}]", order)


def _top(path: str) -> str:
    return path.split(".", 1)[0].split("[", 1)[0]


def object_findings(
    rt: ResourceType, obj: Obj, duplicates: list[str], *, body_order: bool, yaml_lines: list[str]
) -> list[str]:
    """Drop from ``obj`` (in place) what ``rt`` does not declare and return, in the API server's
    order, what strict decoding would report: ``duplicates`` (paths of a JSON body's repeated
    keys), ``yaml_lines`` (go-yaml's complaints about a YAML body) and the unknown fields.
    ``body_order``: the object is a JSON body, whose own order a built-in kind's decoder follows.

    A kind without a schema declares ``apiVersion``, ``kind``, ``metadata`` and its
    :attr:`~fleet.apiserver.resources.ResourceType.top_level` fields (nothing below them is
    looked at); a kind that is not :attr:`~fleet.apiserver.resources.ResourceType.strict` keeps
    everything."""
    if not rt.strict:
        return []
    if rt.schema is None:
        known = {"apiVersion", "kind", "metadata", *rt.top_level}
        unknown = [key for key in obj if key not in known]
        for key in unknown:
            del obj[key]
        return [*_yaml_error(yaml_lines), *(f'duplicate field "{p}"' for p in duplicates)] + [
            f'unknown field "{key}"' for key in sorted(unknown)
        ]
    found = [f'duplicate field "{p}"' for p in duplicates]
    if rt.builtin and body_order:
        order: dict[str, int] = {}
        _document_order(obj, "", order)
        meta, rest = schemas.prune(obj, rt.schema, sort_keys=False)
        unknown = [*meta, *rest]
        # A typed decoder reports a field both unknown and repeated as unknown only.
        ranked = [
            (order.get(p, len(order)), f'duplicate field "{p}"') for p in duplicates if p not in unknown
        ]
        ranked += [(order.get(p, len(order)), f'unknown field "{p}"') for p in unknown]
        return [*_yaml_error(yaml_lines), *(text for _, text in sorted(ranked, key=lambda r: r[0]))]
    meta, rest = schemas.prune(obj, rt.schema, sort_keys=True)
    # A built-in kind's decoder walks the sorted keys once (stable by top-level field);
    # apiextensions reports metadata's first, then the rest sorted.
    unknown = sorted([*meta, *rest], key=_top) if rt.builtin else [*meta, *sorted(rest)]
    return [*_yaml_error(yaml_lines), *found, *(f'unknown field "{p}"' for p in unknown)]


def body_findings(raw: bytes, media_type: str) -> tuple[list[str], list[str]]:
    """The repeated keys of a request body: (paths for JSON, go-yaml's lines for YAML)."""
    if media_type in YAML_TYPES:
        return [], yaml_duplicates(raw)
    return json_duplicates(raw), []


def settle(rt: ResourceType, findings: list[str], mode: str) -> list[str]:
    """A create's or update's findings under ``mode``: ``Strict`` refuses (400), ``Warn``
    returns the warnings, ``Ignore`` nothing."""
    if not findings or mode == IGNORE:
        return []
    if mode == STRICT:
        raise BadRequest(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
            f"strict decoding error: {', '.join(findings)}"
        )
    return warnings(findings)


def patch_findings(rt: ResourceType, patched: Obj, current: Obj | None = None) -> list[str]:
    """Drop from a patched object what ``rt`` does not declare; the unknown fields, in the order
    a patched object is decoded (see the module doc).

    With ``current`` (the stored object the patch applied to), an unknown field the stored object
    already had, with the same value, is kept as stored and not reported: it was written before
    the schema knew better (an object from an older Fleet), the patch did not touch it, and a job
    whose spec may not change could otherwise never be labelled again. Kubernetes gets there by
    pruning what it reads; Fleet keeps what it stored."""
    if current is None:
        return object_findings(rt, patched, [], body_order=False, yaml_lines=[])
    stored = json.loads(json.dumps(current))
    old = set(object_findings(rt, stored, [], body_order=False, yaml_lines=[]))
    if not old:
        return object_findings(rt, patched, [], body_order=False, yaml_lines=[])
    before = json.loads(json.dumps(patched))
    found = object_findings(rt, patched, [], body_order=False, yaml_lines=[])
    kept: list[str] = []
    for finding in found:
        path = _parts(finding.removeprefix('unknown field "').removesuffix('"'))
        if finding in old and path and _at(before, path) == _at(current, path) != _MISSING:
            _put(patched, path, _at(before, path))
            kept.append(finding)
    return [f for f in found if f not in kept]


_MISSING: Final = object()


def _parts(path: str) -> list[str | int]:
    """``a.b[0].c`` as keys and indexes (a key holding a dot cannot be told apart: none is kept)."""
    out: list[str | int] = []
    for part in path.split("."):
        name, _, rest = part.partition("[")
        if name:
            out.append(name)
        for index in filter(None, rest.replace("]", "").split("[")):
            if not index.isdigit():
                return []
            out.append(int(index))
    return out


def _at(value: Any, path: list[str | int]) -> Any:
    for part in path:
        listed = isinstance(part, int) and isinstance(value, list) and part < len(value)
        if not (listed or (isinstance(part, str) and isinstance(value, dict) and part in value)):
            return _MISSING
        value = value[part]
    return value


def _put(obj: Any, path: list[str | int], value: Any) -> None:
    parent = _at(obj, path[:-1])
    if isinstance(parent, dict) and isinstance(path[-1], str):
        parent[path[-1]] = value


# --- patches ------------------------------------------------------------------------------------


def _redacted(value: Any, node: Mapping[str, Any] | None, defs: Mapping[str, Any]) -> Any:
    """``value`` with the values the schema marks ``byte`` or ``password`` replaced."""
    if node is None:
        return value
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        node = defs.get(ref[len("#/$defs/") :])
        if node is None:
            return value
    if node.get("format") in ("byte", "password") and not isinstance(value, dict | list):
        return "<redacted>"
    if isinstance(value, dict):
        properties = node.get("properties") or {}
        additional = node.get("additionalProperties")
        return {
            k: _redacted(v, properties.get(k, additional if isinstance(additional, Mapping) else None), defs)
            for k, v in value.items()
        }
    if isinstance(value, list):
        items = node.get("items")
        return [_redacted(v, items if isinstance(items, Mapping) else None, defs) for v in value]
    return value


def shown(rt: ResourceType, value: Any) -> Any:
    """``value`` (an object or a patch of one) as an error may show it: a Secret's values hidden."""
    if rt.schema is None:
        return value
    return _redacted(value, rt.schema, rt.schema.get("$defs") or {})


def go_value(value: Any) -> str:
    """``value`` as Go's ``%+v`` prints a decoded JSON value (``map[spec:map[paused:true]]``)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_value(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_value(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _go_float(value)
    return str(value)


def _go_float(value: float) -> str:
    """``strconv.FormatFloat(value, 'g', -1, 64)``: the shortest digits, in exponent form when
    the exponent is below -4 or at least 6."""
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digits, exponent = decimal.Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    point = len(text) + exponent  # digits before the decimal point
    power = point - 1
    if power < -4 or power >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        out = f"{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"
    elif point <= 0:
        out = "0." + "0" * -point + text
    elif point >= len(text):
        out = text + "0" * (point - len(text))
    else:
        out = text[:point] + "." + text[point:]
    return ("-" if sign else "") + out


def refuse_patch(shown_value: str, findings: list[str]) -> Invalid:
    """The 422 of a patch whose result strict decoding refuses (``patch.go``: ``NewInvalid`` with
    no kind or name and one cause, ``patch``)."""
    detail = f"Invalid value: {_quote(shown_value)}: strict decoding error: {', '.join(findings)}"
    return Invalid(f' "" is invalid: patch: {detail}', causes=[Cause("patch", detail, "FieldValueInvalid")])


# --- server-side apply --------------------------------------------------------------------------


def check_applied(rt: ResourceType, config: Obj, namespace: str | None, name: str) -> None:
    """Refuse (400) an applied configuration with a field the kind does not declare, as
    structured-merge-diff refuses it whatever ``fieldValidation`` says (see the module doc)."""
    if rt.schema is None or not rt.strict:
        return
    found = schemas.undeclared(config, rt.schema)
    if not found:
        return
    text = found[0] if len(found) == 1 else "errors:\n" + "\n".join(f"  {f}" for f in found)
    gvk = f"{rt.group}/{rt.version}, Kind={rt.kind}"
    raise BadRequest(f"failed to create typed patch object ({namespace or ''}/{name}; {gvk}): {text}")


def applied_duplicates(raw: bytes, mode: str) -> list[str]:
    """An applied configuration's repeated keys under ``mode``: ``Strict`` refuses (400), ``Warn``
    returns a warning per key, ``Ignore`` nothing (``applyPatcher`` in ``patch.go``)."""
    if mode == IGNORE:
        return []
    lines = yaml_duplicates(raw)
    if not lines:
        return []
    if mode == STRICT:
        converting = f"error converting YAML to JSON: {_yaml_error(lines)[0]}"
        raise BadRequest(f"error strict decoding YAML: {converting}")
    return lines
