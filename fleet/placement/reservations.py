"""In-flight reservations: capacity a decision took, held until the member's pods confirm it.

Between "Fleet chose member-2" and "member-2's pods are bound" the capacity feed still shows the
NPUs free. Without a hold, the next decision (or a second dispatcher after failover, from the
same stale snapshot) would give them away again. A :class:`Reservation` names the nodes and
amounts a placement takes; the fit subtracts every live reservation; it ends when the member's
pods of that job appear bound in the capacity feed (:meth:`confirmed`) or when its TTL passes.

A reservation is accepted only if, on each node and resource it takes, the amounts already held
plus its own stay within the free capacity the decision saw (the *basis*: free without
reservations). Two decisions from one snapshot see the same basis, so the second is refused and
its dispatcher re-reads the holds and decides again. Reserving the same id twice is a no-op, so
a retried decision never holds twice.

Stores are pluggable: :class:`MemoryReservations` for one process and the pure tests,
:class:`~fleet.placement.redis_store.RedisReservations` for dispatchers that fail over.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypedDict

from fleet import fastjson

__all__ = [
    "MemoryReservations",
    "Reservation",
    "ReservationRecord",
    "ReservationStore",
    "Takes",
    "fits_basis",
]

#: Changes the in-memory store remembers for :meth:`MemoryReservations.changed_since`.
_LOG = 10_000

#: node -> resource -> amount.
Takes = Mapping[str, Mapping[str, int]]


class ReservationRecord(TypedDict):
    """A :class:`Reservation` as stored (JSON, one hash field per reservation in Redis)."""

    id: str
    member: str
    job: str
    takes: dict[str, dict[str, int]]
    pods: int
    expires_at: float


@dataclass(frozen=True)
class Reservation:
    """Capacity held on ``member`` for one attempt of one job (``id`` = job uid/attempt)."""

    id: str
    member: str
    job: str  # namespace/name, for people reading a dump
    takes: Takes
    pods: int
    expires_at: float

    def to_json(self) -> bytes:
        record: ReservationRecord = {
            "id": self.id,
            "member": self.member,
            "job": self.job,
            "takes": {n: dict(v) for n, v in self.takes.items()},
            "pods": self.pods,
            "expires_at": self.expires_at,
        }
        return fastjson.dumps(record)

    @classmethod
    def from_json(cls, raw: str | bytes) -> Reservation:
        data: ReservationRecord = fastjson.loads(raw)
        return cls(
            id=str(data["id"]),
            member=str(data["member"]),
            job=str(data["job"]),
            takes={str(n): {str(r): int(a) for r, a in v.items()} for n, v in data["takes"].items()},
            pods=int(data["pods"]),
            expires_at=float(data["expires_at"]),
        )


def fits_basis(held: Takes, takes: Takes, basis: Takes) -> bool:
    """Whether ``takes`` on top of ``held`` stays within ``basis`` on every node and resource."""
    for node, amounts in takes.items():
        have, base = held.get(node, {}), basis.get(node, {})
        for resource, amount in amounts.items():
            if have.get(resource, 0) + amount > base.get(resource, 0):
                return False
    return True


class ReservationStore(Protocol):
    def reserve(self, reservation: Reservation, basis: Takes, now: float) -> int:
        """Hold ``reservation`` if it fits ``basis``: 0 when refused, else the member's
        :meth:`versions` number after it (truthy; also when it is already held, unchanged). The
        version lets a writer tell its own change from others' without reading the holds again."""
        ...

    def reserve_many(self, items: Sequence[tuple[Reservation, Takes]], now: float) -> list[int]:
        """:meth:`reserve` of each ``(reservation, basis)`` in order, in one exchange: a later
        one is checked against the holds the earlier ones made."""
        ...

    def release(self, member: str, reservation_id: str) -> int:
        """Drop a reservation (confirmed, dispatched elsewhere, or abandoned): 0 when it is not
        held, else the member's version after it."""
        ...

    def release_many(self, member: str, reservation_ids: Sequence[str]) -> list[int]:
        """:meth:`release` of each of ``member``'s ``reservation_ids``, in one exchange."""
        ...

    def held(self, member: str, now: float) -> dict[str, dict[str, int]]:
        """The summed holds of ``member`` per node and resource, expired ones dropped."""
        ...

    def reservations(self, member: str, now: float) -> list[Reservation]: ...

    def versions(self, members: Sequence[str], now: float) -> dict[str, int]:
        """A number per member that changes whenever its holds change (expiry included)."""
        ...

    def changed_since(self, generation: int | None, now: float) -> tuple[int | None, Collection[str] | None]:
        """The store's generation now and the members whose holds changed since ``generation``;
        ``None`` members means "cannot tell, compare :meth:`versions` of all"."""
        ...


