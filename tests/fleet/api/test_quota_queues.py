"""The read-only Queue kind: one per quota tree node, as ``kubectl get queue`` lists them."""

from __future__ import annotations

import pytest
import yaml

from tests.fleet.api.conftest import JOB, TREE
from tests.support.kubectl import Kubectl, table

pytestmark = pytest.mark.integration


def test_without_a_tree_there_is_the_implicit_root(kubectl: Kubectl) -> None:
    rows = table(kubectl("get", "queue").stdout)
    assert rows == [["NAME", "MIN", "MAX", "USED", "ADMITTED", "PENDING"], ["root", "-", "-", "-", "0", "0"]]


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
    ]
    obj = yaml.safe_load(kubectl("get", "queue", "root-child-2", "-o", "yaml").stdout)
    assert obj["spec"] == {
        "path": "root/child-2",
        "node": "child-2",
        "min": {},
        "max": {"cpu": "10000", "kube-queue/max-jobs": "1", "memory": "10000Gi", "nvidia.com/gpu": "10000"},
    }
    assert obj["status"] == {"used": {}, "admitted": 0, "pending": 1}
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
