"""A kind's schema: one JSON Schema that validates the kind's objects and is served as its OpenAPI.

A :class:`~fleet.apiserver.resources.ResourceType` may carry ``schema``: a JSON Schema of the
object's own fields (``spec``, ``status``, a PriorityClass's ``value``...; ``apiVersion``,
``kind`` and ``metadata`` are added here, as Kubernetes adds them to a CRD's schema). It is
written in the subset that is both JSON Schema and a Kubernetes *structural schema* (the
``openAPIV3Schema`` of a CustomResourceDefinition, "Specifying a structural schema" in the
Kubernetes docs): ``type``, ``description``, ``properties``, ``items``, ``additionalProperties``,
``required``, ``enum``, ``minimum``, ``format`` (shown, not checked; ``byte`` and ``password``
values are never quoted in an error), ``anyOf`` of types for ``x-kubernetes-int-or-string``,
``x-kubernetes-preserve-unknown-fields`` for embedded objects, and ``$ref`` to ``#/$defs/<Name>``
for recursive or shared parts.

The same dict is used twice, so the two can never disagree:

* :func:`schema_causes` validates a decoded object with it (``jsonschema``), each failure a
  ``Cause`` worded as kube-apiserver words a CRD's schema failure (``spec.replicas: Invalid
  value: "string": spec.replicas in body must be of type integer: "two"``); the kind's own
  validator then checks what a schema cannot say;
* :func:`openapi` renders it for the OpenAPI v3 documents (and v2 definitions), its ``$defs``
  as ``components/schemas`` entries named after the kind, which ``kubectl explain`` reads at
  every depth.

* :func:`prune` removes what the schema does not declare, as kube-apiserver prunes a custom
  resource with a structural schema (``pruning/algorithm.go`` of ``k8s.io/apiextensions-apiserver``):
  a field no ``properties`` or ``additionalProperties`` declares is dropped, except below
  ``x-kubernetes-preserve-unknown-fields``, where only the declared parts are pruned; ``metadata``
  is pruned as ``ObjectMeta``; a ``null`` the schema does not declare ``nullable`` is dropped
  (``PruneNonNullableNullsWithoutDefaults``). What is dropped is returned, for
  :mod:`~fleet.apiserver.fields`, which decides by ``fieldValidation`` whether that is an error,
  a warning or silence. :func:`undeclared` is the same rule worded as server-side apply words it.

Kubernetes' own types (a pod template, a Service spec, ``ObjectMeta``) are definitions named
``io.k8s.*``, made by :mod:`~fleet.apiserver.kubetypes` from the official client's models; they
keep their names in the OpenAPI documents, so every kind embedding one shares it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

import jsonschema_rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from fleet.apiserver import kubetypes
from fleet.apiserver.errors import Cause
from fleet.apiserver.resources import Obj

__all__ = ["OBJECT_FIELDS", "OBJECT_META", "openapi", "prune", "schema_causes", "undeclared"]

_API_VERSION: Final = (
    "APIVersion defines the versioned schema of this representation of an object. Servers should "
    "convert recognized schemas to the latest internal value, and may reject unrecognized values."
)
_KIND: Final = "Kind is a string value representing the REST resource this object represents. In CamelCase."
_METADATA: Final = "Standard object's metadata: name, namespace, labels, annotations and the rest."
#: The client model of every object's ``metadata``, and its definition's name.
_OBJECT_META_MODEL: Final = "V1ObjectMeta"
OBJECT_META: Final = kubetypes.definition_name(_OBJECT_META_MODEL)
#: What every object has besides the kind's own fields.
OBJECT_FIELDS: Final[Obj] = {
    "apiVersion": {"type": "string", "description": _API_VERSION},
    "kind": {"type": "string", "description": _KIND},
    "metadata": {"description": _METADATA, "allOf": [{"$ref": f"#/$defs/{OBJECT_META}"}]},
}


#: Formats of values no message quotes (a Secret's ``data`` and ``stringData``).
_SECRET_FORMATS: Final = frozenset({"byte", "password"})


_T = TypeVar("_T")


def _by_identity(
    cache: dict[int, tuple[Mapping[str, Any], _T]], schema: Mapping[str, Any], build: Callable[[], _T]
) -> _T:
    """What ``build`` made from ``schema``, kept by the schema's identity (a kind's schema is
    loaded once and never changed), each entry with its schema, which keeps the identity from
    being reused; at most 256 are kept."""
    known = cache.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    if len(cache) > 256:
        cache.clear()
    made = build()
    cache[id(schema)] = (schema, made)
    return made


_VALIDATORS: dict[int, tuple[Mapping[str, Any], Draft202012Validator]] = {}


def _validator(schema: Mapping[str, Any]) -> Draft202012Validator:
    def build() -> Draft202012Validator:
        copied = json.loads(json.dumps(schema))
        return Draft202012Validator(_inlined(copied, copied.get("$defs") or {}, frozenset()))

    return _by_identity(_VALIDATORS, schema, build)


_Rust = jsonschema_rs.Draft202012Validator


def _rust(document: dict[str, Any]) -> _Rust | None:
    """``document`` compiled by ``jsonschema-rs``; None when it cannot be (then its callers'
    walks decide every object)."""
    try:
        return _Rust(document)
    except (ValueError, jsonschema_rs.ValidationError):
        return None


def _says_yes(check: _Rust | None, obj: Mapping[str, Any]) -> bool:
    """A compiled check's yes; anything it cannot take (or no check at all) is no yes."""
    if check is None:
        return False
    try:
        return bool(check.is_valid(obj))
    except (ValueError, TypeError, OverflowError):
        return False


