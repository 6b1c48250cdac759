"""Kubernetes' own types as schema parts, read from the official ``kubernetes`` client's models.

A kind's schema (:mod:`~fleet.apiserver.schema`) that embeds a Kubernetes type (a job's pod
template, a Service's spec, an object's metadata) names the type instead of restating it:
:func:`definitions` turns a client model (``V1PodTemplateSpec``) and every model it reaches into
structural-schema definitions, so the type's fields, their types and (where the client carries
them) their descriptions come from Kubernetes' own OpenAPI, never written twice. The fields are
the client's ``attribute_map`` and their types its ``openapi_types``, as
:mod:`~fleet.apiserver.pods` reads them (:func:`~fleet.apiserver.pods.client_fields`); the client
types quantities as plain strings and ``IntOrString`` as ``object``, which
:data:`~fleet.apiserver.pods.QUANTITY_FIELDS` and :data:`INT_OR_STRING_FIELDS` correct
(``x-kubernetes-int-or-string``, a quantity with the pattern ``controller-gen`` gives
``resource.Quantity``, as a CRD generated from the Go types declares them); any other
``object`` (``managedFields[].fieldsV1``) is free-form.

No ``required`` list is carried over: what a pod must have is checked, with Kubernetes' wording,
by :mod:`~fleet.apiserver.pods`.

Definitions are named ``io.k8s.<version>.<Kind>`` (``io.k8s.v1.PodSpec``,
``io.k8s.core.v1.Event``), so that ``kubectl explain`` shows ``<PodSpec>`` as it does on a
cluster, and one name means one type wherever several kinds embed it.
"""

from __future__ import annotations

import copy
import functools
import re
from typing import Any, Final

from kubernetes.client import models

from fleet.apiserver.pods import client_fields

__all__ = ["INT_OR_STRING_FIELDS", "PREFIX", "definition_name", "definitions", "is_model"]

#: The prefix of the definitions this module makes.
PREFIX: Final = "io.k8s."
#: Fields the client types as ``object`` that hold an ``IntOrString`` (a port by number or name).
INT_OR_STRING_FIELDS: Final = frozenset(
    {
        ("V1HTTPGetAction", "port"),
        ("V1TCPSocketAction", "port"),
        ("V1ServicePort", "targetPort"),
    }
)
_SCALARS: Final = {
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "str": {"type": "string"},
    "bool": {"type": "boolean"},
    "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
}
_NUMBER: Final = r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
#: The pattern ``controller-gen`` writes for a ``resource.Quantity``.
_QUANTITY_PATTERN: Final = rf"^(\+|-)?{_NUMBER}(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?{_NUMBER}))?$"
_INT_OR_STRING: Final = {
    "x-kubernetes-int-or-string": True,
    "anyOf": [{"type": "integer"}, {"type": "string"}],
}
_LIST = re.compile(r"^List\[(.+)\]$")
_DICT = re.compile(r"^Dict\[str, (.+)\]$")
_MODEL = re.compile(r"^(?P<group>[A-Z][a-z]+)?(?P<version>V\d+(?:(?:alpha|beta)\d+)?)(?P<kind>[A-Z].*)$")


def is_model(name: str) -> bool:
    """Whether ``name`` is a model of the installed ``kubernetes`` client (``V1PodSpec``)."""
    return _MODEL.match(name) is not None and isinstance(getattr(models, name, None), type)


def definition_name(model: str) -> str:
    """``V1PodSpec`` -> ``io.k8s.v1.PodSpec``; ``CoreV1Event`` -> ``io.k8s.core.v1.Event``."""
    match = _MODEL.match(model)
    if match is None:
        raise ValueError(f"{model} is not a Kubernetes client model name")
    group = f"{match['group'].lower()}." if match["group"] else ""
    return f"{PREFIX}{group}{match['version'].lower()}.{match['kind']}"


def _description(model: str) -> str:
    """The model's first docstring paragraph: the type's own description in Kubernetes' OpenAPI."""
    text = (getattr(models, model).__doc__ or "").strip()
    first = text.split("\n\n", 1)[0].strip()
    if "auto generated" in first or first.startswith(("NOTE", "Attributes")):
        return ""
    return " ".join(first.split())


def _field_descriptions(model: str) -> dict[str, str]:
    """The client's field descriptions by JSON name (newer clients carry them; older ones do not)."""
    cls = getattr(models, model)
    fields = getattr(cls, "model_fields", None) or {}
    names: dict[str, str] = cls.attribute_map
    out: dict[str, str] = {}
    for attr, info in fields.items():
        text = getattr(info, "description", None)
        if isinstance(text, str) and text and attr in names:
            out[names[attr]] = text
    return out


def _type(declared: str, refs: set[str]) -> dict[str, Any]:
    """The schema of a declared client type; the models it names are added to ``refs``."""
    if declared in _SCALARS:
        return dict(_SCALARS[declared])
    if declared == "quantity":
        return {**_INT_OR_STRING, "pattern": _QUANTITY_PATTERN}
    if declared == "object":
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if match := _LIST.match(declared):
        return {"type": "array", "items": _type(match.group(1), refs)}
    if match := _DICT.match(declared):
        return {"type": "object", "additionalProperties": _type(match.group(1), refs)}
    refs.add(declared)
    return {"$ref": f"#/$defs/{definition_name(declared)}"}


@functools.cache
def _model_schema(model: str) -> tuple[dict[str, Any], frozenset[str]]:
    """One model as an object schema, and the models its fields name."""
    refs: set[str] = set()
    described = _field_descriptions(model)
    properties: dict[str, Any] = {}
    for name, declared in client_fields(model).items():
        # client_fields types the fields of QUANTITY_FIELDS as "quantity" already.
        if (model, name) in INT_OR_STRING_FIELDS:
            field: dict[str, Any] = dict(_INT_OR_STRING)
        else:
            field = _type(declared, refs)
        if name in described:
            field["description"] = described[name]
        properties[name] = field
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if text := _description(model):
        schema["description"] = text
    return schema, frozenset(refs)


def definitions(model: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``model`` as an inline object schema, and the definitions of every model it reaches, by
    :func:`definition_name` (for a schema's ``$defs``). Nothing returned is shared: callers may
    change it."""
    inline, refs = _model_schema(model)
    defs: dict[str, Any] = {}
    pending = set(refs)
    while pending:
        name = pending.pop()
        key = definition_name(name)
        if key in defs:
            continue
        schema, more = _model_schema(name)
        defs[key] = schema
        pending |= {m for m in more if definition_name(m) not in defs}
    return copy.deepcopy(inline), copy.deepcopy(defs)
