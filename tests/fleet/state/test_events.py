"""Events about fleet objects: the shape kubectl describe reads, aggregation of repeats, fencing."""

from __future__ import annotations

import re

import pytest
import redis

from fleet.apiserver import EVENT, NODE
from fleet.state import DispatchKeys, Objects, events_for, record_event, record_events
from queues import Fence, Fenced
from tests.support.kinds import ASCENDJOB


def test_an_event_has_the_shape_describe_reads(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    job = objects.create(ASCENDJOB, {"metadata": {"name": "train", "namespace": "team-a"}, "spec": {}})
    record_event(objects, job, reason="Queued", message="waiting in queue root", component="fleet-dispatcher")
    (event,) = events_for(objects, job)
    assert event["apiVersion"] == "v1" and event["kind"] == "Event"
    assert event["metadata"]["namespace"] == "team-a"
    assert re.fullmatch(r"train\.[0-9a-f]{16}", event["metadata"]["name"])
    assert event["involvedObject"] == {
        "apiVersion": "mindxdl.gitee.com/v1",
        "kind": "AscendJob",
        "name": "train",
        "namespace": "team-a",
        "uid": job["metadata"]["uid"],
    }
    assert (event["type"], event["reason"], event["message"]) == ("Normal", "Queued", "waiting in queue root")
    assert event["count"] == 1 and event["firstTimestamp"] == event["lastTimestamp"]
    assert event["source"] == {"component": "fleet-dispatcher"}
    assert event["reportingComponent"] == "fleet-dispatcher"
    listed, _ = objects.list(EVENT, "team-a")
    assert listed == [event]


def test_repeats_bump_the_count_and_new_reasons_add_events(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    job = objects.create(ASCENDJOB, {"metadata": {"name": "train", "namespace": "team-a"}, "spec": {}})
    for _ in range(3):
        record_event(objects, job, reason="Queued", message="waiting", component="c")
    record_event(objects, job, type="Warning", reason="Failover", message="member down", component="c")
    first, second = events_for(objects, job)
    assert (first["reason"], first["count"]) == ("Queued", 3)
    assert (second["type"], second["reason"], second["count"]) == ("Warning", "Failover", 1)


def test_a_batch_of_events_aggregates_repeats_as_single_ones_do(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    a = objects.create(ASCENDJOB, {"metadata": {"name": "a", "namespace": "team-a"}, "spec": {}})
    b = objects.create(ASCENDJOB, {"metadata": {"name": "b", "namespace": "team-a"}, "spec": {}})
    record_event(objects, a, reason="Admitted", message="placed", component="c")
    record_events(
        objects,
        [(a, "Admitted", "placed"), (b, "Admitted", "placed"), (b, "Dispatched", "created")],
        component="c",
    )
    assert [(e["reason"], e["count"]) for e in events_for(objects, a)] == [("Admitted", 2)]
    assert sorted((e["reason"], e["count"]) for e in events_for(objects, b)) == [
        ("Admitted", 1),
        ("Dispatched", 1),
    ]
    record_events(objects, [], component="c")  # nothing to say: nothing written
    assert len(objects.list(EVENT)[0]) == 3


def test_events_for_matches_the_object_by_uid(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    old = objects.create(ASCENDJOB, {"metadata": {"name": "train", "namespace": "team-a"}, "spec": {}})
    record_event(objects, old, reason="Queued", message="m", component="c")
    objects.delete(ASCENDJOB, "team-a", "train")
    new = objects.create(ASCENDJOB, {"metadata": {"name": "train", "namespace": "team-a"}, "spec": {}})
    other = objects.create(ASCENDJOB, {"metadata": {"name": "train-2", "namespace": "team-a"}, "spec": {}})
    record_event(objects, new, reason="Queued", message="m", component="c")
    record_event(objects, other, reason="Queued", message="m", component="c")
    (event,) = events_for(objects, new)
    assert event["involvedObject"]["uid"] == new["metadata"]["uid"] and event["count"] == 1
    assert len(events_for(objects, old)) == 1


def test_events_of_cluster_scoped_objects_go_to_default(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    node = objects.create(NODE, {"metadata": {"name": "n1"}})
    record_event(objects, node, reason="Ready", message="ok", component="c")
    (event,) = events_for(objects, node)
    assert event["metadata"]["namespace"] == "default" and "namespace" not in event["involvedObject"]


def test_fenced_events_need_the_current_token(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    lease = DispatchKeys.within(objects.keys).lease
    redis_client.set(lease, "2")
    job = objects.create(ASCENDJOB, {"metadata": {"name": "train", "namespace": "team-a"}, "spec": {}})
    record_event(objects, job, reason="Admitted", message="m", component="c", fence=Fence(lease, "2"))
    with pytest.raises(Fenced):
        record_event(objects, job, reason="Admitted", message="m", component="c", fence=Fence(lease, "1"))
    with pytest.raises(Fenced):
        record_event(objects, job, reason="Other", message="m", component="c", fence=Fence(lease, "1"))
    (event,) = events_for(objects, job)
    assert event["count"] == 1
