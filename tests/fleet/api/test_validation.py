"""PropagationPolicy at the fleet: the samples apply as written; a misspelt field is a 422 cause."""

from __future__ import annotations

import pytest
import redis
import yaml

from fleet.api.kinds import (
    CLUSTER_PROPAGATION_POLICY,
    KARMADA_CLUSTER_PROPAGATION_POLICY,
    KARMADA_PROPAGATION_POLICY,
    PROPAGATION_POLICY,
)
from fleet.state import Objects
from tests.fleet.api.conftest import POLICIES
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
    policy = yaml.safe_load(POLICIES[0].read_text())
    policy["spec"]["placement"]["replicaScheduling"]["replicaSchedulingTyp"] = "Divided"
    done = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(policy), ok=False)
    assert done.returncode == 1
    assert (
        'The PropagationPolicy "example-policy" is invalid: '
        'spec.placement.replicaScheduling.replicaSchedulingTyp: unknown field "replicaSchedulingTyp"'
    ) in done.stderr
    assert Objects(fleet_redis).list(PROPAGATION_POLICY)[0] == []
    dry = kubectl("apply", "-f", str(POLICIES[0]), "--dry-run=server")
    assert "(server dry run)" in dry.stdout
    assert Objects(fleet_redis).list(PROPAGATION_POLICY)[0] == []


SAMPLES = POLICIES[0].parent


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
    assert 'spec.placement.clusterAfinity: unknown field "clusterAfinity"' in done.stderr
