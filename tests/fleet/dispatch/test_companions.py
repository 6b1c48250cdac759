"""Companion objects end to end, every role a real process: a job's file with its ranktable
ConfigMap, a Secret and a headless Service, applied whole with kubectl at the fleet, reaches the
simulated member with the job; an edit at the fleet follows; a member failover moves them; the
stale member loses them; deleting the job deletes them."""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.dispatch.companions import COMPANION_LABEL
from fleet.jobs import cluster_of, current_state
from fleet.kinds import KARMADA_PROPAGATION_POLICY
from fleet.members import NotFound, load_members
from tests.fleet.dispatch.conftest import RunningFleet
from tests.support.fleet_api import FleetApiThread
from tests.support.kinds import FLEET_ASCENDJOB
from tests.support.kubectl import Kubectl, require_kubectl
from tests.support.sim import CARD_POOL

pytestmark = pytest.mark.integration

SAMPLE = (
    Path(__file__).resolve().parents[3] / "config" / "samples" / "ascend" / "pytorch-with-companions.yaml"
)
JOB = "companions-pytorch"
COMPANIONS = (
    ("ConfigMap", "rings-config-companions-pytorch"),
    ("Secret", "companions-pytorch-obs"),
    ("Service", "companions-pytorch"),
)
#: Karmada's way: dependencies travel with the job, a NotReady member is left after 2 s.
POLICY = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: with-deps, namespace: default}
spec:
  resourceSelectors:
    - {apiVersion: mindxdl.gitee.com/v1, kind: AscendJob}
  propagateDeps: true
  failover:
    application:
      decisionConditions: {tolerationSeconds: 2}
      purgeMode: Directly
"""


def _held(fleet: RunningFleet, member: str) -> dict[str, dict[str, Any]]:
    """The companions ``member`` holds now, by kind."""
    client = load_members(fleet.sim.kubeconfig)[member]
    out: dict[str, dict[str, Any]] = {}
    try:
        for kind, name in COMPANIONS:
            with contextlib.suppress(NotFound):
                out[kind] = client.get_core(kind, "default", name)
    finally:
        client.close()
    return out


def test_companions_go_with_the_job_follow_edits_move_on_failover_and_go_with_it(
    fleet_factory: Callable[..., RunningFleet], tmp_path: Path
) -> None:
    fleet = fleet_factory(
        members={"member-1": CARD_POOL, "member-2": CARD_POOL},
        workers=1,
        tree=None,
        syncer_args=("--probe-interval", "0.3", "--failure-threshold", "2"),
        jobDurationSeconds=600,
    )
    fleet.objects.create(KARMADA_PROPAGATION_POLICY, yaml.safe_load(POLICY))

    def job() -> dict[str, Any] | None:
        return fleet.objects.try_get(FLEET_ASCENDJOB, "default", JOB)

    with FleetApiThread(fleet.client) as api:
        kubectl = Kubectl(require_kubectl(), api.kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")
        kubectl("apply", "-f", str(SAMPLE))
        fleet.wait_for("the job to run", lambda: current_state(job() or {}) == "Running", 30)
        first = cluster_of(job() or {})
        assert first is not None
        held = _held(fleet, first)
        assert sorted(held) == ["ConfigMap", "Secret", "Service"]
        assert all(obj["metadata"]["labels"][COMPANION_LABEL] == "true" for obj in held.values())
        assert held["ConfigMap"]["data"] == {"hccl.json": '{"status": "initializing"}\n'}
        assert base64.b64decode(held["Secret"]["data"]["OBS_SECRET_KEY"]) == b"example-secret-key"
        assert held["Service"]["spec"]["clusterIP"] == "None"
        assert "kubectl.kubernetes.io/last-applied-configuration" not in held["Secret"]["metadata"].get(
            "annotations", {}
        )

        # Edited at the fleet: the member's copy follows.
        edit = json.dumps({"data": {"hccl.json": '{"status": "completed"}'}})
        kubectl("patch", "configmap", "rings-config-companions-pytorch", "--type=merge", "-p", edit)
        fleet.wait_for(
            "the edit to reach the member",
            lambda: (
                _held(fleet, first).get("ConfigMap", {}).get("data")
                == {"hccl.json": '{"status": "completed"}'}
            ),
            15,
        )

        # Edited while no syncer follows the changes: brought up to date when one starts.
        fleet.procs.kill9("syncer")
        rotated = {
            **yaml.safe_load(SAMPLE.read_text().split("---")[1]),
            "stringData": {"OBS_SECRET_KEY": "r0tated-s3cret"},
        }
        kubectl("apply", "-f", "-", stdin=yaml.safe_dump(rotated))
        fleet.procs.restart("syncer")
        fleet.wait_for(
            "the rotated secret to reach the member",
            lambda: (
                base64.b64decode(
                    _held(fleet, first).get("Secret", {}).get("data", {}).get("OBS_SECRET_KEY", "")
                )
                == b"r0tated-s3cret"
            ),
            20,
        )

        # The member goes down: the job and its companions move to the other member.
        fleet.sim.fault(first, "down")
        fleet.wait_for(
            "the job to run on the other member",
            lambda: cluster_of(job() or {}) not in (None, first) and current_state(job() or {}) == "Running",
            30,
        )
        second = cluster_of(job() or {})
        assert second is not None
        moved = _held(fleet, second)
        assert sorted(moved) == ["ConfigMap", "Secret", "Service"]
        assert moved["ConfigMap"]["data"] == {"hccl.json": '{"status": "completed"}'}
        # Back up, the old member loses the stale copy and, with it, the companions.
        fleet.sim.fault(first, "up")
        fleet.wait_for("the old member to be cleared", lambda: _held(fleet, first) == {}, 20)

        # Deleted at the fleet: the job's companions go from its member with its copy.
        kubectl("delete", "acjob", JOB)
        fleet.wait_for("the job to go", lambda: job() is None, 20)
        fleet.wait_for("the companions to go", lambda: _held(fleet, second) == {}, 10)
        # No role logged the Secret's data, plain or encoded, nor put it in an Event.
        logs = fleet.procs.logs(tail=100_000)
        events = kubectl("get", "events", "-o", "json").stdout
        for secret in (b"example-secret-key", b"r0tated-s3cret"):
            for shown in (secret.decode(), base64.b64encode(secret).decode()):
                assert shown not in logs and shown not in events
        # The fleet's own objects stay: they are the user's.
        assert kubectl("get", "cm,secret,svc", "-o", "name").stdout.split() == [
            "configmap/rings-config-companions-pytorch",
            "secret/companions-pytorch-obs",
            "service/companions-pytorch",
        ]
