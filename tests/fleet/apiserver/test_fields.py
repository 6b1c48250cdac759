"""Pruning by schema and the findings of strict decoding, as the Kubernetes API server has them.

The expectations are those of kube-apiserver's own tests: apiextensions' pruning
(``pruning/algorithm_test.go``: what a structural schema keeps, below
``x-kubernetes-preserve-unknown-fields`` too) and the field validation integration test (the
order and wording of the findings of a custom resource and of a built-in kind).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from fleet.apiserver import NAMESPACE, fields
from fleet.apiserver.errors import BadRequest, Invalid
from fleet.apiserver.resources import ResourceType
from fleet.apiserver.schema import prune, undeclared

#: The schema of the integration test's custom resource (knownField1, ports, embedded parts),
#: with a preserve-unknown part and a recursive definition.
SCHEMA: dict[str, Any] = {
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "knownField1": {"type": "string"},
                "ports": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"containerPort": {"type": "integer"}, "name": {"type": "string"}},
                    },
                },
                "open": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {"typed": {"type": "object", "properties": {"a": {"type": "string"}}}},
                },
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "tree": {"$ref": "#/$defs/Node"},
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
CUSTOM = ResourceType("example.com", "v1", "Widget", "widgets", "widget", True, schema=SCHEMA)
#: The same schema as a built-in kind (one that takes strategic merge patches).
BUILTIN = replace(CUSTOM, group="", kind="Gadget", strategic={})


def test_pruning_drops_what_the_schema_does_not_declare_at_every_depth() -> None:
    obj: dict[str, Any] = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "labels": {"a": "b"}, "unknownMeta": 1},
        "spec": {
            "knownField1": "x",
            "unknown1": 1,
            "ports": [{"containerPort": 1, "unknownNested": 2}],
            "open": {"anything": {"goes": 1}, "typed": {"a": "y", "b": 3}},
            "labels": {"free": "form"},
            "tree": {"name": "r", "children": [{"name": "c", "children": [{"nam": "typo"}]}]},
        },
        "status": {"x": 1},
    }
    meta, rest = prune(obj, SCHEMA)
    assert meta == ["metadata.unknownMeta"]
    assert rest == [
        "spec.open.typed.b",
        "spec.ports[0].unknownNested",
        "spec.tree.children[0].children[0].nam",
        "spec.unknown1",
        "status",
    ]
    assert obj == {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "labels": {"a": "b"}},
        "spec": {
            "knownField1": "x",
            "ports": [{"containerPort": 1}],
            "open": {"anything": {"goes": 1}, "typed": {"a": "y"}},
            "labels": {"free": "form"},
            "tree": {"name": "r", "children": [{"name": "c", "children": [{}]}]},
        },
    }


def test_a_null_the_schema_does_not_allow_is_dropped_unreported() -> None:
    obj: dict[str, Any] = {
        "metadata": {"name": "w", "creationTimestamp": None},
        "spec": {"knownField1": None},
    }
    assert prune(obj, SCHEMA) == ([], [])
    assert obj == {"metadata": {"name": "w"}, "spec": {}}


def test_a_value_of_the_wrong_type_is_left_for_the_type_check() -> None:
    obj: dict[str, Any] = {"spec": {"knownField1": {"not": "a string"}, "labels": ["a"]}}
    assert prune(obj, SCHEMA) == ([], [])
    assert obj == {"spec": {"knownField1": {"not": "a string"}, "labels": ["a"]}}


def test_a_custom_resource_reports_repeated_keys_then_metadata_then_the_rest_sorted() -> None:
    """``crd-post-strict-validation`` of the integration test, in Fleet's kinds."""
    raw = (
        b'{"apiVersion": "example.com/v1", "kind": "Widget", '
        b'"metadata": {"name": "dupename", "name": "w", "unknownMeta": "metaVal"}, '
        b'"spec": {"unknown1": "val1", "unknownDupe": "valDupe", "unknownDupe": "valDupe2", '
        b'"knownField1": "val1", "knownField1": "val2", '
        b'"ports": [{"name": "portName", "containerPort": 8080, "unknownNested": "val"}]}}'
    )
    obj = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "unknownMeta": "metaVal"},
        "spec": {
            "unknown1": "val1",
            "unknownDupe": "valDupe2",
            "knownField1": "val2",
            "ports": [{"name": "portName", "containerPort": 8080, "unknownNested": "val"}],
        },
    }
    found = fields.object_findings(CUSTOM, obj, fields.json_duplicates(raw), body_order=True, yaml_lines=[])
    assert found == [
        'duplicate field "metadata.name"',
        'duplicate field "spec.unknownDupe"',
        'duplicate field "spec.knownField1"',
        'unknown field "metadata.unknownMeta"',
        'unknown field "spec.ports[0].unknownNested"',
        'unknown field "spec.unknown1"',
        'unknown field "spec.unknownDupe"',
    ]
    with pytest.raises(BadRequest) as refused:
        fields.settle(CUSTOM, found, fields.STRICT)
    assert refused.value.message == (
        'Widget in version "v1" cannot be handled as a Widget: strict decoding error: ' + ", ".join(found)
    )
    assert refused.value.to_status().get("details") is None
    assert fields.settle(CUSTOM, found, fields.WARN) == found
    assert fields.settle(CUSTOM, found, fields.IGNORE) == []


