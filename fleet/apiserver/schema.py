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

Unknown fields are not refused by the schema (no ``additionalProperties: false``): that stays the
kind's own rule (strict decoding of top-level fields, a model's ``extra="forbid"``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any, Final

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from fleet.apiserver.errors import Cause
from fleet.apiserver.resources import Obj

__all__ = ["OBJECT_FIELDS", "openapi", "schema_causes"]

_API_VERSION: Final = (
    "APIVersion defines the versioned schema of this representation of an object. Servers should "
    "convert recognized schemas to the latest internal value, and may reject unrecognized values."
)
_KIND: Final = "Kind is a string value representing the REST resource this object represents. In CamelCase."
_METADATA: Final = "Standard object's metadata: name, namespace, labels, annotations and the rest."
#: What every object has besides the kind's own fields.
OBJECT_FIELDS: Final[Obj] = {
    "apiVersion": {"type": "string", "description": _API_VERSION},
    "kind": {"type": "string", "description": _KIND},
    "metadata": {"type": "object", "description": _METADATA, "x-kubernetes-preserve-unknown-fields": True},
}


#: Formats of values no message quotes (a Secret's ``data`` and ``stringData``).
_SECRET_FORMATS: Final = frozenset({"byte", "password"})


@functools.lru_cache(maxsize=64)
def _validator(text: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(text))


def _key(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, sort_keys=True)


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
    if keyword == "minimum":
        least = rule
        return Cause(
            field, f"Invalid value: {value}: {field} in body should be greater than or equal to {least}"
        )
    return Cause(field, f"Invalid value: {value}: {error.message}")


def schema_causes(schema: Mapping[str, Any], obj: Mapping[str, Any]) -> list[Cause]:
    """Where ``obj`` breaks ``schema``, as field causes (empty when it conforms)."""
    validator = _validator(_key(schema))
    errors = sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path])
    return [_cause(error) for error in errors]


def _rewrite(node: Any, prefix: str, target: str) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$defs":
                continue
            if key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/"):
                out[key] = f"{target}{prefix}.{value[len('#/$defs/') :]}"
            else:
                out[key] = _rewrite(value, prefix, target)
        return out
    if isinstance(node, list):
        return [_rewrite(v, prefix, target) for v in node]
    return node


def openapi(
    name: str, schema: Mapping[str, Any], extra: Mapping[str, Any], *, v2: bool = False
) -> dict[str, Obj]:
    """The OpenAPI definitions of a kind: ``name`` (the whole object, with ``extra`` keys such
    as its group-version-kind tag) and one per ``$defs`` entry, named ``<name>.<Def>``; refs point
    at ``#/components/schemas/`` (v3) or ``#/definitions/`` (v2)."""
    target = "#/definitions/" if v2 else "#/components/schemas/"
    root: Obj = _rewrite(dict(schema), name, target)
    root["type"] = "object"
    root["properties"] = {**OBJECT_FIELDS, **root.get("properties", {})}
    root.update(extra)
    out = {name: root}
    for def_name, definition in (schema.get("$defs") or {}).items():
        out[f"{name}.{def_name}"] = _rewrite(definition, name, target)
    return out
