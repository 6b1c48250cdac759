"""Member access against the project's simulator (``fleet sim`` subprocess), as Fleet will use it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fleet.ascend import Condition
from fleet.members import (
    ADDED,
    DELETED,
    NODES,
    PODS,
    SYNC,
    Member,
    MemberSettings,
    MemberUnavailable,
    WatchEvent,
    load_members,
)
from tests.fleet.members.objects import sample_job
from tests.fleet.members.recording import Recorder
from tests.support.kinds import JOBS
from tests.support.sim import CARD_POOL, RunningSim, running_sim, small_topology

pytestmark = pytest.mark.integration

SETTINGS = MemberSettings(
    attempts=2,
    backoff_initial=0.02,
    backoff_max=0.05,
    probe_timeout=0.5,
    watch_backoff_initial=0.02,
    watch_backoff_max=0.2,
)


@pytest.fixture(scope="module")
def simulator() -> Iterator[RunningSim]:
    module_pool = {**CARD_POOL, "prefix": "module", "count": 2, "labels": {"accelerator-type": "module"}}
    with running_sim(small_topology({"cards": CARD_POOL, "modules": module_pool})) as running:
        yield running


@pytest.fixture
def members(simulator: RunningSim) -> Iterator[dict[str, Member]]:
    members = load_members(simulator.kubeconfig, settings=SETTINGS)
    yield members
    for member in members.values():
        member.close()


def _state(job: dict[str, Any]) -> str:
    conditions = (job.get("status") or {}).get("conditions") or []
    return str(conditions[-1]["type"]) if conditions else ""


def _nodes(events: list[WatchEvent]) -> set[str]:
    return {e.object["spec"]["nodeName"] for e in events if e.object and e.object["spec"].get("nodeName")}


def test_sample_job_runs_and_is_followed_through_watches(members: dict[str, Member]) -> None:
    assert sorted(members) == ["cards", "modules"]
    cards = members["cards"]
    nodes = cards.list_nodes("accelerator-type=card-910b-2")
    assert len(nodes) == 4
    jobs, pods = Recorder(), Recorder()
    job_watcher = cards.watch_jobs(JOBS, jobs, label_selector="framework=pytorch")
    pod_watcher = cards.watch(PODS, pods, label_selector="job-name=default-test-pytorch")
    try:
        assert job_watcher.wait_synced(5.0) and pod_watcher.wait_synced(5.0)
        created = cards.create_job(JOBS, "team-sim", sample_job())  # the member has no such namespace yet
        assert created["metadata"]["namespace"] == "team-sim"
        running = jobs.wait(
            lambda events: any(e.object and _state(e.object) == Condition.RUNNING for e in events)
        )
        assert running[1].type == ADDED
        bound = pods.wait(
            lambda events: (
                len({(e.object or {}).get("spec", {}).get("nodeName") for e in events if e.object} - {None})
                == 2
            )
        )
        assert all(e.type != SYNC or not e.objects for e in bound[:1])
        assert _state(cards.get_job(JOBS, "team-sim", "default-test-pytorch")) == Condition.RUNNING
        assert cards.delete_job(JOBS, "team-sim", "default-test-pytorch") is True
        jobs.wait(lambda events: events[-1].type == DELETED)
    finally:
        job_watcher.stop()
        pod_watcher.stop()


def test_faults_injected_by_the_simulator(simulator: RunningSim, members: dict[str, Member]) -> None:
    modules = members["modules"]
    nodes = Recorder()
    watcher = modules.watch(NODES, nodes)
    try:
        assert watcher.wait_synced(5.0)
        simulator.fault("modules", "503")
        assert not modules.probe().healthy
        with pytest.raises(MemberUnavailable) as caught:
            modules.list_nodes()
        assert caught.value.status == 503
        simulator.fault("modules", "ok")
        assert modules.probe().healthy

        simulator.fault("modules", "down")
        with pytest.raises(MemberUnavailable) as refused:
            modules.list_nodes()
        assert refused.value.status is None
        simulator.fault("modules", "node-notready", node=nodes.events[0].objects[0]["metadata"]["name"])
        simulator.fault("modules", "up")
        # The change made while the member was down reaches the watcher once it is back.
        changed = nodes.wait(lambda events: len(events) >= 2)[1]
        assert changed.type == "MODIFIED"
        assert len(nodes.syncs()) == 1
        assert members["cards"].probe().healthy  # the other member never noticed
    finally:
        watcher.stop()
