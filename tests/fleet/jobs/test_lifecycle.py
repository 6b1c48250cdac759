"""A fleet job's state machine (fleet.jobs.lifecycle): every transition, its guard, and the
conditions it leaves, as ``kubectl wait --for=condition=...`` and a job's printer columns read
them."""

from __future__ import annotations

import ast
import time
from pathlib import Path
from typing import Any

import pytest

from fleet.jobs import (
    Admit,
    Attempt,
    Blame,
    Dispatch,
    EndAttempt,
    Ending,
    Fail,
    FleetReason,
    Hold,
    Mirror,
    Phase,
    Preempt,
    Resume,
    Submit,
    Terminate,
    Wait,
    condition,
    current_state,
    exclusions_of,
    not_before_of,
    step,
)
from fleet.jobs.lifecycle import table
from fleet.policy import Failover
from fleet.timestamps import parse_rfc3339
from fleet.workloads import WorkloadStatus

ROOT = Path(__file__).resolve().parents[3]
FAILOVER = Failover.model_validate({"backoffLimit": 2, "backoffSeconds": 10})


def job(uid: str = "u1") -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "train", "namespace": "default", "uid": uid}, "status": {}}
    return go(obj, Submit("root-child-2"))


def go(obj: dict[str, Any], event: Any, guard: Attempt | None = None) -> dict[str, Any]:
    status = step(obj, event, guard)
    assert status is not None, f"{type(event).__name__} did not apply"
    return {**obj, "status": status}


def types(obj: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["type"], c["status"]) for c in obj["status"]["conditions"]]


def member_status(*states: str, replicas: dict[str, Any] | None = None) -> WorkloadStatus:
    conditions = [{"type": s, "status": "True", "reason": f"Job{s}", "message": s} for s in states]
    return WorkloadStatus(states[-1], f"Job{states[-1]}", states[-1], conditions, replicas or {}, "t0")


def running(obj: dict[str, Any], member: str = "member-2") -> dict[str, Any]:
    attempt = int(obj["status"].get("attempt") or 0) + 1
    obj = go(obj, Admit(member, attempt, f"u1/{attempt}", f"placed on {member}"), Attempt("u1", attempt - 1))
    obj = go(obj, Dispatch(FleetReason.DISPATCHED, "created"), Attempt("u1", attempt))
    seen = member_status("Created", "Running", replicas={"Worker": {"active": 2}})
    return go(obj, Mirror(seen, member, attempt), Attempt("u1", attempt, member))


def test_a_job_submitted_is_queued_with_one_condition() -> None:
    obj = job()
    assert types(obj) == [("Queued", "True")]
    assert obj["status"]["queue"] == "root-child-2" and obj["status"]["attempt"] == 0


def test_each_condition_type_appears_once_and_the_last_is_the_state() -> None:
    obj = running(job())
    assert types(obj) == [
        ("Queued", "False"),
        ("Admitted", "True"),
        ("Dispatched", "True"),
        ("Created", "True"),
        ("Running", "True"),
    ]
    assert current_state(obj) == "Running"
    assert obj["status"]["replicaStatuses"] == {"Worker": {"active": 2}}


def test_last_transition_time_moves_only_when_the_status_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    obj = job()
    queued = condition(obj, Phase.QUEUED)
    assert queued is not None
    monkeypatch.setattr(time, "time", lambda: 4_000_000_000.0)
    later = go(obj, Wait(FleetReason.QUOTA_EXCEEDED, "root: 4 used + 8 requested exceeds max 8"))
    again = condition(later, Phase.QUEUED)
    assert again is not None
    assert again["lastTransitionTime"] == queued["lastTransitionTime"], "still True: no transition"
    assert again["lastUpdateTime"] != queued["lastUpdateTime"] and again["reason"] == "QuotaExceeded"
    admitted = go(later, Admit("member-1", 1, "r", "placed"), Attempt("u1", 0))
    flipped = condition(admitted, Phase.QUEUED)
    assert flipped is not None and flipped["status"] == "False"
    assert flipped["lastTransitionTime"] != queued["lastTransitionTime"]


def test_a_repeated_event_changes_nothing() -> None:
    obj = job()
    waiting = go(obj, Wait(FleetReason.NO_FIT, "no member fits"))
    assert step(waiting, Wait(FleetReason.NO_FIT, "no member fits")) is None


