"""The reservation store in Redis, for dispatchers that fail over to one another.

Reserve, release and expiry are Lua scripts, so "check every node's basis, then hold" is one
atomic step however many dispatchers race; the key layout is in :mod:`fleet.placement.keys`.
Time comes from the caller (``now``), like the in-memory store, so both behave the same under
test clocks. Amounts are integers in canonical units (exact in Lua doubles below 2**53).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import redis

from fleet.connections import run_script_many
from fleet.placement.keys import EXPIRY, HELD, ITEMS, TAKES, VERSION, ReservationKeys
from fleet.placement.reservations import Reservation, Takes

__all__ = ["RedisReservations"]

_PRELUDE = f"""
local BASE = KEYS[1]
local K_HELD = BASE .. '{HELD}'
local K_ITEMS = BASE .. '{ITEMS}'
local K_EXPIRY = BASE .. '{EXPIRY}'
local K_VERSION = BASE .. '{VERSION}'
local function k_takes(id) return BASE .. '{TAKES}' .. id end

local function drop(id)
  local takes = redis.call('HGETALL', k_takes(id))
  for i = 1, #takes, 2 do
    local left = redis.call('HINCRBY', K_HELD, takes[i], -tonumber(takes[i + 1]))
    if left == 0 then redis.call('HDEL', K_HELD, takes[i]) end
  end
  redis.call('DEL', k_takes(id))
  redis.call('HDEL', K_ITEMS, id)
  redis.call('ZREM', K_EXPIRY, id)
  redis.call('INCR', K_VERSION)
end

local function expire(now)
  local due = redis.call('ZRANGEBYSCORE', K_EXPIRY, '-inf', now)
  for _, id in ipairs(due) do drop(id) end
end
"""

# ARGV: now, id, json, expires_at, then (field, take, basis) triples.
_RESERVE = (
    _PRELUDE
    + """
expire(ARGV[1])
local id = ARGV[2]
if redis.call('HEXISTS', K_ITEMS, id) == 1 then return 1 end
for i = 5, #ARGV, 3 do
  local have = tonumber(redis.call('HGET', K_HELD, ARGV[i]) or '0')
  if have + tonumber(ARGV[i + 1]) > tonumber(ARGV[i + 2]) then return 0 end
end
for i = 5, #ARGV, 3 do
  redis.call('HINCRBY', K_HELD, ARGV[i], ARGV[i + 1])
  redis.call('HSET', k_takes(id), ARGV[i], ARGV[i + 1])
end
redis.call('HSET', K_ITEMS, id, ARGV[3])
redis.call('ZADD', K_EXPIRY, ARGV[4], id)
redis.call('INCR', K_VERSION)
return 1
"""
)

# ARGV: id.
_RELEASE = (
    _PRELUDE
    + """
if redis.call('HEXISTS', K_ITEMS, ARGV[1]) == 0 then return 0 end
drop(ARGV[1])
return 1
"""
)

# ARGV: now. Returns the version after dropping expired reservations.
_VERSION = (
    _PRELUDE
    + """
expire(ARGV[1])
return tonumber(redis.call('GET', K_VERSION) or '0')
"""
)


#: One script call: its keys and its arguments.
_Call = tuple[list[str], list[str | int | float | bytes]]


def _field(node: str, resource: str) -> str:
    return f"{node}|{resource}"


class RedisReservations:
    """:class:`~fleet.placement.reservations.ReservationStore` on Redis (see module docstring)."""

    def __init__(self, client: redis.Redis, keys: ReservationKeys | None = None) -> None:
        self.client = client
        self.keys = keys or ReservationKeys()
        self._reserve = client.register_script(_RESERVE)
        self._release = client.register_script(_RELEASE)
        self._version = client.register_script(_VERSION)

    def _reserve_call(self, reservation: Reservation, basis: Takes, now: float) -> _Call:
        args: list[str | int | float | bytes] = [
            now,
            reservation.id,
            reservation.to_json(),
            reservation.expires_at,
        ]
        for node, amounts in sorted(reservation.takes.items()):
            for resource, amount in sorted(amounts.items()):
                args += [_field(node, resource), amount, basis.get(node, {}).get(resource, 0)]
        return [self.keys.member_base(reservation.member)], args

    def reserve(self, reservation: Reservation, basis: Takes, now: float) -> bool:
        return self.reserve_many([(reservation, basis)], now)[0]

    def reserve_many(self, items: Sequence[tuple[Reservation, Takes]], now: float) -> list[bool]:
        calls = [self._reserve_call(reservation, basis, now) for reservation, basis in items]
        return [bool(reply) for reply in run_script_many(self.client, self._reserve, calls)]

    def release(self, member: str, reservation_id: str) -> bool:
        return self.release_many(member, [reservation_id])[0]

    def release_many(self, member: str, reservation_ids: Sequence[str]) -> list[bool]:
        base = self.keys.member_base(member)
        calls: list[_Call] = [([base], [rid]) for rid in reservation_ids]
        return [bool(reply) for reply in run_script_many(self.client, self._release, calls)]

    def held(self, member: str, now: float) -> dict[str, dict[str, int]]:
        self._version(keys=[self.keys.member_base(member)], args=[now])
        out: dict[str, dict[str, int]] = {}
        raw: dict[bytes, bytes] = self.client.hgetall(self.keys.held(member))  # type: ignore[assignment]
        for key, value in raw.items():
            node, _, resource = key.decode().rpartition("|")
            out.setdefault(node, {})[resource] = int(value)
        return out

    def reservations(self, member: str, now: float) -> list[Reservation]:
        self._version(keys=[self.keys.member_base(member)], args=[now])
        raw: dict[bytes, bytes] = self.client.hgetall(self.keys.items(member))  # type: ignore[assignment]
        return [Reservation.from_json(v) for v in raw.values()]

    def versions(self, members: Sequence[str], now: float) -> dict[str, int]:
        replies = run_script_many(
            self.client, self._version, [([self.keys.member_base(m)], [now]) for m in members]
        )
        return {m: int(v) for m, v in zip(members, replies, strict=True)}

    def changed_since(self, generation: int | None, now: float) -> tuple[int | None, Collection[str] | None]:
        """Per-member keys live in different hash slots: no cheap global answer."""
        return None, None