def test_a_builtin_kind_reports_in_the_order_of_its_json_body() -> None:
    """``post-strict-validation`` of the integration test: a typed decoder meets the findings as
    it reads the body, repeated and unknown fields interleaved, and reports a field both unknown
    and repeated as unknown only."""
    raw = (
        b'{"metadata": {"name": "dupename", "name": "g", "unknownMeta": "metaVal"}, '
        b'"spec": {"unknown1": "val1", "unknownDupe": "valDupe", "unknownDupe": "valDupe2", '
        b'"knownField1": "a", "knownField1": "b", "ports": [{"unknownNested": "val1"}]}}'
    )
    obj = {
        "metadata": {"name": "g", "unknownMeta": "metaVal"},
        "spec": {
            "unknown1": "val1",
            "unknownDupe": "valDupe2",
            "knownField1": "b",
            "ports": [{"unknownNested": "val1"}],
        },
    }
    found = fields.object_findings(BUILTIN, obj, fields.json_duplicates(raw), body_order=True, yaml_lines=[])
    assert found == [
        'duplicate field "metadata.name"',
        'unknown field "metadata.unknownMeta"',
        'unknown field "spec.unknown1"',
        'unknown field "spec.unknownDupe"',  # both unknown and repeated: unknown only
        'duplicate field "spec.knownField1"',
        'unknown field "spec.ports[0].unknownNested"',
    ]


def test_a_yaml_bodys_repeated_keys_are_go_yamls_lines_in_one_error() -> None:
    raw = b"""\
metadata:
  name: a
  name: b
spec:
  ports:
  - name: x
    name: y
"""
    assert fields.yaml_duplicates(raw) == [
        'line 3: key "name" already set in map',
        'line 7: key "name" already set in map',
    ]
    found = fields.object_findings(
        CUSTOM,
        {"metadata": {"name": "b"}, "zz": 1},
        [],
        body_order=False,
        yaml_lines=fields.yaml_duplicates(raw),
    )
    assert found == [
        "yaml: unmarshal errors:\n"
        '  line 3: key "name" already set in map\n'
        '  line 7: key "name" already set in map',
        'unknown field "zz"',
    ]
    assert fields.warnings(found) == [
        'line 3: key "name" already set in map',
        'line 7: key "name" already set in map',
        'unknown field "zz"',
    ]


def test_a_json_patch_is_read_strictly_op_by_op() -> None:
    raw = (
        b'[{"op": "add", "path": "/a", "value": 1, "foo": "bar"},'
        b' {"op": "add", "path": "/b", "path": "/c", "value": 2}]'
    )
    assert fields.json_patch_findings(raw) == [
        'json patch unknown field "[0].foo"',
        'json patch duplicate field "[1].path"',
    ]


