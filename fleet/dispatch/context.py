"""What every dispatch role works with: Redis, the fleet objects, the ledger, the members.

One :class:`Context` per process (RQ task functions reach it through :func:`current`, set by
``fleet worker`` before the worker starts). Every key set it uses (the ledger's, the objects', the
reservations', its own) and the RQ queue names derive from its one :class:`queues.KeySpace`
(``--key-prefix``), so every role of a deployment works in that deployment's keys.
Members are built lazily from the kubeconfig, one :class:`fleet.members.Member` each, and reused;
each role calls :meth:`Context.refresh_members` every :data:`MEMBERS_EVERY` seconds to follow the
file (:mod:`fleet.members.changes`): a member added gets its client, one removed or with new
credentials has its old client closed once the role stopped using it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import redis
from prometheus_client import Counter
from rq import Queue

from fleet.dispatch.degraded import Marks
from fleet.kinds import POLICY_KINDS
from fleet.members import (
    KubeconfigChanges,
    Member,
    MemberChanges,
    MemberConfigError,
    MemberSettings,
    load_members,
)
from fleet.placement import RedisReservations, ReservationKeys
from fleet.policy import PropagationPolicy, default_policy, select_policy
from fleet.state import EVICT_QUEUE, PROPAGATE_QUEUE, PURGE_QUEUE, Copies, DispatchKeys, Objects, StateKeys
from fleet.workloads import KINDS
from queues import DEFAULT_SPACE, Keys, KeySpace, Ledger

#: The policy of a job no policy selects: queued, the defaults of every field.
DEFAULT_POLICY: Final = default_policy([(a.api_version, a.kind) for a in KINDS])

__all__ = ["CLAIM_SECONDS", "DEFAULT_POLICY", "MEMBERS_EVERY", "Context", "current", "install"]

log = logging.getLogger("fleet.dispatch")

#: How long a worker's claim on the propagations it is running lasts unless renewed (it renews
#: every third of it while it lives): a killed worker's propagations are enqueued again by the
#: dispatcher about this long after it died (:class:`fleet.dispatch.tasks.Claim`).
CLAIM_SECONDS: Final = 3.0

#: How often each role looks at its members' kubeconfig for members added, removed or changed
#: (a ``stat``; the file is read only when that changed).
MEMBERS_EVERY: Final = 2.0

MEMBER_CHANGES = Counter(
    "fleet_member_changes_total",
    "Members added, removed or changed in the kubeconfig a role follows.",
    ["change"],
)


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
    #: Where member copies may exist (:mod:`fleet.state.copies`).
    copies: Copies = field(init=False)
    #: Members whose calls keep timing out, as every process sees them (:mod:`fleet.dispatch.degraded`).
    degraded: Marks = field(init=False)
    _members: dict[str, Member] | None = field(init=False, default=None)
    _changes: KubeconfigChanges | None = field(init=False, default=None)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    #: Held by :meth:`refresh_members` alone: one reload at a time, without blocking readers.
    _refreshing: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.keys = DispatchKeys.within(self.space)
        self.objects = Objects(self.client, StateKeys.within(self.space))
        self.ledger = Ledger(self.client, Keys.within(self.space))
        self.reservations = RedisReservations(self.client, ReservationKeys.within(self.space))
        self.queue = Queue(self.keys.queue(PROPAGATE_QUEUE), connection=self.client)
        self.purge_queue = Queue(self.keys.queue(PURGE_QUEUE), connection=self.client)
        self.evict_queue = Queue(self.keys.queue(EVICT_QUEUE), connection=self.client)
        self.degraded = Marks(self.client, self.keys)
        self.copies = Copies(self.client, self.keys)

    @property
    def members(self) -> Mapping[str, Member]:
        """The members as last read (a dict replaced whole on a change, never edited)."""
        with self._lock:
            if self._members is None:
                self._members = {}
                if self.kubeconfig is not None:
                    self._changes = KubeconfigChanges(self.kubeconfig)
                    first = self._changes.poll(strict=True)  # a wrong path fails at start
                    self._members = self._build(first.added if first else ())
                    self._changes.accept()
            return self._members

    def refresh_members(self, apply: Callable[[MemberChanges], None] | None = None) -> MemberChanges | None:
        """Follow the kubeconfig: when its members changed, build the clients of those added or
        changed, make them :attr:`members`, call ``apply`` (the role starts and stops what it
        runs per member), then close the clients replaced or removed. ``None`` when nothing
        changed or the file cannot be used (the members stay as they were)."""
        with self._refreshing:
            current = self.members
            changes = self._changes
            if changes is None:
                return None
            change = changes.poll()
            if not change:
                if change is not None:
                    changes.accept()  # a version with the same members (say, a comment edited)
                return None
            try:
                fresh = self._build((*change.added, *change.changed))
            except MemberConfigError as error:  # changed again meanwhile, or a context it cannot use
                changes.reject(error)
                return None
            changes.accept()
            members = {n: m for n, m in current.items() if n not in change.removed}
            members.update(fresh)
            with self._lock:
                self._members = members
            log.info(
                "event=members_changed added=%s removed=%s changed=%s members=%d",
                ",".join(change.added) or "-", ",".join(change.removed) or "-",
                ",".join(change.changed) or "-", len(members),
            )  # fmt: skip
            for kind in ("added", "removed", "changed"):
                if getattr(change, kind):
                    MEMBER_CHANGES.labels(kind).inc(len(getattr(change, kind)))
            try:
                if apply is not None:
                    apply(change)
            finally:
                for name in (*change.removed, *change.changed):
                    current[name].close()
            return change

    def _build(self, names: tuple[str, ...] | list[str]) -> dict[str, Member]:
        if not names or self.kubeconfig is None:
            return {}
        members = load_members(self.kubeconfig, settings=self.settings, only=names)
        for member in members.values():  # a breaker opening on timeouts marks it degraded
            member.breaker.listener = self.degraded.on_transition
        return members

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
            self._changes = None


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
