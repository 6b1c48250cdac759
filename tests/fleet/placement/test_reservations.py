"""In-flight reservations: two decisions from one stale snapshot never take the same NPUs."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
import redis
from prometheus_client import REGISTRY

from fleet.ascend import NPU_RESOURCE
from fleet.placement import (
    MemberCapacity,
    MemoryReservations,
    Placer,
    PlaceRequest,
    Reservation,
    ReservationStore,
)
from fleet.placement.redis_store import RedisReservations
from tests.fleet.placement.factory import demand, job, node, pod


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _placer(store: ReservationStore, clock: Clock, members: dict[str, list[dict[str, Any]]]) -> Placer:
    placer = Placer(store, ttl=60.0, clock=clock)
    for name, nodes in members.items():
        placer.add_member(MemberCapacity.from_lists(name, nodes))
    return placer


@pytest.fixture(params=["memory", "fakeredis", "redis"])
def store_factory(request: pytest.FixtureRequest) -> Callable[[], ReservationStore]:
    """Builds store handles that share one backing state (as two dispatchers share Redis)."""
    if request.param == "memory":
        shared = MemoryReservations()
        return lambda: shared
    client: redis.Redis = request.getfixturevalue(
        "fake_redis" if request.param == "fakeredis" else "real_redis"
    )
    return lambda: RedisReservations(client)


def _taken(store: ReservationStore, member: str, now: float) -> dict[str, int]:
    return {n: v.get(NPU_RESOURCE, 0) for n, v in store.held(member, now).items()}


def test_two_dispatchers_with_one_stale_snapshot_never_share_npus(
    store_factory: Callable[[], ReservationStore],
) -> None:
    clock = Clock()
    members = {"m1": [node(f"a{i}", 8) for i in range(2)], "m2": [node(f"b{i}", 8) for i in range(2)]}
    # Two dispatchers (e.g. before and after a failover) built from the same snapshot.
    first, second = _placer(store_factory(), clock, members), _placer(store_factory(), clock, members)
    d = demand(job(workers=1, npus=8))
    one = first.place(d, reservation_id="uid-1/0", job="default/one")
    two = second.place(d, reservation_id="uid-2/0", job="default/two")
    assert one is not None and two is not None
    assert one.member != two.member  # the second was refused on m1 and re-decided
    third = second.place(d, reservation_id="uid-3/0", job="default/three")
    assert third is None  # all 32 NPUs are held; the stale snapshot still shows them free
    store = first.store
    for member in ("m1", "m2"):
        assert _taken(store, member, clock.now) == {
            f"{'a' if member == 'm1' else 'b'}{i}": 8 for i in range(2)
        }


def test_reserving_the_same_decision_twice_holds_once(store_factory: Callable[[], ReservationStore]) -> None:
    store = store_factory()
    r = Reservation("u/1", "m", "default/j", {"n0": {NPU_RESOURCE: 8}}, 1, expires_at=2000.0)
    basis = {"n0": {NPU_RESOURCE: 8}}
    assert store.reserve(r, basis, 1000.0)
    assert store.reserve(r, basis, 1000.0)
    assert store.held("m", 1000.0) == {"n0": {NPU_RESOURCE: 8}}
    other = Reservation("u/2", "m", "default/k", {"n0": {NPU_RESOURCE: 1}}, 1, expires_at=2000.0)
    assert not store.reserve(other, basis, 1000.0)  # refused, and nothing changed
    assert store.held("m", 1000.0) == {"n0": {NPU_RESOURCE: 8}}
    assert [x.id for x in store.reservations("m", 1000.0)] == ["u/1"]


def test_holds_expire_after_their_ttl(store_factory: Callable[[], ReservationStore]) -> None:
    clock = Clock()
    placer = _placer(store_factory(), clock, {"m": [node(f"n{i}", 8) for i in range(2)]})
    d = demand(job(workers=1, npus=8))
    assert placer.place(d, reservation_id="u/1", job="default/a") is not None
    assert placer.place(d, reservation_id="u/2", job="default/b") is None
    before = placer.store.versions(["m"], clock.now)
    clock.now += 61.0
    assert placer.store.versions(["m"], clock.now) != before
    assert placer.place(d, reservation_id="u/2", job="default/b") is not None


def test_holds_end_when_the_members_pods_are_bound(store_factory: Callable[[], ReservationStore]) -> None:
    clock = Clock()
    placer = _placer(store_factory(), clock, {"m": [node(f"n{i}", 8) for i in range(4)]})
    d = demand(job(workers=1, npus=8))
    decision = placer.place(d, reservation_id="uid-9/1", job="default/a")
    assert decision is not None
    cap = placer.member("m")
    assert placer.confirm("m") == []  # no pods yet: still held
    labels = {"fleet.io/job-uid": "uid-9", "fleet.io/attempt": "1"}
    # The member scheduler binds the pods, possibly elsewhere than Fleet planned.
    cap.upsert_pod(pod("a-master-0", "n3", 8, labels=labels))
    assert placer.confirm("m") == []  # half of the gang is not a confirmation
    cap.upsert_pod(pod("a-worker-0", "n2", 8, labels=labels))
    assert placer.confirm("m") == ["uid-9/1"]
    assert placer.store.held("m", clock.now) == {}
    # Real usage replaced the hold: two more 8-NPU pods fit, not four.
    assert cap.free_total(NPU_RESOURCE) == 16
    assert placer.place(d, reservation_id="uid-10/1", job="default/b") is not None
    assert placer.place(d, reservation_id="uid-11/1", job="default/c") is None


def test_a_hold_another_dispatcher_made_is_confirmed_once_synced(
    store_factory: Callable[[], ReservationStore],
) -> None:
    """confirm reads no store on a pod event: holds it did not make itself come with sync."""
    clock = Clock()
    members = {"m": [node(f"n{i}", 8) for i in range(4)]}
    old_leader, successor = _placer(store_factory(), clock, members), _placer(store_factory(), clock, members)
    d = demand(job(workers=1, npus=8))
    assert old_leader.place(d, reservation_id="uid-9/1", job="default/a") is not None
    successor.sync()
    cap = successor.member("m")
    labels = {"fleet.io/job-uid": "uid-9", "fleet.io/attempt": "1"}
    cap.upsert_pod(pod("a-master-0", "n0", 8, labels=labels))
    assert successor.confirm("m") == []
    cap.upsert_pod(pod("a-worker-0", "n1", 8, labels=labels))
    assert successor.confirm("m") == ["uid-9/1"]
    assert successor.store.held("m", clock.now) == {}
    assert successor.confirm("m") == []  # confirmed once


def test_release_gives_capacity_back(store_factory: Callable[[], ReservationStore]) -> None:
    clock = Clock()
    placer = _placer(store_factory(), clock, {"m": [node(f"n{i}", 8) for i in range(2)]})
    d = demand(job(workers=1, npus=8))
    decision = placer.place(d, reservation_id="u/1", job="default/a")
    assert decision is not None and placer.decide(d) is None
    placer.release("m", decision.reservation.id)
    assert placer.decide(d) is not None


def test_a_rounds_placements_see_each_other_and_are_held_together(
    store_factory: Callable[[], ReservationStore],
) -> None:
    """place_many: each decision is made over the holds of those before it in the round."""
    clock = Clock()
    placer = _placer(store_factory(), clock, {"m1": [node("a0", 8)], "m2": [node("b0", 8)]})
    d = demand(job(workers=1, npus=8))  # two 8-NPU pods: a whole member each
    small = demand(job(workers=0, npus=8))  # one 8-NPU pod
    requests = [
        PlaceRequest(small, reservation_id="u1/1", job="default/one"),
        PlaceRequest(small, reservation_id="u2/1", job="default/two"),
        PlaceRequest(small, reservation_id="u3/1", job="default/three"),
        PlaceRequest(d, reservation_id="u4/1", job="default/four"),
    ]
    one, two, three, four = placer.place_many(requests)
    assert one is not None and two is not None
    assert {one.member, two.member} == {"m1", "m2"}  # the second saw the first's hold
    assert three is None and four is None  # nothing left, in memory as in the store
    assert _taken(placer.store, "m1", clock.now) == {"a0": 8}
    assert _taken(placer.store, "m2", clock.now) == {"b0": 8}
    assert {r.id for m in ("m1", "m2") for r in placer.store.reservations(m, clock.now)} == {"u1/1", "u2/1"}


def test_a_hold_refused_in_a_round_is_decided_again_alone(
    store_factory: Callable[[], ReservationStore],
) -> None:
    """Another dispatcher took capacity after this one's snapshot: the refused job is re-decided
    on what is really free, the others of the round keep their holds."""
    clock = Clock()
    members = {"m1": [node("a0", 8), node("a1", 8)], "m2": [node("b0", 8)]}
    mine, other = _placer(store_factory(), clock, members), _placer(store_factory(), clock, members)
    small = demand(job(workers=0, npus=8))
    mine.sync()
    assert other.place(small, reservation_id="x/1", job="default/x") is not None  # unseen by mine
    refusals = _refusals()
    results = mine.place_many(
        [
            PlaceRequest(small, reservation_id=f"u{i}/1", job=f"default/j{i}", strategy="spread")
            for i in range(3)
        ]
    )
    placed = [r for r in results if r is not None]
    assert len(placed) == 2  # 3 nodes, one taken by the other dispatcher
    assert results[0] is not None and results[1] is not None and results[2] is None
    store = mine.store
    held = {**_taken(store, "m1", clock.now), **_taken(store, "m2", clock.now)}
    assert held == {"a0": 8, "a1": 8, "b0": 8}  # every node held once, by someone
    assert _refusals() == refusals + 1  # the store refused the stale decision once


def _refusals() -> float:
    return sum(
        REGISTRY.get_sample_value("fleet_placement_reserve_conflicts_total", {"member": m}) or 0.0
        for m in ("m1", "m2")
    )


def test_batched_reserve_and_release_act_in_order(store_factory: Callable[[], ReservationStore]) -> None:
    store = store_factory()
    basis = {"n0": {NPU_RESOURCE: 8}}
    first = Reservation("u/1", "m", "default/a", {"n0": {NPU_RESOURCE: 6}}, 1, expires_at=2000.0)
    second = Reservation("u/2", "m", "default/b", {"n0": {NPU_RESOURCE: 4}}, 1, expires_at=2000.0)
    third = Reservation("u/3", "m", "default/c", {"n0": {NPU_RESOURCE: 2}}, 1, expires_at=2000.0)
    # Each answer is the member's version after it (0: refused or not held): one more per change.
    (start,) = store.versions(["m"], 1000.0).values()
    assert store.reserve_many([(first, basis), (second, basis), (third, basis)], 1000.0) == [
        start + 1,
        0,
        start + 2,
    ]
    assert store.held("m", 1000.0) == {"n0": {NPU_RESOURCE: 8}}
    assert store.reserve(first, basis, 1000.0) == start + 2  # held already: nothing changed
    assert store.release_many("m", ["u/1", "u/2", "u/3"]) == [start + 3, 0, start + 4]
    assert store.held("m", 1000.0) == {}
    assert store.versions(["m"], 1000.0) == {"m": start + 4}
    assert store.reserve_many([], 1000.0) == []


class _CountingStore:
    """A store that counts how often a member's holds are read back whole."""

    def __init__(self, store: ReservationStore) -> None:
        self.store = store
        self.reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def reservations(self, member: str, now: float) -> list[Reservation]:
        self.reads += 1
        return self.store.reservations(member, now)


