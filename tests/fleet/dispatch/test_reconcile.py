"""The dispatcher's reconcile against jobs that move while it runs: nothing that exists leaves the
queue, nothing in flight is sent twice (a dispatcher in-process on fakeredis and a real Redis)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from fleet.dispatch.context import Context
from fleet.dispatch.dispatcher import Dispatcher
from fleet.dispatch.handback import inflight_entry
from fleet.jobs import submit
from fleet.jobs.phases import FleetReason, Phase
from fleet.jobs.status import set_state
from fleet.placement import Placer
from fleet.state import Objects
from queues import JobState
from tests.fleet.placement.factory import job
from tests.support.kinds import FLEET_ASCENDJOB


@pytest.fixture
def dispatcher(redis_client: redis.Redis) -> Iterator[Dispatcher]:
    ctx = Context(redis_client)
    d = Dispatcher(ctx, Placer(ctx.reservations), holder="test")
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
    listed = Objects.list
    arrivals: list[str] = []

    def list_then_submit(self: Objects, *args: Any, **kwargs: Any) -> Any:
        """The listing is taken, then 120 jobs arrive before the reconcile reads the ledger (once:
        the reconcile lists every job kind in turn)."""
        found = listed(self, *args, **kwargs)
        if not arrivals:
            for i in range(120):
                arrivals.append(submit(ctx.objects, ctx.ledger, one(f"during-{i}"))["metadata"]["name"])
        return found

    monkeypatch.setattr(Objects, "list", list_then_submit)
    dispatcher.reconcile()
    monkeypatch.setattr(Objects, "list", listed)
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
        status = obj.setdefault("status", {})
        status.update(attempt=1, cluster=member)
        set_state(status, Phase.ADMITTED, FleetReason.ADMITTED, f"placed on {member}")
        return obj

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
        set_state(obj["status"], Phase.PAUSED, FleetReason.PAUSED, "paused")
        return obj

    ctx.objects.mutate(FLEET_ASCENDJOB, "default", "paused", pause)
    assert ctx.ledger.state("default/paused") is JobState.PENDING
    dispatcher.reconcile()
    assert ctx.ledger.state("default/paused") is JobState.ABSENT
