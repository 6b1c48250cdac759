"""Members added to and removed from the kubeconfig while the roles run (issue 21, req. 3).

``fleet member add`` and ``remove`` edit the members' Secret that every role's pod mounts; the
roles follow the file without a restart. The dispatcher, a worker and a sharded syncer start
with one member, full of jobs; a second member written into the kubeconfig takes the jobs that
wait, and once it is removed again no role watches or probes it any more, and the first member
goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fleet.ascend import Condition
from fleet.jobs import cluster_of
from fleet.jobs.phases import Phase
from fleet.state.dispatch_keys import DEFAULT_DISPATCH_KEYS
from fleet.state.member_health import read_health
from tests.fleet.dispatch.conftest import RunningFleet, members_only
from tests.fleet.placement.factory import job
from tests.support.kinds import FLEET_ASCENDJOB
from tests.support.sim import CARD_POOL

pytestmark = pytest.mark.integration

ROLES = ("dispatcher", "worker-1", "syncer")


def _submit(fleet: RunningFleet, name: str, seconds: float) -> str:
    """A one-pod job of 2 NPUs (one card node) in team-a, running ``seconds``."""
    obj = job(name, workers=0, npus=2, exclusive=False)
    obj["metadata"]["namespace"] = "team-a"
    obj["metadata"]["annotations"] = {"sim.fleet.io/duration-seconds": str(seconds)}
    fleet.submit(obj)
    return f"team-a/{name}"


def _placed(fleet: RunningFleet) -> dict[str, str | None]:
    items, _ = fleet.objects.list(FLEET_ASCENDJOB)
    return {f"team-a/{o['metadata']['name']}": cluster_of(o) for o in items}


def _probed(fleet: RunningFleet, member: str) -> float:
    record = read_health(fleet.client, DEFAULT_DISPATCH_KEYS, [member]).get(member)
    return 0.0 if record is None else record.probed


def _log(fleet: RunningFleet, role: str) -> str:
    return fleet.procs.roles[role].log_path.read_text(errors="replace")


def test_members_added_and_removed_without_a_restart(
    fleet_factory: Callable[..., RunningFleet], tmp_path: Path
) -> None:
    fleet = fleet_factory(
        members={"member-1": CARD_POOL, "member-2": {**CARD_POOL, "prefix": "other"}},
        workers=0,
        dispatchers=0,
        syncer=False,
    )
    members = tmp_path / "members" / "kubeconfig"
    members_only(fleet.sim.kubeconfig, members, {"member-1"})
    fleet.procs.kubeconfig = members
    fleet.procs.start("dispatcher", "dispatcher")
    fleet.procs.start("worker-1", "worker")
    fleet.procs.start("syncer", "syncer", "--sharded", "--ownership-seconds", "2", "--probe-interval", "0.3")
    pids: dict[str, Any] = {r: fleet.procs.roles[r].process.pid for r in ROLES}  # type: ignore[union-attr]

    # member-1 full: four card nodes, four jobs of one node each, for 30 s.
    fillers = [_submit(fleet, f"fill-{i}", 30) for i in range(4)]
    fleet.wait_for("member-1 full", lambda: all(fleet.states()[k] == Condition.RUNNING for k in fillers), 60)
    waiting = [_submit(fleet, f"wait-{i}", 1) for i in range(2)]
    time.sleep(3)
    assert all(fleet.states()[k] == Phase.QUEUED for k in waiting), fleet.states()

    members_only(fleet.sim.kubeconfig, members, {"member-1", "member-2"})
    fleet.wait_for(
        "the waiting jobs to run on member-2",
        lambda: all(fleet.states()[k] == Condition.SUCCEEDED for k in waiting),
        20,
    )
    placed = _placed(fleet)
    assert [placed[k] for k in waiting] == ["member-2", "member-2"]
    assert all(fleet.states()[k] == Condition.RUNNING for k in fillers), "member-1 freed first"
    for role in ROLES:
        assert "event=members_changed added=member-2 removed=- changed=-" in _log(fleet, role), role
    assert _probed(fleet, "member-2") > 0  # the syncer took it into ownership and probes it

    members_only(fleet.sim.kubeconfig, members, {"member-1"})
    fleet.wait_for(  # the last lines each role writes about it: its watches stopped, its lease
        "every role to let member-2 go",
        lambda: (
            "removed=member-2" in _log(fleet, "worker-1")
            and "member=member-2 kind=pods event=stopped" in _log(fleet, "dispatcher")
            and "lost=member-2" in _log(fleet, "syncer")
        ),
        15,
    )
    let_go = _probed(fleet, "member-2")
    lines = {role: len(_log(fleet, role).splitlines()) for role in ROLES}
    last = _submit(fleet, "after", 1)  # member-1 takes it once its fillers end
    fleet.wait_for(
        "member-1's jobs to finish and the next to run there",
        lambda: all(fleet.states()[k] == Condition.SUCCEEDED for k in [*fillers, last]),
        60,
    )
    assert _placed(fleet)[last] == "member-1"
    assert _probed(fleet, "member-2") == let_go, "member-2 is still probed"
    assert _probed(fleet, "member-1") > let_go
    for role in ROLES:
        since = _log(fleet, role).splitlines()[lines[role] :]
        noisy = [line for line in since if "member-2" in line or "Traceback" in line]
        assert not noisy, f"{role}:\n" + "\n".join(noisy)
        process = fleet.procs.roles[role].process
        assert process is not None and process.poll() is None and process.pid == pids[role], role
