"""``kubectl apply --server-side`` at the fleet, for each stored kind: created, applied twice
without a change, refused with 409 where another manager owns a field it changes, taken over
with ``--force-conflicts``, and a field the manager stops applying removed."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.fleet.endpoint.conftest import JOB, POLICIES, TREE
from tests.support.kubectl import Kubectl

pytestmark = pytest.mark.integration

PRIORITY_CLASS = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "urgent"},
    "value": 1000,
    "description": "for tests",
}


def policy(toleration: int) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load(POLICIES[0].read_text())
    obj["spec"]["failover"]["application"]["decisionConditions"]["tolerationSeconds"] = toleration
    return obj


def get(kubectl: Kubectl, *what: str) -> dict[str, Any]:
    out: dict[str, Any] = yaml.safe_load(kubectl("get", *what, "-o", "yaml", "--show-managed-fields").stdout)
    return out


def test_apply_twice_is_a_no_op_and_a_conflict_is_a_409(kubectl: Kubectl) -> None:
    first = kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(policy(30)))
    assert (
        first.stdout.strip()
        == "propagationpolicy.policy.one.alibabacloud.com/example-policy serverside-applied"
    )
    before = get(kubectl, "pp", "example-policy")
    kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(policy(30)))
    after = get(kubectl, "pp", "example-policy")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    [entry] = after["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["fieldsType"]) == ("kubectl", "Apply", "FieldsV1")
    toleration = entry["fieldsV1"]["f:spec"]["f:failover"]["f:application"]["f:decisionConditions"]
    assert toleration == {"f:tolerationSeconds": {}}

    refused = kubectl(
        "apply", "--server-side", "--field-manager=ops", "-f", "-", stdin=yaml.safe_dump(policy(60)), ok=False
    )
    assert refused.returncode == 1
    assert (
        'Apply failed with 1 conflict: conflict with "kubectl" using policy.one.alibabacloud.com/v1alpha1: '
        ".spec.failover.application.decisionConditions.tolerationSeconds" in refused.stderr
    )
    assert get(kubectl, "pp", "example-policy")["spec"]["failover"]["application"]["decisionConditions"] == {
        "tolerationSeconds": 30
    }
    # The same value is no conflict: the field is shared.
    kubectl("apply", "--server-side", "--field-manager=ops", "-f", "-", stdin=yaml.safe_dump(policy(30)))
    forced = kubectl(
        "apply",
        "--server-side",
        "--field-manager=ops",
        "--force-conflicts",
        "-f",
        "-",
        stdin=yaml.safe_dump(policy(60)),
    )
    assert forced.returncode == 0
    taken = get(kubectl, "pp", "example-policy")
    assert taken["spec"]["failover"]["application"]["decisionConditions"] == {"tolerationSeconds": 60}
    owners = {e["manager"]: e["fieldsV1"] for e in taken["metadata"]["managedFields"]}
    assert "f:tolerationSeconds" not in str(owners["kubectl"])
    assert "f:tolerationSeconds" in str(owners["ops"])


def test_a_field_no_longer_applied_is_removed(kubectl: Kubectl) -> None:
    kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(PRIORITY_CLASS))
    trimmed = {k: v for k, v in PRIORITY_CLASS.items() if k != "description"}
    kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(trimmed))
    assert "description" not in get(kubectl, "priorityclass", "urgent")


def test_a_client_side_apply_owns_its_fields(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", str(POLICIES[0]))
    refused = kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(policy(45)), ok=False)
    assert refused.returncode == 1
    assert 'conflict with "kubectl-client-side-apply"' in refused.stderr


@pytest.mark.parametrize("path", [JOB, TREE], ids=["acjob", "elasticquotatree"])
def test_every_kind_applies_server_side_twice(kubectl: Kubectl, path: Any) -> None:
    if path == JOB:
        kubectl("apply", "--server-side", "-f", str(TREE))
    created = kubectl("apply", "--server-side", "-f", str(path))
    assert created.stdout.strip().endswith("serverside-applied")
    obj = yaml.safe_load(path.read_text())
    what = (obj["kind"].lower(), obj["metadata"]["name"], "-n", obj["metadata"].get("namespace", "default"))
    version = get(kubectl, *what)["metadata"]["resourceVersion"]
    kubectl("apply", "--server-side", "-f", str(path))
    assert get(kubectl, *what)["metadata"]["resourceVersion"] == version