def test_a_patch_refusal_is_invalid_with_one_cause_named_patch() -> None:
    error = fields.refuse_patch('{"a":"b"}', ['unknown field "spec.x"'])
    assert isinstance(error, Invalid)
    status = error.to_status()
    detail = 'Invalid value: "{\\"a\\":\\"b\\"}": strict decoding error: unknown field "spec.x"'
    assert status["message"] == f' "" is invalid: patch: {detail}'
    assert status["details"] == {
        "causes": [{"reason": "FieldValueInvalid", "message": detail, "field": "patch"}]
    }


@pytest.mark.parametrize(
    ("value", "printed"),
    [
        ({"spec": {"b": [1, "x", True, None], "a": 2.0}}, "map[spec:map[a:2 b:[1 x true <nil>]]]"),
        (1.5, "1.5"),
        (123456789.0, "1.23456789e+08"),
        (1e-07, "1e-07"),
        (100000.0, "100000"),
    ],
)
def test_a_strategic_patch_is_shown_as_go_prints_a_map(value: Any, printed: str) -> None:
    assert fields.go_value(value) == printed


def test_server_side_apply_names_the_first_unknown_field_of_each_object() -> None:
    config = {
        "metadata": {"name": "w", "unknownMeta": 1},
        "spec": {"zz": 1, "knownField1": "x", "aa": 2, "ports": [{"bad": 1}]},
    }
    assert undeclared(config, SCHEMA) == [
        ".metadata.unknownMeta: field not declared in schema",
        ".spec.zz: field not declared in schema",
        ".spec.ports[0].bad: field not declared in schema",
    ]
    with pytest.raises(BadRequest) as refused:
        fields.check_applied(CUSTOM, config, "default", "w")
    assert refused.value.message == (
        "failed to create typed patch object (default/w; example.com/v1, Kind=Widget): errors:\n"
        "  .metadata.unknownMeta: field not declared in schema\n"
        "  .spec.zz: field not declared in schema\n"
        "  .spec.ports[0].bad: field not declared in schema"
    )
    assert config["spec"]["zz"] == 1  # the configuration itself is not changed


def test_server_side_apply_repeated_keys_by_directive() -> None:
    raw = b'{"spec": {"a": 1, "a": 2}}'
    with pytest.raises(BadRequest) as refused:
        fields.applied_duplicates(raw, fields.STRICT)
    assert refused.value.message == (
        "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n"
        '  line 1: key "a" already set in map'
    )
    assert fields.applied_duplicates(raw, fields.WARN) == ['line 1: key "a" already set in map']
    assert fields.applied_duplicates(raw, fields.IGNORE) == []


def test_a_kind_without_a_schema_knows_its_top_level_fields_only() -> None:
    obj = {"metadata": {"name": "n", "anything": 1}, "spec": {"deep": {"unknown": 1}}, "extra": 1}
    assert fields.object_findings(NAMESPACE, obj, [], body_order=True, yaml_lines=[]) == [
        'unknown field "extra"'
    ]
    assert obj == {"metadata": {"name": "n", "anything": 1}, "spec": {"deep": {"unknown": 1}}}


def test_the_directive_defaults_to_warn_and_names_the_supported_values() -> None:
    assert fields.directive(None) == fields.directive("") == "Warn"
    with pytest.raises(BadRequest) as refused:
        fields.directive("warn")
    assert (
        refused.value.message
        == 'fieldValidation: Unsupported value: "warn": supported values: "Ignore", "Strict", "Warn"'
    )


def test_a_warning_header_escapes_its_text() -> None:
    assert fields.warning_header('unknown field "spec.a\\b"') == '299 - "unknown field \\"spec.a\\\\b\\""'


def test_a_key_repeated_only_deep_in_a_list_is_found_and_a_body_without_one_has_none() -> None:
    """The decode flags a repeated key wherever it is (here only in a list's second object),
    and a body that repeats none is not walked for paths at all."""
    deep = b'{"spec": {"containers": [{"name": "a"}, {"name": "b", "image": "x", "name": "c"}]}}'
    assert fields.json_duplicates(deep) == ["spec.containers[1].name"]
    assert fields.json_duplicates(b'{"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}') == []
    assert fields.json_duplicates(b"not json") == []
