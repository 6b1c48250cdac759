"""Kubeflow's ``spec.runPolicy.suspend`` at the fleet, through the real kubectl: a job submitted
suspended is held (``Suspended``, not queued, no quota); suspending an admitted job gives its
quota back and lets go of its member; resuming queues it again and it takes its quota again.
The switch is the one field of the spec that may change, and its owner may flip it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Final

import pytest
import redis
import yaml

from fleet.endpoint.auth import parse_token_file
from fleet.kinds import fleet_kind
from fleet.state import Objects
from fleet.workloads.kubeflow_jobs import pytorchjob
from queues import JobState, Ledger
from tests.fleet.endpoint.conftest import JOB, SAMPLES, TREE, call
from tests.support.fleet_api import FleetApiThread
from tests.support.job_states import admit as admit_to
from tests.support.kubectl import Kubectl, table

pytestmark = pytest.mark.integration

TORCH: Final = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs"
KEY: Final = "pytorchjobs.kubeflow.org:default/pytorch-test"
FLEET_PYTORCHJOB: Final = fleet_kind(pytorchjob)
JOBS: Final = "kube-queue/max-jobs"
#: The leaf of the seed tree that binds namespace default (one job at a time).
LEAF: Final = "child-2"


def torch(*, suspend: bool | None = None) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((SAMPLES / "pytorchjob.yaml").read_text())
    if suspend is not None:
        body["spec"]["runPolicy"]["suspend"] = suspend
    return body


def admit(client: redis.Redis) -> None:
    """What the dispatcher does for a job that fits: admitted by the ledger, placed on member-1."""
    assert Ledger(client).admit_pending(KEY).admitted

    def change(obj: dict[str, Any]) -> dict[str, Any]:
        return admit_to(obj, "member-1")

    assert Objects(client).mutate(FLEET_PYTORCHJOB, "default", "pytorch-test", change) is not None


def row(kubectl: Kubectl) -> list[str]:
    rows = table(kubectl("get", "pytorchjob", "pytorch-test").stdout)
    assert rows[0][:3] == ["NAME", "STATE", "CLUSTER"]
    return rows[1]


def test_a_job_submitted_suspended_waits_unqueued_and_holds_no_quota(
    kubectl: Kubectl, fleet_redis: redis.Redis, tmp_path: Path
) -> None:
    kubectl("apply", "-f", str(TREE))
    manifest = tmp_path / "suspended.yaml"
    manifest.write_text(yaml.safe_dump(torch(suspend=True)))
    assert "pytorchjob.kubeflow.org/pytorch-test created" in kubectl("apply", "-f", str(manifest)).stdout
    assert row(kubectl)[:3] == ["pytorch-test", "Suspended", "<none>"]
    stored = Objects(fleet_redis).get(FLEET_PYTORCHJOB, "default", "pytorch-test")
    last = stored["status"]["conditions"][-1]
    assert (last["type"], last["reason"]) == ("Suspended", "PyTorchJobSuspended")  # the operator's reason
    assert last["message"] == (
        "suspended: spec.runPolicy.suspend is true, so it is not admitted: no member copy, no "
        "replicas, no quota held until it is set to false"
    )
    ledger = Ledger(fleet_redis)
    assert ledger.state(KEY) is JobState.ABSENT
    assert ledger.usage(LEAF).get(JOBS, 0) == 0

    # Applying the file again with the switch off queues it; the dispatcher takes its quota.
    manifest.write_text(yaml.safe_dump(torch(suspend=False)))
    kubectl("apply", "-f", str(manifest))
    assert row(kubectl)[:2] == ["pytorch-test", "Queued"]
    assert ledger.state(KEY) is JobState.PENDING
    admit(fleet_redis)
    assert ledger.usage(LEAF)[JOBS] == 1


def test_suspending_gives_the_quota_back_and_resuming_takes_it_again(
    kubectl: Kubectl, fleet_api: FleetApiThread, fleet_redis: redis.Redis
) -> None:
    kubectl("apply", "-f", str(TREE))
    code, stored = call(fleet_api, "POST", TORCH, torch())
    assert code == 201, stored
    admit(fleet_redis)
    ledger = Ledger(fleet_redis)
    assert ledger.state(KEY) is JobState.ADMITTED
    assert ledger.usage(LEAF)[JOBS] == 1

    job = ("pytorchjob", "pytorch-test")
    kubectl("patch", *job, "--type", "merge", "-p", '{"spec":{"runPolicy":{"suspend":true}}}')
    assert row(kubectl)[:3] == ["pytorch-test", "Suspended", "<none>"]
    assert ledger.state(KEY) is JobState.ABSENT
    assert ledger.usage(LEAF).get(JOBS, 0) == 0
    suspended = Objects(fleet_redis).get(FLEET_PYTORCHJOB, "default", "pytorch-test")
    assert suspended["status"]["lastCluster"] == "member-1"  # the syncer deletes its copy there

    kubectl("patch", *job, "--type", "merge", "-p", '{"spec":{"runPolicy":{"suspend":false}}}')
    assert row(kubectl)[:2] == ["pytorch-test", "Queued"]
    assert ledger.state(KEY) is JobState.PENDING
    admit(fleet_redis)
    assert ledger.usage(LEAF)[JOBS] == 1
    described = kubectl("describe", *job).stdout
    assert "PyTorchJobSuspended" in described and "Resumed" in described
    assert "its copy in member-1 is deleted" in described

    # Anything else in the spec is what was queued and charged: refused, naming the switch.
    other = copy.deepcopy(torch())
    other["spec"]["runPolicy"]["backoffLimit"] = 9
    current = Objects(fleet_redis).get(FLEET_PYTORCHJOB, "default", "pytorch-test")
    other["metadata"] = current["metadata"]
    code, answer = call(fleet_api, "PUT", f"{TORCH}/pytorch-test", other)
    assert code == 422, answer
    (cause,) = answer["details"]["causes"]
    assert cause["field"] == "spec"
    assert "a job of this kind may flip spec.runPolicy.suspend" in cause["message"]


def test_an_ascendjob_has_no_switch_its_spec_stays_as_submitted(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", str(TREE))
    kubectl("apply", "-f", str(JOB))
    done = kubectl(
        "patch",
        "acjob",
        "default-test-pytorch",
        "--type",
        "merge",
        "-p",
        '{"spec":{"runPolicy":{"suspend":true}}}',
        ok=False,
    )
    assert done.returncode == 1
    assert "field is immutable" in done.stderr and "may flip" not in done.stderr


def test_the_owner_of_a_pytorchjob_may_flip_suspend_and_nothing_else(fleet_redis: redis.Redis) -> None:
    tokens = parse_token_file('alice-token-s1,alice,u-1,"namespace:default"\n')
    with FleetApiThread(fleet_redis, tokens=tokens, members=lambda: ["member-1"]) as api:
        code, stored = call(api, "POST", TORCH, torch(), token="alice-token-s1")
        assert code == 201, stored
        path = f"{TORCH}/pytorch-test"
        patch = {"spec": {"runPolicy": {"suspend": True}}}
        code, held = call(api, "PATCH", path, patch, token="alice-token-s1", merge=True)
        assert code == 200, held
        assert held["status"]["conditions"][-1]["type"] == "Suspended"
        more = {"spec": {"runPolicy": {"suspend": False, "backoffLimit": 9}}}
        code, answer = call(api, "PATCH", path, more, token="alice-token-s1", merge=True)
        assert code == 422, answer
        assert answer["details"]["causes"][0]["field"] == "spec"
        code, answer = call(api, "PATCH", f"{path}/status", {}, token="alice-token-s1", merge=True)
        assert code == 403, answer
