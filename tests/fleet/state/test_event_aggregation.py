"""Events aggregate as Kubernetes' EventCorrelator aggregates them (client-go's
``EventAggregatorByReasonFunc``): one Event per object, source, type and reason, whose message is
the latest one, with a count, the first time and the last time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fakeredis
import pytest
import redis
from click.testing import CliRunner

from fleet.apiserver import EVENT
from fleet.cli import main
from fleet.connections import run_scripts
from fleet.state import Objects, event_call, event_name, events_for, record_event, record_events
from fleet.state import events as events_module
from tests.support.fleet_api import FleetApiThread
from tests.support.kinds import ASCENDJOB, FLEET_ASCENDJOB


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Each Event write reads the next second; ``[...]`` holds the times handed out."""
    handed: list[str] = []

    def tick() -> str:
        handed.append(f"2024-05-01T10:{len(handed) // 60:02}:{len(handed) % 60:02}Z")
        return handed[-1]

    monkeypatch.setattr(events_module, "now_rfc3339", tick)
    yield handed


def refusal(used: int) -> str:
    return f"quota root/a: cpu {used} used + 2 requested exceeds max 10"


def job(objects: Objects, name: str = "train") -> dict[str, Any]:
    return objects.create(ASCENDJOB, {"metadata": {"name": name, "namespace": "team-a"}, "spec": {}})


def test_changing_messages_under_one_reason_are_one_event(
    redis_client: redis.Redis, clock: list[str]
) -> None:
    objects = Objects(redis_client)
    train = job(objects)
    record_event(objects, train, type="Warning", reason="QuotaExceeded", message=refusal(9), component="d")
    first = clock[-1]
    record_events(objects, [(train, "QuotaExceeded", refusal(8))], type="Warning", component="d")
    call, settle = event_call(
        objects, train, type="Warning", reason="QuotaExceeded", message=refusal(7), component="d"
    )
    (reply,) = run_scripts(objects.client, [call])
    settle(reply)
    record_event(objects, train, type="Warning", reason="QuotaExceeded", message=refusal(8), component="d")
    last = clock[-1]
    (event,) = events_for(objects, train)
    assert event["count"] == 4
    assert event["message"] == refusal(8)
    assert (event["firstTimestamp"], event["lastTimestamp"]) == (first, last)
    assert event["metadata"]["name"] == event_name(train, "QuotaExceeded", type="Warning", component="d")
    assert len(objects.list(EVENT)[0]) == 1


def test_a_job_refused_again_and_again_has_one_event(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    jobs = [job(objects, f"j{i}") for i in range(5)]
    for round_ in range(200):
        record_events(objects, [(j, "QuotaExceeded", refusal(round_ % 10)) for j in jobs], component="d")
    events, _ = objects.list(EVENT)
    assert len(events) == 5
    assert {e["count"] for e in events} == {200}
    assert {e["message"] for e in events} == {refusal(9)}


def test_reasons_types_and_sources_are_separate_events_oldest_first(
    redis_client: redis.Redis, clock: list[str]
) -> None:
    objects = Objects(redis_client)
    train, other = job(objects), job(objects, "train-2")
    record_event(objects, train, reason="Submitted", message="queued in root-a", component="api")
    record_event(objects, train, reason="QuotaExceeded", message=refusal(9), component="d")
    record_event(objects, train, type="Warning", reason="QuotaExceeded", message=refusal(9), component="d")
    record_event(objects, train, reason="QuotaExceeded", message=refusal(9), component="other")
    record_event(objects, other, reason="QuotaExceeded", message=refusal(9), component="d")
    record_event(objects, train, reason="Submitted", message="queued in root-b", component="api")
    listed = events_for(objects, train)
    assert [(e["type"], e["reason"], e["source"]["component"], e["count"]) for e in listed] == [
        ("Normal", "QuotaExceeded", "d", 1),
        ("Warning", "QuotaExceeded", "d", 1),
        ("Normal", "QuotaExceeded", "other", 1),
        ("Normal", "Submitted", "api", 2),  # its last time is the latest: listed last
    ]
    assert listed[-1]["message"] == "queued in root-b"
    assert listed[-1]["firstTimestamp"] == clock[0] and listed[-1]["lastTimestamp"] == clock[-1]
    assert [e["count"] for e in events_for(objects, other)] == [1]


def test_an_event_deleted_meanwhile_is_recorded_again(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    train = job(objects)
    record_event(objects, train, reason="QuotaExceeded", message=refusal(9), component="d")
    (event,) = events_for(objects, train)
    objects.delete(EVENT, "team-a", event["metadata"]["name"])
    record_event(objects, train, reason="QuotaExceeded", message=refusal(3), component="d")
    (again,) = events_for(objects, train)
    assert (again["count"], again["message"]) == (1, refusal(3))


@pytest.mark.integration
def test_describe_shows_one_aggregated_event_per_reason_oldest_first(
    tmp_path: Path, clock: list[str]
) -> None:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    objects = Objects(client)
    status = {"conditions": [{"type": "Queued", "status": "True", "reason": "QuotaExceeded"}]}
    train = objects.create(
        FLEET_ASCENDJOB, {"metadata": {"name": "train", "namespace": "default"}, "spec": {}, "status": status}
    )
    other = objects.create(
        FLEET_ASCENDJOB, {"metadata": {"name": "train-2", "namespace": "default"}, "spec": {}}
    )
    record_event(objects, train, reason="Submitted", message="queued in root-a", component="fleet")
    for used in (9, 8, 7):
        record_event(
            objects, train, reason="QuotaExceeded", message=refusal(used), component="fleet-dispatcher"
        )
    record_event(objects, other, reason="Elsewhere", message="not about train", component="fleet")
    with FleetApiThread(client) as api:
        config = api.kubeconfig(tmp_path / "kubeconfig")
        described = CliRunner().invoke(main, ["describe", "acjob", "train", "--kubeconfig", str(config)])
    client.close()
    assert described.exit_code == 0, described.output
    events = described.stdout.split("Events:", 1)[1].splitlines()[2:]
    assert [line.split()[1] for line in events] == ["Submitted", "QuotaExceeded"]
    assert "(x3)" in events[1] and events[1].rstrip().endswith(refusal(7))
    assert "not about train" not in described.stdout
