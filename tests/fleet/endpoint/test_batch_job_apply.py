"""Kubernetes' Job at the fleet through the real kubectl: ``kubectl apply`` of a changed Job sends
a strategic merge patch, as for any built-in kind; ``suspend`` is the field that may change. A Job
applied suspended without Kueue's label is held (``Suspended``, not queued); applied again with
``suspend: false`` it is queued. A Job written for Kueue (its label, ``suspend: true``) is queued
at once: the switch is Kueue's gate, which Fleet opens."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
import yaml

from fleet.jobs import current_state
from fleet.kinds import fleet_kind
from fleet.state import Objects
from fleet.workloads.batch_jobs import batch_job
from queues import Ledger
from tests.support.kubectl import Kubectl

pytestmark = pytest.mark.integration

SAMPLE = Path(__file__).resolve().parents[3] / "config" / "samples" / "kueue-batch-job.yaml"
FLEET_JOB = fleet_kind(batch_job)


def test_apply_flips_suspend_and_a_kueue_job_is_queued_at_once(
    kubectl: Kubectl, fleet_redis: redis.Redis, tmp_path: Path
) -> None:
    objects = Objects(fleet_redis)
    kueue = yaml.safe_load(SAMPLE.read_text())
    kueue["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "default"
    (tmp_path / "kueue.yaml").write_text(yaml.safe_dump(kueue))
    assert "job.batch/npu-sample-job created" in kubectl("apply", "-f", str(tmp_path / "kueue.yaml")).stdout
    assert current_state(objects.get(FLEET_JOB, "default", "npu-sample-job")) == "Queued"
    assert "jobs.batch:default/npu-sample-job" in Ledger(fleet_redis).pending.records()

    plain = yaml.safe_load(SAMPLE.read_text())
    plain["metadata"].update(name="held", labels={})
    (tmp_path / "held.yaml").write_text(yaml.safe_dump(plain))
    assert "job.batch/held created" in kubectl("apply", "-f", str(tmp_path / "held.yaml")).stdout
    held = objects.get(FLEET_JOB, "default", "held")
    assert current_state(held) == "Suspended"
    assert held["status"]["conditions"][-1]["reason"] == "JobSuspended"
    assert "jobs.batch:default/held" not in Ledger(fleet_redis).pending.records()

    plain["spec"]["suspend"] = False
    (tmp_path / "held.yaml").write_text(yaml.safe_dump(plain))
    assert "job.batch/held configured" in kubectl("apply", "-f", str(tmp_path / "held.yaml")).stdout
    resumed = objects.get(FLEET_JOB, "default", "held")
    assert resumed["spec"]["suspend"] is False and current_state(resumed) == "Queued"
    assert "jobs.batch:default/held" in Ledger(fleet_redis).pending.records()

    plain["spec"]["parallelism"] = 2
    (tmp_path / "held.yaml").write_text(yaml.safe_dump(plain))
    changed = kubectl("apply", "-f", str(tmp_path / "held.yaml"), ok=False)
    assert changed.returncode != 0 and "spec" in changed.stderr
