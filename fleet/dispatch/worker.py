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

RQ's scheduler (it enqueues what RQ keeps for later: the evictions' and purges' retries with
backoff) runs in a thread of the worker (:class:`_ThreadScheduler`), not in the process RQ forks
for it. A forked scheduler inherits the worker's sockets and outlives a worker killed with
SIGKILL, an orphan, so the dead worker's blocking ``BLPOP`` stayed open in Redis, and Redis gave
it the next task pushed: a propagation then waited out the dispatcher's ``inflight_timeout``
(30 s), an eviction or a purge sat ``started`` until RQ's own clean-up. It also forked a process
whose other threads (lanes, claims) may hold locks at that moment.

Everything else (dequeueing, the task's registries and results, suspension, stop requests) is
RQ's own, but for one thing: RQ's loop waits out a Redis that is away only while it
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
import threading
import time
from typing import Any, Final

import redis
from rq import SimpleWorker
from rq.defaults import DEFAULT_LOGGING_DATE_FORMAT, DEFAULT_LOGGING_FORMAT
from rq.scheduler import RQScheduler

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

    def _start_scheduler(
        self,
        burst: bool = False,
        logging_level: str | None = "INFO",
        date_format: str = DEFAULT_LOGGING_DATE_FORMAT,
        log_format: str = DEFAULT_LOGGING_FORMAT,
    ) -> None:
        """RQ's, with :class:`_ThreadScheduler` for its forked scheduler."""
        scheduler = _ThreadScheduler(
            self.queues,
            connection=self.connection,
            logging_level=logging_level if logging_level is not None else self.log.level,
            date_format=date_format,
            log_format=log_format,
            serializer=self.serializer,
        )
        self.scheduler = scheduler
        scheduler.acquire_locks()  # type: ignore[no-untyped-call]
        if not scheduler.acquired_locks:
            return
        if not burst:
            scheduler.start()
            return
        try:
            scheduler.register_birth()
            scheduler.enqueue_scheduled_jobs()  # type: ignore[no-untyped-call]
        finally:
            scheduler.release_locks()  # type: ignore[no-untyped-call]
            scheduler.register_death()

    def stop_scheduler(self) -> None:
        """Ask the scheduler thread to stop (it releases its locks) and wait for it: RQ's
        signals a process."""
        scheduler = self.scheduler
        if scheduler is None:
            return
        thread: object = scheduler._process
        if not isinstance(thread, threading.Thread) or not thread.is_alive():
            return
        scheduler.request_stop()  # type: ignore[no-untyped-call]
        thread.join(timeout=scheduler.interval + 5)

    def check_for_suspension(self, burst: bool) -> None:
        try:
            super().check_for_suspension(burst)
        except _AWAY as error:
            log.warning("event=suspension_unread worker=%s error=%r", self.name, error)


class _ThreadScheduler(RQScheduler):
    """RQ's scheduler loop in a daemon thread of the worker: it ends with the worker, whatever
    kills it, and holds no copy of the worker's sockets. RQ's own restart still applies: the
    worker's maintenance starts it again when it is not alive (``_process.is_alive()``)."""

    def start(self) -> threading.Thread:
        self._status = self.Status.STARTED
        thread = threading.Thread(target=self._run, name="rq-scheduler", daemon=True)
        self._process = thread  # type: ignore[assignment]  # RQ's is a process
        thread.start()
        return thread

    def _install_signal_handlers(self) -> None:
        """None: signals are the worker's main thread's, and the worker stops this loop itself."""

    def _run(self) -> None:
        try:
            self.work()  # type: ignore[no-untyped-call]
        except Exception as error:  # the worker's next maintenance starts it again
            log.warning("event=scheduler_stopped error=%r", error)
