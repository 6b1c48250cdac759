"""The job page's timeline: Events and the member's states that record none, oldest first."""

from __future__ import annotations

from typing import Any

from fleet.endpoint.console.pages import timeline


def _condition(type_: str, status: str, reason: str, at: str) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": f"{type_} now",
        "lastTransitionTime": at,
    }


def _event(reason: str, at: str, type_: str = "Normal") -> dict[str, Any]:
    return {"type": type_, "reason": reason, "message": reason, "firstTimestamp": at, "lastTimestamp": at}


def test_running_and_succeeded_come_from_the_conditions_between_the_events() -> None:
    """The member's Running and Succeeded record no Event (issue 30): the timeline takes them
    from the conditions, in time order with the Events, whole seconds and fractions alike."""
    job = {
        "metadata": {"name": "train", "creationTimestamp": "2026-11-28T10:00:00Z"},
        "status": {
            "conditions": [
                _condition("Queued", "False", "Submitted", "2026-11-28T10:00:00.200000Z"),
                _condition("Admitted", "True", "Admitted", "2026-11-28T10:00:00.200000Z"),
                _condition("Dispatched", "True", "Dispatched", "2026-11-28T10:00:00.300000Z"),
                _condition("Created", "True", "JobCreated", "2026-11-28T10:00:00.400000Z"),
                _condition("Running", "True", "JobRunning", "2026-11-28T10:00:01.500000Z"),
                _condition("Succeeded", "True", "JobSucceeded", "2026-11-28T10:00:09.250000Z"),
            ]
        },
    }
    events = [
        _event("Dispatched", "2026-11-28T10:00:01Z"),
        _event("Submitted", "2026-11-28T10:00:00Z"),
        _event("ApplicationFailover", "2026-11-28T10:00:05Z", "Warning"),
    ]
    assert [(e["reason"], e["type"]) for e in timeline(job, events)] == [
        ("Submitted", "Normal"),
        ("Dispatched", "Normal"),
        ("JobRunning", "Normal"),
        ("ApplicationFailover", "Warning"),
        ("JobSucceeded", "Normal"),
    ]


def test_a_state_no_longer_true_is_left_to_the_events() -> None:
    """A job queued again after a failover says Running=False: the timeline shows no Running."""
    job = {
        "metadata": {"name": "moved"},
        "status": {"conditions": [_condition("Running", "False", "ClusterFailover", "2026-11-28T10:00:02Z")]},
    }
    failover = _event("ClusterFailover", "2026-11-28T10:00:02Z", "Warning")
    assert [e["reason"] for e in timeline(job, [failover])] == ["ClusterFailover"]
