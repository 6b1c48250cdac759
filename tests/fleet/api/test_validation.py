"""PropagationPolicy at the fleet: the samples apply as written; a misspelt field is a 422 cause."""

from __future__ import annotations

import pytest
import redis
import yaml

from fleet.api.kinds import PROPAGATION_POLICY
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
