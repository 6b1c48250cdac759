"""Fleet job status: the last condition is always the state, mirrored after Fleet's own."""

from __future__ import annotations

from fleet.jobs import FleetStatus, Phase, current_state, mirror, set_state
from fleet.jobs.status import MAX_CONDITIONS
from fleet.workloads import WorkloadStatus


def _types(status: FleetStatus) -> list[str]:
    return [c["type"] for c in status["conditions"]]


def test_set_state_appends_and_repeats_are_idempotent() -> None:
    status: FleetStatus = {}
    assert set_state(status, Phase.QUEUED, "Submitted", "waiting in queue root")
    assert not set_state(status, Phase.QUEUED, "Submitted", "waiting in queue root")
    assert set_state(status, Phase.QUEUED, "QuotaExceeded", "quota root: cpu 4/4 in use")
    assert _types(status) == ["Queued"]
    assert status["conditions"][-1]["message"] == "quota root: cpu 4/4 in use"
    assert set_state(status, Phase.ADMITTED, "Admitted", "placed on member-2")
    assert current_state({"status": status}) == "Admitted"


def test_mirror_replaces_what_follows_dispatched_with_the_member_conditions() -> None:
    status: FleetStatus = {}
    set_state(status, Phase.QUEUED, "Submitted", "")
    set_state(status, Phase.ADMITTED, "Admitted", "")
    set_state(status, Phase.DISPATCHED, "Dispatched", "")
    created = {"type": "Created", "status": "True", "reason": "JobCreated", "message": "created"}
    running = {"type": "Running", "status": "True", "reason": "JobRunning", "message": "running"}
    assert mirror(status, WorkloadStatus("Created", "JobCreated", "", [created]), dispatched_message="m")
    assert _types(status) == ["Queued", "Admitted", "Dispatched", "Created"]
    member = WorkloadStatus("Running", "JobRunning", "", [created, running], {"Worker": {"active": 2}}, "t0")
    assert mirror(status, member, dispatched_message="m")
    assert _types(status) == ["Queued", "Admitted", "Dispatched", "Created", "Running"]
    assert status["replicaStatuses"] == {"Worker": {"active": 2}}
    assert status["startTime"] == "t0"
    assert not mirror(status, member, dispatched_message="m")


def test_mirror_before_the_worker_wrote_dispatched_adds_it() -> None:
    status: FleetStatus = {}
    set_state(status, Phase.ADMITTED, "Admitted", "")
    created = {"type": "Created", "status": "True", "reason": "PodGroupPending", "message": "pending"}
    mirror(
        status, WorkloadStatus("Created", "PodGroupPending", "", [created]), dispatched_message="created in m"
    )
    assert _types(status) == ["Admitted", "Dispatched", "Created"]


def test_conditions_stay_bounded_through_many_failovers() -> None:
    status: FleetStatus = {}
    for i in range(100):
        set_state(status, Phase.QUEUED, "Submitted", str(i))
        set_state(status, Phase.ADMITTED, "Admitted", str(i))
    assert len(status["conditions"]) == MAX_CONDITIONS
    assert current_state({"status": status}) == "Admitted"