class MemoryReservations:
    """A reservation store in one process's memory (tests, benchmarks, a single dispatcher)."""

    def __init__(self) -> None:
        self._items: dict[str, dict[str, Reservation]] = {}
        self._held: dict[str, dict[str, dict[str, int]]] = {}
        self._version: dict[str, int] = {}
        self._expiry: list[tuple[float, str, str]] = []
        self._generation = 0
        self._log: deque[tuple[int, str]] = deque(maxlen=_LOG)

    def _apply(self, r: Reservation, sign: int) -> None:
        held = self._held.setdefault(r.member, {})
        for node, amounts in r.takes.items():
            slot = held.setdefault(node, {})
            for resource, amount in amounts.items():
                slot[resource] = slot.get(resource, 0) + sign * amount
                if not slot[resource]:
                    del slot[resource]
            if not slot:
                del held[node]
        self._version[r.member] = self._version.get(r.member, 0) + 1
        self._generation += 1
        self._log.append((self._generation, r.member))

    def _expire(self, now: float) -> None:
        while self._expiry and self._expiry[0][0] <= now:
            _, member, rid = heapq.heappop(self._expiry)
            r = self._items.get(member, {}).get(rid)
            if r is not None and r.expires_at <= now:
                self.release(member, rid)

    def reserve(self, reservation: Reservation, basis: Takes, now: float) -> int:
        self._expire(now)
        items = self._items.setdefault(reservation.member, {})
        if reservation.id in items:
            return self._version[reservation.member]
        if not fits_basis(self._held.get(reservation.member, {}), reservation.takes, basis):
            return 0
        items[reservation.id] = reservation
        self._apply(reservation, +1)
        heapq.heappush(self._expiry, (reservation.expires_at, reservation.member, reservation.id))
        return self._version[reservation.member]

    def release(self, member: str, reservation_id: str) -> int:
        r = self._items.get(member, {}).pop(reservation_id, None)
        if r is None:
            return 0
        self._apply(r, -1)
        return self._version[member]

    def reserve_many(self, items: Sequence[tuple[Reservation, Takes]], now: float) -> list[int]:
        return [self.reserve(reservation, basis, now) for reservation, basis in items]

    def release_many(self, member: str, reservation_ids: Sequence[str]) -> list[int]:
        return [self.release(member, rid) for rid in reservation_ids]

    def held(self, member: str, now: float) -> dict[str, dict[str, int]]:
        self._expire(now)
        return {n: dict(v) for n, v in self._held.get(member, {}).items()}

    def reservations(self, member: str, now: float) -> list[Reservation]:
        self._expire(now)
        return list(self._items.get(member, {}).values())

    def versions(self, members: Sequence[str], now: float) -> dict[str, int]:
        self._expire(now)
        return {m: self._version.get(m, 0) for m in members}

    def changed_since(self, generation: int | None, now: float) -> tuple[int | None, Collection[str] | None]:
        self._expire(now)
        if generation is None or (self._log and self._log[0][0] > generation + 1):
            return self._generation, None
        changed = set()
        for gen, member in reversed(self._log):
            if gen <= generation:
                break
            changed.add(member)
        return self._generation, changed
