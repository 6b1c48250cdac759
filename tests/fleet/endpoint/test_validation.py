"""PropagationPolicy at the fleet: the samples apply as written; a misspelt field is a 422 cause."""

from __future__ import annotations

from types import UnionType
from typing import Any, Union, get_args, get_origin

import pytest
import redis
import yaml
from pydantic import BaseModel

from fleet.endpoint.schemas import load
from fleet.kinds import (
    CLUSTER_PROPAGATION_POLICY,
    KARMADA_CLUSTER_PROPAGATION_POLICY,
    KARMADA_PROPAGATION_POLICY,
    PROPAGATION_POLICY,
)
from fleet.policy import PolicySpec
from fleet.state import Objects
from tests.fleet.endpoint.conftest import POLICIES
from tests.support.kubectl import Kubectl, table

pytestmark = pytest.mark.integration


def test_the_policy_samples_apply_as_written(kubectl: Kubectl, fleet_redis: redis.Redis) -> None:
    first, second = POLICIES
    done = kubectl("apply", "-f", str(first))
    assert done.stdout.strip() == "propagationpolicy.policy.one.alibabacloud.com/example-policy created"
    assert done.stderr == ""
    # The second sample is the same policy with queueing on: applying it changes the first.
    changed = kubectl("apply", "-f", str(second))
    assert changed.stdout.strip() == "propagationpolicy.policy.one.alibabacloud.com/example-policy configured"
    rows = table(kubectl("get", "pp").stdout)
    assert rows[0] == ["NAME", "PRIORITY", "AGE"]
    assert rows[1][0] == "example-policy"
    [stored] = Objects(fleet_redis).list(PROPAGATION_POLICY)[0]
    assert stored["spec"]["suspension"] == {"scheduling": True}
    assert {s["kind"] for s in stored["spec"]["resourceSelectors"]} == {"AscendJob", "PyTorchJob"}


def test_a_misspelt_policy_field_is_refused_with_its_path(kubectl: Kubectl, fleet_redis: redis.Redis) -> None:
    """kubectl's default, --validate=strict: the API server's strict decoding error, nothing stored."""
    policy = yaml.safe_load(POLICIES[0].read_text())
    policy["spec"]["placement"]["replicaScheduling"]["replicaSchedulingTyp"] = "Divided"
    done = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(policy), ok=False)
    assert done.returncode == 1
    assert (
        'Error from server (BadRequest): error when creating "STDIN": PropagationPolicy in version '
        '"v1alpha1" cannot be handled as a PropagationPolicy: strict decoding error: '
        'unknown field "spec.placement.replicaScheduling.replicaSchedulingTyp"'
    ) in done.stderr
    assert Objects(fleet_redis).list(PROPAGATION_POLICY)[0] == []
    dry = kubectl("apply", "-f", str(POLICIES[0]), "--dry-run=server")
    assert "(server dry run)" in dry.stdout
    assert Objects(fleet_redis).list(PROPAGATION_POLICY)[0] == []


SAMPLES = POLICIES[0].parent


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model an annotation holds (``Placement``, ``tuple[Toleration, ...]``, ``X | None``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (tuple, list, Union, UnionType):
        for arg in get_args(annotation):
            found = _model_of(arg)
            if found is not None:
                return found
    return None


def test_a_karmada_policy_applies_with_a_warning_per_field_fleet_does_not_act_on(
    kubectl: Kubectl, fleet_redis: redis.Redis
) -> None:
    done = kubectl("apply", "-f", str(SAMPLES / "propagationpolicy-karmada.yaml"))
    assert done.stdout.strip() == "propagationpolicy.policy.karmada.io/ascend-in-region created"
    assert sorted(done.stderr.splitlines()) == [
        "Warning: spec.placement.spreadConstraints: accepted but not acted on by Fleet "
        "(a job runs whole in one member)",
        "Warning: spec.schedulerName: accepted but not acted on by Fleet "
        "(Fleet's dispatcher places every job)",
    ]
    [stored] = Objects(fleet_redis).list(KARMADA_PROPAGATION_POLICY)[0]
    assert stored["spec"]["failover"]["application"]["purgeMode"] == "Directly"
    shown = kubectl("get", "propagationpolicies.policy.karmada.io", "-n", "default", "-o", "name")
    assert shown.stdout.split() == ["propagationpolicy.policy.karmada.io/ascend-in-region"]


def test_cluster_propagation_policies_are_served_in_both_groups(
    kubectl: Kubectl, fleet_redis: redis.Redis
) -> None:
    done = kubectl("apply", "-f", str(SAMPLES / "clusterpropagationpolicy.yaml"))
    assert done.stdout.strip() == (
        "clusterpropagationpolicy.policy.one.alibabacloud.com/ascend-everywhere created"
    )
    assert done.stderr == ""
    karmada = yaml.safe_load((SAMPLES / "clusterpropagationpolicy.yaml").read_text())
    karmada["apiVersion"] = "policy.karmada.io/v1alpha1"
    again = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(karmada))
    assert again.stdout.strip() == "clusterpropagationpolicy.policy.karmada.io/ascend-everywhere created"
    assert table(kubectl("get", "cpp").stdout)[1][0] == "ascend-everywhere"
    assert len(Objects(fleet_redis).list(CLUSTER_PROPAGATION_POLICY)[0]) == 1
    kubectl("delete", "clusterpropagationpolicies.policy.karmada.io", "ascend-everywhere")
    assert Objects(fleet_redis).list(KARMADA_CLUSTER_PROPAGATION_POLICY)[0] == []


def test_a_field_outside_both_schemas_is_still_refused(kubectl: Kubectl) -> None:
    policy = yaml.safe_load((SAMPLES / "clusterpropagationpolicy.yaml").read_text())
    policy["spec"]["placement"]["clusterAfinity"] = {}
    done = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(policy), ok=False)
    assert 'strict decoding error: unknown field "spec.placement.clusterAfinity"' in done.stderr


def test_a_misspelt_field_inside_a_karmada_field_fleet_does_not_act_on_is_unknown(
    kubectl: Kubectl, fleet_redis: redis.Redis
) -> None:
    """Karmada's fields are known to their last leaf (its CRD's schema): a typo inside one that
    Fleet accepts without acting on is an unknown field like any other, while the fields
    themselves keep their Warning."""
    policy = yaml.safe_load((SAMPLES / "propagationpolicy-karmada.yaml").read_text())
    policy["spec"]["placement"]["spreadConstraints"][0]["spreadByFeild"] = "region"
    refused = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(policy), ok=False)
    assert refused.returncode == 1
    assert 'unknown field "spec.placement.spreadConstraints[0].spreadByFeild"' in refused.stderr
    assert Objects(fleet_redis).list(KARMADA_PROPAGATION_POLICY)[0] == []
    warned = kubectl("apply", "-f", "-", "--validate=warn", stdin=yaml.safe_dump(policy))
    assert sorted(warned.stderr.splitlines()) == [
        "Warning: spec.placement.spreadConstraints: accepted but not acted on by Fleet "
        "(a job runs whole in one member)",
        "Warning: spec.schedulerName: accepted but not acted on by Fleet "
        "(Fleet's dispatcher places every job)",
        'Warning: unknown field "spec.placement.spreadConstraints[0].spreadByFeild"',
    ]
    [stored] = Objects(fleet_redis).list(KARMADA_PROPAGATION_POLICY)[0]
    assert "spreadByFeild" not in stored["spec"]["placement"]["spreadConstraints"][0]


def test_every_field_of_karmadas_schema_is_known_to_the_policy_model() -> None:
    """The schema (what is unknown) and the policy model (what Fleet reads) name the same
    fields: a field the schema keeps is one the model reads or names as not acted on."""
    schema = load("PropagationPolicy", "policy.karmada.io")
    defs = schema["$defs"]

    def fields(node: dict[str, Any], model: type[BaseModel] | None, path: str) -> list[str]:
        if "$ref" in node and node["$ref"].startswith("#/$defs/"):
            node = {**defs[node["$ref"].removeprefix("#/$defs/")], **node}
        if node.get("x-kubernetes-preserve-unknown-fields") or model is None:
            return []
        known = {info.alias or name: info for name, info in model.model_fields.items()}
        missing = [f"{path}.{key}" for key in node.get("properties", {}) if key not in known]
        for key, child in (node.get("properties") or {}).items():
            if key in known:
                missing += fields(child, _model_of(known[key].annotation), f"{path}.{key}")
        return missing

    assert fields(schema["properties"]["spec"], PolicySpec, "spec") == []
