"""The dispatcher's reconcile against jobs that move while it runs: nothing that exists leaves the
queue, nothing in flight is sent twice (a dispatcher in-process on fakeredis and a real Redis)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from fleet.apiserver.resources import ResourceType
from fleet.dispatch.context import Context
from fleet.dispatch.dispatcher import Dispatcher, DispatcherSettings
from fleet.dispatch.handback import inflight_entry
from fleet.jobs import cluster_of, current_state, submit
from fleet.jobs.pause import held_entry
from fleet.jobs.phases import Phase
from fleet.jobs.submit import job_key
from fleet.kinds import fleet_kind
from fleet.placement import Placer
from fleet.state import Objects, events_for
from fleet.workloads import adapter_for
from queues import JobState
from tests.fleet.dispatch.conftest import pytorch_job, t9k_job
from tests.fleet.placement.factory import job
from tests.support.job_states import admit, hold, run
from tests.support.kinds import FLEET_ASCENDJOB


@pytest.fixture
def dispatcher(redis_client: redis.Redis) -> Iterator[Dispatcher]:
    """A leader whose lease outlasts a test on a loaded machine (no renewer runs: with the
    default lease a slow step found itself fenced)."""
    ctx = Context(redis_client)
    d = Dispatcher(ctx, Placer(ctx.reservations), holder="test", settings=DispatcherSettings(lease_ttl=120))
    assert d.lease.acquire()
    yield d
    d.lease.release()


def one(name: str) -> dict[str, Any]:
    obj = job(name, workers=0, npus=1, exclusive=False)
    obj["metadata"]["namespace"] = "default"
    return obj


def test_jobs_submitted_while_the_reconcile_lists_stay_queued(
    dispatcher: Dispatcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = dispatcher.ctx
    for i in range(5):
        submit(ctx.objects, ctx.ledger, one(f"before-{i}"))
    scanned = Objects.scan
    arrivals: list[str] = []

    def scan_then_submit(self: Objects, *args: Any, **kwargs: Any) -> Any:
        """The stored jobs are walked, then 120 jobs arrive before the reconcile reads the ledger
        (once: the reconcile walks every job kind in turn)."""
        found = scanned(self, *args, **kwargs)
        if not arrivals:
            for i in range(120):
                arrivals.append(submit(ctx.objects, ctx.ledger, one(f"during-{i}"))["metadata"]["name"])
        return found

    monkeypatch.setattr(Objects, "scan", scan_then_submit)
    dispatcher.reconcile()
    monkeypatch.setattr(Objects, "scan", scanned)
    for name in [f"before-{i}" for i in range(5)] + arrivals:
        assert ctx.ledger.state(f"default/{name}") is JobState.PENDING, name
    assert ctx.ledger.rebuild() == []
    # A ledger entry whose job really is gone is still released.
    ctx.client.hdel(ctx.objects.keys.objects("mindxdl.gitee.com/ascendjobs"), "default/before-0")
    dispatcher.reconcile()
    assert ctx.ledger.state("default/before-0") is JobState.ABSENT
    assert ctx.ledger.state("default/during-0") is JobState.PENDING


def admitted(ctx: Context, name: str, member: str) -> dict[str, Any]:
    """Admit ``name`` in the ledger and mark it Admitted to ``member`` as the dispatcher does."""
    key = f"default/{name}"
    [decision] = ctx.ledger.admit_pending_many([key])
    assert decision.admitted

    def change(obj: dict[str, Any]) -> dict[str, Any]:
        return admit(obj, member, attempt=1)

    stored = ctx.objects.mutate(FLEET_ASCENDJOB, "default", name, change)
    assert stored is not None
    return stored


def test_a_job_in_flight_is_not_sent_again_one_whose_send_was_lost_is(dispatcher: Dispatcher) -> None:
    ctx = dispatcher.ctx
    for name in ("flying", "lost"):
        submit(ctx.objects, ctx.ledger, one(name))
    flying = admitted(ctx, "flying", "member-1")
    admitted(ctx, "lost", "member-2")
    entry = inflight_entry("default/flying", str(flying["metadata"]["uid"]), 1)
    ctx.client.zadd(ctx.keys.inflight, {entry: 10**10})  # its propagation is on its way
    dispatcher.reconcile()
    sent = [job.args[0] for job in ctx.queue.get_jobs()]
    assert [[item[0] for item in batch] for batch in sent] == [["default/lost"]]
    assert ctx.ledger.state("default/flying") is JobState.ADMITTED


def test_a_paused_job_the_ledger_still_holds_is_released(dispatcher: Dispatcher) -> None:
    """The API died between pausing a job (its object ``Paused``) and releasing it."""
    ctx = dispatcher.ctx
    submit(ctx.objects, ctx.ledger, one("paused"))

    def pause(obj: dict[str, Any]) -> dict[str, Any]:
        return hold(obj, Phase.PAUSED, "paused")

    ctx.objects.mutate(FLEET_ASCENDJOB, "default", "paused", pause)
    assert ctx.ledger.state("default/paused") is JobState.PENDING
    dispatcher.reconcile()
    assert ctx.ledger.state("default/paused") is JobState.ABSENT


def _running_with_switch_stored(
    ctx: Context, obj: dict[str, Any], switch: Callable[[dict[str, Any], bool], None]
) -> tuple[ResourceType, str]:
    """Submit ``obj``, admit it and mark it Running on member-1; then store its switch on the way
    the API does first, and die before writing the state (the crash window of a pause)."""
    stored = submit(ctx.objects, ctx.ledger, obj)
    rt, key = fleet_kind(adapter_for(stored)), job_key(stored)
    assert ctx.ledger.admit_pending_many([key])[0].admitted

    def running(current: dict[str, Any]) -> dict[str, Any]:
        return run(admit(current, "member-1", attempt=1), "member-1")

    name = stored["metadata"]["name"]
    ctx.objects.mutate(rt, "default", name, running)

    def flip(current: dict[str, Any]) -> dict[str, Any]:
        switch(current, True)
        return current

    ctx.objects.mutate(rt, "default", name, flip, subresource=None)
    return rt, key


def _suspend(obj: dict[str, Any], on: bool) -> None:
    obj["spec"].setdefault("runPolicy", {})["suspend"] = on


def _pause(obj: dict[str, Any], on: bool) -> None:
    obj["spec"].setdefault("runMode", {})["pause"] = {"enabled": on}


@pytest.mark.parametrize(
    ("obj", "switch", "held", "reason"),
    [
        (
            lambda: pytorch_job("torch", workers=1, npus=8, selector={}),
            _suspend,
            "Suspended",
            "PyTorchJobSuspended",
        ),
        (lambda: t9k_job("tf", npus=1), _pause, "Paused", "Paused"),
    ],
    ids=["kubeflow-suspend", "t9k-pause"],
)
def test_a_switch_stored_without_its_state_is_converged(
    dispatcher: Dispatcher,
    obj: Callable[[], dict[str, Any]],
    switch: Callable[[dict[str, Any], bool], None],
    held: str,
    reason: str,
) -> None:
    """The API died between storing the switch and writing the state: the job would run on
    held (or stay held once released). The reconcile holds it, giving its quota back and letting
    go of its member, then, the switch stored off with the same crash, queues it again."""
    ctx = dispatcher.ctx
    rt, key = _running_with_switch_stored(ctx, obj(), switch)
    name = key.rpartition("/")[2]
    assert ctx.ledger.state(key) is JobState.ADMITTED
    assert current_state(ctx.objects.get(rt, "default", name)) == "Running"

    dispatcher.reconcile()
    after = ctx.objects.get(rt, "default", name)
    assert current_state(after) == held
    assert cluster_of(after) is None and after["status"]["lastCluster"] == "member-1"
    assert ctx.ledger.state(key) is JobState.ABSENT
    assert ctx.ledger.usage("root").get("kube-queue/max-jobs", 0) == 0
    assert after["status"]["conditions"][-1]["reason"] == reason
    # Its copy on member-1 is recorded for the syncer to purge at once.
    entry = held_entry("member-1", key, after["metadata"]["uid"], 1)
    assert ctx.client.sismember(ctx.keys.held, entry)
    assert reason in [e["reason"] for e in events_for(ctx.objects, after)]
    dispatcher.reconcile()  # converged: nothing more to do
    assert current_state(ctx.objects.get(rt, "default", name)) == held

    def off(current: dict[str, Any]) -> dict[str, Any]:
        switch(current, False)
        return current

    ctx.objects.mutate(rt, "default", name, off, subresource=None)  # and the API dies again
    dispatcher.reconcile()
    assert current_state(ctx.objects.get(rt, "default", name)) == "Queued"
    assert ctx.ledger.state(key) is JobState.PENDING