def test_a_placer_reads_a_members_holds_back_only_when_someone_else_changed_them(
    store_factory: Callable[[], ReservationStore],
) -> None:
    """Its own holds and releases are laid over its view as it makes them; the store's version
    tells it when the member changed otherwise (another dispatcher, an expiry), and only then
    are the member's holds read back."""
    clock = Clock()
    members = {"m": [node(f"n{i}", 8) for i in range(4)]}
    counting = _CountingStore(store_factory())
    placer = _placer(counting, clock, members)
    placer.sync()
    first_read = counting.reads
    d = demand(job(workers=0, npus=2))
    decided = placer.place_many([PlaceRequest(d, f"u{i}/1", f"default/j{i}") for i in range(3)])
    assert all(decided)
    placer.place(d, reservation_id="u3/1", job="default/j3")
    placer.release("m", "u3/1")
    placer.sync()
    assert counting.reads == first_read  # its own writes only: nothing read back
    other = _placer(store_factory(), clock, members)
    assert other.place(d, reservation_id="x/1", job="default/x") is not None
    placer.sync()
    assert counting.reads == first_read + 1  # another's hold: read once
    assert {n: dict(placer.member("m").held(n)) for n in ("n0", "n1", "n2", "n3")} == {
        n: dict(v) for n, v in {**{f"n{i}": {} for i in range(4)}, **counting.held("m", clock.now)}.items()
    }
    clock.now += 61.0  # every hold expires
    placer.sync()
    assert counting.reads == first_read + 2
    assert not any(placer.member("m").held(f"n{i}") for i in range(4))


