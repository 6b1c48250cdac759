"""The three patch types, as Kubernetes applies them."""

from __future__ import annotations

import re
from typing import Any

import pytest

from fleet.apiserver import NODE, POD, BadRequest, Invalid
from fleet.apiserver.patch import apply_json_patch, apply_merge_patch, apply_strategic_merge_patch

NODE_OBJ: dict[str, Any] = {
    "metadata": {"name": "n", "labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
    "spec": {"taints": [{"key": "k1", "effect": "NoSchedule"}, {"key": "k2", "effect": "NoExecute"}]},
    "status": {
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "False"}],
    },
}


def test_merge_patch_merges_maps_deletes_nulls_and_replaces_lists() -> None:
    out = apply_merge_patch(NODE_OBJ, {"metadata": {"labels": {"a": None, "c": "3"}}, "spec": {"taints": []}})
    assert out["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert out["spec"]["taints"] == []
    assert NODE_OBJ["metadata"]["labels"] == {"a": "1", "b": "2"}  # the target is untouched


def test_json_patch_operations() -> None:
    doc = {"a": {"b": [1, 2]}, "c": "x"}
    out = apply_json_patch(
        doc,
        [
            {"op": "add", "path": "/a/b/-", "value": 3},
            {"op": "replace", "path": "/c", "value": "y"},
            {"op": "copy", "from": "/c", "path": "/d"},
            {"op": "move", "from": "/d", "path": "/e~1f"},
            {"op": "remove", "path": "/a/b/0"},
            {"op": "test", "path": "/a/b", "value": [2, 3]},
        ],
    )
    assert out == {"a": {"b": [2, 3]}, "c": "y", "e/f": "y"}


def test_json_patch_failures_change_nothing_and_name_the_path() -> None:
    doc = {"a": 1}
    with pytest.raises(Invalid, match="test operation failed: /a"):
        apply_json_patch(
            doc, [{"op": "replace", "path": "/a", "value": 2}, {"op": "test", "path": "/a", "value": 3}]
        )
    assert doc == {"a": 1}
    with pytest.raises(Invalid, match="/missing/x: path does not exist"):
        apply_json_patch(doc, [{"op": "add", "path": "/missing/x", "value": 1}])
    with pytest.raises(BadRequest, match="JSON array"):
        apply_json_patch(doc, {"op": "add"})
    with pytest.raises(BadRequest, match="unknown op"):
        apply_json_patch(doc, [{"op": "frobnicate", "path": "/a"}])


def test_json_patch_errors_name_the_operation_never_the_documents_content() -> None:
    doc = {"data": {"password": "hunter2"}, "items": [1, 2]}
    failing = [
        ({"op": "add", "path": "/missing/x", "value": 1}, "0 (add): /missing/x: path does not exist"),
        ({"op": "remove", "path": "/data/user"}, "/data/user: path does not exist"),
        ({"op": "copy", "from": "/nope", "path": "/x"}, "/nope or /x: path does not exist"),
        ({"op": "add", "path": "/items/5", "value": 3}, "cannot add at /items/5"),
        ({"op": "move", "from": "/data", "path": "/data/inner"}, "cannot move at /data/inner"),
        ({"op": "remove", "path": ""}, "cannot remove at "),
    ]
    for operation, message in failing:
        with pytest.raises(Invalid, match=re.escape(message)) as raised:
            apply_json_patch(doc, [operation])
        assert "hunter2" not in str(raised.value)
    with pytest.raises(BadRequest, match="'path' must be a JSON pointer"):
        apply_json_patch(doc, [{"op": "add", "path": "data", "value": 1}])
    with pytest.raises(BadRequest, match="does not contain a 'value'"):
        apply_json_patch(doc, [{"op": "add", "path": "/x"}])
    assert doc == {"data": {"password": "hunter2"}, "items": [1, 2]}


def test_strategic_merges_conditions_by_type_and_replaces_taints() -> None:
    assert NODE.strategic is not None
    out = apply_strategic_merge_patch(
        NODE_OBJ,
        {
            "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletDown"}]},
            "spec": {"taints": [{"key": "k2", "effect": "NoExecute"}]},
        },
        NODE.strategic,
    )
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "False", "reason": "KubeletDown"},
        {"type": "DiskPressure", "status": "False"},
    ]
    # Node taints have no patch strategy in Kubernetes: kubectl taint sends the whole new list.
    assert out["spec"]["taints"] == [{"key": "k2", "effect": "NoExecute"}]


def test_strategic_directives() -> None:
    assert NODE.strategic is not None
    out = apply_strategic_merge_patch(
        NODE_OBJ,
        {
            "metadata": {"labels": {"a": None}, "$deleteFromPrimitiveList/finalizers": ["x"]},
            "status": {
                "conditions": [{"type": "DiskPressure", "$patch": "delete"}],
                "$setElementOrder/conditions": [{"type": "Ready"}],
            },
        },
        NODE.strategic,
    )
    assert out["metadata"]["labels"] == {"b": "2"}
    assert out["metadata"]["finalizers"] == []
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    replaced = apply_strategic_merge_patch(
        NODE_OBJ, {"status": {"$patch": "replace", "phase": "x"}}, NODE.strategic
    )
    assert replaced["status"] == {"phase": "x"}


def test_strategic_merges_containers_by_name_and_their_env() -> None:
    assert POD.strategic is not None
    pod = {
        "spec": {
            "containers": [
                {"name": "a", "image": "1", "env": [{"name": "X", "value": "1"}]},
                {"name": "b", "image": "2"},
            ],
            "volumes": [{"name": "v", "emptyDir": {}}],
        }
    }
    out = apply_strategic_merge_patch(
        pod,
        {
            "spec": {
                "containers": [
                    {"name": "a", "env": [{"name": "Y", "value": "2"}]},
                    {"name": "c", "image": "3"},
                ],
                "volumes": [{"name": "v", "hostPath": {"path": "/x"}, "$retainKeys": ["name", "hostPath"]}],
            }
        },
        POD.strategic,
    )
    assert [c["name"] for c in out["spec"]["containers"]] == ["a", "b", "c"]
    assert out["spec"]["containers"][0]["env"] == [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]
    assert out["spec"]["volumes"] == [{"name": "v", "hostPath": {"path": "/x"}}]


def test_strategic_list_items_need_their_merge_key() -> None:
    assert NODE.strategic is not None
    with pytest.raises(BadRequest, match=r"status\.conditions: every item needs the merge key 'type'"):
        apply_strategic_merge_patch(
            NODE_OBJ, {"status": {"conditions": [{"status": "True"}]}}, NODE.strategic
        )
