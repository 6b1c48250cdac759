"""Syncers share the members through leases: one owner per member, rebalanced as syncers come
and go (:mod:`fleet.dispatch.ownership`), on fakeredis and on a real redis-server."""

from __future__ import annotations

import time
from collections import Counter

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from fleet.dispatch.ownership import Shards, assignment
from fleet.state.dispatch_keys import DEFAULT_DISPATCH_KEYS

MEMBERS = [f"member-{i}" for i in range(30)]
TTL = 0.6


def _rounds(shards: list[Shards], n: int = 2) -> dict[str, frozenset[str]]:
    """``n`` balancing rounds of every syncer (a release in one round is taken in the next)."""
    owned: dict[str, frozenset[str]] = {}
    for _ in range(n):
        for shard in shards:
            owned[shard.me] = shard.balance(MEMBERS)
    return owned


def _exactly_once(owned: dict[str, frozenset[str]]) -> None:
    counts = Counter(member for members in owned.values() for member in members)
    assert sorted(counts) == sorted(MEMBERS), "every member has an owner"
    assert set(counts.values()) == {1}, "no member has two"


def test_three_syncers_share_the_members_once_each(redis_client: redis.Redis) -> None:
    shards = [Shards(redis_client, DEFAULT_DISPATCH_KEYS, ttl=TTL, me=f"s{i}") for i in range(3)]
    owned = _rounds(shards)
    _exactly_once(owned)
    assert sorted(len(members) for members in owned.values()) == [10, 10, 10]  # an even share each
    wanted = assignment(MEMBERS, ["s0", "s1", "s2"])
    for shard in shards:
        assert all(shard.owns(m) == (m in owned[shard.me]) for m in MEMBERS)
        assert all(wanted[m] == shard.me for m in owned[shard.me])


def test_a_dead_syncers_members_are_taken_over_after_its_lease(redis_client: redis.Redis) -> None:
    shards = [Shards(redis_client, DEFAULT_DISPATCH_KEYS, ttl=TTL, me=f"s{i}") for i in range(3)]
    before = _rounds(shards)
    dead, alive = shards[0], shards[1:]
    # The dead one renews no more; until its lease runs out, nobody else takes its members.
    owned = _rounds(alive, 1)
    assert not (before[dead.me] & (owned["s1"] | owned["s2"]))
    time.sleep(TTL + 0.05)
    owned = _rounds(alive)
    _exactly_once(owned)
    assert before[dead.me] <= owned["s1"] | owned["s2"]


def test_a_syncer_joining_takes_its_share_and_only_that(redis_client: redis.Redis) -> None:
    shards = [Shards(redis_client, DEFAULT_DISPATCH_KEYS, ttl=TTL, me=f"s{i}") for i in range(2)]
    before = _rounds(shards)
    newcomer = Shards(redis_client, DEFAULT_DISPATCH_KEYS, ttl=TTL, me="s9")
    owned = _rounds([*shards, newcomer], 3)
    _exactly_once(owned)
    assert sorted(len(members) for members in owned.values()) == [10, 10, 10]
    moved = sum(len(before[old.me] - owned[old.me]) for old in shards)
    assert moved <= 15, f"{moved} members moved for a newcomer's share of 10"


def test_a_clean_stop_hands_the_members_over_at_once(redis_client: redis.Redis) -> None:
    shards = [Shards(redis_client, DEFAULT_DISPATCH_KEYS, ttl=30.0, me=f"s{i}") for i in range(2)]
    _rounds(shards)
    shards[0].release()
    owned = _rounds(shards[1:], 1)
    assert owned["s1"] == frozenset(MEMBERS)


def test_a_syncer_cut_off_from_redis_stops_acting_before_its_lease_could_pass() -> None:
    broken = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.05, retry=Retry(NoBackoff(), 0))
    shard = Shards(broken, DEFAULT_DISPATCH_KEYS, ttl=TTL, me="s0")
    # Its last good round was just now: a failed round keeps the members...
    shard._owned, shard._valid_until = frozenset(MEMBERS), time.monotonic() + 30
    assert shard.balance(MEMBERS) == frozenset(MEMBERS)
    # ...until 0.8 of the lease time after it, when another syncer may soon take them.
    shard._valid_until = time.monotonic() - 0.001
    assert shard.balance(MEMBERS) == frozenset()
    assert not shard.owns(MEMBERS[0])
