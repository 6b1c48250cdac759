"""The ElasticQuotaTree through the real kubectl: the sample applies as written, with its warning
shown as kubectl shows warnings, and its status reports use per node from the quota ledger."""

from __future__ import annotations

import json

import pytest
import redis
import yaml

from fleet.kinds import ELASTIC_QUOTA_TREE
from fleet.state import Objects
from queues import Ledger, leaf_in
from tests.fleet.endpoint.conftest import JOB, TREE
from tests.support.kubectl import Kubectl

pytestmark = pytest.mark.integration

WARNING = (
    "Warning: root: max differs from min in cpu, kube-queue/max-jobs, memory, nvidia.com/gpu: "
    "the root's max should equal its min (accepted; the root's max is what limits)"
)

#: The sample job: a Master and a Worker pod of 2 NPUs each.
DEMAND = {"huawei.com/Ascend910": "4", "pods": "2"}


def nodes(kubectl: Kubectl) -> dict[str, dict[str, object]]:
    listed = yaml.safe_load(kubectl("get", "elasticquotatree", "-n", "kube-system", "-o", "yaml").stdout)
    [tree] = listed["items"]
    return {node["name"]: node for node in tree["status"]["nodes"]}


def test_sample_applies_with_its_warning_and_is_idempotent(
    kubectl: Kubectl, fleet_redis: redis.Redis
) -> None:
    done = kubectl("apply", "-f", str(TREE))
    assert done.stdout.strip() == "elasticquotatree.scheduling.sigs.k8s.io/elasticquotatree created"
    assert WARNING in done.stderr.splitlines()
    assert Ledger(fleet_redis).version() == 1
    again = kubectl("apply", "-f", str(TREE))
    assert again.stdout.strip() == "elasticquotatree.scheduling.sigs.k8s.io/elasticquotatree unchanged"
    shown = kubectl("get", "eqtree", "-n", "kube-system")
    assert shown.stdout.split()[:3] == ["NAME", "VERSION", "AGE"]
    assert shown.stdout.split()[3:5] == ["elasticquotatree", "1"]


def test_status_shows_used_and_requested_per_node(kubectl: Kubectl, fleet_redis: redis.Redis) -> None:
    kubectl("apply", "-f", str(TREE))
    before = nodes(kubectl)
    assert set(before) == {"root", "child-2"}
    assert before["child-2"] == {
        "name": "child-2",
        "path": "root/child-2",
        "queue": "root-child-2",
        "used": {},
        "requested": {},
        "admitted": 0,
        "pending": 0,
    }
    kubectl("create", "-f", str(JOB))
    queued = nodes(kubectl)
    for name in ("root", "child-2"):
        assert queued[name]["requested"] == DEMAND
        assert (queued[name]["used"], queued[name]["pending"], queued[name]["admitted"]) == ({}, 1, 0)
    # What the dispatcher does next: admit the job on child-2 and its ancestors.
    [decision] = Ledger(fleet_redis).admit_pending_many(["default/default-test-pytorch"])
    assert decision.admitted
    admitted = nodes(kubectl)
    for name in ("root", "child-2"):
        assert admitted[name]["used"] == DEMAND
        assert (admitted[name]["requested"], admitted[name]["pending"], admitted[name]["admitted"]) == (
            {},
            0,
            1,
        )


def test_an_invalid_tree_is_422_with_field_causes_and_changes_nothing(
    kubectl: Kubectl, fleet_redis: redis.Redis
) -> None:
    document = yaml.safe_load(TREE.read_text())
    child = document["spec"]["root"]["children"][0]
    child["min"] = {"cpu": 20}
    child["max"]["cpu"] = 10
    done = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(document), ok=False)
    assert done.returncode == 1
    assert 'The ElasticQuotaTree "elasticquotatree" is invalid: ' in done.stderr
    assert "spec.root.children[0].min.cpu: root/child-2: min.cpu 20 exceeds max.cpu 10" in done.stderr
    assert Ledger(fleet_redis).version() == 0
    assert Objects(fleet_redis).list(ELASTIC_QUOTA_TREE)[0] == []


def test_server_dry_run_applies_nothing(kubectl: Kubectl, fleet_redis: redis.Redis) -> None:
    done = kubectl("apply", "-f", str(TREE), "--dry-run=server")
    assert "created (server dry run)" in done.stdout
    assert Ledger(fleet_redis).version() == 0
    assert "No resources found" in kubectl("get", "eqtree", "-A").stderr


def test_only_one_tree_and_it_cannot_be_deleted(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", str(TREE))
    other = yaml.safe_load(TREE.read_text())
    other["metadata"]["name"] = "another"
    done = kubectl("create", "-f", "-", stdin=json.dumps(other), ok=False)
    assert "only one ElasticQuotaTree is supported and kube-system/elasticquotatree exists" in done.stderr
    refused = kubectl("delete", "eqtree", "elasticquotatree", "-n", "kube-system", ok=False)
    assert refused.returncode == 1
    assert "cannot be deleted" in refused.stderr
    assert "elasticquotatree" in kubectl("get", "eqtree", "-n", "kube-system").stdout


def test_a_koord_queue_tree_applies_with_a_warning_naming_the_attribute_fleet_ignores(
    kubectl: Kubectl, fleet_redis: redis.Redis
) -> None:
    done = kubectl("apply", "-f", str(TREE.with_name("elasticquotatree-koord-queue.yaml")))
    assert done.stdout.strip() == "elasticquotatree.scheduling.sigs.k8s.io/elasticquotatree created"
    assert (
        "Warning: root/root.algo/root.algo.nlp: attributes.preempt-policy: ignored (koord-queue's "
        "force-preemption switch; Fleet preempts by fleet.io/preemption)"
    ) in done.stderr.splitlines()
    shown = nodes(kubectl)
    assert shown["root.algo.nlp"]["queue"] == "root-root.algo-root.algo.nlp"
    assert leaf_in(Ledger(fleet_redis).tree(), "nlp") == "root.algo.nlp"
