"""The RQ worker that ``fleet worker`` runs: RQ's ``SimpleWorker`` with its bookkeeping in fewer
round trips.

A propagation task waits on its member calls and a handful of Redis round trips; RQ's work loop
adds about twenty more per task around it. Nine of those are the worker's heartbeat (written
after a task, before dequeueing and after it, as three separate commands each time) and two
write the worker's state ``idle`` twice in a row. On the benchmark's two shared cores a round
trip costs a millisecond or more, so this was a quarter of a worker's time, all of it on the
path from Admitted to Dispatched (docs/benchmarks.md).

:class:`Worker` keeps RQ's behaviour and changes only how often it says so:

- a heartbeat outside a task's own pipeline is sent as one pipeline, and at most every
  :data:`HEARTBEAT_EVERY` seconds (its key lives for ``worker_ttl + 60`` s, minutes, so a
  worker that stops beating is still seen gone within the same bound RQ gives);
- a state write is skipped when this worker itself wrote that very state last, outside a
  pipeline (a state set inside a pipeline is always followed by a real write).

Everything else (dequeueing, the task's registries and results, suspension, the scheduler, stop
requests) is RQ's own, but for one thing: RQ's loop waits out a Redis that is away only while it
dequeues, and quits on a connection error anywhere else. A Redis failover (Sentinel promoting a
replica) at the moment of the suspension check, a heartbeat or a state write then ended the
worker for good, and the propagations it would have run waited for ever. Those three here
log the error and let the loop go on to its dequeue, which waits for Redis with RQ's own
backoff: a suspension check that cannot read Redis counts as not suspended (it is asked again
before the next task), and a heartbeat or a state write that could not be sent is sent again by
the next one.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Final

import redis
from rq import SimpleWorker

__all__ = ["HEARTBEAT_EVERY", "Worker"]

#: Seconds between two heartbeats the work loop sends on its own (a task's are always sent).
HEARTBEAT_EVERY: Final = 1.0

#: What a Redis that is away (or failing over) raises.
_AWAY: Final = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)

log = logging.getLogger("fleet.dispatch.worker")


class Worker(SimpleWorker):
    """RQ's in-process worker, with heartbeats and idle-state writes sent only when they say
    something new."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._beaten_at = -HEARTBEAT_EVERY
        self._written_state: str | None = None

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        if pipeline is not None:
            super().heartbeat(timeout, pipeline=pipeline)
            self._beaten_at = time.monotonic()
            return
        if timeout is None and time.monotonic() - self._beaten_at < HEARTBEAT_EVERY:
            return
        try:
            with self.connection.pipeline(transaction=False) as pipe:
                super().heartbeat(timeout, pipeline=pipe)
                pipe.execute()
        except _AWAY as error:
            log.warning("event=heartbeat_unsent worker=%s error=%r", self.name, error)
            return
        self._beaten_at = time.monotonic()

    def set_state(self, state: str, pipeline: Any = None) -> None:
        if pipeline is not None:
            self._written_state = None  # the pipeline may not run: the next write goes out
            super().set_state(state, pipeline=pipeline)
            return
        if state == self._written_state:
            return
        try:
            super().set_state(state)
        except _AWAY as error:
            log.warning("event=state_unsent worker=%s state=%s error=%r", self.name, state, error)
            self._written_state = None
            return
        self._written_state = state

    def check_for_suspension(self, burst: bool) -> None:
        try:
            super().check_for_suspension(burst)
        except _AWAY as error:
            log.warning("event=suspension_unread worker=%s error=%r", self.name, error)