@pytest.mark.parametrize("seed", range(4))
def test_the_holds_laid_over_a_member_are_what_the_store_holds_after_any_sequence(seed: int) -> None:
    """The placer keeps each member's summed holds as they change (not summed again from every
    hold at each placement): after any run of placements, releases, pods bound and confirmed,
    and syncs, the capacity it decides on holds exactly what the store holds."""
    rng = random.Random(seed)
    clock = Clock()
    store = MemoryReservations()
    placer = _placer(store, clock, {"m": [node(f"n{i}", 8) for i in range(4)]})
    cap = placer.member("m")
    placed: list[str] = []
    for step in range(120):
        action = rng.choice(["place", "place", "release", "bind", "sync"])
        if action == "place":
            rid = f"u{step}/1"
            npus = rng.choice([1, 2, 4, 8])
            if placer.place(demand(job(workers=0, npus=npus)), reservation_id=rid, job=f"default/j{step}"):
                placed.append(rid)
        elif action == "release" and placed:
            placer.release("m", placed.pop(rng.randrange(len(placed))))
        elif action == "bind" and placed:
            rid = placed.pop(0)
            hold = next(r for r in store.reservations("m", clock.now) if r.id == rid)
            ((where, amounts),) = hold.takes.items()
            uid, attempt = rid.split("/")
            labels = {"fleet.io/job-uid": uid, "fleet.io/attempt": attempt}
            cap.upsert_pod(pod(f"p{step}", where, amounts[NPU_RESOURCE], labels=labels))
            assert placer.confirm("m") == [rid]
        else:
            placer.sync()
        held = store.held("m", clock.now)
        assert {n: dict(cap.held(n)) for n in held} == held
        assert not any(cap.held(n) for n in {f"n{i}" for i in range(4)} - set(held))


