"""The readers of a fleet job's status: what an absent or malformed field reads as."""

from __future__ import annotations

from typing import Any

from fleet.jobs import (
    attempt_of,
    cluster_of,
    conditions_of,
    exclusions_of,
    failures_of,
    job_queue_of,
    last_cluster_of,
    member_failures_of,
    not_before_of,
    preempted_by_of,
    refused_of,
    status_for_update,
    status_of,
)

FULL: dict[str, Any] = {
    "metadata": {"name": "a"},
    "status": {
        "conditions": [{"type": "Queued", "status": "True"}],
        "queue": "root-a",
        "cluster": "member-1",
        "lastCluster": "member-2",
        "attempt": 2,
        "failures": 1,
        "excluded": {"member-2": 100.5},
        "excludedFirmly": {"member-3": 200},
        "memberFailures": {"member-2": 2},
        "refused": {"member-4": "403 Forbidden"},
        "notBefore": 50.25,
        "preemptedBy": "ns/vip",
    },
}


def test_each_field_reads_as_written() -> None:
    assert conditions_of(FULL) == [{"type": "Queued", "status": "True"}]
    assert job_queue_of(FULL) == "root-a"
    assert (cluster_of(FULL), last_cluster_of(FULL)) == ("member-1", "member-2")
    assert (attempt_of(FULL), failures_of(FULL), not_before_of(FULL)) == (2, 1, 50.25)
    assert exclusions_of(FULL) == {"member-2": 100.5}
    assert exclusions_of(FULL, firm=True) == {"member-3": 200}  # as written: not made a float
    assert member_failures_of(FULL) == {"member-2": 2}
    assert refused_of(FULL) == {"member-4": "403 Forbidden"}
    assert preempted_by_of(FULL) == "ns/vip"


def test_a_job_without_a_status_reads_as_never_placed() -> None:
    for obj in ({"metadata": {"name": "a"}}, {"status": None}, {"status": "garbage"}):
        assert status_of(obj) == {}
        assert conditions_of(obj) == []
        assert job_queue_of(obj) is None and cluster_of(obj) is None and last_cluster_of(obj) is None
        assert (attempt_of(obj), failures_of(obj), not_before_of(obj)) == (0, 0, 0.0)
        assert exclusions_of(obj) == exclusions_of(obj, firm=True) == {}
        assert member_failures_of(obj) == {} and refused_of(obj) == {}
        assert preempted_by_of(obj) == ""


def test_malformed_maps_and_lists_read_as_empty() -> None:
    obj = {
        "status": {
            "conditions": "Queued",
            "excluded": ["member-1"],
            "excludedFirmly": 3,
            "memberFailures": "x",
            "refused": ["member-2"],
            "cluster": "",
        }
    }
    assert conditions_of(obj) == []
    assert exclusions_of(obj) == exclusions_of(obj, firm=True) == {}
    assert member_failures_of(obj) == {} and refused_of(obj) == {}
    assert cluster_of(obj) is None


def test_readers_return_copies_of_the_maps() -> None:
    obj: dict[str, Any] = {"status": {"excluded": {"m": 1.0}, "memberFailures": {"m": 1}}}
    exclusions_of(obj)["n"] = 2.0
    member_failures_of(obj)["n"] = 2
    assert obj["status"] == {"excluded": {"m": 1.0}, "memberFailures": {"m": 1}}


def test_status_for_update_makes_the_status_once_and_writes_through() -> None:
    obj: dict[str, Any] = {"metadata": {}}
    status = status_for_update(obj)
    status["queue"] = "root"
    assert obj["status"] == {"queue": "root"}
    assert status_for_update(obj) is obj["status"]
