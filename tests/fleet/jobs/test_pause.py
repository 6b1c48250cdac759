"""Pause and resume at the fleet: a paused T9k job holds no quota and is in no queue."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from fleet.jobs import cluster_of, current_state
from fleet.jobs.pause import SpecChanged, apply, paused_at_submission, switched
from fleet.jobs.submit import job_key, prepare, queue_accepted
from fleet.state import Objects, events_for
from fleet.workloads import T9K_TFJOB
from queues import JobState, Ledger

SAMPLE = Path(__file__).resolve().parents[3] / "config" / "samples" / "t9k-tensorflowtrainingjob.yaml"


def tf_job() -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    obj["metadata"]["namespace"] = "default"
    return obj


def with_pause(obj: dict[str, Any], on: bool) -> dict[str, Any]:
    new = copy.deepcopy(obj)
    new["spec"].setdefault("runMode", {})["pause"] = {"enabled": on}
    return new


def submitted(objects: Objects, ledger: Ledger) -> dict[str, Any]:
    prepared = prepare(tf_job(), ledger)
    stored = objects.create(T9K_TFJOB, prepared.obj)
    queue_accepted(objects, ledger, prepared, stored)
    return stored


def test_only_the_pause_switch_may_change() -> None:
    job = tf_job()
    assert switched(job, copy.deepcopy(job)) is None
    assert switched(job, with_pause(job, True)) is True
    assert switched(with_pause(job, True), with_pause(job, False)) is False
    assert switched(with_pause(job, False), tf_job()) is None  # off, either way
    other = copy.deepcopy(job)
    other["spec"]["replicaSpecs"][0]["replicas"] = 8
    with pytest.raises(SpecChanged):
        switched(job, other)
    assert paused_at_submission(with_pause(job, True)) and not paused_at_submission(job)


def test_pausing_a_queued_job_takes_it_out_of_its_queue_and_resuming_queues_it_again(
    redis_client: redis.Redis,
) -> None:
    objects, ledger = Objects(redis_client), Ledger(redis_client)
    stored = submitted(objects, ledger)
    key = job_key(stored)
    assert ledger.state(key) is JobState.PENDING
    paused = apply(objects, ledger, T9K_TFJOB, stored, with_pause(stored, True), pause=True)
    assert paused is not None and current_state(paused) == "Paused"
    assert paused["spec"]["runMode"]["pause"]["enabled"] is True
    assert ledger.state(key) is JobState.ABSENT
    resumed = apply(objects, ledger, T9K_TFJOB, paused, with_pause(paused, False), pause=False)
    assert resumed is not None and current_state(resumed) == "Queued"
    assert ledger.state(key) is JobState.PENDING
    reasons = [e["reason"] for e in events_for(objects, resumed)]
    assert "Paused" in reasons and "Resumed" in reasons


def test_pausing_a_running_job_returns_its_quota_and_lets_go_of_its_member(redis_client: redis.Redis) -> None:
    objects, ledger = Objects(redis_client), Ledger(redis_client)
    stored = submitted(objects, ledger)
    key = job_key(stored)
    assert ledger.admit_pending(key).admitted
    assert ledger.usage("root")["cpu"] == 2000

    def running(obj: dict[str, Any]) -> dict[str, Any]:
        obj["status"].update(cluster="member-1", attempt=1)
        obj["status"]["conditions"].append(
            {"type": "Running", "status": "True", "reason": "-", "message": ""}
        )
        return obj

    placed = objects.mutate(T9K_TFJOB, "default", "tensorflow-example", running)
    assert placed is not None
    paused = apply(objects, ledger, T9K_TFJOB, placed, with_pause(placed, True), pause=True)
    assert paused is not None and current_state(paused) == "Paused"
    assert cluster_of(paused) is None and paused["status"]["lastCluster"] == "member-1"
    assert ledger.state(key) is JobState.ABSENT
    assert ledger.usage("root").get("cpu", 0) == 0


def test_a_paused_job_no_longer_shows_its_copys_phase(redis_client: redis.Redis) -> None:
    objects, ledger = Objects(redis_client), Ledger(redis_client)
    submitted(objects, ledger)

    def running(obj: dict[str, Any]) -> dict[str, Any]:
        obj["status"].update(cluster="member-1", attempt=1, phase="Running", aggregate={"running": 4})
        return obj

    placed = objects.mutate(T9K_TFJOB, "default", "tensorflow-example", running)
    assert placed is not None
    paused = apply(objects, ledger, T9K_TFJOB, placed, with_pause(placed, True), pause=True)
    assert paused is not None
    assert "phase" not in paused["status"] and "aggregate" not in paused["status"]
