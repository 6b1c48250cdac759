"""The syncer's composer (issue 22): what it does across its concerns, in this process."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import pytest
import redis

from fleet.ascend import NPU_RESOURCE as NPU
from fleet.dispatch.context import Context
from fleet.dispatch.handback import inflight_entry
from fleet.dispatch.ownership import Shards
from fleet.dispatch.sync import MemberCopy, SyncerSettings
from fleet.dispatch.sync import observer as observer_module
from fleet.dispatch.sync.observer import _superseded
from fleet.dispatch.syncer import Syncer
from fleet.jobs import current_state
from fleet.labels import ATTEMPT_LABEL, JOB_NAME_LABEL, JOB_NAMESPACE_LABEL, JOB_UID_LABEL
from fleet.members import MODIFIED, SYNC, EventCallback, WatchEvent
from fleet.placement import Reservation
from fleet.state import CopyEntry, events_for
from fleet.workloads import job_key
from tests.fleet.dispatch.conftest import admitted_on
from tests.support.job_states import dispatch
from tests.support.kinds import FLEET_ASCENDJOB


def test_a_member_let_go_is_forgotten_by_every_concern_and_acted_on_afresh_when_taken_back(
    fake_redis: redis.Redis,
) -> None:
    """A sharded syncer that lets a member go forgets what it sent and knew for it, so that when
    the member comes back to it, a purge is sent at once (not held for ``purge_again_after``)
    and its health continues from the record in Redis, not from this syncer's old copy."""
    ctx = Context(fake_redis)
    syncer = Syncer(ctx)
    kept, dropped = MemberCopy("m1", "default", "a", "u1", 1), MemberCopy("m2", "default", "b", "u2", 1)
    for ident in (kept, dropped):
        syncer.stale.purge(ident, "orphan")
        syncer.stale.purge(ident, "orphan")  # seen again at once: not sent twice
        syncer.probes.record(ident.member, healthy=False, error="refused", latency=0.1)
    assert [job.args[0] for job in ctx.purge_queue.jobs] == ["m1", "m2"]

    syncer._let_go("m2")
    assert set(syncer.shared.health) == {"m1"} and syncer.shared.probed == {"m1"}
    for ident in (kept, dropped):
        syncer.stale.purge(ident, "orphan")
    assert [job.args[0] for job in ctx.purge_queue.jobs] == ["m1", "m2", "m2"]


class _ListsAtOnce:
    """A member whose watches deliver their list before ``watch_jobs`` even returns: the
    soonest a real watch's own thread can."""

    def __init__(self, name: str, copies: list[dict[str, Any]]) -> None:
        self.name, self.copies = name, copies

    def watch_jobs(self, kind: Any, callback: EventCallback, *_: Any, **__: Any) -> Any:
        callback(WatchEvent(SYNC, self.name, str(kind), objects=tuple(self.copies)))
        return self


