"""The RQ task that creates member copies, run in this process against a simulated member over
HTTP: a batch's member calls go out concurrently, yet every item gets its own outcome, in order,
and a second run adopts what the first created."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from fleet.dispatch import degraded, propagation
from fleet.dispatch import lanes as lanes_module
from fleet.dispatch.context import Context, install
from fleet.dispatch.lanes import lanes
from fleet.dispatch.tasks import CREATE_CONCURRENCY, LANE_WAIT, Claim, propagate_batch
from fleet.jobs import current_state, exclusions_of
from fleet.jobs.phases import FleetReason, Phase
from fleet.kinds import PROPAGATION_POLICY
from fleet.labels import ATTEMPT_LABEL, JOB_UID_LABEL
from fleet.members import MemberSettings
from fleet.state import events_for
from tests.fleet.dispatch.conftest import admitted_on, members_only
from tests.support.kinds import FLEET_ASCENDJOB, JOBS
from tests.support.sim import CARD_POOL, RunningSim, running_sim, small_topology


def test_a_batch_is_created_concurrently_with_one_outcome_per_item_in_order(
    member: RunningSim, fake_redis: redis.Redis
) -> None:
    ctx = Context(fake_redis, member.kubeconfig)
    install(ctx)
    try:
        count = CREATE_CONCURRENCY * 2 + 3
        objs = [admitted_on(ctx, f"t{i}", "m1") for i in range(count)]
        uids = [o["metadata"]["uid"] for o in objs]
        items: list[Any] = [(f"default/t{i}", uid, 1, "m1", None) for i, uid in enumerate(uids)]
        items[5] = (items[5][0], items[5][1], 2, "m1", None)  # an attempt the job is not at
        outcomes = propagate_batch(items, wait=LANE_WAIT)
        assert outcomes == ["created"] * 5 + ["superseded"] + ["created"] * (count - 6)
        copies = {c["metadata"]["name"]: c for c in ctx.member("m1").list_jobs(JOBS, namespace="default")}
        assert sorted(copies) == sorted(f"t{i}" for i in range(count) if i != 5)
        for i, obj in enumerate(objs):
            stored = ctx.objects.get(FLEET_ASCENDJOB, "default", f"t{i}")
            if i == 5:
                assert current_state(stored) == Phase.ADMITTED
                continue
            assert current_state(stored) == Phase.DISPATCHED
            labels = copies[f"t{i}"]["metadata"]["labels"]
            assert labels[JOB_UID_LABEL] == obj["metadata"]["uid"] and labels[ATTEMPT_LABEL] == "1"
        # Run again (a task that ran twice): the copies are adopted, nothing is created twice.
        again = propagate_batch([items[0], items[1]], wait=LANE_WAIT)
        assert again == ["adopted", "adopted"]
        assert len(ctx.member("m1").list_jobs(JOBS, namespace="default")) == count - 1
    finally:
        ctx.close()


def test_a_claim_renews_the_entries_still_in_flight_and_puts_none_back(fake_redis: redis.Redis) -> None:
    ctx = Context(fake_redis, None, claim_seconds=0.6)
    inflight = ctx.keys.inflight
    fake_redis.zadd(inflight, {"default/a|u1|1": time.time() + 30, "default/b|u2|1": time.time() + 30})
    with Claim(ctx, ["default/a|u1|1", "default/b|u2|1", "default/gone|u3|1"]):
        first = fake_redis.zscore(inflight, "default/a|u1|1")
        assert first is not None and first < time.time() + 1  # the claim, not the 30 s queue bound
        fake_redis.zrem(inflight, "default/b|u2|1")  # done meanwhile
        time.sleep(0.5)
        renewed = fake_redis.zscore(inflight, "default/a|u1|1")
        assert renewed is not None and renewed > first
    assert fake_redis.zscore(inflight, "default/b|u2|1") is None
    assert fake_redis.zscore(inflight, "default/gone|u3|1") is None
    held = fake_redis.zscore(inflight, "default/a|u1|1")
    time.sleep(0.4)  # the worker is gone: nothing renews it any more
    assert fake_redis.zscore(inflight, "default/a|u1|1") == held


def _policy(toleration: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy.one.alibabacloud.com/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "short", "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "mindxdl.gitee.com/v1", "kind": "AscendJob"}],
            "failover": {"application": {"decisionConditions": {"tolerationSeconds": toleration}}},
        },
    }


@pytest.fixture
def two_members() -> Iterator[RunningSim]:
    topology = small_topology({"fast": CARD_POOL, "slow": CARD_POOL}, jobDurationSeconds=3600)
    with running_sim(topology) as sim:
        yield sim


def test_a_slow_member_holds_its_own_lane_never_the_worker_and_its_creates_move_after_the_toleration(
    two_members: RunningSim, fake_redis: redis.Redis
) -> None:
    """A member answering later than the timeout: the task for it returns within ``LANE_WAIT``
    (its calls go on in its lane), a batch for another member right after it is created at
    once, the slow member's breaker opens on the timeouts and marks it degraded, its creates
    are deferred (still Admitted, sent again later), and once it has been degraded longer than
    the toleration they are handed back to be placed elsewhere."""
    settings = MemberSettings(request_timeout=1.0, call_budget=1.5, breaker_failures=2, breaker_reset=60.0)
    ctx = Context(fake_redis, two_members.kubeconfig, settings=settings)
    install(ctx)
    two_members.fault("slow", "slow", ms=3000, probes=False)
    try:
        ctx.objects.create(PROPAGATION_POLICY, _policy(toleration=2))
        slow = [admitted_on(ctx, f"s{i}", "slow") for i in range(6)]
        fast = [admitted_on(ctx, f"f{i}", "fast") for i in range(3)]
        slow_items: list[Any] = [
            (f"default/s{i}", o["metadata"]["uid"], 1, "slow", None) for i, o in enumerate(slow)
        ]
        fast_items: list[Any] = [
            (f"default/f{i}", o["metadata"]["uid"], 1, "fast", None) for i, o in enumerate(fast)
        ]
        started = time.monotonic()
        outcomes = propagate_batch(slow_items, wait=LANE_WAIT)
        assert time.monotonic() - started < LANE_WAIT + 0.5
        assert set(outcomes) <= {"pending", "deferred"}
        started = time.monotonic()
        assert propagate_batch(fast_items, wait=LANE_WAIT) == ["created"] * 3
        assert time.monotonic() - started < 1.0, "a batch for a healthy member waited behind the slow one"
        # The slow lane: two timeouts open the breaker, on timeouts: the member is degraded.
        deadline = time.monotonic() + 10
        while "slow" not in degraded.read(fake_redis, ctx.keys):
            assert time.monotonic() < deadline, "never marked degraded"
            time.sleep(0.1)
        assert ctx.member("slow").breaker.timed_out
        while lanes().queued("slow"):
            time.sleep(0.1)  # the lane's calls end (timed out, or refused at once by the open breaker)
        assert all(
            current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", f"s{i}")) == Phase.ADMITTED
            for i in range(6)
        )
        deferred = [
            float(s or 0)
            for s in fake_redis.zmscore(ctx.keys.inflight, [f"{k}|{u}|1" for k, u, *_ in slow_items])
        ]
        assert all(score > time.time() - 1 for score in deferred)  # sent again in a few seconds
        # Past the toleration the next attempt to send them hands them back, the member avoided.
        since = degraded.read(fake_redis, ctx.keys)["slow"].since
        time.sleep(max(0.0, since + 2.2 - time.time()))
        assert propagate_batch(slow_items) == ["replanned"] * 6
        for i in range(6):
            obj = ctx.objects.get(FLEET_ASCENDJOB, "default", f"s{i}")
            assert current_state(obj) == Phase.QUEUED
            assert obj["status"]["conditions"][-1]["reason"] == FleetReason.MEMBER_DEGRADED
            assert exclusions_of(obj)["slow"] > time.time() + 60
        assert fake_redis.zcard(ctx.keys.inflight) == 0
    finally:
        two_members.fault("slow", "ok")
        ctx.close()


def test_a_member_the_worker_does_not_know_yet_is_read_again_then_waited_for_then_given_up(
    two_members: RunningSim, fake_redis: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each pod's copy of the members' Secret is refreshed on its own: a job placed on a member
    this worker has not read yet is created once its kubeconfig has it (read at once, not at the
    next poll), waits while it has not (sent again later, still Admitted), and is handed back
    only after ``MEMBER_LAG_SECONDS``."""
    path = tmp_path / "kubeconfig"
    members_only(two_members.kubeconfig, path, {"fast"})
    ctx = Context(fake_redis, path)
    install(ctx)
    try:
        assert list(ctx.members) == ["fast"]
        early = admitted_on(ctx, "early", "slow")
        members_only(two_members.kubeconfig, path, {"fast", "slow"})
        assert propagate_batch(
            [("default/early", early["metadata"]["uid"], 1, "slow", None)], wait=LANE_WAIT
        ) == ["created"]
        ahead = admitted_on(ctx, "ahead", "later")
        item: Any = ("default/ahead", ahead["metadata"]["uid"], 1, "later", None)
        assert propagate_batch([item], wait=LANE_WAIT) == ["deferred"]
        assert current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", "ahead")) == Phase.ADMITTED
        assert (fake_redis.zscore(ctx.keys.inflight, "default/ahead|" + item[1] + "|1") or 0) > time.time()
        monkeypatch.setattr(propagation, "MEMBER_LAG_SECONDS", 0.0)
        assert propagate_batch([item], wait=LANE_WAIT) == ["unavailable"]
        obj = ctx.objects.get(FLEET_ASCENDJOB, "default", "ahead")
        assert current_state(obj) == Phase.QUEUED
        assert obj["status"]["conditions"][-1]["reason"] == FleetReason.MEMBER_UNAVAILABLE
    finally:
        ctx.close()


