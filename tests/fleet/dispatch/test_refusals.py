"""Jobs a member refuses, or whose copy cannot be made, end: none waits for ever.

A refusal about the job itself (the member's API server found the object invalid: any member
would) fails the job at once; a refusal of the member's own (its RBAC, its CRD, its admission
policy) sends the job elsewhere and fails it, with every member's reason, once no member is
left; an error while making one job's copy fails that job, and the rest goes on. Each time the
job's quota and capacity hold are given back.

The first tests run the worker's task in this process against simulated members over HTTP, where
every step can be read exactly; the last run the dispatcher, the worker and the syncer as the
processes they are (``tests/fleet/dispatch/conftest.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from fleet.ascend import NPU_RESOURCE
from fleet.dispatch.context import Context, install
from fleet.dispatch.tasks import LANE_WAIT, propagate_batch
from fleet.jobs import cluster_of, current_state, prepare
from fleet.jobs.phases import FleetReason, Phase
from fleet.placement import RedisReservations, job_pod_key
from fleet.placement.reservations import Reservation
from fleet.state import events_for
from fleet.workloads.ascendjob import AscendJobAdapter
from queues import Ledger, load
from tests.fleet.dispatch.conftest import MODULE_POOL, TREE, RunningFleet
from tests.fleet.placement.factory import job
from tests.support.job_states import admit as admit_to
from tests.support.kinds import FLEET_ASCENDJOB
from tests.support.sim import CARD_POOL, RunningSim, running_sim, small_topology

MEMBERS = ("m1", "m2", "m3")
NODES = ("team-a", "team-b", "root")
#: A spec nested this deep is stored (JSON handles it), but a member's API server refuses the body
#: (400: deeper than it decodes): a copy no member can take, not a member away.
DEPTH = 600


def nested(depth: int) -> dict[str, Any]:
    top: dict[str, Any] = {}
    level = top
    for _ in range(depth):
        level["a"] = {}
        level = level["a"]
    return top


@pytest.fixture(scope="module")
def members() -> Iterator[RunningSim]:
    with running_sim(small_topology(dict.fromkeys(MEMBERS, CARD_POOL), jobDurationSeconds=3600)) as sim:
        yield sim


@pytest.fixture
def ctx(members: RunningSim, fake_redis: redis.Redis) -> Iterator[Context]:
    context = Context(fake_redis, members.kubeconfig)
    context.ledger.apply(load(TREE)[0])
    install(context)
    yield context
    context.close()
    for member in MEMBERS:
        members.fault(member, "ok")


def _accepted(ctx: Context, name: str) -> str:
    """Accept a job in team-a as the API does."""
    obj = job(name, workers=0, npus=1)
    obj["metadata"]["namespace"] = "team-a"
    prepared = prepare(obj, ctx.ledger)
    ctx.objects.create(FLEET_ASCENDJOB, prepared.obj)
    ctx.ledger.enqueue(prepared.key, prepared.leaf, prepared.request, prepared.priority)
    return prepared.key


def _place(ctx: Context, key: str, member: str) -> tuple[str, str, int, str, None]:
    """What the dispatcher does for one job: admit it, hold a card of ``member``, write
    ``Admitted``; returns the propagation it would send."""
    [decision] = ctx.ledger.admit_pending_many([key])
    assert decision.admitted, decision.refusal
    namespace, _, name = key.partition("/")
    obj = ctx.objects.get(FLEET_ASCENDJOB, namespace, name)
    uid, attempt = str(obj["metadata"]["uid"]), int(obj["status"].get("attempt") or 0) + 1
    node = f"card-{len(ctx.reservations.reservations(member, time.time()))}"  # a free card each
    hold = Reservation(
        job_pod_key(uid, attempt), member, key, {node: {NPU_RESOURCE: 1}}, 1, time.time() + 120
    )
    assert ctx.reservations.reserve(hold, {node: {NPU_RESOURCE: 2}}, time.time())

    def admit(current: dict[str, Any]) -> dict[str, Any]:
        admit_to(current, member, attempt=attempt)
        current["status"]["reservation"] = hold.id
        return current

    assert ctx.objects.mutate(FLEET_ASCENDJOB, namespace, name, admit) is not None
    ctx.client.zadd(ctx.keys.inflight, {f"{key}|{uid}|{attempt}": time.time() + 30})
    return (key, uid, attempt, member, None)


def _get(ctx: Context, key: str) -> dict[str, Any]:
    namespace, _, name = key.partition("/")
    return ctx.objects.get(FLEET_ASCENDJOB, namespace, name)


def _last(obj: dict[str, Any]) -> dict[str, Any]:
    last: dict[str, Any] = obj["status"]["conditions"][-1]
    return last


def _nothing_held(ctx: Context, key: str) -> None:
    """The job holds no quota (neither admitted nor queued), no capacity, nothing in flight."""
    assert key not in ctx.ledger.records()
    assert key not in ctx.ledger.pending.records()
    for member in MEMBERS:
        assert ctx.reservations.reservations(member, time.time()) == [], member
    assert ctx.client.zcard(ctx.keys.inflight) == 0


def _addressless(message: str) -> None:
    assert "127.0.0.1" not in message and "http" not in message, message


def test_a_member_finding_the_job_invalid_fails_it_with_its_message_and_gives_everything_back(
    ctx: Context, members: RunningSim
) -> None:
    before = ctx.ledger.usages(NODES)
    key = _accepted(ctx, "invalid-spec")
    members.fault("m1", "refuse-create", refusal="invalid", job=key)
    item = _place(ctx, key, "m1")
    assert ctx.ledger.usages(NODES) != before  # admitted: the quota is taken

    assert propagate_batch([item], wait=LANE_WAIT) == ["rejected"]

    obj = _get(ctx, key)
    assert current_state(obj) == Phase.FAILED
    last = _last(obj)
    assert last["reason"] == FleetReason.MEMBER_REJECTED
    assert last["message"].startswith("m1 rejected the job itself, as every member would: 422 Invalid: ")
    assert 'AscendJob.mindxdl.gitee.com "invalid-spec" is invalid: spec: Invalid value' in last["message"]
    _addressless(last["message"])
    assert cluster_of(obj) is None and obj["status"]["lastCluster"] == "m1"
    assert ctx.ledger.usages(NODES) == before
    _nothing_held(ctx, key)
    warnings = [e for e in events_for(ctx.objects, obj) if e["type"] == "Warning"]
    assert [e["reason"] for e in warnings] == [FleetReason.MEMBER_REJECTED]
    # Run again (a task that ran twice): nothing more happens.
    assert propagate_batch([item]) == ["superseded"]
    assert ctx.ledger.usages(NODES) == before


def test_a_refusal_of_the_members_own_sends_the_job_elsewhere_and_the_last_one_fails_it(
    ctx: Context, members: RunningSim
) -> None:
    before = ctx.ledger.usages(NODES)
    key = _accepted(ctx, "refused-everywhere")
    for member, refusal in zip(MEMBERS, ("forbidden", "no-crd", "policy"), strict=True):
        members.fault(member, "refuse-create", refusal=refusal, job=key)

    assert propagate_batch([_place(ctx, key, "m1")], wait=LANE_WAIT) == ["refused"]
    obj = _get(ctx, key)
    assert current_state(obj) == Phase.QUEUED  # back in its queue, m1 never tried again for it
    assert set(obj["status"]["refused"]) == {"m1"}
    assert obj["status"]["refused"]["m1"].startswith(
        "403 Forbidden: ascendjobs.mindxdl.gitee.com is forbidden"
    )
    assert key in ctx.ledger.pending.records() and key not in ctx.ledger.records()
    assert ctx.ledger.usages(NODES) == before
    assert ctx.reservations.reservations("m1", time.time()) == []

    assert propagate_batch([_place(ctx, key, "m2")], wait=LANE_WAIT) == ["refused"]
    assert current_state(_get(ctx, key)) == Phase.QUEUED
    assert propagate_batch([_place(ctx, key, "m3")], wait=LANE_WAIT) == ["refused"]

    obj = _get(ctx, key)
    assert current_state(obj) == Phase.FAILED
    last = _last(obj)
    assert last["reason"] == FleetReason.ALL_MEMBERS_REFUSED
    message = last["message"]
    assert message.startswith("every member refused the job: m1: 403 Forbidden: ")
    assert "; m2: 404 NotFound: the server could not find the requested resource; " in message
    assert "m3: 422 Invalid: " in message and "ValidatingAdmissionPolicy 'sim-policy'" in message
    _addressless(message)
    assert ctx.ledger.usages(NODES) == before
    _nothing_held(ctx, key)


def test_a_job_whose_copy_cannot_be_made_fails_and_the_rest_of_its_batch_is_created(
    ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any error while one job's copy is built (here the kind's ``member_copy`` failing for one
    job, as a fault in an adapter would) fails that job alone."""
    made = AscendJobAdapter.member_copy

    def member_copy(self: AscendJobAdapter, obj: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if obj["metadata"]["name"] == "unbuildable":
            raise RecursionError("maximum recursion depth exceeded")
        return made(self, obj, *args, **kwargs)

    monkeypatch.setattr(AscendJobAdapter, "member_copy", member_copy)
    before = ctx.ledger.usages(NODES)
    keys = [_accepted(ctx, "first"), _accepted(ctx, "unbuildable"), _accepted(ctx, "last")]
    items = [_place(ctx, key, "m1") for key in keys]

    assert propagate_batch(items, wait=LANE_WAIT) == ["created", "failed", "created"]

    deep = _get(ctx, keys[1])
    assert current_state(deep) == Phase.FAILED
    last = _last(deep)
    assert last["reason"] == FleetReason.PROPAGATION_FAILED
    assert last["message"].startswith("the copy of the job for m1 could not be made: RecursionError: ")
    assert keys[1] not in ctx.ledger.records() and keys[1] not in ctx.ledger.pending.records()
    held = {r.job for r in ctx.reservations.reservations("m1", time.time())}
    assert held == {keys[0], keys[2]}  # the failed job's hold is gone, the others' stay until they run
    for key in (keys[0], keys[2]):
        assert current_state(_get(ctx, key)) == Phase.DISPATCHED
    assert ctx.ledger.usages(NODES)["team-a"]["kube-queue/max-jobs"] == (
        before["team-a"].get("kube-queue/max-jobs", 0) + 2
    )


# ---- the running system --------------------------------------------------------------------------


def _job_state(fleet: RunningFleet, name: str) -> dict[str, Any]:
    return fleet.objects.get(FLEET_ASCENDJOB, "team-a", name)


def _one_card(name: str) -> dict[str, Any]:
    obj = job(name, workers=0, npus=1)
    obj["metadata"]["namespace"] = "team-a"
    obj["metadata"]["annotations"] = {"sim.fleet.io/duration-seconds": "600"}
    return obj


def _submit(fleet: RunningFleet, name: str) -> str:
    fleet.submit(_one_card(name))
    return f"team-a/{name}"


def _held(fleet: RunningFleet) -> list[Reservation]:
    store = RedisReservations(fleet.client)
    return [
        r for member in ("member-1", "member-2", "member-3") for r in store.reservations(member, time.time())
    ]


def _state_is(fleet: RunningFleet, name: str, state: str) -> Callable[[], bool]:
    return lambda: current_state(_job_state(fleet, name)) == state


@pytest.mark.integration
def test_running_fleet_a_job_every_member_would_refuse_fails_at_once(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(members={"member-1": CARD_POOL, "member-2": CARD_POOL}, workers=1, syncer=False)
    before = Ledger(fleet.client).usages(NODES)
    for member in ("member-1", "member-2"):
        fleet.sim.fault(member, "refuse-create", refusal="invalid", job="team-a/invalid")
    _submit(fleet, "invalid")
    fleet.wait_for("the job to fail", _state_is(fleet, "invalid", Phase.FAILED), 30)
    obj = _job_state(fleet, "invalid")
    assert _last(obj)["reason"] == FleetReason.MEMBER_REJECTED
    assert 'AscendJob.mindxdl.gitee.com "invalid" is invalid' in _last(obj)["message"]
    assert [c["type"] for c in obj["status"]["conditions"]] == ["Queued", "Admitted", "Failed"]  # one try
    # The job is stored Failed first, then its quota is released (a crash between the two
    # is mended by the reconcile): a reader may see the first before the second.
    fleet.wait_for("its quota released", lambda: fleet.ledger.usages(NODES) == before, 10)
    assert fleet.ledger.records() == {} and fleet.ledger.pending.records() == {}
    assert _held(fleet) == []


@pytest.mark.integration
def test_running_fleet_a_job_refused_by_one_member_runs_on_another(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    # Two alike members: packing chooses member-1 (the name breaks the tie), which refuses.
    fleet = fleet_factory(members={"member-1": CARD_POOL, "member-2": CARD_POOL}, workers=1)
    fleet.sim.fault("member-1", "refuse-create", refusal="webhook")
    _submit(fleet, "elsewhere")
    fleet.wait_for("the job to run on member-2", _state_is(fleet, "elsewhere", "Running"), 30)
    obj = _job_state(fleet, "elsewhere")
    assert cluster_of(obj) == "member-2" and obj["status"]["attempt"] == 2
    assert list(obj["status"]["refused"]) == ["member-1"]
    assert (
        'admission webhook "policy.sim.fleet.io" denied the request' in obj["status"]["refused"]["member-1"]
    )
    reasons = [e["reason"] for e in events_for(fleet.objects, obj)]
    assert reasons.count(FleetReason.MEMBER_REFUSED) == 1
    assert {uid: m for uid, m in fleet.member_copies().items()} == {obj["metadata"]["uid"]: ["member-2"]}


@pytest.mark.integration
def test_running_fleet_a_job_refused_by_every_member_fails_naming_each_reason(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(workers=1, syncer=False)
    before = fleet.ledger.usages(NODES)
    for member, refusal in (("member-1", "policy"), ("member-2", "forbidden"), ("member-3", "no-crd")):
        fleet.sim.fault(member, "refuse-create", refusal=refusal, job="team-a/nowhere")
    _submit(fleet, "nowhere")  # one card: fits each member
    fleet.wait_for("the job to fail", _state_is(fleet, "nowhere", Phase.FAILED), 45)
    obj = _job_state(fleet, "nowhere")
    last = _last(obj)
    assert last["reason"] == FleetReason.ALL_MEMBERS_REFUSED
    assert "member-1: 422 Invalid: " in last["message"]
    assert "member-2: 403 Forbidden: " in last["message"]
    assert "member-3: 404 NotFound: " in last["message"]
    assert "avoided" not in last["message"]
    assert obj["status"]["attempt"] == 3
    # The job is stored Failed first, then its quota is released (a crash between the two
    # is mended by the reconcile): a reader may see the first before the second.
    fleet.wait_for("its quota released", lambda: fleet.ledger.usages(NODES) == before, 10)
    assert fleet.ledger.records() == {} and fleet.ledger.pending.records() == {}
    assert _held(fleet) == []


@pytest.mark.integration
def test_running_fleet_a_copy_no_member_takes_fails_its_job_and_the_worker_goes_on(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(members={"member-1": CARD_POOL}, workers=1, syncer=False)
    before = fleet.ledger.usages(NODES)
    obj = job("too-deep", workers=0, npus=1)
    obj["metadata"]["namespace"] = "team-a"
    prepared = prepare(obj, fleet.ledger)
    prepared.obj["spec"]["extra"] = nested(DEPTH)  # past the API's checks, straight to the store
    fleet.objects.create(FLEET_ASCENDJOB, prepared.obj)
    fleet.ledger.enqueue(prepared.key, prepared.leaf, prepared.request, prepared.priority)
    fleet.wait_for("the job to fail", _state_is(fleet, "too-deep", Phase.FAILED), 30)
    last = _last(_job_state(fleet, "too-deep"))
    assert last["reason"] == FleetReason.ALL_MEMBERS_REFUSED
    assert "member-1: 400 BadRequest: the request body is nested too deeply" in last["message"]
    # The job is stored Failed first, then its quota is released (a crash between the two
    # is mended by the reconcile): a reader may see the first before the second.
    fleet.wait_for("its quota released", lambda: fleet.ledger.usages(NODES) == before, 10)
    assert fleet.ledger.records() == {} and fleet.ledger.pending.records() == {}
    assert _held(fleet) == []
    # The same (only) worker takes the next job.
    _submit(fleet, "next")
    fleet.wait_for("the next job to be dispatched", _state_is(fleet, "next", Phase.DISPATCHED), 30)
    assert fleet.procs.roles["worker-1"].alive and fleet.procs.roles["worker-1"].restarts == 0


@pytest.mark.integration
def test_running_fleet_a_refusing_member_is_named_with_its_reason_and_none_left_fails_the_job(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(members={"member-1": MODULE_POOL, "member-2": CARD_POOL}, workers=1, syncer=False)
    # Eight NPUs on one node: only member-1 has such nodes, and it refuses. The job waits (a
    # member may join, member-2 may grow), saying why each member does not take it.
    fleet.sim.fault("member-1", "refuse-create", refusal="forbidden", job="team-a/big")
    big = job("big", workers=0, npus=8)
    big["metadata"]["namespace"] = "team-a"
    fleet.submit(big)
    fleet.wait_for(
        "the pending reason to name the refusal",
        lambda: "member-1: refused the job (403 Forbidden: " in _last(_job_state(fleet, "big"))["message"],
        30,
    )
    last = _last(_job_state(fleet, "big"))
    assert last["reason"] == FleetReason.NO_FIT and "avoided" not in last["message"]
    assert "member-2: " in last["message"]
    # A job whose refusals already cover every member (the worker that recorded them knew fewer
    # members, say) is failed by the dispatcher rather than left waiting.
    prepared = prepare(_one_card("stale"), fleet.ledger)
    prepared.obj["status"]["refused"] = {"member-1": "403 Forbidden: no", "member-2": "404 NotFound: no CRD"}
    fleet.objects.create(FLEET_ASCENDJOB, prepared.obj)
    fleet.ledger.enqueue(prepared.key, prepared.leaf, prepared.request, prepared.priority)
    fleet.wait_for("the job to fail", _state_is(fleet, "stale", Phase.FAILED), 30)
    last = _last(_job_state(fleet, "stale"))
    assert last["reason"] == FleetReason.ALL_MEMBERS_REFUSED
    assert last["message"] == (
        "every member refused the job: member-1: 403 Forbidden: no; member-2: 404 NotFound: no CRD"
    )
    assert prepared.key not in fleet.ledger.pending.records()
