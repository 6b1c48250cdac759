"""Two teams share a leaf, each with the priority cap its admin set (issue 34, requirement 1).

Real processes (redis-server, a simulated member, ``fleet dispatcher``, ``worker``, ``syncer``)
and a fleet API replica with a token file, reached by the official Python client and kubectl
with tenant tokens, as the teams would. The tree caps what each team may write as its own
priority (``fleet.io/max-priority``): team-a 100 on its leaf ``a``, team-b 1000 on ``b``; both may
submit to the leaf ``shared``. A team-a job above its cap (or above 1,000,000,000) is refused
with a 403 naming the annotation and the node, and nothing is stored; at its cap it preempts a
lower team-b job of the shared leaf, and a team-b job at team-b's cap preempts it in turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from fleet.endpoint.auth import parse_token_file
from queues import QUOTA_LABEL
from tests.fleet.dispatch.conftest import MODULE_POOL, RunningFleet
from tests.fleet.placement.factory import job
from tests.support.fleet_api import FleetApiThread, official_client
from tests.support.kubectl import Kubectl, require_kubectl

pytestmark = pytest.mark.integration

GROUP, VERSION, PLURAL = "mindxdl.gitee.com", "v1", "ascendjobs"
TOKEN_FILE = """\
admin-token-p1,admin,u-1,"fleet:admins"
alice-token-p2,alice,u-2,"namespace:team-a"
bob-token-p3,bob,u-3,"namespace:team-b"
"""
TOKENS = {"admin": "admin-token-p1", "alice": "alice-token-p2", "bob": "bob-token-p3"}
TREE = """
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    max: {huawei.com/Ascend910: 32}
    min: {huawei.com/Ascend910: 32}
    children:
    - name: a
      max: {huawei.com/Ascend910: 8}
      min: {huawei.com/Ascend910: 8}
      namespaces: [team-a]
      attributes: {fleet.io/max-priority: "100"}
    - name: b
      max: {huawei.com/Ascend910: 8}
      min: {huawei.com/Ascend910: 8}
      namespaces: [team-b]
      attributes: {fleet.io/max-priority: "1000"}
    - name: shared
      max: {huawei.com/Ascend910: 8}
      min: {huawei.com/Ascend910: 8}
      attributes: {fleet.io/available-in-namespaces: "team-a,team-b"}
"""
ANNOTATION = "fleet.io/priority"


def shared_job(namespace: str, name: str, priority: str) -> dict[str, Any]:
    """An 8-NPU job of ``namespace`` in the shared leaf, its priority written as the annotation."""
    obj = job(name, workers=0, npus=8, exclusive=False, selector={"host-arch": "huawei-arm"})
    obj["metadata"]["namespace"] = namespace
    obj["metadata"]["labels"][QUOTA_LABEL] = "shared"
    obj["metadata"]["annotations"] = {"sim.fleet.io/duration-seconds": "600", ANNOTATION: priority}
    return obj


def test_two_teams_sharing_a_leaf_keep_their_own_priority_caps(
    fleet_factory: Callable[..., RunningFleet], tmp_path: Path
) -> None:
    fleet = fleet_factory(members={"member-1": MODULE_POOL}, workers=1, tree=TREE)
    tokens = parse_token_file(TOKEN_FILE)
    with FleetApiThread(fleet.client, tokens=tokens, members=lambda: ["member-1"], tls=True) as api:

        def jobs_of(who: str) -> client.CustomObjectsApi:
            (tmp_path / who).mkdir(exist_ok=True)
            return client.CustomObjectsApi(official_client(api, tmp_path / who, token=TOKENS[who]))

        alice, bob = jobs_of("alice"), jobs_of("bob")

        def create(api_: client.CustomObjectsApi, obj: dict[str, Any]) -> dict[str, Any]:
            created = api_.create_namespaced_custom_object(
                GROUP, VERSION, obj["metadata"]["namespace"], PLURAL, obj
            )
            assert isinstance(created, dict)
            return created

        def states() -> dict[str, str | None]:
            return fleet.states()

        low = create(bob, shared_job("team-b", "b-low", "10"))
        assert low["status"]["priority"] == 10
        fleet.wait_for("team-b's job to run", lambda: states().get("team-b/b-low") == "Running", 30)

        # Above team-a's cap, or above any user's: refused, naming the field and the rule.
        for value, rule in (
            ("101", "the most the ElasticQuotaTree allows jobs of namespace team-a there "
                    "(attribute fleet.io/max-priority of quota node 'a')"),
            ("2000000000", "priority 2000000000 is above 100"),
        ):  # fmt: skip
            with pytest.raises(ApiException) as refused:
                create(alice, shared_job("team-a", f"a-{value}", value))
            status = json.loads(refused.value.body or "{}")
            assert (refused.value.status, status["reason"]) == (403, "Forbidden"), status
            assert rule in status["message"], status["message"]
            assert status["details"]["causes"][0]["field"] == f"metadata.annotations[{ANNOTATION}]"
            assert f"team-a/a-{value}" not in states()
        config = api.kubeconfig(tmp_path / "alice.kubeconfig", token=TOKENS["alice"])
        kubectl = Kubectl(require_kubectl(), config, tmp_path / "cache")
        done = kubectl(
            "create", "-f", "-", stdin=yaml.safe_dump(shared_job("team-a", "a-kubectl", "500")), ok=False
        )
        assert done.returncode == 1
        assert "Error from server (Forbidden):" in done.stderr, done.stderr
        assert "priority 500 is above 100" in done.stderr

        # At its cap, team-a's job outranks team-b's lower one in the shared leaf, and preempts it.
        at_cap = create(alice, shared_job("team-a", "a-capped", "100"))
        assert at_cap["status"]["priority"] == 100
        fleet.wait_for(
            "team-a's capped job to preempt team-b's lower one",
            lambda: states().get("team-a/a-capped") == "Running" and states().get("team-b/b-low") == "Queued",
            40,
        )
        # team-b's cap is higher: its job there preempts team-a's in turn.
        create(bob, shared_job("team-b", "b-high", "1000"))
        fleet.wait_for(
            "team-b's job at its cap to preempt team-a's",
            lambda: (
                states().get("team-b/b-high") == "Running" and states().get("team-a/a-capped") == "Queued"
            ),
            40,
        )
        preempted = alice.get_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, "a-capped")
        assert isinstance(preempted, dict)
        assert preempted["status"]["preemptedBy"] == "team-b/b-high"
        first = bob.get_namespaced_custom_object(GROUP, VERSION, "team-b", PLURAL, "b-low")
        assert isinstance(first, dict)
        assert first["status"]["preemptedBy"] == "team-a/a-capped"