def _spy_marks(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every write of Dispatched marks, by the jobs it held (the writes themselves go through)."""
    writes: list[list[str]] = []
    real = propagation._mark_dispatched

    def spy(ctx: Context, done: Any) -> None:
        if done:
            writes.append(sorted(item[0] for item, _ in done))
        real(ctx, done)

    monkeypatch.setattr(propagation, "_mark_dispatched", spy)
    return writes


def _dispatched_once(ctx: Context, names: list[str], *, within: float) -> None:
    """Wait until every job is Dispatched; then each has exactly one Dispatched Event and no
    in-flight entry is left."""
    deadline = time.monotonic() + within
    while any(
        current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", n)) != Phase.DISPATCHED for n in names
    ):
        assert time.monotonic() < deadline, "a create was never marked Dispatched"
        time.sleep(0.05)
    time.sleep(0.3)  # nothing more comes
    for name in names:
        reasons = [
            e["reason"] for e in events_for(ctx.objects, ctx.objects.get(FLEET_ASCENDJOB, "default", name))
        ]
        assert reasons.count(FleetReason.DISPATCHED) == 1, reasons
    assert ctx.client.zcard(ctx.keys.inflight) == 0


def test_creates_that_outlast_their_task_are_each_marked_dispatched_once(
    member: RunningSim, fake_redis: redis.Redis
) -> None:
    """A member slower than ``LANE_WAIT`` (within its timeout): the task returns ``pending`` for
    the creates still running, and the lane marks each Dispatched when it ends, once, with one
    Dispatched Event, as the task would have."""
    ctx = Context(
        fake_redis, member.kubeconfig, settings=MemberSettings(request_timeout=10.0, call_budget=20.0)
    )
    install(ctx)
    member.fault("m1", "slow", ms=int(LANE_WAIT * 1000) + 300, probes=False)
    try:
        count = CREATE_CONCURRENCY * 2
        objs = [admitted_on(ctx, f"late{i}", "m1") for i in range(count)]
        items: list[Any] = [
            (f"default/late{i}", o["metadata"]["uid"], 1, "m1", None) for i, o in enumerate(objs)
        ]
        assert set(propagate_batch(items)) == {"pending"}
        _dispatched_once(ctx, [f"late{i}" for i in range(count)], within=20)
    finally:
        ctx.close()


@pytest.mark.parametrize(
    ("latency_ms", "count"),
    [
        # Near: one round of the lane, which a task that waited 50 ms saw end and marked itself;
        # waiting held the rounds behind it in the queue (a second at 200 admissions a second
        # with members 30 ms away).
        (20, CREATE_CONCURRENCY),
        (150, CREATE_CONCURRENCY + 2),  # far: two rounds of the lane, well within LANE_WAIT
    ],
    ids=["near", "far"],
)
def test_a_task_hands_its_creates_to_the_lane_and_the_batch_marks_them_together(
    member: RunningSim, fake_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch, latency_ms: int, count: int
) -> None:
    """As the dispatcher sends it, a task returns before its member answers, however near (the
    worker is free for the next batch), and the batch's Dispatched marks still go out in one
    write, made by the create that ends last."""
    ctx = Context(
        fake_redis, member.kubeconfig, settings=MemberSettings(request_timeout=10.0, call_budget=20.0)
    )
    install(ctx)
    member.fault("m1", "slow", ms=latency_ms, probes=False)
    writes = _spy_marks(monkeypatch)
    try:
        names = [f"h{i}" for i in range(count)]
        objs = [admitted_on(ctx, name, "m1") for name in names]
        items: list[Any] = [
            (f"default/{n}", o["metadata"]["uid"], 1, "m1", None) for n, o in zip(names, objs, strict=True)
        ]
        started = time.monotonic()
        assert propagate_batch(items) == ["pending"] * count
        assert time.monotonic() - started < 0.3, "the task waited for its member"
        assert all(
            current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", n)) == Phase.ADMITTED for n in names
        )
        _dispatched_once(ctx, names, within=10)
        assert writes == [sorted(f"default/{n}" for n in names)]
        assert len(ctx.member("m1").list_jobs(JOBS, namespace="default")) == count
    finally:
        member.fault("m1", "ok")
        ctx.close()


def test_a_create_that_outlasts_the_lane_wait_does_not_hold_its_batch_marks(
    member: RunningSim, fake_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One create of a batch much slower than the rest: ``LANE_WAIT`` after the hand-off the
    creates that ended are marked Dispatched together, and the slow one when it ends, each
    once."""
    ctx = Context(fake_redis, member.kubeconfig)
    install(ctx)
    writes = _spy_marks(monkeypatch)
    real = propagation._propagate_one

    def slow_for_one(ctx: Context, item: Any, *args: Any, **kwargs: Any) -> str:
        if item[0] == "default/w0":
            time.sleep(LANE_WAIT + 1.0)
        return real(ctx, item, *args, **kwargs)

    monkeypatch.setattr(propagation, "_propagate_one", slow_for_one)
    try:
        names = [f"w{i}" for i in range(3)]
        objs = [admitted_on(ctx, name, "m1") for name in names]
        items: list[Any] = [
            (f"default/{n}", o["metadata"]["uid"], 1, "m1", None) for n, o in zip(names, objs, strict=True)
        ]
        started = time.monotonic()
        propagate_batch(items)
        deadline = started + LANE_WAIT + 0.8
        while current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", "w1")) != Phase.DISPATCHED:
            assert time.monotonic() < deadline, "the batch's marks waited for its slowest create"
            time.sleep(0.05)
        assert time.monotonic() - started >= LANE_WAIT - 0.05  # written by the batch's timer
        assert current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", "w0")) == Phase.ADMITTED
        _dispatched_once(ctx, names, within=10)
        assert writes == [["default/w1", "default/w2"], ["default/w0"]]
    finally:
        ctx.close()


def test_late_marks_gathered_while_one_is_written_go_out_together(
    fake_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group commit of late Dispatched marks: while one lane thread writes, the marks other
    lanes finish meanwhile wait, and all of them go out in its next write, none lost."""
    ctx = Context(fake_redis)
    writes: list[list[str]] = []
    writing, release = threading.Event(), threading.Event()

    def mark(_: Context, done: Any) -> None:
        writes.append([item[0] for item, _ in done])
        if len(writes) == 1:
            writing.set()
            assert release.wait(10)

    monkeypatch.setattr(propagation, "_mark_dispatched", mark)
    marks = propagation._late_marks(ctx)
    first = threading.Thread(target=marks.put, args=(("default/a", "u", 1, "m1", None), "created"))
    first.start()
    assert writing.wait(10)
    others = [
        threading.Thread(target=marks.put, args=((f"default/{n}", "u", 1, "m1", None), "created"))
        for n in "bcd"
    ]
    for thread in others:
        thread.start()
    for thread in others:
        thread.join(10)  # each only adds its mark: the writer is busy
        assert not thread.is_alive()
    release.set()
    first.join(10)
    assert writes == [["default/a"], ["default/b", "default/c", "default/d"]]


def test_creates_past_a_full_lane_are_sent_again_within_a_second(
    member: RunningSim, fake_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burst fills a member's lane: the creates past its backlog stay Admitted and are due
    again in about ``BUSY_SECONDS`` (the lane drains meanwhile), not after a slow member's
    ``DEFER_SECONDS``."""
    monkeypatch.setattr(lanes_module, "LANE_BACKLOG", 2)
    ctx = Context(
        fake_redis, member.kubeconfig, settings=MemberSettings(request_timeout=10.0, call_budget=20.0)
    )
    install(ctx)
    member.fault("m1", "slow", ms=int(LANE_WAIT * 1000) + 500, probes=False)
    try:
        objs = [admitted_on(ctx, f"burst{i}", "m1") for i in range(6)]
        items: list[Any] = [
            (f"default/burst{i}", o["metadata"]["uid"], 1, "m1", None) for i, o in enumerate(objs)
        ]
        sent = time.time()
        assert propagate_batch(items) == ["pending"] * 2 + ["deferred"] * 4
        due = fake_redis.zmscore(
            ctx.keys.inflight, [f"default/burst{i}|{o['metadata']['uid']}|1" for i, o in enumerate(objs)]
        )
        for score in due[2:]:
            assert (
                score is not None
                and sent + propagation.BUSY_SECONDS - 0.1 <= score < sent + propagation.DEFER_SECONDS
            )
        assert all(
            current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", f"burst{i}")) == Phase.ADMITTED
            for i in range(2, 6)
        )
    finally:
        ctx.close()
