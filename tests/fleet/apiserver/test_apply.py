"""Server-side apply's rules on plain objects: ownership, conflicts, shared fields, removal."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.apiserver.apply import apply, fields_v1, record_update
from fleet.apiserver.errors import Conflict

V = "example.io/v1"


def config(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": V, "kind": "Thing", "metadata": {"name": "t", "labels": {"a": "1"}}, "spec": spec}


def owners(obj: dict[str, Any]) -> dict[tuple[str, str], Any]:
    return {(e["manager"], e["operation"]): e["fieldsV1"] for e in obj["metadata"]["managedFields"]}


def test_apply_creates_and_owns_exactly_what_it_sent() -> None:
    obj = apply(
        None,
        config(replicas=2, template={"image": "x"}, ports=[1, 2]),
        manager="me",
        force=False,
        api_version=V,
    )
    assert obj["spec"] == {"replicas": 2, "template": {"image": "x"}, "ports": [1, 2]}
    assert owners(obj)[("me", "Apply")] == {
        "f:metadata": {"f:labels": {"f:a": {}}},
        "f:spec": {"f:ports": {}, "f:replicas": {}, "f:template": {"f:image": {}}},
    }


def test_another_managers_field_conflicts_unless_the_value_is_the_same_or_forced() -> None:
    obj = apply(None, config(replicas=2, image="x"), manager="me", force=False, api_version=V)
    with pytest.raises(Conflict) as refused:
        apply(obj, config(replicas=3), manager="you", force=False, api_version=V)
    assert (
        refused.value.message
        == 'Apply failed with 1 conflict: conflict with "me" using example.io/v1: .spec.replicas'
    )
    assert [(c.field, c.reason) for c in refused.value.causes] == [(".spec.replicas", "FieldManagerConflict")]
    shared = apply(obj, config(replicas=2), manager="you", force=False, api_version=V)
    assert "f:replicas" in str(owners(shared)[("me", "Apply")]) and "f:replicas" in str(
        owners(shared)[("you", "Apply")]
    )
    forced = apply(obj, config(replicas=3), manager="you", force=True, api_version=V)
    assert forced["spec"]["replicas"] == 3
    assert "f:replicas" not in str(owners(forced)[("me", "Apply")])


def test_a_field_dropped_from_the_config_goes_unless_someone_else_owns_it() -> None:
    obj = apply(None, config(replicas=2, image="x"), manager="me", force=False, api_version=V)
    obj = apply(obj, config(replicas=2), manager="me", force=False, api_version=V)
    assert obj["spec"] == {"replicas": 2}
    obj = apply(obj, config(replicas=2, image="y"), manager="me", force=False, api_version=V)
    edited = {**obj, "spec": {**obj["spec"], "image": "z"}}
    record_update(obj, edited, manager="kubectl-edit", api_version=V)
    assert owners(edited)[("kubectl-edit", "Update")] == fields_v1([("spec", "image")])
    assert "f:image" not in str(owners(edited)[("me", "Apply")])
    kept = apply(edited, config(replicas=2), manager="me", force=False, api_version=V)
    assert kept["spec"] == {"replicas": 2, "image": "z"}  # kubectl-edit's now


def test_apply_needs_a_manager() -> None:
    with pytest.raises(Exception, match="fieldManager is required"):
        apply(None, config(), manager="", force=False, api_version=V)