def test_the_guard_refuses_another_uid_another_attempt_another_member_and_a_deleted_job() -> None:
    obj = running(job())
    lost = EndAttempt("member-2", FleetReason.COPY_LOST, "gone", FAILOVER)
    assert step(obj, lost, Attempt("other", 1, "member-2")) is None
    assert step(obj, lost, Attempt("u1", 2, "member-2")) is None
    assert step(obj, lost, Attempt("u1", 1, "member-3")) is None
    assert step(obj, lost, Attempt("u1", 1, "member-2", state=Phase.ADMITTED)) is None
    deleted = {**obj, "metadata": {**obj["metadata"], "deletionTimestamp": "2026-11-28T00:00:00Z"}}
    assert step(deleted, lost, Attempt("u1", 1, "member-2")) is None
    assert step(obj, lost, Attempt("u1", 1, "member-2")) is not None


def test_an_ended_attempt_clears_what_the_member_said() -> None:
    """After a failover the job is Queued again: no Running=True, no old replicaStatuses."""
    obj = running(job())
    back = go(obj, EndAttempt("member-2", FleetReason.CLUSTER_FAILOVER, "member-2 NotReady", FAILOVER),
              Attempt("u1", 1, "member-2"))  # fmt: skip
    assert types(back) == [("Admitted", "False"), ("Dispatched", "False"), ("Queued", "True")]
    assert current_state(back) == "Queued"
    for field in ("replicaStatuses", "startTime", "cluster", "reservation"):
        assert field not in back["status"]
    assert back["status"]["lastCluster"] == "member-2"
    again = running(back, "member-1")
    assert [t for t, s in types(again) if s == "True"] == ["Admitted", "Dispatched", "Created", "Running"]
    assert len(types(again)) == 5, "a second attempt adds no condition: one per type"


def test_a_failure_backs_off_and_excludes_by_blame_in_rfc3339() -> None:
    obj = running(job())
    now = 4_000_000_000.0
    ending = Ending(count_failure=True, blame=Blame.MEMBER)
    status = step(obj, EndAttempt("member-2", FleetReason.APPLICATION_FAILOVER, "stuck", FAILOVER, ending),
                  Attempt("u1", 1, "member-2"), now=now)  # fmt: skip
    assert status is not None
    back = {**obj, "status": status}
    assert parse_rfc3339(status["notBefore"]) is not None
    assert not_before_of(back) == pytest.approx(now + 10)
    assert isinstance(status["excluded"]["member-2"], str)
    assert exclusions_of(back)["member-2"] == pytest.approx(now + 10 + 10)
    assert status["memberFailures"] == {"member-2": 1} and status["failures"] == 1


def test_retries_running_out_fail_the_job() -> None:
    obj = job()
    for attempt in range(1, 4):
        obj = go(obj, Admit("member-1", attempt, "r", "placed"), Attempt("u1", attempt - 1))
        obj = go(obj, EndAttempt("member-1", FleetReason.APPLICATION_FAILOVER, "boom", FAILOVER,
                                 Ending(count_failure=True)), Attempt("u1", attempt, "member-1"))  # fmt: skip
    assert current_state(obj) == "Failed"
    failed = condition(obj, "Failed")
    assert failed is not None and failed["reason"] == FleetReason.BACKOFF_LIMIT_EXCEEDED


def test_every_member_refusing_fails_the_job_and_terminal_endings_fail_it() -> None:
    obj = go(job(), Admit("member-1", 1, "r", "placed"), Attempt("u1", 0))
    refused = Ending(refused="403 Forbidden", members=("member-1",))
    end = go(obj, EndAttempt("member-1", FleetReason.MEMBER_REFUSED, "no", FAILOVER, refused))
    assert current_state(end) == "Failed"
    assert (condition(end, "Failed") or {})["reason"] == FleetReason.ALL_MEMBERS_REFUSED
    end = go(obj, EndAttempt("member-1", FleetReason.MEMBER_REJECTED, "422", FAILOVER, Ending(terminal=True)))
    assert (condition(end, "Failed") or {})["reason"] == FleetReason.MEMBER_REJECTED


def test_a_victim_being_evicted_takes_only_an_end_from_its_member() -> None:
    obj = running(job())
    marked = go(obj, Preempt("default/big", "preempted by default/big"), Attempt("u1", 1))
    assert current_state(marked) == Phase.RESCHEDULING and marked["status"]["preemptedBy"] == "default/big"
    assert step(marked, Mirror(member_status("Created", "Restarting"), "member-2", 1)) is None
    done = go(marked, Mirror(member_status("Created", "Succeeded"), "member-2", 1))
    assert current_state(done) == "Succeeded"
    assert (condition(done, Phase.RESCHEDULING) or {})["status"] == "False"


