"""A worker's lanes to the members and its claims on the attempts it runs.

Lanes: one bounded pool of threads per member (:func:`lanes`), so a member's creates wait only on
that member; the propagation tasks (:mod:`fleet.dispatch.propagation`) hand their member calls to
them and return at once.

In flight: the dispatcher marks each attempt it sends in the in-flight set, with a deadline
(``DispatcherSettings.inflight_timeout``) by which some worker must have taken it. A worker that
takes a batch *claims* its attempts (:class:`Claim`): their deadline becomes now plus
``Context.claim_seconds`` (3 s), renewed every third of that from a thread while the batch runs,
however long the member takes to answer. When the worker dies the claim lapses and the
dispatcher enqueues the attempts again (:mod:`fleet.dispatch.lead.propagations`), to any worker.
A worker that was only stalled and resumes finds the copy made (adopted, same attempt) or the attempt no
longer current (it changes nothing): attempts, not claims, are the fence, so a claim that lapses
early costs a repeated create call, never a second copy. Deadlines are wall-clock times of the
worker and compared by the dispatcher on its own clock: hosts whose clocks differ by a good part
of the claim (NTP keeps them within milliseconds) see claims lapse early or late by that much.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final

import redis

from fleet.dispatch.context import CLAIM_SECONDS, Context

__all__ = [
    "CLAIM_SECONDS",
    "CREATE_CONCURRENCY",
    "DRAIN_SECONDS",
    "LANE_BACKLOG",
    "LANE_WAIT",
    "Claim",
    "lanes",
]

log = logging.getLogger("fleet.dispatch.tasks")

#: Member calls a worker makes at once to one member (its *lane*). More hides more of a distant
#: member's latency; on the benchmark's two shared cores, 8 delayed the simulated members' watch
#: streams enough to double the status-sync latency for 5% more throughput (docs/benchmarks.md).
CREATE_CONCURRENCY: Final = 4
#: Creates that may wait in one member's lane; past that, a batch's creates are deferred.
LANE_BACKLOG: Final = 64
#: How long a batch's Dispatched marks wait for its slowest creates: then those that ended are
#: written, and each later one as it ends (a slow member holds its own lane, never the batch's
#: marks nor the worker). A create past a full lane is sent again after it, too.
LANE_WAIT: Final = 1.0
#: How long a stopping worker waits for the creates still in its lanes (a task returns as soon as
#: it has handed them over): they end, and are marked, before the worker closes its clients.
#: Within Kubernetes' default 30 s grace period; past it a claim lapses and another worker sends
#: the create again (adopted, never a second copy).
DRAIN_SECONDS: Final = 20.0


class _Lanes:
    """One bounded pool of threads per member (made on first use: RQ may fork after import):
    a member's creates wait only on that member."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pools: dict[str, ThreadPoolExecutor] = {}
        self._queued: Counter[str] = Counter()

    def submit(self, member: str, fn: Callable[[], str]) -> Future[str] | None:
        """Run ``fn`` in ``member``'s lane; ``None`` when its backlog is full."""
        with self._lock:
            if self._queued[member] >= LANE_BACKLOG:
                return None
            self._queued[member] += 1
            pool = self._pools.get(member)
            if pool is None:
                pool = ThreadPoolExecutor(CREATE_CONCURRENCY, thread_name_prefix=f"lane-{member}")
                self._pools[member] = pool

        def run() -> str:
            try:
                return fn()
            finally:
                with self._lock:
                    self._queued[member] -= 1

        return pool.submit(run)

    def queued(self, member: str) -> int:
        with self._lock:
            return self._queued[member]

    def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for every lane's creates to end; whether they all did."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                left = sum(self._queued.values())
            if not left:
                return True
            if time.monotonic() >= deadline:
                log.warning("event=lanes_not_drained creates=%d", left)
                return False
            time.sleep(0.05)


@functools.cache
def lanes() -> _Lanes:
    """This worker's lanes (made on first use: RQ may fork after import)."""
    return _Lanes()


class Claim:
    """A worker's claim on the in-flight entries of the attempts it runs (see the module
    docstring): ``with Claim(ctx, entries):`` sets their deadline to now plus
    ``ctx.claim_seconds`` and renews it every third of that until the block ends. Only entries
    still in flight are touched (``ZADD XX``): one done or given back meanwhile is not put back.
    Creates that outlive their task in a member's lane are claimed without a block:
    :meth:`add` them, :meth:`start`, and :meth:`drop` each as it ends; the claim stops with
    the last."""

    def __init__(self, ctx: Context, entries: Sequence[str]) -> None:
        self.ctx = ctx
        self.entries = list(entries)
        self._lock = threading.Lock()
        self._started = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="claim", daemon=True)

    def __enter__(self) -> Claim:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def add(self, entry: str) -> None:
        with self._lock:
            self.entries.append(entry)

    def drop(self, entry: str) -> None:
        """``entry`` ended: no longer renewed; a started claim stops once none is left."""
        with self._lock:
            if entry in self.entries:
                self.entries.remove(entry)
            if not self.entries and self._started:
                self._stop.set()

    def start(self) -> None:
        with self._lock:
            self._started = True
            if not self.entries:
                self._stop.set()
                return
        self._extend()
        self._thread.start()

    def _extend(self) -> None:
        with self._lock:
            entries = list(self.entries)
        if entries:
            deadline = time.time() + self.ctx.claim_seconds
            self.ctx.client.zadd(self.ctx.keys.inflight, dict.fromkeys(entries, deadline), xx=True)

    def _run(self) -> None:
        while not self._stop.wait(self.ctx.claim_seconds / 3):
            try:
                self._extend()
            except redis.RedisError as error:  # the next renewal may succeed; lapsing is safe
                log.warning("event=claim_renew_failed entries=%d error=%r", len(self.entries), error)
