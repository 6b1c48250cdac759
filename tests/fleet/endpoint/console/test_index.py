"""The console's job rows: filters and pages over tens of thousands of jobs cost little, and a
row reads a job's state, member and queue through fleet.jobs' readers."""

from __future__ import annotations

import time
from typing import Any

from fleet.endpoint.console.index import Row, row_of, select
from fleet.endpoint.console.pages import paged
from fleet.kinds import FLEET_JOB_KINDS
from tests.support.job_states import admit, run

RT = FLEET_JOB_KINDS[0]


def _row(i: int) -> Row:
    return Row(
        rt=FLEET_JOB_KINDS[i % len(FLEET_JOB_KINDS)],
        namespace=f"team-{i % 20}",
        name=f"job-{i:05d}",
        uid=str(i),
        state=("Queued", "Running", "Succeeded")[i % 3],
        member=f"member-{i % 100:03d}",
        queue=f"root-team-{i % 20}",
        priority=0,
        created=f"2026-01-01T00:{i // 600 % 60:02d}:{i // 10 % 60:02d}Z",
        message="",
    )


def test_a_row_is_read_through_the_jobs_readers() -> None:
    obj: dict[str, Any] = {
        "metadata": {"namespace": "a", "name": "j", "uid": "u", "creationTimestamp": "t"},
        "status": {"queue": "root-a", "priority": 5},
    }
    run(admit(obj, "member-2"), "member-2")
    row = row_of(RT, obj)
    assert (row.state, row.member, row.queue, row.priority, row.message) == (
        "Running",
        "member-2",
        "root-a",
        5,
        "Running in member-2",
    )


def test_filters_and_pages_over_ten_thousand_jobs_are_quick() -> None:
    rows = [_row(i) for i in range(10_000)]
    started = time.perf_counter()
    for _ in range(10):
        found = select(rows, keep=lambda r: r.namespace != "team-3", state="Queued", member="member-007")
        page = paged(found, 2, 50)
    elapsed = (time.perf_counter() - started) / 10
    assert all(r.state == "Queued" and r.member == "member-007" and r.namespace != "team-3" for r in found)
    assert page.total == len(found) and page.number <= page.pages
    named = [r.name for r in select(rows, keep=lambda _: True, name="JOB-0999")]  # any case, a substring
    assert named == [f"job-0999{i}" for i in range(9, -1, -1)]  # newest first
    assert elapsed < 0.5, f"{elapsed * 1000:.0f} ms per filtered page of 10,000 jobs"