def test_a_member_taken_over_is_acted_on_from_its_first_list(
    fake_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sharded syncer that takes a member over acts on the list its watches deliver first,
    however soon it comes: a copy that finished before the takeover sends nothing later, so a
    list dropped as a late event would leave its job unmirrored for ever."""
    ctx = Context(fake_redis)
    copy = {"kind": "AscendJob", "metadata": {"namespace": "team-a", "name": "j1"}}
    ctx._members = {"m1": _ListsAtOnce("m1", [copy])}  # type: ignore[dict-item]
    syncer = Syncer(ctx, shards=Shards(fake_redis, ctx.keys))
    observed: list[tuple[str, list[Mapping[str, Any]]]] = []

    def observe(member: str, copies: Sequence[Mapping[str, Any]]) -> None:
        observed.append((member, list(copies)))

    monkeypatch.setattr(syncer.observer, "observe", observe)
    monkeypatch.setattr(syncer, "_spawn", lambda *args: None)  # no probe thread
    syncer._rebalance(frozenset({"m1"}))
    assert observed and all(event == ("m1", [copy]) for event in observed)


class _Lists:
    """A member whose list of copies is fixed (no watch has said anything of them)."""

    def __init__(self, copies: list[dict[str, Any]]) -> None:
        self.copies = copies

    def list_objects(self, *_: Any, **__: Any) -> Any:
        return SimpleNamespace(items=self.copies)


def _copy_of(obj: Mapping[str, Any], conditions: list[dict[str, str]]) -> dict[str, Any]:
    meta = obj["metadata"]
    labels = {
        JOB_NAMESPACE_LABEL: meta["namespace"],
        JOB_NAME_LABEL: meta["name"],
        JOB_UID_LABEL: meta["uid"],
        ATTEMPT_LABEL: "1",
    }
    return {
        "apiVersion": "mindxdl.gitee.com/v1",
        "kind": "AscendJob",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "labels": labels},
        "status": {"conditions": conditions},
    }


def test_a_first_status_no_watch_reported_is_mirrored_by_the_next_list_and_none_is_set_back(
    fake_redis: redis.Redis,
) -> None:
    """Level, not edge: a copy Running at its member while its job still shows Dispatched (the
    watch's event missed) is mirrored when the copy audit lists the member; a job that already
    shows its member's state is not set back by a list older than what the watch delivered."""
    ctx = Context(fake_redis)
    syncer = Syncer(ctx)
    running = [{"type": "Running", "status": "True", "reason": "JobRunning", "message": "running"}]
    missed = ctx.objects.mutate(FLEET_ASCENDJOB, "default", "missed", dispatch_of(ctx, "missed"))
    ahead = ctx.objects.mutate(FLEET_ASCENDJOB, "default", "ahead", dispatch_of(ctx, "ahead"))
    assert missed is not None and ahead is not None
    syncer.observer.observe("m1", [_copy_of(ahead, running)])  # the watch said Running
    assert current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", "ahead")) == "Running"
    ctx.copies.expect(
        [
            CopyEntry("m1", f"default/{o['metadata']['name']}", o["metadata"]["uid"], 1)
            for o in (missed, ahead)
        ]
    )

    member = _Lists([_copy_of(missed, running), _copy_of(ahead, [])])  # "ahead": an older list
    assert syncer.audit.audit("m1", member) == 0  # type: ignore[arg-type]  # nothing is missing
    assert current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", "missed")) == "Running"
    assert current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", "ahead")) == "Running"


def dispatch_of(ctx: Context, name: str) -> Any:
    """A change that marks ``name`` (admitted to m1 first) Dispatched."""
    admitted_on(ctx, name, "m1")
    return dispatch


def _condition(type_: str, reason: str, status: str = "True") -> dict[str, str]:
    return {"type": type_, "status": status, "reason": reason, "message": f"{type_} now"}


def _versions(obj: Mapping[str, Any], *steps: list[dict[str, str]]) -> list[WatchEvent]:
    """One read of a member's stream: the copy of ``obj`` at each of ``steps`` (its conditions)."""
    return [WatchEvent(MODIFIED, "m1", "ascendjobs", object=_copy_of(obj, step)) for step in steps]


def _dispatched(ctx: Context, name: str) -> dict[str, Any]:
    """The fleet job ``name``, admitted to m1 and marked Dispatched."""
    obj = ctx.objects.mutate(FLEET_ASCENDJOB, "default", name, dispatch_of(ctx, name))
    assert obj is not None
    return obj


def test_a_burst_of_one_copys_steps_is_written_once_at_its_latest(fake_redis: redis.Redis) -> None:
    """Level, not edge: a read that holds a copy's Created then Running (a syncer that fell
    behind) writes its job once, at Running, with both conditions. Read apart, Created waits
    the batch period for a later version: Running within it is one write; Running after it
    (Created written when it was due) is two."""
    ctx = Context(fake_redis)
    syncer = Syncer(ctx)
    created = [_condition("Created", "JobCreated")]
    running = [*created, _condition("Running", "JobRunning")]
    jobs = {name: _dispatched(ctx, name) for name in ("burst", "apart", "slow")}
    since = ctx.objects.get(FLEET_ASCENDJOB, "default", "slow")["metadata"]["resourceVersion"]
    syncer.observer.on_batch(_versions(jobs["burst"], created, running))
    syncer.observer.on_batch(_versions(jobs["apart"], created))
    syncer.observer.on_batch(_versions(jobs["slow"], created))
    assert current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", "apart")) == "Dispatched"
    syncer.observer.on_batch(_versions(jobs["apart"], running))  # within the period
    syncer.observer.flush(time.monotonic() + syncer.settings.starting_batch)  # the period passed
    assert current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", "slow")) == "Created"
    syncer.observer.on_batch(_versions(jobs["slow"], running))
    for name in ("burst", "apart", "slow"):
        obj = ctx.objects.get(FLEET_ASCENDJOB, "default", name)
        assert current_state(obj) == "Running"
        assert [c["type"] for c in obj["status"]["conditions"]][-2:] == ["Created", "Running"]
    changes, _ = ctx.objects.changes(FLEET_ASCENDJOB, since, block_ms=0)
    writes = Counter(str(c.object["metadata"]["name"]) for c in changes if c.object is not None)
    assert writes == {"burst": 1, "apart": 1, "slow": 2}, writes


def test_a_copy_that_keeps_changing_while_it_starts_is_still_written_within_its_batch_period(
    fake_redis: redis.Redis,
) -> None:
    """A later starting version replaces the held one but keeps its due time, so a copy whose
    starting versions keep coming is written within one period of the first, at its newest."""
    ctx = Context(fake_redis)
    syncer = Syncer(ctx)
    job = _dispatched(ctx, "busy")
    syncer.observer.on_batch(_versions(job, []))  # seen, no state yet
    due = syncer.observer.holds.next_due()
    assert due is not None
    time.sleep(0.01)
    syncer.observer.on_batch(_versions(job, [_condition("Created", "JobCreated")]))
    assert syncer.observer.holds.next_due() == due
    syncer.observer.flush(due)
    assert current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", "busy")) == "Created"
    assert len(syncer.observer.holds) == 0


def test_a_starting_copy_is_mirrored_by_the_holds_thread_once_its_batch_period_passed(
    fake_redis: redis.Redis,
) -> None:
    """A copy that stays Created is not left unmirrored: the syncer's holds thread writes it
    once the batch period passed, not before; a version that is acted on (a failure) never waits."""
    ctx = Context(fake_redis)
    syncer = Syncer(ctx, SyncerSettings(starting_batch=0.3))
    waits = _dispatched(ctx, "waits")
    fails = _dispatched(ctx, "fails")
    stop = threading.Event()
    thread = threading.Thread(target=syncer.observer.flush_held, args=(stop,), daemon=True)
    thread.start()
    try:
        started = time.monotonic()
        syncer.observer.on_batch(_versions(waits, [_condition("Created", "JobCreated")]))
        syncer.observer.on_batch(_versions(fails, [_condition("Failed", "JobValidFailed")]))
        assert current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", "fails")) == "Failed"
        assert current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", "waits")) == "Dispatched"
        deadline = started + 5
        while current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", "waits")) != "Created":
            assert time.monotonic() < deadline, "the held Created was never mirrored"
            time.sleep(0.02)
        assert time.monotonic() - started >= 0.3
        assert len(syncer.observer.holds) == 0
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()


def test_a_held_version_gives_way_to_a_list_and_is_passed_over_by_the_audit(fake_redis: redis.Redis) -> None:
    """What a list says is newer than what was held: the list's version is mirrored and the
    held one dropped (nothing written when its time comes). The copy audit's list, read beside
    the watch, leaves a held copy to its watch."""
    ctx = Context(fake_redis)
    syncer = Syncer(ctx)
    created = [_condition("Created", "JobCreated")]
    running = [*created, _condition("Running", "JobRunning")]
    listed = _dispatched(ctx, "listed")
    audited = _dispatched(ctx, "audited")
    syncer.observer.on_batch(_versions(listed, created))
    syncer.observer.on_batch(_versions(audited, created))
    syncer.observer.observe("m1", [_copy_of(audited, created)], unmirrored_only=True)
    assert current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", "audited")) == "Dispatched"
    syncer.observer.on_event(WatchEvent(SYNC, "m1", "ascendjobs", objects=(_copy_of(listed, running),)))
    obj = ctx.objects.get(FLEET_ASCENDJOB, "default", "listed")
    assert current_state(obj) == "Running"
    version = obj["metadata"]["resourceVersion"]
    syncer.observer.flush(time.monotonic() + syncer.settings.starting_batch)
    after = ctx.objects.get(FLEET_ASCENDJOB, "default", "listed")
    assert after["metadata"]["resourceVersion"] == version  # the held Created was not written
    assert current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", "audited")) == "Created"


def test_without_a_batch_period_a_starting_copy_is_mirrored_at_once(fake_redis: redis.Redis) -> None:
    ctx = Context(fake_redis)
    syncer = Syncer(ctx, SyncerSettings(starting_batch=0))
    job = _dispatched(ctx, "now")
    syncer.observer.on_batch(_versions(job, [_condition("Created", "JobCreated")]))
    assert current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", "now")) == "Created"
    assert len(syncer.observer.holds) == 0


def test_a_restart_inside_a_burst_is_still_recorded(fake_redis: redis.Redis) -> None:
    """A version that says more than "running" (a restart, a failure) is acted on in its turn
    even when a later one follows in the same read: its Warning Event is recorded."""
    ctx = Context(fake_redis)
    syncer = Syncer(ctx)
    running = [_condition("Created", "JobCreated"), _condition("Running", "JobRunning")]
    restarting = [
        *running[:1],
        _condition("Running", "JobRunning", "False"),
        _condition("Restarting", "JobRestarting"),
    ]
    again = [
        *running[:1],
        _condition("Restarting", "JobRestarting", "False"),
        _condition("Running", "JobRunning"),
    ]
    job = ctx.objects.mutate(FLEET_ASCENDJOB, "default", "bumpy", dispatch_of(ctx, "bumpy"))
    assert job is not None
    syncer.observer.on_batch(_versions(job, running, restarting, again))
    obj = ctx.objects.get(FLEET_ASCENDJOB, "default", "bumpy")
    assert current_state(obj) == "Running"
    warnings = [e["reason"] for e in events_for(ctx.objects, obj) if e["type"] == "Warning"]
    assert warnings == ["JobRestarting"]


def test_a_version_whose_status_its_kind_cannot_read_is_never_passed_over(fake_redis: redis.Redis) -> None:
    """Passing a version over needs its status read; one its kind cannot read is left for the
    path every copy takes, instead of failing the whole read."""
    ctx = Context(fake_redis)
    job = ctx.objects.mutate(FLEET_ASCENDJOB, "default", "odd", dispatch_of(ctx, "odd"))
    assert job is not None
    odd = _copy_of(job, [])
    odd["status"] = {"replicaStatuses": 5}
    events = [
        WatchEvent(MODIFIED, "m1", "ascendjobs", object=odd),
        *_versions(job, [_condition("Running", "R")]),
    ]
    assert _superseded("m1", events) == set()
    assert _superseded("m1", [*_versions(job, [], [])]) == {0}


class _CountingReads:
    """Counts the fleet jobs read through ``get_many`` (each one decoded)."""

    def __init__(self, ctx: Context, monkeypatch: pytest.MonkeyPatch) -> None:
        self.read = 0
        real = ctx.objects.get_many

        def get_many(rt: Any, keys: Sequence[tuple[str, str]]) -> Any:
            self.read += len(keys)
            return real(rt, keys)

        monkeypatch.setattr(ctx.objects, "get_many", get_many)


def test_the_audit_reads_no_finished_job_its_member_still_holds_and_still_mirrors_a_missed_one(
    fake_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member keeps its finished copies, and the audit lists them every ``audit_every``: the
    jobs of those whose quota is released are not read again (they cannot be unmirrored), while
    a Running copy its job never showed (the watch's event missed) is still mirrored."""
    ctx = Context(fake_redis)
    syncer = Syncer(ctx)
    done = [_condition("Succeeded", "JobSucceeded")]
    running = [_condition("Running", "JobRunning")]
    finished = []
    for i in range(5):
        obj = ctx.objects.mutate(FLEET_ASCENDJOB, "default", f"done-{i}", dispatch_of(ctx, f"done-{i}"))
        assert obj is not None
        syncer.observer.on_batch(_versions(obj, done))  # the watch said Succeeded: quota released
        finished.append(obj)
    missed = ctx.objects.mutate(FLEET_ASCENDJOB, "default", "missed", dispatch_of(ctx, "missed"))
    assert missed is not None
    assert ctx.ledger.states([f"default/done-{i}" for i in range(5)]) == ["absent"] * 5
    ctx.copies.expect([CopyEntry("m1", job_key(o), o["metadata"]["uid"], 1) for o in (*finished, missed)])

    reads = _CountingReads(ctx, monkeypatch)
    member = _Lists([*(_copy_of(o, done) for o in finished), _copy_of(missed, running)])
    syncer.audit.audit("m1", member)  # type: ignore[arg-type]
    assert current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", "missed")) == "Running"
    assert reads.read == 1, f"{reads.read} jobs read for one that could be unmirrored"


def test_the_ends_of_one_read_release_every_finished_jobs_quota_hold_and_mark(
    fake_redis: redis.Redis,
) -> None:
    """The Succeeded copies of one read of a member's stream finish all their jobs (quota, the
    capacity hold and the in-flight mark released, batched), and seeing them again changes
    nothing and raises nothing (a syncer restarted between the write and the release)."""
    ctx = Context(fake_redis)
    syncer = Syncer(ctx)
    jobs = []
    for i in range(3):
        obj = ctx.objects.mutate(FLEET_ASCENDJOB, "default", f"j{i}", dispatch_of(ctx, f"j{i}"))
        assert obj is not None
        uid = obj["metadata"]["uid"]
        hold = Reservation(f"{uid}/1", "m1", f"default/j{i}", {"n0": {NPU: 1}}, 1, 9e9)
        assert ctx.reservations.reserve(hold, {"n0": {NPU: 8}}, time.time())
        fake_redis.zadd(ctx.keys.inflight, {inflight_entry(f"default/j{i}", uid, 1): time.time() + 60})
        jobs.append(obj)
    keys = [f"default/j{i}" for i in range(3)]
    assert ctx.ledger.states(keys) == ["admitted"] * 3

    done = [_condition("Succeeded", "JobSucceeded")]
    read = [WatchEvent(MODIFIED, "m1", "ascendjobs", object=_copy_of(o, done)) for o in jobs]
    for _ in range(2):
        syncer.observer.on_batch(read)
        assert ctx.ledger.states(keys) == ["absent"] * 3
        assert ctx.reservations.reservations("m1", time.time()) == []
        assert fake_redis.zcard(ctx.keys.inflight) == 0
        assert all(
            current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", k[8:])) == "Succeeded" for k in keys
        )


def test_the_audit_passes_over_a_copy_at_the_version_it_mirrored_until_the_recheck_time(
    fake_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A running copy the watch delivered and the syncer mirrored, listed again at that very
    version, is not news: the audit does not read its job (a fleet of long jobs was read whole
    every ``audit_every``). A new version is read, and so is the same one once
    ``RECHECK_SECONDS`` have passed (a write Redis lost since is repaired then)."""
    ctx = Context(fake_redis)
    syncer = Syncer(ctx)
    running = [_condition("Running", "JobRunning")]
    obj = ctx.objects.mutate(FLEET_ASCENDJOB, "default", "long", dispatch_of(ctx, "long"))
    assert obj is not None
    ctx.copies.expect([CopyEntry("m1", job_key(obj), obj["metadata"]["uid"], 1)])
    copy = _copy_of(obj, running)
    copy["metadata"]["resourceVersion"] = "41"
    syncer.observer.on_batch([WatchEvent(MODIFIED, "m1", "ascendjobs", object=copy)])
    assert current_state(ctx.objects.get(FLEET_ASCENDJOB, "default", "long")) == "Running"

    reads = _CountingReads(ctx, monkeypatch)
    syncer.audit.audit("m1", _Lists([copy]))  # type: ignore[arg-type]
    assert reads.read == 0
    newer = {**copy, "metadata": {**copy["metadata"], "resourceVersion": "42"}}
    syncer.audit.audit("m1", _Lists([newer]))  # type: ignore[arg-type]
    assert reads.read == 1
    monkeypatch.setattr(observer_module, "RECHECK_SECONDS", 0.0)
    syncer.audit.audit("m1", _Lists([copy]))  # type: ignore[arg-type]
    assert reads.read == 2
