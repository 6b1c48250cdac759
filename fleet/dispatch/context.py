"""What every dispatch role works with: Redis, the fleet objects, the ledger, the members.

One :class:`Context` per process (RQ task functions reach it through :func:`current`, set by
``fleet worker`` before the worker starts). Every key set it uses (the ledger's, the objects', the
reservations', its own) and the RQ queue names derive from its one :class:`queues.KeySpace`
(``--key-prefix``), so every role of a deployment works in that deployment's keys.
Members are built lazily from the kubeconfig, one :class:`fleet.members.Member` each, and reused.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import redis
from rq import Queue

from fleet.dispatch.degraded import Marks
from fleet.kinds import POLICY_KINDS
from fleet.members import Member, MemberSettings, load_members
from fleet.placement import RedisReservations, ReservationKeys
from fleet.policy import PropagationPolicy, default_policy, select_policy
from fleet.state import EVICT_QUEUE, PROPAGATE_QUEUE, PURGE_QUEUE, DispatchKeys, Objects, StateKeys
from fleet.workloads import KINDS
from queues import DEFAULT_SPACE, Keys, KeySpace, Ledger

#: The policy of a job no policy selects: queued, the defaults of every field.
DEFAULT_POLICY: Final = default_policy([(a.api_version, a.kind) for a in KINDS])

__all__ = ["CLAIM_SECONDS", "DEFAULT_POLICY", "Context", "current", "install"]

#: How long a worker's claim on the propagations it is running lasts unless renewed (it renews
#: every third of it while it lives): a killed worker's propagations are enqueued again by the
#: dispatcher about this long after it died (:class:`fleet.dispatch.tasks.Claim`).
CLAIM_SECONDS: Final = 3.0


@dataclass
class Context:
    client: redis.Redis
    kubeconfig: Path | None = None
    #: The deployment's key space: every key set below and the queue names derive from it.
    space: KeySpace = DEFAULT_SPACE
    settings: MemberSettings = field(default_factory=MemberSettings)
    #: The claim a worker of this process holds on the propagations it runs (CLAIM_SECONDS).
    claim_seconds: float = CLAIM_SECONDS
    keys: DispatchKeys = field(init=False)
    objects: Objects = field(init=False)
    ledger: Ledger = field(init=False)
    reservations: RedisReservations = field(init=False)
    queue: Queue = field(init=False)
    purge_queue: Queue = field(init=False)
    evict_queue: Queue = field(init=False)
    #: Members whose calls keep timing out, as every process sees them (:mod:`fleet.dispatch.degraded`).
    degraded: Marks = field(init=False)
    _members: dict[str, Member] | None = field(init=False, default=None)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.keys = DispatchKeys.within(self.space)
        self.objects = Objects(self.client, StateKeys.within(self.space))
        self.ledger = Ledger(self.client, Keys.within(self.space))
        self.reservations = RedisReservations(self.client, ReservationKeys.within(self.space))
        self.queue = Queue(self.keys.queue(PROPAGATE_QUEUE), connection=self.client)
        self.purge_queue = Queue(self.keys.queue(PURGE_QUEUE), connection=self.client)
        self.evict_queue = Queue(self.keys.queue(EVICT_QUEUE), connection=self.client)
        self.degraded = Marks(self.client, self.keys)

    @property
    def members(self) -> Mapping[str, Member]:
        with self._lock:
            if self._members is None:
                if self.kubeconfig is None:
                    self._members = {}
                else:
                    self._members = load_members(self.kubeconfig, settings=self.settings)
                for member in self._members.values():  # a breaker opening on timeouts marks it degraded
                    member.breaker.listener = self.degraded.on_transition
            return self._members

    def member(self, name: str) -> Member:
        try:
            return self.members[name]
        except KeyError:
            raise LookupError(f"member {name!r} is not in the kubeconfig") from None

    def policies(self) -> list[PropagationPolicy]:
        items = [item for kind in POLICY_KINDS for item in self.objects.list(kind)[0]]
        out = []
        for item in items:
            try:
                out.append(PropagationPolicy.model_validate(item))
            except ValueError:
                continue  # refused at the API; an old invalid one is ignored rather than fatal
        return out

    def close(self) -> None:
        with self._lock:
            for member in (self._members or {}).values():
                member.close()
            self._members = None


def policy_for(job: Mapping[str, Any], policies: list[PropagationPolicy]) -> PropagationPolicy:
    return select_policy(job, policies) or DEFAULT_POLICY


_installed: dict[str, Context] = {}


def install(context: Context) -> None:
    """Make ``context`` the one RQ task functions in this process use."""
    _installed["current"] = context


def current() -> Context:
    try:
        return _installed["current"]
    except KeyError:
        raise RuntimeError("no dispatch context installed in this process (fleet worker sets one)") from None
