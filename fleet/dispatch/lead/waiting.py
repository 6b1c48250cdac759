"""The messages on waiting jobs: why each one waits, written when it changes.

A job that the cycle does not place keeps its ``Queued`` condition, whose reason and message say
exactly what holds it: the quota node and figures that refuse it (the ledger's), the job that
holds the quota it needs, why no member fits it now (or ever, as the fleet is), or the policy
that holds it. They are written only when they change, with Kubernetes-style aggregated Events;
``kubectl describe`` of a waiting job computes its position and blocker when asked
(:mod:`fleet.endpoint.computed`). A job that fails for good while queued (invalid, refused by
every member) is failed here too, out of its queue.
"""

from __future__ import annotations

import math
import re
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Final

from prometheus_client import Counter

from fleet.dispatch.handback import exclusion_ends
from fleet.dispatch.lead.shared import COMPONENT, MEMORY, Leading, Miss
from fleet.jobs import (
    Change,
    Fail,
    FleetReason,
    Phase,
    Wait,
    current_state,
    mutate_job,
    mutate_jobs,
    refused_of,
    transition,
)
from fleet.placement import Demand, never_fits, say_avoided
from fleet.policy import PropagationPolicy
from fleet.state import record_event, record_events
from queues import Blocked, Refused, Snapshot

__all__ = ["DECISIONS", "QUOTA_RESERVED", "REFUSALS", "Waiting"]

DECISIONS = Counter("fleet_dispatch_decisions_total", "Dispatch decisions by outcome.", ["outcome"])
REFUSALS = Counter(
    "fleet_quota_refusals_total",
    "Class heads refused for quota (each counted once per park), by kind: max, min (a sibling's "
    "guarantee), order (strict queue), reserved (held for a starving head or a preemptor).",
    ["kind"],
)

#: A job preempted by another records it; the reason a job holds back others says this.
QUOTA_RESERVED: Final = "QuotaReserved"

_DIGITS: Final = re.compile(r"\d+")

#: One pending message to write: (job, reason, message), and optionally its shape (below).
Item = tuple[str, str, str] | tuple[str, str, str, str]


def _shape(message: str) -> str:
    """A pending message with its numbers blurred: what it says, not how much."""
    return _DIGITS.sub("#", message)


class Waiting:
    """Writes why jobs wait; remembers what it last wrote on each (:meth:`say_many`)."""

    def __init__(self, leading: Leading) -> None:
        self.leading = leading
        self.ctx = leading.ctx
        self.settings = leading.settings
        #: Job -> the pending message last written on it, its shape (digits blurred), when.
        self._said: OrderedDict[str, tuple[str, str, float]] = OrderedDict()
        #: Picks that fit no member, this cycle (for the debug line).
        self.nofits = 0

    def forget(self, key: str | None = None) -> None:
        """Forget what was said on ``key`` (placed, failed), or on every job (a new term)."""
        if key is None:
            self._said.clear()
        else:
            self._said.pop(key, None)

    def say(self, key: str, reason: str, message: str) -> None:
        """Make the job's ``Queued`` condition say ``message`` (written only when it changed)."""
        self.say_many([(key, reason, message)])

    def say_many(self, items: Sequence[Item]) -> None:
        """:meth:`say` for many jobs: one read, one pipeline of the writes that change
        something, one of their Events (aggregated per object and reason, as Kubernetes does).

        A reason that says the same thing with other numbers (``8 used`` then ``9 used``), or
        (an item's fourth element, its *shape*) the same thing about another job, is written
        again at most every ``reason_refresh`` seconds: under contention usage moves with every
        admission, and rewriting every waiting head each time would cost a write per head per
        change. The numbers a user reads in ``describe`` are computed when asked."""
        now = time.monotonic()
        todo = []
        shapes: dict[str, str] = {}
        for item in items:
            key, reason, message = item[0], item[1], item[2]
            shape = item[3] if len(item) > 3 else _shape(message)
            said = self._said.get(key)
            if said is not None:
                if said[0] == message:
                    continue
                if said[1] == shape and now - said[2] < self.settings.reason_refresh:
                    continue
            todo.append((key, reason, message))
            shapes[key] = shape
        if not todo:
            return
        wrote: set[str] = set()

        def change_for(key: str, reason: str, message: str) -> Change:
            inner = transition(Wait(reason, message))

            def change(obj: dict[str, Any]) -> dict[str, Any] | None:
                out = inner(obj)
                if out is not None:
                    wrote.add(key)
                return out

            return change

        changes = [(key, change_for(key, reason, message)) for key, reason, message in todo]
        stored = mutate_jobs(self.ctx.objects, changes, fence=self.leading.fence)
        events: list[tuple[dict[str, Any], str, str]] = []
        for (key, reason, message), obj in zip(todo, stored, strict=True):
            self._said[key] = (message, shapes[key], now)
            self._said.move_to_end(key)
            if obj is not None and key in wrote and current_state(obj) == Phase.QUEUED:
                events.append((obj, reason, message))
        while len(self._said) > MEMORY:
            self._said.popitem(last=False)
        if events:
            record_events(self.ctx.objects, events, component=COMPONENT, fence=self.leading.fence)

    def refused(self, refused: Sequence[Refused], blocked: Sequence[Blocked], snap: Snapshot) -> None:
        """The pending reasons of this cycle's refused and held-back class heads. A head the
        quota can never admit says so, with the ledger's figures of the node that refuses it."""
        items: list[Item] = []
        for r in refused:
            REFUSALS.labels(r.refusal.kind.value).inc()
            if r.never is not None:
                message = (
                    f"{r.refusal}; {r.never.node} can never admit it (its max is below what it asks "
                    "for): it waits for the tree to change, holding back no other job"
                )
            else:
                message = str(r.refusal)
            items.append((r.job, FleetReason.QUOTA_EXCEEDED, message))
        for b in blocked:
            holder = b.holder
            path = snap.nodes[holder.node].path if holder.node in snap.nodes else holder.node
            if holder.why == "nominated":
                why = f"{holder.job} preempted jobs to start and holds the quota of {path} until it does"
            elif holder.why == "older":
                since = time.strftime("%H:%M:%S", time.gmtime(holder.since))
                longer = (
                    "since before this job was submitted"
                    if self.settings.wait_ratio <= 1
                    else f"more than {self.settings.wait_ratio:g} times as long as this job"
                )
                why = f"{holder.job} has waited for the quota of {path} since {since}Z, {longer}"
                why += ": it goes first"
            else:
                why = (
                    f"{holder.job} has waited at the head of its queue since "
                    f"{time.strftime('%H:%M:%S', time.gmtime(holder.since))}Z and holds the quota of "
                    f"{path} until it starts (starvation bound {self.settings.starvation_seconds:g}s)"
                )
            if (self._said.get(b.job) or ("",))[0] != why:
                REFUSALS.labels("reserved").inc()
            items.append((b.job, QUOTA_RESERVED, why, QUOTA_RESERVED))
        self.say_many(items)

    def no_fit(
        self,
        key: str,
        obj: dict[str, Any],
        demand: Demand,
        *,
        policy: PropagationPolicy,
        avoid: frozenset[str],
        epoch: int,
        now: float,
    ) -> bool:
        """No member fits the job now: say why, member by member, and remember it so that it is
        not fitted again until some member's capacity changed. True when it can never fit as
        the fleet is: the caller parks it (out of line until the fleet changes), so that it
        holds no head position and no reservation."""
        leading = self.leading
        DECISIONS.labels("nofit").inc()
        self.nofits += 1
        affinity = policy.spec.placement.cluster_affinity
        with leading.lock:
            never = not leading.placer.could_ever_fit(
                demand, affinity=affinity, member_labels=leading.member_labels()
            )
        previous = leading.misses.get(key)
        if never or previous is None or previous.reason != "nofit" or previous.epoch != epoch:
            self.say(key, FleetReason.NO_FIT, self.no_fit_message(obj, demand, policy, avoid, never=never))
        if never:
            leading.misses.pop(key, None)
            return True
        ends = exclusion_ends(obj, now)
        leading.remember(key, Miss("nofit", epoch, now + 0.05, wake=min(ends, default=math.inf)))
        return False

    def no_fit_message(
        self,
        obj: dict[str, Any],
        demand: Demand,
        policy: PropagationPolicy,
        avoid: frozenset[str],
        *,
        never: bool = False,
    ) -> str:
        """Why no member fits the job, member by member (:func:`fleet.placement.explain_members`);
        for one that can ``never`` fit, what stops it on each member whatever is avoided now."""
        leading = self.leading
        with leading.lock:
            lines = leading.placer.explain(
                demand,
                affinity=policy.spec.placement.cluster_affinity,
                avoid=() if never else avoid,
                member_labels=leading.member_labels(),
            )
        if not never:
            refused = refused_of(obj)
            lines = [
                say_avoided(line, leading.down, refused, leading.degraded, leading.cordoned) for line in lines
            ]
        if not lines:
            return "no member cluster is known yet"
        if never or never_fits(lines):
            return (
                "no member cluster can ever fit the whole job as the fleet is (it waits out of line "
                "until the fleet changes): " + "; ".join(lines)
            )
        return "no member cluster fits the whole job now: " + "; ".join(lines)

    def fail(self, key: str, obj: dict[str, Any], reason: str, message: str) -> None:
        """Fail a job that is not placed (queued, or held) for good: ``Failed`` with ``reason``,
        out of its queue."""
        fence = self.leading.fence
        mutate_job(self.ctx.objects, key, transition(Fail(reason, message)), fence=fence)
        self.ctx.ledger.release(key, fence=fence)
        self.leading.misses.pop(key, None)
        self._said.pop(key, None)
        record_event(
            self.ctx.objects, obj, type="Warning", reason=reason, message=message, component=COMPONENT
        )