def test_a_member_state_that_is_false_last_does_not_become_the_state() -> None:
    conditions = [
        {"type": "Running", "status": "True", "reason": "R", "message": ""},
        {"type": "Restarting", "status": "False", "reason": "R", "message": ""},
    ]
    seen = WorkloadStatus("Running", "R", "", conditions)
    obj = go(go(job(), Admit("m", 1, "r", "p")), Mirror(seen, "m", 1))
    assert current_state(obj) == "Running" and obj["status"]["conditions"][-1]["type"] == "Running"


def test_deletion_holding_and_resuming() -> None:
    obj = running(job())
    deleted = {**obj, "metadata": {**obj["metadata"], "deletionTimestamp": "2026-11-28T00:00:00Z"}}
    assert step(obj, Terminate(FleetReason.DELETING_COPY, "deleting")) is None, "only a job being deleted"
    assert current_state(go(deleted, Terminate(FleetReason.DELETING_COPY, "deleting"))) == Phase.TERMINATING
    held = go(obj, Hold(Phase.SUSPENDED, FleetReason.SUSPENDED, "suspended"))
    assert current_state(held) == Phase.SUSPENDED and "cluster" not in held["status"]
    assert [t for t, s in types(held) if s == "True"] == ["Suspended"]
    back = go(held, Resume("resumed"))
    assert current_state(back) == Phase.QUEUED
    assert current_state(go(back, Fail(FleetReason.INVALID, "bad"))) == "Failed"


def test_an_old_history_is_read_and_rewritten_as_one_condition_per_type() -> None:
    """A job stored by an older Fleet: conditions as a history, times as epoch seconds."""
    history = [
        {"type": t, "status": "True", "reason": t, "message": ""}
        for t in ("Queued", "Admitted", "Dispatched", "Running", "Rescheduling", "Queued")
    ]
    obj = {"metadata": {"uid": "u1"}, "status": {"conditions": history, "attempt": 1,
                                                 "excluded": {"member-1": 4_000_000_000.0}}}  # fmt: skip
    assert current_state(obj) == "Queued"
    assert exclusions_of(obj) == {"member-1": 4_000_000_000.0}
    admitted = go(obj, Admit("member-2", 2, "r", "placed"), Attempt("u1", 1))
    kinds = [c["type"] for c in admitted["status"]["conditions"]]
    assert sorted(kinds) == sorted(set(kinds)) and current_state(admitted) == "Admitted"


def test_the_transition_table_in_docs_is_current() -> None:
    assert (ROOT / "docs" / "lifecycle.md").read_text() == table(), "regenerate it: make docs"


# What writes a job's state: only the state machine (and the list mechanics it uses).
_WRITERS = {"fleet/jobs/lifecycle.py", "fleet/jobs/conditions.py"}
#: Modules that write conditions of other objects than fleet jobs: the member simulator (the
#: members' own), the serving core (core kinds), and the MemberCluster and quota kinds' status.
_OTHER_OBJECTS = ("fleet/sim/", "fleet/apiserver/", "fleet/endpoint/members.py", "fleet/kinds.py")


def _writes_state(tree: ast.AST) -> list[int]:
    """Lines that store into ``[...]["conditions"]`` or call ``put`` of the conditions module."""
    lines = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        lines += [
            target.lineno
            for target in targets
            if isinstance(target, ast.Subscript)
            and isinstance(target.slice, ast.Constant)
            and target.slice.value == "conditions"
        ]
        if (
            isinstance(node, ast.ImportFrom)
            and node.module == "fleet.jobs.conditions"
            and any(alias.name == "put" for alias in node.names)
        ):
            lines.append(node.lineno)
    return lines


def test_no_module_but_the_state_machine_writes_a_jobs_state_or_conditions() -> None:
    offenders = []
    for path in sorted((ROOT / "fleet").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in _WRITERS or rel.startswith(_OTHER_OBJECTS):
            continue
        for line in _writes_state(ast.parse(path.read_text())):
            offenders.append(f"{rel}:{line}")
    assert offenders == [], "write a job's state through fleet.jobs.lifecycle, not by hand"


def test_the_check_finds_a_write_by_hand() -> None:
    assert _writes_state(ast.parse('obj["status"]["conditions"] = []')) == [1]
    assert _writes_state(ast.parse("from fleet.jobs.conditions import put")) == [1]
    assert _writes_state(ast.parse('status.get("conditions")')) == []