#: Compiled checks; None: the schema could not be compiled, so every object goes to ``jsonschema``.
_COMPILED: dict[int, tuple[Mapping[str, Any], _Rust | None]] = {}


def _conforms(schema: Mapping[str, Any], obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` conforms to ``schema``, by ``jsonschema-rs`` (a compiled validator in
    Rust: 2 us for the sample one-NPU AscendJob, where ``fastjsonschema``'s generated Python took
    100 us, most of it building the path of every array item it checks, and ``jsonschema``'s walk
    900 us; issue 30). Only its yes is trusted: the walk of :func:`schema_causes` finds and words
    every cause. ``format`` is dropped first, as ``jsonschema`` checks none here. Bodies come as
    JSON decodes them; were a value JSON has no type for to reach it, its refusal to take it is
    no yes, and the walk judges.
    ``tests/fleet/apiserver/test_schema_compiled.py`` holds the two to one verdict on every
    served kind's samples and their mutations."""
    return _says_yes(_by_identity(_COMPILED, schema, lambda: _rust(_without_formats(schema))), obj)


def _without_formats(node: Any, *, names: bool = False) -> Any:
    """A copy of schema ``node`` without ``format`` keywords (``names``: ``node`` maps names to
    schemas, as ``properties`` and ``$defs`` do, so a field called ``format`` stays)."""
    if isinstance(node, list):
        return [_without_formats(item) for item in node]
    if not isinstance(node, dict):
        return node
    if names:
        return {key: _without_formats(value) for key, value in node.items()}
    return {
        key: _without_formats(value, names=key in ("properties", "$defs"))
        for key, value in node.items()
        if key != "format"
    }


def _inlined(node: Any, defs: Mapping[str, Any], within: frozenset[str]) -> Any:
    """``node`` with every ``$ref`` that is not recursive replaced by what it refers to (the
    validator follows a reference at a cost on every object it checks; a pod template has a
    hundred of them). A reference with other keywords beside it keeps them, under ``allOf``."""
    if isinstance(node, list):
        return [_inlined(item, defs, within) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[len("#/$defs/") :] not in within:
        name = ref[len("#/$defs/") :]
        target = _inlined(defs[name], defs, within | {name})
        rest = {k: _inlined(v, defs, within) for k, v in node.items() if k != "$ref"}
        if set(rest) <= {"description"}:
            return {**target, **rest}
        return {**rest, "allOf": [*rest.get("allOf", []), target]}
    return {k: (v if k == "$defs" else _inlined(v, defs, within)) for k, v in node.items()}


def _path(error: ValidationError) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number" if isinstance(value, float) else "integer"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "null"


def _cause(error: ValidationError) -> Cause:
    field = _path(error)
    value = (
        json.dumps(error.instance)
        if not isinstance(error.instance, dict | list)
        else _json_type(error.instance)
    )
    if isinstance(error.schema, Mapping) and error.schema.get("format") in _SECRET_FORMATS:
        value = '"<redacted>"'  # a Secret's value, even a wrong one, is never echoed
    keyword = error.validator
    rule: Any = error.validator_value
    if keyword == "required":
        missing = str(error.message).split("'")[1] if "'" in str(error.message) else ""
        child = f"{field}.{missing}" if field else missing
        return Cause(child, "Required value", "FieldValueRequired")
    if keyword == "enum":
        supported = ", ".join(json.dumps(v) for v in rule)
        return Cause(
            field, f"Unsupported value: {value}: supported values: {supported}", "FieldValueNotSupported"
        )
    if keyword in ("type", "anyOf"):
        wanted = rule
        if keyword == "anyOf":
            wanted = " or ".join(str(s.get("type")) for s in rule if isinstance(s, Mapping))
        kind = _json_type(error.instance)
        return Cause(field, f'Invalid value: "{kind}": {field} in body must be of type {wanted}: {value}')
    if keyword == "pattern":
        return Cause(field, f"Invalid value: {value}: {field} in body should match '{rule}'")
    if keyword == "minimum":
        least = rule
        return Cause(
            field, f"Invalid value: {value}: {field} in body should be greater than or equal to {least}"
        )
    return Cause(field, f"Invalid value: {value}: {error.message}")


def schema_causes(schema: Mapping[str, Any], obj: Mapping[str, Any]) -> list[Cause]:
    """Where ``obj`` breaks ``schema``, as field causes (empty when it conforms).

    An object the compiled check passes conforms (:func:`_conforms`); only one it refuses is
    walked by ``jsonschema``, which finds every cause and words each as kube-apiserver does."""
    if _conforms(schema, obj):
        return []
    validator = _validator(schema)
    errors = sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path])
    return [_cause(error) for error in errors]


def _component(prefix: str, def_name: str) -> str:
    """The component name of a definition: Kubernetes' own types keep theirs (shared by every
    kind that embeds them), a kind's own are named after the kind."""
    return def_name if def_name.startswith(kubetypes.PREFIX) else f"{prefix}.{def_name}"


def _rewrite(node: Any, prefix: str, target: str) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$defs":
                continue
            if key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/"):
                out[key] = f"{target}{_component(prefix, value[len('#/$defs/') :])}"
            else:
                out[key] = _rewrite(value, prefix, target)
        return out
    if isinstance(node, list):
        return [_rewrite(v, prefix, target) for v in node]
    return node


@functools.cache
def _object_meta_defs() -> dict[str, Any]:
    """``ObjectMeta`` and the types it reaches, as definitions."""
    inline, defs = kubetypes.definitions(_OBJECT_META_MODEL)
    return {OBJECT_META: inline, **defs}


def openapi(
    name: str, schema: Mapping[str, Any], extra: Mapping[str, Any], *, v2: bool = False
) -> dict[str, Obj]:
    """The OpenAPI definitions of a kind: ``name`` (the whole object, with ``extra`` keys such
    as its group-version-kind tag) and one per ``$defs`` entry, named ``<name>.<Def>`` (Kubernetes'
    own types by their ``io.k8s.*`` names); refs point at ``#/components/schemas/`` (v3) or
    ``#/definitions/`` (v2)."""
    target = "#/definitions/" if v2 else "#/components/schemas/"
    root: Obj = _rewrite(dict(schema), name, target)
    root["type"] = "object"
    root["properties"] = {**_rewrite(OBJECT_FIELDS, name, target), **root.get("properties", {})}
    root.update(extra)
    out = {name: root}
    for def_name, definition in {**_object_meta_defs(), **(schema.get("$defs") or {})}.items():
        out[_component(name, def_name)] = _rewrite(definition, name, target)
    return out


# --- pruning ------------------------------------------------------------------------------------


class _Node:
    """A schema node as pruning sees it (``Structural`` in apiextensions): the declared
    properties, the schema of other keys, the items' schema, whether unknown fields are kept,
    and whether ``null`` is a value."""

    __slots__ = ("additional", "items", "kind", "nullable", "preserve", "properties")

    def __init__(self) -> None:
        self.properties: dict[str, _Node] = {}
        self.additional: _Node | None = None
        self.items: _Node | None = None
        self.preserve = False
        self.nullable = False
        #: The declared ``type`` (``None``: not said, as for an int-or-string).
        self.kind: str | None = None


#: Compiled schemas by identity, each with its schema (as :data:`_VALIDATORS`).
_STRUCTURES: dict[int, tuple[Mapping[str, Any], _Node]] = {}


def _target(ref: Any, defs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        found = defs.get(ref[len("#/$defs/") :])
        return found if isinstance(found, Mapping) else None
    return None


def _resolved(node: Mapping[str, Any], defs: Mapping[str, Any]) -> dict[str, Any]:
    """``node`` with what its ``$ref`` and ``allOf`` parts say merged in (its own keys win)."""
    merged: dict[str, Any] = {}
    target = _target(node.get("$ref"), defs)
    if target is not None:
        merged.update(_resolved(target, defs))
    for part in node.get("allOf") or []:
        if isinstance(part, Mapping):
            merged.update(_resolved(part, defs))
    merged.update({k: v for k, v in node.items() if k not in ("$ref", "allOf")})
    return merged


def _compile(node: Mapping[str, Any], defs: Mapping[str, Any], memo: dict[int, _Node]) -> _Node:
    """``node``, its ``$ref`` followed, compiled; a definition compiles once, however often it
    is referred to (so recursive ones end)."""
    target = _target(node.get("$ref"), defs)
    if target is not None and set(node) <= {"$ref", "description"}:
        return _compile(target, defs, memo)
    known = memo.get(id(node))
    if known is not None:
        return known
    out = _Node()
    memo[id(node)] = out
    merged = _resolved(node, defs)
    out.preserve = merged.get("x-kubernetes-preserve-unknown-fields") is True
    out.nullable = merged.get("nullable") is True
    declared = merged.get("type")
    out.kind = declared if isinstance(declared, str) else None
    for key, child in (merged.get("properties") or {}).items():
        out.properties[key] = _compile(child, defs, memo)
    additional = merged.get("additionalProperties")
    if isinstance(additional, Mapping):
        out.additional = _compile(additional, defs, memo)
    elif additional is True:
        out.preserve = True
    items = merged.get("items")
    if isinstance(items, Mapping):
        out.items = _compile(items, defs, memo)
    return out


def _structure(schema: Mapping[str, Any]) -> _Node:
    """The compiled root of a kind's schema (its own fields; ``metadata`` is apart)."""
    return _by_identity(_STRUCTURES, schema, lambda: _compile(schema, schema.get("$defs") or {}, {}))


@functools.cache
def _object_meta() -> _Node:
    return _compile({"$ref": f"#/$defs/{OBJECT_META}"}, _object_meta_defs(), {})


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _prune(value: Any, node: _Node | None, path: str, out: list[str], sort_keys: bool) -> None:
    """``prune`` and ``skipPrune`` of apiextensions, recording what is dropped, then the nulls
    the schema does not allow dropped (unrecorded). A value of another type than the schema
    declares is left whole for the type check to refuse (as a built-in kind's decoder refuses
    it), never pruned into something that might pass."""
    if (
        node is not None
        and node.kind is not None
        and (
            (isinstance(value, dict) and node.kind != "object")
            or (isinstance(value, list) and node.kind != "array")
        )
    ):
        return
    if isinstance(value, dict):
        keys = sorted(value) if sort_keys else list(value)
        for key in keys:
            child = value[key]
            declared = node.properties.get(key) if node is not None else None
            if declared is None and node is not None:
                declared = node.additional
            if declared is None:
                if node is None or not node.preserve:
                    out.append(_join(path, key))
                    del value[key]
                continue
            if child is None and not declared.nullable:
                del value[key]
                continue
            _prune(child, declared, _join(path, key), out, sort_keys)
    elif isinstance(value, list):
        items = node.items if node is not None else None
        if node is not None and node.preserve and items is None:
            return
        for index, item in enumerate(value):
            _prune(item, items, f"{path}[{index}]", out, sort_keys)


def _strict(root: _Node, meta: _Node) -> dict[str, Any]:
    """A JSON Schema an object meets exactly when :func:`prune` would find nothing to drop in
    it: every node's keys declared (or kept by ``x-kubernetes-preserve-unknown-fields``), no
    ``null`` where the node is not ``nullable``, with the same skips :func:`_prune` makes (a
    value of another type than declared is left whole, and so are ``apiVersion`` and ``kind``).
    Written from the same :class:`_Node` graph, so the two read one structure."""
    names: dict[int, str] = {}
    defs: dict[str, Any] = {}

    def ref(node: _Node | None) -> dict[str, Any]:
        key = id(node) if node is not None else 0
        name = names.get(key)
        if name is None:
            name = names[key] = f"n{len(names)}"
            defs[name] = body(node)
        return {"$ref": f"#/$defs/{name}"}

    def member(node: _Node) -> dict[str, Any]:
        return ref(node) if node.nullable else {"allOf": [ref(node)], "not": {"type": "null"}}

    def body(node: _Node | None) -> dict[str, Any]:
        if node is None:  # nothing declared: every key of an object is dropped
            return {"maxProperties": 0, "items": ref(None)}
        out: dict[str, Any] = {}
        if node.kind in (None, "object"):
            out["properties"] = {key: member(child) for key, child in node.properties.items()}
            out["additionalProperties"] = (
                member(node.additional) if node.additional is not None else node.preserve
            )
        if node.kind in (None, "array") and not (node.preserve and node.items is None):
            out["items"] = ref(node.items)
        return out

    top: dict[str, Any] = {key: member(child) for key, child in root.properties.items()}
    top.update(
        {"apiVersion": True, "kind": True, "metadata": {"anyOf": [{"not": {"type": "object"}}, ref(meta)]}}
    )
    return {"type": "object", "properties": top, "additionalProperties": root.preserve, "$defs": defs}


_STRICT: dict[int, tuple[Mapping[str, Any], _Rust | None]] = {}


def _untouched(obj: Mapping[str, Any], schema: Mapping[str, Any]) -> bool:
    """Whether :func:`prune` would leave ``obj`` as it is, by a compiled check of :func:`_strict`
    (3 us for the sample AscendJob, where the walk took about 50 us under load; issue 30). Only
    its yes is trusted; on a no the walk runs and finds what to drop."""
    check = _by_identity(_STRICT, schema, lambda: _rust(_strict(_structure(schema), _object_meta())))
    return _says_yes(check, obj)


def prune(
    obj: dict[str, Any], schema: Mapping[str, Any], *, sort_keys: bool = True
) -> tuple[list[str], list[str]]:
    """Drop from ``obj``, in place, every field ``schema`` (a kind's schema) does not declare.

    Returns the paths dropped from ``metadata`` (pruned as ``ObjectMeta``) and those dropped from
    the rest, each in the order met, object keys taken in sorted order unless ``sort_keys`` is
    false (then in the object's own order). ``apiVersion`` and ``kind`` are never dropped."""
    if _untouched(obj, schema):
        return [], []
    return _walk(obj, schema, sort_keys=sort_keys)


def _walk(obj: dict[str, Any], schema: Mapping[str, Any], *, sort_keys: bool) -> tuple[list[str], list[str]]:
    """:func:`prune`'s walk, which finds and drops what the schema does not declare."""
    meta: list[str] = []
    rest: list[str] = []
    root = _structure(schema)
    keys = sorted(obj) if sort_keys else list(obj)
    for key in keys:
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata":
            if isinstance(obj[key], dict):
                _prune(obj[key], _object_meta(), "metadata", meta, sort_keys)
            continue
        declared = root.properties.get(key)
        if declared is None:
            if not root.preserve:
                rest.append(key)
                del obj[key]
            continue
        if obj[key] is None and not declared.nullable:
            del obj[key]
            continue
        _prune(obj[key], declared, key, rest, sort_keys)
    return meta, rest


def undeclared(config: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """What server-side apply's typed conversion refuses in an applied configuration: a field
    the schema does not declare, as structured-merge-diff words it (``typed/validate.go``:
    ``.spec.foo: field not declared in schema``), the first one of each object only (it stops
    reading an object at its first unknown field), in the order of the configuration."""
    copied = json.loads(json.dumps(config))
    meta, rest = prune(copied, schema, sort_keys=False)
    found: dict[str, str] = {}
    for path in [*meta, *rest]:
        parent = path.rsplit(".", 1)[0] if "." in path else ""
        found.setdefault(parent, path)
    return [f".{path}: field not declared in schema" for path in found.values()]
