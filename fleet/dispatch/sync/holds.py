"""A copy's "starting" versions held for a batch period, so that a copy that runs at once costs
its job one status write, not two.

Kubernetes' Job controller batches the pod events of a Job: ``enqueueSyncJobBatched`` queues
the Job's key with ``AddAfter(key, syncJobBatchPeriod)`` (1 s, pkg/controller/job/
job_controller.go), so that pods that change in quick succession cost one sync and one status
write. The syncer does the same for the versions of a member copy that say only that it is
being created or starting: no state yet, or ``Created``, and an outcome of ``STARTING``
(:func:`fleet.dispatch.sync.observer._starting`). Such a version is held for ``period``; a
later version of the copy in that time (Running, a failure, its delete, a list that holds it)
replaces it and is the one acted on. Once the period passes with nothing newer, the held
version is mirrored as before. A copy that runs within the period is written once, at
``Running``, with the member's ``Created`` and ``Running`` conditions and their own times
(issue 30, goal 7: five changes on a job's happy path: created, Admitted, Dispatched, Running,
Succeeded).

Only the starting versions wait. Running is written at once (users and the quota's use wait for
it), and so is every version that is acted on or recorded: a failure, a restart, a finish, a
gang that waits (its own clock, :mod:`~fleet.dispatch.sync.gangs`).

Order: a copy's versions come from one watch thread, that of its member and kind. The flusher
takes the same ``(member, resource)`` lock as that thread (:meth:`StartingHolds.serial`), so a held
version is never written after a newer one. A held version lost with its syncer (a restart) is
mirrored from the next syncer's list, as every copy is.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

__all__ = ["CopyName", "StartingHolds"]

#: A copy in its member: (kind, namespace, name), as the member names it.
CopyName = tuple[str, str, str]


class StartingHolds:
    """The starting versions held until they are due (monotonic seconds)."""

    def __init__(self, period: float) -> None:
        #: How long a starting version waits for a later one; 0 holds nothing.
        self.period = period
        self._lock = threading.Lock()
        #: (member, copy name) -> (the newest starting version, its watch's resource, when due).
        self._held: dict[tuple[str, CopyName], tuple[Mapping[str, Any], str, float]] = {}
        self._serial: dict[tuple[str, str], threading.Lock] = {}

    def serial(self, member: str, resource: str) -> threading.Lock:
        """The lock that orders the acts on ``member``'s copies of ``resource`` (one watch's):
        its watch thread holds it while it acts on a read, the flusher while it writes what
        was held."""
        with self._lock:
            lock = self._serial.get((member, resource))
            if lock is None:
                lock = self._serial[(member, resource)] = threading.Lock()
            return lock

    def hold(self, member: str, resource: str, name: CopyName, copy: Mapping[str, Any], now: float) -> None:
        """Hold ``copy``, the newest version of ``name``; it stays due when the first version
        held was (a copy that keeps changing while starting is still written within ``period``)."""
        with self._lock:
            previous = self._held.get((member, name))
            due = now + self.period if previous is None else previous[2]
            self._held[(member, name)] = (copy, resource, due)

    def drop(self, member: str, name: CopyName) -> None:
        """Forget what is held of ``name``: a newer version of it, or its end, came."""
        with self._lock:
            self._held.pop((member, name), None)

    def holding(self, member: str, name: CopyName) -> bool:
        with self._lock:
            return (member, name) in self._held

    def due(self, now: float) -> set[tuple[str, str]]:
        """The ``(member, resource)`` pairs that hold a version due by ``now``."""
        with self._lock:
            return {(member, resource) for (member, _), (_, resource, at) in self._held.items() if at <= now}

    def take_due(self, member: str, resource: str, now: float) -> list[Mapping[str, Any]]:
        """Remove and return ``member``'s versions of ``resource`` due by ``now``; call it with
        :meth:`serial` held, so that no newer version is acted on meanwhile."""
        with self._lock:
            keys = [
                key
                for key, (_, where, at) in self._held.items()
                if key[0] == member and where == resource and at <= now
            ]
            return [self._held.pop(key)[0] for key in keys]

    def next_due(self) -> float | None:
        with self._lock:
            return min((at for _, _, at in self._held.values()), default=None)

    def forget_member(self, member: str) -> None:
        """Forget what is held of ``member``'s copies (let go: its next owner lists them)."""
        with self._lock:
            for key in [k for k in self._held if k[0] == member]:
                del self._held[key]

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)
