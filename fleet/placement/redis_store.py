"""The reservation store in Redis, for dispatchers that fail over to one another.

Reserve, release and expiry are Lua scripts (``lua/*.lua``, after the key names of
:meth:`~fleet.placement.keys.ReservationKeys.lua` and ``lua/common.lua``), so "check every node's
basis, then hold" is one atomic step however many dispatchers race; the key layout is in
:mod:`fleet.placement.keys`. Time comes from the caller (``now``), like the in-memory store, so
both behave the same under test clocks. Amounts are integers in canonical units (exact in Lua
doubles below 2**53).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import redis

from fleet.connections import run_script_many
from fleet.placement.keys import ReservationKeys
from fleet.placement.reservations import Reservation, Takes
from queues import lua_script, read_lua

__all__ = ["RedisReservations"]

#: One script call: its keys and its arguments.
_Call = tuple[list[str], list[str | int | float | bytes]]


def _field(node: str, resource: str) -> str:
    return f"{node}|{resource}"


class RedisReservations:
    """:class:`~fleet.placement.reservations.ReservationStore` on Redis (see module docstring)."""

    def __init__(self, client: redis.Redis, keys: ReservationKeys | None = None) -> None:
        self.client = client
        self.keys = keys or ReservationKeys()
        prelude = self.keys.lua() + read_lua("fleet.placement", "common")
        self._reserve = lua_script(client, "fleet.placement", "reserve", prelude)
        self._release = lua_script(client, "fleet.placement", "release", prelude)
        self._version = lua_script(client, "fleet.placement", "version", prelude)

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

    def reserve(self, reservation: Reservation, basis: Takes, now: float) -> int:
        return self.reserve_many([(reservation, basis)], now)[0]

    def reserve_many(self, items: Sequence[tuple[Reservation, Takes]], now: float) -> list[int]:
        calls = [self._reserve_call(reservation, basis, now) for reservation, basis in items]
        return [int(reply) for reply in run_script_many(self.client, self._reserve, calls)]

    def release(self, member: str, reservation_id: str) -> int:
        return self.release_many(member, [reservation_id])[0]

    def release_many(self, member: str, reservation_ids: Sequence[str]) -> list[int]:
        base = self.keys.member_base(member)
        calls: list[_Call] = [([base], [rid]) for rid in reservation_ids]
        return [int(reply) for reply in run_script_many(self.client, self._release, calls)]

    def held(self, member: str, now: float) -> dict[str, dict[str, int]]:
        self._version(keys=[self.keys.member_base(member)], args=[now])
        out: dict[str, dict[str, int]] = {}
        raw: dict[bytes, bytes] = self.client.hgetall(self.keys.member(member).held)  # type: ignore[assignment]
        for key, value in raw.items():
            node, _, resource = key.decode().rpartition("|")
            out.setdefault(node, {})[resource] = int(value)
        return out

    def reservations(self, member: str, now: float) -> list[Reservation]:
        self._version(keys=[self.keys.member_base(member)], args=[now])
        raw: dict[bytes, bytes] = self.client.hgetall(self.keys.member(member).items)  # type: ignore[assignment]
        return [Reservation.from_json(v) for v in raw.values()]

    def versions(self, members: Sequence[str], now: float) -> dict[str, int]:
        replies = run_script_many(
            self.client, self._version, [([self.keys.member_base(m)], [now]) for m in members]
        )
        return {m: int(v) for m, v in zip(members, replies, strict=True)}

    def changed_since(self, generation: int | None, now: float) -> tuple[int | None, Collection[str] | None]:
        """Per-member keys live in different hash slots: no cheap global answer."""
        return None, None
