"""Submission: an accepted job is stored Queued, queued on its leaf and its Submitted Event recorded."""

from __future__ import annotations

from typing import Any

import redis

from fleet.jobs import current_state, submit
from fleet.jobs.phases import FleetReason
from fleet.jobs.submit import enqueue, prepare, queue_accepted
from fleet.state import Objects, events_for
from queues import JobState, Ledger
from tests.fleet.placement import factory
from tests.queues.support import make_tree
from tests.support.kinds import FLEET_ASCENDJOB


def job(name: str, **kwargs: Any) -> dict[str, Any]:
    obj = factory.job(name, **kwargs)
    obj["metadata"]["namespace"] = "default"
    return obj


def _submitted(objects: Objects, stored: dict[str, Any]) -> list[tuple[str, str, int]]:
    return [
        (e["reason"], e["message"], e["count"])
        for e in events_for(objects, stored)
        if e["reason"] == FleetReason.SUBMITTED
    ]


def test_a_submitted_job_is_stored_queued_and_its_event_recorded(redis_client: redis.Redis) -> None:
    objects, ledger = Objects(redis_client), Ledger(redis_client)
    stored = submit(objects, ledger, job("train", workers=1, npus=8))
    assert current_state(stored) == "Queued"
    assert objects.get(FLEET_ASCENDJOB, "default", "train")["metadata"]["uid"] == stored["metadata"]["uid"]
    assert ledger.pending.peek("root", 10) == ["default/train"]
    assert ledger.pending.records()["default/train"].request == {"huawei.com/Ascend910": 16, "pods": 2}
    assert _submitted(objects, stored) == [("Submitted", "queued in root", 1)]


def test_submission_takes_three_round_trips(real_redis: redis.Redis, round_trips: list[int]) -> None:
    """The tree's version and the PriorityClass change check together (one MULTI), the create,
    then the queueing and the Event together."""
    objects, ledger = Objects(real_redis), Ledger(real_redis)
    submit(objects, ledger, job("warm-up"))  # scripts loaded, the tree read once
    before = round_trips[0]
    for i in range(5):
        submit(objects, ledger, job(f"j{i}"))
    assert round_trips[0] - before == 3 * 5
    assert len(ledger.pending.peek("root", 10)) == 6


def test_queueing_an_accepted_job_again_changes_nothing_but_the_events_count(
    redis_client: redis.Redis,
) -> None:
    """What a retry of the second step does: the job stays queued once, its Event says twice."""
    objects, ledger = Objects(redis_client), Ledger(redis_client)
    prepared = prepare(job("again"), ledger)
    stored = objects.create(FLEET_ASCENDJOB, prepared.obj)
    queue_accepted(objects, ledger, prepared, stored)
    queue_accepted(objects, ledger, prepared, stored)
    assert ledger.pending.peek("root", 10) == ["default/again"]
    assert ledger.enqueue("default/again", "root", prepared.request) is JobState.PENDING
    assert _submitted(objects, stored) == [("Submitted", "queued in root", 2)]


def test_a_ledger_on_another_client_is_written_separately(redis_client: redis.Redis) -> None:
    other = redis.Redis(connection_pool=redis_client.connection_pool)
    objects, ledger = Objects(redis_client), Ledger(other)
    stored = submit(objects, ledger, job("apart"))
    assert ledger.pending.peek("root", 10) == ["default/apart"]
    assert _submitted(objects, stored) == [("Submitted", "queued in root", 1)]


def test_a_tree_applied_elsewhere_costs_the_next_submission_one_read(
    real_redis: redis.Redis, round_trips: list[int]
) -> None:
    """The version read with the PriorityClass check is exact: the next submission reads the new
    tree's spec (one more round trip) and is queued in it; the one after is back to three."""
    objects, ledger = Objects(real_redis), Ledger(real_redis)
    submit(objects, ledger, job("warm-up"))
    team = {"name": "team", "namespaces": ["default"], "max": {"huawei.com/Ascend910": 64}}
    Ledger(real_redis).apply(make_tree({"name": "root", "children": [team]}))  # another replica
    before = round_trips[0]
    stored = submit(objects, ledger, job("in-team"))
    assert round_trips[0] - before == 4
    assert stored["status"]["queue"] == "root-team"
    assert ledger.pending.peek("team", 10) == ["default/in-team"]
    before = round_trips[0]
    submit(objects, ledger, job("again"))
    assert round_trips[0] - before == 3


def test_a_job_stored_before_a_rule_came_is_queued_again_as_accepted(redis_client: redis.Redis) -> None:
    """What the reconcile and a resume do with a stored job the ledger does not hold: its demand
    is read as accepted (a rule that came after, here the framework label as if required later,
    does not fail it), and it waits in its queue with the request it was accepted with."""
    objects, ledger = Objects(redis_client), Ledger(redis_client)
    stored = submit(objects, ledger, job("before-the-rule", workers=1, npus=8))
    ledger.release("default/before-the-rule")
    del stored["metadata"]["labels"]["framework"]
    prepared = enqueue(ledger, stored)
    assert prepared.request == {"huawei.com/Ascend910": 16, "pods": 2}
    assert ledger.pending.peek("root", 10) == ["default/before-the-rule"]
