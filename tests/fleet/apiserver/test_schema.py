"""A kind's schema as causes (worded as kube-apiserver words a CRD schema's failures) and as
OpenAPI definitions (its ``$defs`` named after the kind, refs rewritten)."""

from __future__ import annotations

from typing import Any

from fleet.apiserver.schema import openapi, schema_causes

SCHEMA: dict[str, Any] = {
    "properties": {
        "spec": {
            "type": "object",
            "required": ["root"],
            "properties": {
                "root": {"$ref": "#/$defs/Node"},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "count": {"type": "integer", "minimum": 0},
            },
        }
    },
    "$defs": {
        "Node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            },
        }
    },
}


def test_causes_name_the_field_and_the_rule() -> None:
    [cause] = schema_causes(SCHEMA, {"spec": {"root": {"children": [{"name": 3}]}}})
    assert cause.field == "spec.root.children[0].name"
    assert (
        cause.message
        == 'Invalid value: "integer": spec.root.children[0].name in body must be of type string: 3'
    )
    [missing] = schema_causes(SCHEMA, {"spec": {}})
    assert (missing.field, missing.message, missing.reason) == (
        "spec.root",
        "Required value",
        "FieldValueRequired",
    )
    [mode] = schema_causes(SCHEMA, {"spec": {"root": {}, "mode": "c"}})
    assert mode.reason == "FieldValueNotSupported"
    assert mode.message == 'Unsupported value: "c": supported values: "a", "b"'
    [count] = schema_causes(SCHEMA, {"spec": {"root": {}, "count": -1}})
    assert count.message == "Invalid value: -1: spec.count in body should be greater than or equal to 0"
    assert schema_causes(SCHEMA, {"spec": {"root": {"name": "x", "unknown": 1}}}) == []


def test_openapi_names_the_definitions_after_the_kind() -> None:
    gvk = {"x-kubernetes-group-version-kind": [{"group": "g", "version": "v1", "kind": "Tree"}]}
    out = openapi("g.v1.Tree", SCHEMA, gvk)
    own = sorted(name for name in out if not name.startswith("io.k8s."))
    assert own == ["g.v1.Tree", "g.v1.Tree.Node"]
    # metadata is Kubernetes' ObjectMeta, under its own name (shared by every kind).
    assert out["g.v1.Tree"]["properties"]["metadata"]["allOf"] == [
        {"$ref": "#/components/schemas/io.k8s.v1.ObjectMeta"}
    ]
    assert "labels" in out["io.k8s.v1.ObjectMeta"]["properties"]
    root = out["g.v1.Tree"]
    assert root["properties"]["spec"]["properties"]["root"] == {"$ref": "#/components/schemas/g.v1.Tree.Node"}
    assert {"apiVersion", "kind", "metadata", "spec"} <= set(root["properties"])
    assert (
        "$defs" not in root
        and root["x-kubernetes-group-version-kind"] == gvk["x-kubernetes-group-version-kind"]
    )
    items = out["g.v1.Tree.Node"]["properties"]["children"]["items"]
    assert items == {"$ref": "#/components/schemas/g.v1.Tree.Node"}
    v2 = openapi("g.v1.Tree", SCHEMA, gvk, v2=True)
    assert v2["g.v1.Tree.Node"]["properties"]["children"]["items"] == {"$ref": "#/definitions/g.v1.Tree.Node"}


def test_a_byte_or_password_value_is_never_quoted() -> None:
    """A Secret's ``data`` is ``format: byte``: a wrong value is named by its type, never shown."""
    secret = {
        "properties": {
            "data": {"type": "object", "additionalProperties": {"type": "string", "format": "byte"}}
        }
    }
    [cause] = schema_causes(secret, {"data": {"token": 12345}})
    assert cause.field == "data.token"
    assert "12345" not in cause.message
    assert cause.message.startswith('Invalid value: "integer": data.token in body must be of type string')
