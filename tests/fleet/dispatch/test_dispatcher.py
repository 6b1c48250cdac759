"""The dispatcher as a process: where jobs land, why they wait, and one leader at a time.

These run the dispatcher and workers without a syncer (the tests of the syncer cover mirroring),
so what they see on the fleet object is the dispatcher's and the workers' own doing.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from fleet.jobs import cluster_of, current_state, prepare
from fleet.members import load_members
from fleet.state import events_for
from fleet.state.dispatch_keys import DEFAULT_DISPATCH_KEYS
from queues import load
from tests.fleet.dispatch.conftest import RunningFleet
from tests.fleet.placement.factory import sample_job
from tests.support.kinds import FLEET_ASCENDJOB, JOBS

pytestmark = pytest.mark.integration

SAMPLE_TREE = Path(__file__).resolve().parents[3] / "config" / "samples" / "elasticquotatree.yaml"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _job(fleet: RunningFleet, name: str) -> dict[str, Any]:
    return fleet.objects.get(FLEET_ASCENDJOB, "default", name)


def _sample(name: str = "default-test-pytorch") -> dict[str, Any]:
    obj = sample_job()
    obj["metadata"]["name"] = name
    obj["metadata"]["namespace"] = "default"
    obj["metadata"]["annotations"] = {"sim.fleet.io/duration-seconds": "600"}
    return obj


def test_the_sample_job_lands_on_the_card_member_and_the_second_waits_for_max_jobs(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(members=None, syncer=False, tree=None, workers=1)
    fleet.ledger.apply(load(SAMPLE_TREE.read_text())[0])
    first = fleet.submit(_sample())
    fleet.submit(_sample("second"))
    fleet.wait_for(
        "the sample job to be dispatched",
        lambda: current_state(_job(fleet, first["metadata"]["name"])) == "Dispatched",
        30,
    )
    landed = _job(fleet, "default-test-pytorch")
    assert cluster_of(landed) == "member-2"
    assert landed["status"]["attempt"] == 1
    assert [c["type"] for c in landed["status"]["conditions"]] == ["Queued", "Admitted", "Dispatched"]
    # Its history is in its Events, recorded just after each change of its status: the fleet's
    # three acts (the Admitted condition's own message is in the status, not a fourth Event).
    fleet.wait_for(
        "its Submitted, ScheduleBindingSucceed and Dispatched Events",
        lambda: (
            sorted(e["reason"] for e in events_for(fleet.objects, landed))
            == ["Dispatched", "ScheduleBindingSucceed", "Submitted"]
        ),
        10,
    )
    # The copy exists in member-2, labelled after the fleet job.
    members = load_members(fleet.sim.kubeconfig)
    try:
        copy_ = members["member-2"].get_job(JOBS, "default", "default-test-pytorch")
    finally:
        for m in members.values():
            m.close()
    assert copy_["metadata"]["labels"]["fleet.io/job-uid"] == landed["metadata"]["uid"]
    assert copy_["metadata"]["labels"]["fleet.io/attempt"] == "1"
    # The second one waits, saying exactly why.
    fleet.wait_for(
        "the second job's pending reason",
        lambda: "max-jobs" in _job(fleet, "second")["status"]["conditions"][-1]["message"],
        15,
    )
    waiting = _job(fleet, "second")
    assert current_state(waiting) == "Queued"
    assert (
        waiting["status"]["conditions"][-1]["message"] == "quota root/child-2: kube-queue/max-jobs 1/1 in use"
    )
    assert waiting["status"]["conditions"][-1]["reason"] == "QuotaExceeded"


def test_a_job_that_fits_nowhere_says_which_selector_no_node_matches(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(members=None, syncer=False, tree=None, workers=1)
    obj = _sample("placeholder")
    for spec in obj["spec"]["replicaSpecs"].values():
        spec["template"]["spec"]["nodeSelector"] = {"example-key": "example-value"}
    fleet.submit(obj)
    fleet.wait_for(
        "a no-fit reason",
        lambda: _job(fleet, "placeholder")["status"]["conditions"][-1]["reason"] == "NoFittingCluster",
        20,
    )
    message = _job(fleet, "placeholder")["status"]["conditions"][-1]["message"]
    # No member has such nodes even empty: waiting would not help, and the reason says so.
    assert message.startswith(
        "no member cluster can ever fit the whole job as the fleet is "
        "(it waits out of line until the fleet changes): "
    )
    assert "example-key=example-value" in message
    for member in ("member-1", "member-2", "member-3"):
        assert member in message
    assert current_state(_job(fleet, "placeholder")) == "Queued"


def test_two_dispatchers_only_one_decides_and_the_other_takes_over(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(members=None, syncer=False, tree=None, workers=1, dispatchers=2)
    lease = DEFAULT_DISPATCH_KEYS.lease
    fleet.wait_for("a leader", lambda: fleet.client.get(lease + ":holder") is not None, 30)
    holder = fleet.client.get(lease + ":holder")
    assert holder is not None
    pids = {name: role.process.pid for name, role in fleet.procs.roles.items() if role.process is not None}
    leader = next(name for name, pid in pids.items() if _text(holder).endswith(f"-{pid}"))
    follower = "dispatcher-2" if leader == "dispatcher" else "dispatcher"
    fleet.submit(_sample("before"))
    fleet.wait_for("the first job placed", lambda: current_state(_job(fleet, "before")) == "Dispatched", 30)
    fleet.procs.kill9(leader)
    killed_at = time.monotonic()
    fleet.wait_for(
        "the follower to lead",
        lambda: (
            (h := fleet.client.get(lease + ":holder")) is not None and _text(h).endswith(f"-{pids[follower]}")
        ),
        15,
    )
    # Within the lease time (3 s) plus one acquisition attempt.
    assert time.monotonic() - killed_at < 3 + 2
    second = copy.deepcopy(_sample("after"))
    for spec in second["spec"]["replicaSpecs"].values():
        spec["template"]["spec"]["nodeSelector"] = {"accelerator-type": "module-910b-8"}
        spec["template"]["spec"]["containers"][0]["resources"] = {
            "requests": {"huawei.com/Ascend910": "8"},
            "limits": {"huawei.com/Ascend910": "8"},
        }
    fleet.submit(second)
    fleet.wait_for(
        "the follower to place a job", lambda: current_state(_job(fleet, "after")) == "Dispatched", 30
    )
    assert cluster_of(_job(fleet, "after")) == "member-1"
    # Each job was admitted exactly once: one binding Event each, whoever led.
    for name in ("before", "after"):
        bindings = [
            e["count"]
            for e in events_for(fleet.objects, _job(fleet, name))
            if e["reason"] == "ScheduleBindingSucceed"
        ]
        assert bindings == [1], bindings


def test_a_job_queued_before_the_tree_was_applied_is_still_dispatched(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    """Without a tree every job waits on the implicit root; once a tree is applied the root has
    children and no leaf's queue holds those jobs. They stay charged at the root and the
    dispatcher schedules them from there (they were stranded for good before)."""
    fleet = fleet_factory(members=None, syncer=False, tree=None, workers=1)
    prepared = prepare(_sample("early"), fleet.ledger)
    assert prepared.leaf == "root"
    fleet.objects.create(FLEET_ASCENDJOB, prepared.obj)
    fleet.ledger.apply(load(SAMPLE_TREE.read_text())[0])
    fleet.ledger.enqueue(prepared.key, "root", prepared.request, prepared.priority)  # queued before it
    fleet.wait_for(
        "dispatch from the root's own queue", lambda: current_state(_job(fleet, "early")) == "Dispatched", 30
    )
    assert fleet.ledger.usages(["root"])["root"].get("kube-queue/max-jobs") == 1


def test_a_job_excluded_from_the_only_member_it_fits_lands_there_at_once_the_exclusion_giving_way(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    # After a failover the job avoids the member that lost it for a while. When that member is
    # the only one it fits, the exclusion gives way (issue 23, req. 5): the job is placed there
    # at once rather than waiting the exclusion out beside an idle member.
    fleet = fleet_factory(members=None, syncer=False, tree=None, workers=1)
    fleet.ledger.apply(load(SAMPLE_TREE.read_text())[0])
    prepared = prepare(_sample("excluded"), fleet.ledger)
    ends = time.time() + 60.0
    prepared.obj["status"]["excluded"] = {"member-2": ends}
    fleet.objects.create(FLEET_ASCENDJOB, prepared.obj)
    fleet.ledger.enqueue(prepared.key, prepared.leaf, prepared.request, prepared.priority)
    fleet.wait_for(
        "dispatch despite the exclusion", lambda: current_state(_job(fleet, "excluded")) == "Dispatched", 20
    )
    landed = _job(fleet, "excluded")
    assert cluster_of(landed) == "member-2"
    admitted = next(c for c in landed["status"]["conditions"] if c["type"] == "Admitted")
    assert "its exclusion from member-2 gave way" in admitted["message"]
    assert datetime.fromisoformat(admitted["lastTransitionTime"].replace("Z", "+00:00")).timestamp() < ends


def test_a_firm_exclusion_from_the_only_member_it_fits_is_waited_out(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    # A member that could not be reached or refused the job for now is excluded firmly: the
    # attempt counted no failure, no backoff paces it, and giving way would loop on the
    # refusal. The job waits, and when that member is the only one it fits, nothing about
    # capacity changes when the exclusion ends: the dispatcher must still try it again then.
    fleet = fleet_factory(members=None, syncer=False, tree=None, workers=1)
    fleet.ledger.apply(load(SAMPLE_TREE.read_text())[0])
    prepared = prepare(_sample("excluded"), fleet.ledger)
    # The window opens once the dispatcher leads: on a loaded machine its start alone took
    # longer than a window counted from before it, and the job never waited.
    fleet.wait_for(
        "the dispatcher to lead", lambda: bool(fleet.client.exists(DEFAULT_DISPATCH_KEYS.lease)), 60
    )
    ends = time.time() + 8.0
    prepared.obj["status"]["excludedFirmly"] = {"member-2": ends}
    fleet.objects.create(FLEET_ASCENDJOB, prepared.obj)
    fleet.ledger.enqueue(prepared.key, prepared.leaf, prepared.request, prepared.priority)
    fleet.wait_for(
        "the no-fit reason naming the exclusion",
        lambda: "member-2: avoided" in _job(fleet, "excluded")["status"]["conditions"][-1]["message"],
        15,
    )
    assert current_state(_job(fleet, "excluded")) == "Queued"
    fleet.wait_for(
        "dispatch once the exclusion ends", lambda: current_state(_job(fleet, "excluded")) == "Dispatched", 20
    )
    landed = _job(fleet, "excluded")
    assert cluster_of(landed) == "member-2"
    admitted = next(c for c in landed["status"]["conditions"] if c["type"] == "Admitted")
    assert "gave way" not in admitted["message"]
    assert datetime.fromisoformat(admitted["lastTransitionTime"].replace("Z", "+00:00")).timestamp() >= int(
        ends
    )
