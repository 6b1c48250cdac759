"""The decision loop's view of the fleet: every member's capacity, the holds, and a fit cache.

:meth:`Placer.place` is one fit-and-choose decision: fit the job on every allowed member (from
a cache keyed on the member's capacity version, so an unchanged member costs a dict lookup),
choose by pack or spread, and reserve the chosen placement. When the store refuses the hold
(another decision took the capacity from the same snapshot), the placer re-reads that member's
holds and decides again. :meth:`Placer.confirm` ends holds whose pods the capacity feed shows
bound.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from fleet.ascend import NPU_RESOURCE
from fleet.placement.capacity import MemberCapacity
from fleet.placement.demand import Demand
from fleet.placement.explain import explain_members
from fleet.placement.fit import Placement, Strategy, allowed, choose, fit_member, gang_fits
from fleet.placement.metrics import DECISION_SECONDS, DECISIONS, RESERVE_CONFLICTS
from fleet.placement.reservations import (
    MemoryReservations,
    Reservation,
    ReservationStore,
    Takes,
)
from fleet.policy import ClusterAffinity

__all__ = ["DEFAULT_TTL", "Decision", "PlaceRequest", "Placer"]

log = logging.getLogger("fleet.placement")

#: How long a hold lives without its pods appearing bound (seconds).
DEFAULT_TTL = 120.0

_PLACED = DECISIONS.labels("placed")
_NOFIT = DECISIONS.labels("nofit")

#: Distinct demands whose fits are cached (jobs come from few templates; this bounds the rest).
_CACHE_LIMIT = 10_000

#: Decisions retried after the store refused a hold, before giving up for now.
_ATTEMPTS = 5


@dataclass
class _Fits:
    """Where one demand fits, as of capacity version ``watermark``."""

    npus: int
    watermark: int = 0
    fits: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    placement: Placement
    reservation: Reservation

    @property
    def member(self) -> str:
        return self.placement.member


@dataclass(frozen=True)
class PlaceRequest:
    """One job for :meth:`Placer.place_many` (the arguments :meth:`Placer.place` takes)."""

    demand: Demand
    reservation_id: str
    job: str
    strategy: Strategy = "pack"
    affinity: ClusterAffinity | None = None
    avoid: Collection[str] = ()


class Placer:
    def __init__(
        self,
        store: ReservationStore | None = None,
        *,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store: ReservationStore = store if store is not None else MemoryReservations()
        self.ttl = ttl
        self.clock = clock
        self._members: dict[str, MemberCapacity] = {}
        self._seen: dict[str, int] = {}
        self._generation: int | None = None
        self._cache: dict[Demand, _Fits] = {}
        #: Per member, its reservations as last read or made here: what :meth:`confirm` checks
        #: the capacity feed against without a round trip per pod event, and what a hold made
        #: or released here is added to without reading them all back.
        self._holds: dict[str, _Holds] = {}

    # ---- members ------------------------------------------------------------------------------

    def add_member(self, capacity: MemberCapacity) -> None:
        self._members[capacity.name] = capacity
        self._seen.pop(capacity.name, None)
        self._generation = None
        self._cache.clear()

    def remove_member(self, name: str) -> None:
        self._members.pop(name, None)
        self._seen.pop(name, None)
        self._holds.pop(name, None)
        self._cache.clear()

    def member(self, name: str) -> MemberCapacity:
        return self._members[name]

    def members(self) -> Iterator[MemberCapacity]:
        return iter(self._members.values())

    def sync(self, only: Collection[str] | None = None) -> None:
        """Lay the store's current holds over the capacity of members whose holds changed."""
        now = self.clock()
        if only is None:
            generation, changed = self.store.changed_since(self._generation, now)
            self._generation = generation
            if changed is not None:
                only = changed
        names = list(self._members) if only is None else [m for m in only if m in self._members]
        if not names:
            return
        for name, version in self.store.versions(names, now).items():
            if self._seen.get(name) != version:
                holds = _Holds(self.store.reservations(name, now))
                self._members[name].set_held(holds.sums)
                self._holds[name] = holds
                self._seen[name] = version

    # ---- decisions ----------------------------------------------------------------------------

    def _fits(self, demand: Demand) -> dict[str, int]:
        """Member -> NPUs left after placing, for every member where ``demand``'s gang fits now.

        The hot path of a decision. The answer is kept per demand; capacity versions come from
        one process-wide counter, so only members whose version passed the demand's watermark
        are fitted again and an unchanged member costs one comparison.
        """
        entry = self._cache.get(demand)
        if entry is None:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            entry = self._cache[demand] = _Fits(demand.gang_total(NPU_RESOURCE))
        mark = entry.watermark
        caps = [c for c in self._members.values() if c.version > mark]
        if caps:
            entry.watermark = max(c.version for c in caps)
        for cap in caps:
            if cap.listed and gang_fits(cap, demand):
                entry.fits[cap.name] = cap.free_total(NPU_RESOURCE) - entry.npus
            else:
                entry.fits.pop(cap.name, None)
        return entry.fits

    def candidates(
        self,
        demand: Demand,
        *,
        affinity: ClusterAffinity | None = None,
        avoid: Collection[str] = (),
    ) -> list[tuple[str, int]]:
        """``(member, NPUs left after placing)`` for every allowed member where the gang fits now."""
        fits = self._fits(demand)
        if not avoid and affinity is None:
            return list(fits.items())
        return [
            (name, left)
            for name, left in fits.items()
            if allowed(name, self._members[name].labels, affinity, avoid)
        ]

    def decide(
        self,
        demand: Demand,
        *,
        strategy: Strategy = "pack",
        affinity: ClusterAffinity | None = None,
        avoid: Collection[str] = (),
    ) -> Placement | None:
        """The chosen placement without holding it (``fleet explain``; the dispatcher uses place)."""
        candidates = self.candidates(demand, affinity=affinity, avoid=avoid)
        while candidates:
            member = choose(candidates, strategy)
            placement = fit_member(self._members[str(member)], demand)
            if placement is not None:
                return placement
            candidates = [c for c in candidates if c[0] != member]  # defensive: never expected
        return None

    def place(
        self,
        demand: Demand,
        *,
        reservation_id: str,
        job: str,
        strategy: Strategy = "pack",
        affinity: ClusterAffinity | None = None,
        avoid: Collection[str] = (),
        synced: bool = False,
    ) -> Decision | None:
        """Decide and hold; ``None`` when the job fits nowhere right now.

        ``synced``: the caller ran :meth:`sync` since the holds last changed elsewhere (the
        dispatcher, once per round, is the only writer of holds), so it is not run again.
        """
        started = time.perf_counter()
        try:
            if not synced:
                self.sync()
            decision = self._place(PlaceRequest(demand, reservation_id, job, strategy, affinity, avoid))
        finally:
            DECISION_SECONDS.observe(time.perf_counter() - started)
        (_PLACED if decision is not None else _NOFIT).inc()
        return decision

    def place_many(self, requests: Sequence[PlaceRequest]) -> list[Decision | None]:
        """:meth:`place` of many jobs at once (the caller has run :meth:`sync` this round): each
        decided in memory over the holds decided before it, all held in one exchange with the
        store. A hold the store refuses (another writer took the capacity) has its member read
        again and that job decided alone, as :meth:`place` does. Results are in request order.
        """
        started = time.perf_counter()
        results: list[Decision | None] = [None] * len(requests)
        made: list[tuple[int, Decision, Takes]] = []
        for i, request in enumerate(requests):
            placement = self.decide(
                request.demand, strategy=request.strategy, affinity=request.affinity, avoid=request.avoid
            )
            if placement is None:
                continue
            reservation = self._reservation(placement, request.reservation_id, request.job)
            basis = self._basis(placement)
            self._own_write(placement.member, add=reservation)  # the next decision sees it
            made.append((i, Decision(placement, reservation), basis))
        refused: list[int] = []
        stale: set[str] = set()
        replies = self.store.reserve_many([(d.reservation, basis) for _, d, basis in made], self.clock())
        for (i, decision, _), version in zip(made, replies, strict=True):
            if version:
                self._advance(decision.member, version)
                results[i] = decision
                continue
            log.info("event=hold_refused job=%s member=%s", requests[i].job, decision.member)
            RESERVE_CONFLICTS.labels(decision.member).inc()
            self._own_write(decision.member, drop=decision.reservation.id)
            self._seen.pop(decision.member, None)  # the store holds what this view does not
            refused.append(i)
            stale.add(decision.member)
        if stale:
            self.sync(stale)
        for i in refused:
            results[i] = self._place(requests[i])
        if requests:
            elapsed = (time.perf_counter() - started) / len(requests)
            for result in results:
                DECISION_SECONDS.observe(elapsed)
                (_PLACED if result is not None else _NOFIT).inc()
        return results

    def _reservation(self, placement: Placement, reservation_id: str, job: str) -> Reservation:
        return Reservation(
            id=reservation_id,
            member=placement.member,
            job=job,
            takes=placement.takes,
            pods=placement.pods,
            expires_at=self.clock() + self.ttl,
        )

    def _basis(self, placement: Placement) -> Takes:
        """What the store checks the hold against: the nodes' free capacity before any hold."""
        cap = self._members[placement.member]
        return {node: cap.unheld_free(node) for node in placement.takes}

    def _place(self, request: PlaceRequest) -> Decision | None:
        """Decide and hold one job, deciding again (after reading the member) when refused."""
        job, reservation_id = request.job, request.reservation_id
        for _ in range(_ATTEMPTS):
            placement = self.decide(
                request.demand, strategy=request.strategy, affinity=request.affinity, avoid=request.avoid
            )
            if placement is None:
                return None
            reservation = self._reservation(placement, reservation_id, job)
            version = self.store.reserve(reservation, self._basis(placement), self.clock())
            if version:
                self._own_write(placement.member, add=reservation)
                self._advance(placement.member, version)
                log.debug(
                    "event=placed job=%s member=%s reservation=%s pods=%d nodes=%d",
                    job,
                    placement.member,
                    reservation_id,
                    placement.pods,
                    len(placement.takes),
                )
                return Decision(placement, reservation)
            log.info(
                "event=hold_refused job=%s member=%s reservation=%s", job, placement.member, reservation_id
            )
            RESERVE_CONFLICTS.labels(placement.member).inc()
            self._seen.pop(placement.member, None)
            self.sync([placement.member])
        return None

    def release(self, member: str, reservation_id: str) -> None:
        version = self.store.release(member, reservation_id)
        self._own_write(member, drop=reservation_id)
        self._advance(member, version)

    def _own_write(self, member: str, *, add: Reservation | None = None, drop: str | None = None) -> None:
        """Lay a hold this placer just made or dropped (or holds it just ended: ``_holds``
        already changed) over ``member``'s capacity, in memory, without a round trip; the
        store's answer then says whether the view is still the store's (:meth:`_advance`).
        Until the next :meth:`sync` a stale view is harmless: the store checks every
        reservation against what it holds, and a refusal makes the member read at once. A
        member never read yet is read now.
        """
        holds = self._holds.get(member)
        if holds is None or member not in self._members:
            self._seen.pop(member, None)
            self.sync([member])
            holds = self._holds.get(member)
            if holds is None or member not in self._members:
                return
        if add is not None:
            holds.add(add)
        if drop is not None:
            holds.drop(drop)
        # Only the nodes these holds touch: laying the whole member again cost a placement
        # its member's held nodes (a seventh of deciding at 100 members of 100 nodes).
        self._members[member].set_held_on(holds.take_changed())

    def _advance(self, member: str, version: int) -> None:
        """The store's version of ``member`` after one write of this placer's (0: it changed
        nothing). Each change moves the version by one, so one more than the version the holds
        here were read or kept at means this write was the only change since: the view is the
        store's, and :meth:`sync` need not read the member's holds back (at 100 members, reading
        every changed member back each round was a fifth of the dispatcher's work, measured with
        py-spy on ``bench.scale_bench``). Anything else (an expiry, another writer, a hold that
        was there already) has the member read at the next sync."""
        if version and self._seen.get(member) == version - 1:
            self._seen[member] = version
        else:
            self._seen.pop(member, None)

    def confirm(self, member: str) -> list[str]:
        """End the holds of ``member`` whose pods the capacity feed shows bound.

        Called on every pod event, so it reads no store: it checks the holds as :meth:`sync`
        last read them (plus those placed here since). A hold another process made after that
        is confirmed on the first pod event after the next sync.
        """
        cap = self._members.get(member)
        if cap is None:
            return []
        holds = self._holds.get(member)
        if holds is None:
            return []
        done = [rid for rid, r in holds.items.items() if cap.bound_pods(rid) >= r.pods]
        if done:
            versions = self.store.release_many(member, done)
            for rid in done:
                holds.drop(rid)
            self._own_write(member)
            for version in versions:
                self._advance(member, version)
        return done

    def shape(self) -> int:
        """A number that changes whenever what some member could ever hold changes (a member
        added, removed or relabelled, a node added, removed or changed, a member first listed):
        what a job that can never fit waits for (:meth:`could_ever_fit`)."""
        return hash(
            tuple(
                (cap.name, cap.shape, cap.listed, tuple(sorted(cap.labels.items())))
                for cap in self._members.values()
            )
        )

    def could_ever_fit(
        self,
        demand: Demand,
        *,
        affinity: ClusterAffinity | None = None,
        member_labels: Mapping[str, Mapping[str, str]] | None = None,
    ) -> bool:
        """Whether some member the job may go to (``affinity``) could hold it if every job there
        ended (:meth:`MemberCapacity.emptied`), or is not listed yet: False means no release,
        failover or wait will let it run, only a change of the fleet (:meth:`shape`)."""
        for cap in self._members.values():
            labels = (member_labels or {}).get(cap.name, cap.labels)
            if affinity is not None and not affinity.allows(cap.name, labels):
                continue
            if not cap.listed or fit_member(cap.emptied(), demand) is not None:
                return True
        return False

    def explain(
        self,
        demand: Demand,
        *,
        affinity: ClusterAffinity | None = None,
        avoid: Collection[str] = (),
        member_labels: Mapping[str, Mapping[str, str]] | None = None,
    ) -> list[str]:
        self.sync()
        return explain_members(
            self._members.values(), demand, affinity=affinity, avoid=avoid, member_labels=member_labels
        )