@pytest.mark.parametrize("seed", range(3))
def test_after_a_sync_the_holds_laid_over_a_member_are_the_stores_whoever_changed_them(
    seed: int, store_factory: Callable[[], ReservationStore]
) -> None:
    """Another dispatcher's holds and releases and holds that expire mix with the placer's own:
    whatever it kept without reading back, each sync leaves its view exactly the store's."""
    rng = random.Random(seed)
    clock = Clock()
    members = {"m": [node(f"n{i}", 8) for i in range(4)]}
    placer, other = _placer(store_factory(), clock, members), _placer(store_factory(), clock, members)
    cap = placer.member("m")
    mine: list[str] = []
    theirs: list[str] = []
    for step in range(150):
        action = rng.choice(["place", "place", "release", "other", "other-release", "expire", "sync"])
        d = demand(job(workers=0, npus=rng.choice([1, 2, 4])))
        if action == "place":
            if placer.place(d, reservation_id=f"u{step}/1", job=f"default/j{step}"):
                mine.append(f"u{step}/1")
        elif action == "release" and mine:
            placer.release("m", mine.pop(rng.randrange(len(mine))))
        elif action == "other":
            if other.place(d, reservation_id=f"x{step}/1", job=f"default/x{step}"):
                theirs.append(f"x{step}/1")
        elif action == "other-release" and theirs:
            other.release("m", theirs.pop(rng.randrange(len(theirs))))
        elif action == "expire":
            clock.now += rng.choice([1.0, 30.0, 61.0])
        else:
            placer.sync()
            held = placer.store.held("m", clock.now)
            assert {n: dict(cap.held(n)) for n in held} == held
            assert not any(cap.held(n) for n in {f"n{i}" for i in range(4)} - set(held))
