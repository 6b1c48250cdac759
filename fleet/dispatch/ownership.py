"""Which syncer owns which member: leases in Redis, spread by rendezvous hashing.

Any number of ``fleet syncer --sharded`` processes share the members. Each one, every third of
the lease time (:class:`Shards.balance`):

1. heartbeats into a sorted set of live syncers (score: when its heartbeat expires, by Redis'
   clock) and reads the live ones back;
2. computes, for every member, the live syncer it *should* belong to (:func:`assignment`): the
   highest ``sha1(member|syncer)`` among the syncers not yet holding ``ceil(members/syncers)``
   (rendezvous hashing with bounded loads: every syncer computes the same answer from the same
   live set, each gets an even share, and a syncer coming or going moves few members besides
   its own share);
3. in one script: renews the leases it holds on its own members, takes those whose lease is free
   or expired, and gives back the ones that now belong to another live syncer.

A lease is a field of one hash (member -> ``syncer|expiry ms``, Redis' clock), so the whole
round is one atomic script on one key, in the dispatch keys' hash slot. A syncer killed with -9
stops renewing: its heartbeat and its leases expire after the lease time, the others no longer
count it and take its members in their next round, so a member is unwatched for at most about
``lease + lease/3`` seconds. The new owner lists the member's copies afresh (a watch starts with
a list), so no status change made meanwhile is lost.

One owner at a time is what the leases guarantee while clocks run: a syncer stops acting on its
members by its own clock once ``0.8 * lease`` passed without a successful round (Redis away, a
long pause), before any other could take them. What a stalled syncer might still write when it
wakes is harmless: every write of the syncer to a fleet job is a compare-and-set on its uid and
attempt, so a failover is applied once whoever sends it (no duplicate), and purges are idempotent.

Karmada shards its cluster controllers differently (one controller per member, elected through
Kubernetes Leases); the lease-per-member and heartbeat here follow the same idea over Redis,
which Fleet already depends on, rather than a Kubernetes API the fleet may not have.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import redis

from fleet.state import DispatchKeys
from queues import lua_script

__all__ = ["OWNERSHIP_SECONDS", "Shards", "assignment", "syncer_id"]

log = logging.getLogger("fleet.dispatch.ownership")

#: The default lease time of a member: how long a killed syncer's members go unwatched, at most.
OWNERSHIP_SECONDS: Final = 5.0


def syncer_id() -> str:
    """This process: host (a pod's name in a cluster) and pid, unique among live syncers."""
    return f"{socket.gethostname()}-{os.getpid()}"


def assignment(members: Sequence[str], syncers: Sequence[str]) -> dict[str, str]:
    """Member -> the live syncer it belongs to: rendezvous hashing with bounded loads, the same
    on every syncer that sees the same members and live syncers."""
    most = -(-len(members) // max(1, len(syncers)))
    load = dict.fromkeys(syncers, 0)
    owners: dict[str, str] = {}
    for member in sorted(members):
        ranked = sorted(syncers, key=lambda s: hashlib.sha1(f"{member}|{s}".encode()).digest(), reverse=True)
        owner = next(s for s in ranked if load[s] < most)
        load[owner] += 1
        owners[member] = owner
    return owners


@dataclass
class Shards:
    """This syncer's share of the members, kept by :meth:`balance` (called every ``ttl / 3``)."""

    client: redis.Redis
    keys: DispatchKeys
    ttl: float = OWNERSHIP_SECONDS
    me: str = field(default_factory=syncer_id)
    _owned: frozenset[str] = frozenset()
    _valid_until: float = 0.0

    def __post_init__(self) -> None:  # lua/ownership_*.lua
        self._heartbeat = lua_script(self.client, "fleet.dispatch", "ownership_heartbeat")
        self._balance = lua_script(self.client, "fleet.dispatch", "ownership_balance")
        self._release = lua_script(self.client, "fleet.dispatch", "ownership_release")

    @property
    def interval(self) -> float:
        return self.ttl / 3

    def balance(self, members: Sequence[str]) -> frozenset[str]:
        """One round (heartbeat, rendezvous, leases); returns the members this syncer owns now.

        On a Redis error the members are kept until ``0.8 * ttl`` after the last good round, then
        dropped: by then another syncer may have taken them."""
        started = time.monotonic()
        ttl_ms = str(int(self.ttl * 1000))
        try:
            replies = self._heartbeat(keys=[self.keys.syncers], args=[self.me, ttl_ms])
            live = [_text(s) for s in replies]
            if self.me not in live:
                live.append(self.me)
            args: list[str] = []
            for member, owner in assignment(members, live).items():
                args += [member, "1" if owner == self.me else "0"]
            held = self._balance(keys=[self.keys.owners], args=[self.me, ttl_ms, *args])
        except redis.RedisError as error:
            log.warning("event=ownership_round_failed owned=%d error=%s", len(self._owned), error)
            if time.monotonic() >= self._valid_until and self._owned:
                log.warning("event=ownership_lost members=%d error=%s", len(self._owned), error)
                self._owned = frozenset()
            return self._owned
        self._valid_until = started + 0.8 * self.ttl
        owned = frozenset(_text(m) for m in held)
        if owned != self._owned:
            log.info(
                "event=ownership syncer=%s syncers=%d owned=%d gained=%s lost=%s",
                self.me, len(live), len(owned),
                ",".join(sorted(owned - self._owned)) or "-", ",".join(sorted(self._owned - owned)) or "-",
            )  # fmt: skip
        self._owned = owned
        return owned

    def owns(self, member: str) -> bool:
        """Whether this syncer may act on ``member`` now (its lease is held and fresh)."""
        return member in self._owned and time.monotonic() < self._valid_until

    def release(self) -> None:
        """A clean stop: give every lease back at once, so the others take over in their next round."""
        try:
            self._release(keys=[self.keys.owners, self.keys.syncers], args=[self.me, *sorted(self._owned)])
        except redis.RedisError as error:
            log.warning("event=ownership_not_released error=%s", error)
        self._owned = frozenset()


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw
