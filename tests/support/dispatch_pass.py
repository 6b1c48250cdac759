"""The dispatcher's quota step, done by hand: for tests that need its decisions but no dispatcher.

It admits pending jobs in order through the ledger and writes each outcome on the fleet object as
the dispatcher does (``Admitted`` with a member, or ``Queued`` with the ledger's exact refusal),
with an Event, through :class:`fleet.state.Objects`.
"""

from __future__ import annotations

from typing import Any

import redis

from fleet.jobs import Wait, step
from fleet.jobs.phases import FleetReason, Phase
from fleet.state import Objects, record_event
from queues import Ledger
from tests.support.job_states import admit
from tests.support.kinds import FLEET_ASCENDJOB

__all__ = ["dispatch_once"]


def dispatch_once(client: redis.Redis, keys: list[str], *, member: str = "member-1") -> dict[str, str]:
    """Job name -> the message written on it (the refusal, for a job left Queued)."""
    objects = Objects(client)
    outcome: dict[str, str] = {}
    for decision in Ledger(client).admit_pending_many(keys):
        namespace, _, name = decision.job.partition("/")
        if decision.admitted:
            state, reason, message = Phase.ADMITTED, FleetReason.ADMITTED, f"admitted; placed on {member}"
        else:
            state, reason, message = Phase.QUEUED, FleetReason.QUOTA_EXCEEDED, str(decision.refusal)

        def change(obj: dict[str, Any], s: str = state, r: str = reason, m: str = message) -> dict[str, Any]:
            if s == Phase.ADMITTED:
                return admit(obj, member, attempt=1, message=m)
            obj["status"] = step(obj, Wait(r, m)) or obj["status"]
            return obj

        stored = objects.mutate(FLEET_ASCENDJOB, namespace, name, change)
        assert stored is not None
        record_event(objects, stored, reason=reason, message=message, component="fleet-dispatcher")
        outcome[name] = message
    return outcome
