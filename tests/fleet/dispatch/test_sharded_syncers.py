"""Three ``fleet syncer --sharded`` processes over the simulator: one killed with -9 and one
added mid-run (issue 21, req. 5).

Jobs run and finish throughout. Every one must end ``Succeeded`` on its first attempt: a status
change a dead syncer's member made while nobody watched it is seen by the new owner's list (no
update lost), and no member is failed over twice or by mistake (no second attempt, one copy per
job). The dead syncer's members are owned by a live syncer again within the lease time.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import pytest

from fleet.jobs import attempt_of
from fleet.jobs.phases import Phase
from fleet.state.dispatch_keys import DEFAULT_DISPATCH_KEYS
from tests.fleet.dispatch.conftest import MODULE_POOL, RunningFleet, mixed_job
from tests.support.kinds import FLEET_ASCENDJOB

pytestmark = pytest.mark.integration

OWNERSHIP = 2.0
MEMBERS = {f"member-{i}": {**MODULE_POOL, "prefix": f"m{i}", "count": 2} for i in range(1, 7)}
SUCCEEDED = "Succeeded"


def _owners(fleet: RunningFleet) -> dict[str, str]:
    raw: dict[bytes, bytes] = fleet.client.hgetall(DEFAULT_DISPATCH_KEYS.owners)  # type: ignore[assignment]
    now_ms = time.time() * 1000
    owners = {}
    for member, value in raw.items():
        holder, expiry = value.decode().rsplit("|", 1)
        if float(expiry) > now_ms:
            owners[member.decode()] = holder
    return owners


def _syncer_id(fleet: RunningFleet, role: str) -> str:
    process = fleet.procs.roles[role].process
    assert process is not None
    return f"{socket.gethostname()}-{process.pid}"


def _submit(fleet: RunningFleet, first: int, count: int) -> list[str]:
    keys = []
    for i in range(first, first + count):
        obj = fleet.submit(mixed_job(4 * i, "team-a", 2))  # one 1-NPU pod for 2 s, fits any member
        keys.append(f"team-a/{obj['metadata']['name']}")
    return keys


def test_sharded_syncers_survive_a_kill_and_a_newcomer(fleet_factory: Callable[..., RunningFleet]) -> None:
    fleet = fleet_factory(members=MEMBERS, workers=2, syncer=False)
    args = ("--sharded", "--ownership-seconds", str(OWNERSHIP), "--probe-interval", "0.3")
    for n in (1, 2, 3):
        fleet.procs.start(f"syncer-{n}", "syncer", *args)
    ids = {role: _syncer_id(fleet, role) for role in ("syncer-1", "syncer-2", "syncer-3")}
    fleet.wait_for(
        "three syncers to share the members",
        lambda: set(_owners(fleet)) == set(MEMBERS) and set(_owners(fleet).values()) == set(ids.values()),
        60,  # three Python processes starting on a busy machine
    )
    keys = _submit(fleet, 0, 8)
    fleet.wait_for("the first jobs to run", lambda: any(fleet.states()[k] != Phase.QUEUED for k in keys), 60)

    victim = "syncer-1"
    lost = {m for m, holder in _owners(fleet).items() if holder == ids[victim]}
    assert lost
    fleet.procs.kill9(victim)
    killed = time.monotonic()
    keys += _submit(fleet, 8, 8)  # placed and finishing on its members while nobody watches them
    fleet.wait_for(
        "the dead syncer's members taken over",
        lambda: all(_owners(fleet).get(m) in (ids["syncer-2"], ids["syncer-3"]) for m in lost),
        OWNERSHIP * 4,
    )
    took = time.monotonic() - killed
    # The lease time, then the next round of a live syncer (a third of it), and a poll.
    assert took < OWNERSHIP * 4 / 3 + 1.0, f"members unowned for {took:.1f}s"

    fleet.procs.start("syncer-4", "syncer", *args)
    ids["syncer-4"] = _syncer_id(fleet, "syncer-4")
    keys += _submit(fleet, 16, 8)
    fleet.wait_for(
        "the newcomer to take its share",
        lambda: ids["syncer-4"] in _owners(fleet).values() and set(_owners(fleet)) == set(MEMBERS),
        60,
    )
    assert ids[victim] not in _owners(fleet).values()

    fleet.wait_for("every job to succeed", lambda: all(fleet.states()[k] == SUCCEEDED for k in keys), 90)
    items, _ = fleet.objects.list(FLEET_ASCENDJOB)
    assert [attempt_of(o) for o in items] == [1] * len(keys), "a job was failed over"
    assert all(len(members) == 1 for members in fleet.member_copies().values())
    logs = "".join(fleet.procs.roles[r].log_path.read_text(errors="replace") for r in fleet.procs.roles)
    assert "event=cluster_failover" not in logs and "event=application_failover" not in logs
