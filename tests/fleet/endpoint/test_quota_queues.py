"""The read-only Queue kind: one per quota tree node, as ``kubectl get queue`` lists them."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
import yaml

from queues import Ledger
from tests.fleet.endpoint.conftest import JOB, TREE
from tests.support.kubectl import Kubectl, table

pytestmark = pytest.mark.integration


def test_without_a_tree_there_is_the_implicit_root(kubectl: Kubectl) -> None:
    rows = table(kubectl("get", "queue").stdout)
    assert rows == [
        ["NAME", "MIN", "MAX", "USED", "ADMITTED", "PENDING", "SHARE", "BORROWED"],
        ["root", "-", "-", "-", "0", "0", "0.00", "-"],
    ]


def test_one_queue_per_tree_node_with_its_limits_and_pending_jobs(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", str(TREE))
    kubectl("create", "-f", str(JOB))
    rows = table(kubectl("get", "queues").stdout)
    assert [row[0] for row in rows[1:]] == ["root", "root-child-2"]
    child = rows[2]
    assert child[1:] == [
        "-",
        "cpu=10000,kube-queue/max-jobs=1,memory=10000Gi,nvidia.com/gpu=10000",
        "-",
        "0",
        "1",
        "0.00",
        "-",
    ]
    obj = yaml.safe_load(kubectl("get", "queue", "root-child-2", "-o", "yaml").stdout)
    assert obj["spec"] == {
        "path": "root/child-2",
        "node": "child-2",
        "min": {},
        "max": {"cpu": "10000", "kube-queue/max-jobs": "1", "memory": "10000Gi", "nvidia.com/gpu": "10000"},
    }
    assert obj["status"] == {
        "used": {},
        "borrowed": {},
        "lent": {},
        "share": "0.00",
        "belowMin": False,
        "admitted": 0,
        "waiting": 1,
        "pending": 1,
    }
    selected = table(kubectl("get", "queue", "-l", "fleet.io/quota-node=child-2").stdout)
    assert [row[0] for row in selected[1:]] == ["root-child-2"]


def test_queues_are_read_only(kubectl: Kubectl) -> None:
    done = kubectl("delete", "queue", "root", ok=False)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "Error from server (MethodNotAllowed): queues.fleet.io is read-only (computed by Fleet): "
        "delete is not supported"
    )
    assert "root" in kubectl("get", "queue").stdout


NPU = "huawei.com/Ascend910"
#: Two teams under a root of 16 NPUs; team-b borrows 4 beyond its min of 8, which is what team-a,
#: using 2 of its 8, cannot take back without reclaim (16 - 14 = 2 free of its 6 idle).
CONTENDED = f"""
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {{name: elasticquotatree, namespace: kube-system}}
spec:
  root:
    name: root
    min: {{{NPU}: 16}}
    max: {{{NPU}: 16}}
    children:
    - name: team-a
      min: {{{NPU}: 8}}
      max: {{{NPU}: 16}}
      namespaces: [team-a]
    - name: team-b
      min: {{{NPU}: 8}}
      max: {{{NPU}: 16}}
      namespaces: [team-b]
"""


def test_a_contended_tree_shows_borrowed_lent_and_the_share(
    kubectl: Kubectl, fleet_redis: redis.Redis, tmp_path: Path
) -> None:
    tree = tmp_path / "tree.yaml"
    tree.write_text(CONTENDED)
    kubectl("apply", "-f", str(tree))
    ledger = Ledger(fleet_redis)
    assert ledger.admit("team-b/1", "team-b", {NPU: 12}).admitted
    assert ledger.admit("team-a/1", "team-a", {NPU: 2}).admitted
    ledger.enqueue("team-a/2", "team-a", {NPU: 8})
    rows = table(kubectl("get", "queue", "-o", "wide").stdout)
    assert rows == [
        ["NAME", "MIN", "MAX", "USED", "ADMITTED", "PENDING", "SHARE", "BORROWED", "LENT", "BELOW-MIN"],
        ["root", f"{NPU}=16", f"{NPU}=16", f"{NPU}=14", "2", "1", "0.88", "-", "-", "true"],
        ["root-team-a", f"{NPU}=8", f"{NPU}=16", f"{NPU}=2", "1", "1", "0.25", "-", f"{NPU}=4", "true"],
        ["root-team-b", f"{NPU}=8", f"{NPU}=16", f"{NPU}=12", "1", "0", "1.50", f"{NPU}=4", "-", "false"],
    ]
    default = table(kubectl("get", "queue").stdout)
    assert default[0] == ["NAME", "MIN", "MAX", "USED", "ADMITTED", "PENDING", "SHARE", "BORROWED"]
    obj = yaml.safe_load(kubectl("get", "queue", "root-team-a", "-o", "yaml").stdout)
    assert obj["status"] == {
        "used": {NPU: "2"},
        "borrowed": {},
        "lent": {NPU: "4"},
        "share": "0.25",
        "belowMin": True,
        "admitted": 1,
        "waiting": 1,
        "pending": 1,
    }
    assert kubectl("get", "queue", "root-team-b", "-o", "jsonpath={.status.share}").stdout == "1.50"