class _Holds:
    """A member's holds, as last read or made and released here, and their sum per node and
    resource, kept as they change: summed again from every hold at each placement, a batch's
    placements cost the square of the holds waiting for their pods (2 ms a placement with a
    few hundred waiting, in the Kueue baseline)."""

    def __init__(self, reservations: Iterable[Reservation]) -> None:
        self.items: dict[str, Reservation] = {}
        #: What the holds take together (node -> resource -> amount; zeros are left in).
        self.sums: dict[str, dict[str, int]] = {}
        #: Nodes whose sums changed since :meth:`take_changed` (what a capacity must lay again).
        self.changed: set[str] = set()
        for reservation in reservations:
            self.add(reservation)
        self.changed.clear()  # laid whole by whoever read them

    def add(self, reservation: Reservation) -> None:
        """Hold ``reservation`` (one held already under its id is replaced, not counted twice)."""
        self.drop(reservation.id)
        self.items[reservation.id] = reservation
        self._count(reservation, 1)

    def drop(self, reservation_id: str) -> None:
        reservation = self.items.pop(reservation_id, None)
        if reservation is not None:
            self._count(reservation, -1)

    def _count(self, reservation: Reservation, sign: int) -> None:
        for node, amounts in reservation.takes.items():
            slot = self.sums.setdefault(node, {})
            for resource, amount in amounts.items():
                slot[resource] = slot.get(resource, 0) + sign * amount
            self.changed.add(node)

    def take_changed(self) -> dict[str, dict[str, int]]:
        """The sums of the nodes changed since the last call."""
        out = {node: self.sums[node] for node in self.changed}
        self.changed.clear()
        return out
