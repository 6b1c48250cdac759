"""Table rows as kubectl users expect them, and Kubernetes' age formatting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleet.apiserver import NODE, POD
from fleet.apiserver.tables import build_table, human_duration, json_path, wants_table
from tests.support.kinds import ASCENDJOB


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (5, "5s"),
        (119, "119s"),
        (200, "3m20s"),
        (600, "10m"),
        (4 * 3600 + 300, "4h5m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 7200, "3d2h"),
        (100 * 86400, "100d"),
        (3 * 365 * 86400, "3y"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_accept_header_decides_table_output() -> None:
    kubectl = (
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
        "application/json"
    )
    assert wants_table(kubectl)
    assert not wants_table("application/json")
    assert not wants_table("application/json, */*")


def test_json_path() -> None:
    obj = {"status": {"conditions": [{"type": "Created"}, {"type": "Running"}]}}
    assert json_path(obj, ".status.conditions[-1].type") == "Running"
    assert json_path(obj, ".status.conditions[5].type") is None
    assert json_path({}, ".status.conditions[-1].type") is None


def _stamp(ago: timedelta) -> str:
    return (datetime.now(UTC) - ago).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_node_rows() -> None:
    node: dict[str, Any] = {
        "metadata": {
            "name": "n1",
            "creationTimestamp": _stamp(timedelta(hours=2)),
            "labels": {"node-role.kubernetes.io/worker": ""},
        },
        "spec": {"unschedulable": True},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kubeletVersion": "v1.32.0"},
        },
    }
    table = build_table(NODE, [node])
    names = [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0]
    assert names == ["Name", "Status", "Roles", "Age", "Version"]
    assert table["rows"][0]["cells"][:5] == ["n1", "Ready,SchedulingDisabled", "worker", "120m", "v1.32.0"]
    node["status"]["conditions"][0]["status"] = "False"
    del node["spec"]["unschedulable"]
    assert build_table(NODE, [node])["rows"][0]["cells"][1] == "NotReady"


def test_pod_rows() -> None:
    pod = {
        "metadata": {"name": "p", "creationTimestamp": _stamp(timedelta(seconds=30))},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.5",
            "containerStatuses": [
                {"name": "a", "ready": True, "restartCount": 1, "state": {"running": {}}},
                {
                    "name": "b",
                    "ready": False,
                    "restartCount": 2,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                },
            ],
        },
    }
    cells = build_table(POD, [pod], include_object="None")["rows"][0]["cells"]
    assert cells[:4] == ["p", "1/2", "CrashLoopBackOff", 3]
    assert cells[5:7] == ["10.0.0.5", "n1"]


def test_ascendjob_state_is_the_last_condition_and_objects_are_included_on_request() -> None:
    job = {
        "metadata": {"name": "j", "creationTimestamp": _stamp(timedelta(minutes=5))},
        "status": {"conditions": [{"type": "Created"}, {"type": "Running"}]},
    }
    table = build_table(ASCENDJOB, [job, {"metadata": {"name": "k"}}], include_object="Object")
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "State", "Age"]
    assert table["rows"][0]["cells"] == ["j", "Running", "5m"]
    assert table["rows"][1]["cells"] == ["k", "<none>", "<unknown>"]
    assert table["rows"][0]["object"] is job
    metadata_only = build_table(ASCENDJOB, [job])["rows"][0]["object"]
    assert metadata_only == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": job["metadata"],
    }


def test_a_slice_to_the_end_reads_as_kubectl_reads_the_kubeflow_state_column() -> None:
    """Kubeflow's CRDs print State from ``.status.conditions[-1:].type``."""
    from fleet.apiserver.tables import json_path

    job = {"status": {"conditions": [{"type": "Created"}, {"type": "Running"}]}}
    assert json_path(job, ".status.conditions[-1:].type") == "Running"
    assert json_path(job, ".status.conditions[-2:].type") == ["Created", "Running"]
    assert json_path({"status": {"conditions": []}}, ".status.conditions[-1:].type") is None
