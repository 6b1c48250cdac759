"""The ``fleet worker`` RQ worker: RQ's bookkeeping in fewer round trips, none of it lost."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis
from rq import Queue, Retry, SimpleWorker, get_current_job
from rq.scheduler import RQScheduler
from rq.worker import BaseWorker
from rq.worker import base as rq_worker_base

from fleet.dispatch import worker as worker_module
from fleet.dispatch.worker import HEARTBEAT_EVERY, Worker


def seen_by_monitoring() -> dict[str, Any]:
    """A task that reports how the worker running it looks to ``rq info`` at that moment."""
    job = get_current_job()
    assert job is not None and job.worker_name is not None
    key = BaseWorker.redis_worker_namespace_prefix + job.worker_name
    fields = job.connection.hgetall(key)
    return {
        "state": fields.get(b"state", b""),
        "heartbeat": bool(fields.get(b"last_heartbeat")),
        "ttl": job.connection.ttl(key),
    }


class _Clock:
    """Stands in for the ``time`` module: a monotonic clock the test moves by hand."""

    def __init__(self, now: list[float]) -> None:
        self._now = now

    def monotonic(self) -> float:
        return self._now[0]


def double(n: int) -> int:
    return 2 * n


def test_a_running_task_sees_its_worker_busy_and_alive(redis_client: redis.Redis) -> None:
    queue = Queue("work", connection=redis_client)
    jobs = [queue.enqueue(seen_by_monitoring) for _ in range(3)]
    Worker([queue], connection=redis_client).work(burst=True)
    for job in jobs:
        seen = job.return_value()
        assert seen is not None
        assert seen["state"] == b"busy"
        assert seen["heartbeat"]
        assert seen["ttl"] > 0  # the worker's registration expires only if it stops beating


def test_heartbeats_outside_tasks_are_sent_at_most_every_interval(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(worker_module, "time", _Clock(clock))
    worker = Worker([Queue("work", connection=redis_client)], connection=redis_client)
    worker.register_birth()  # type: ignore[no-untyped-call]
    worker.heartbeat()
    assert redis_client.hget(worker.key, "last_heartbeat")

    redis_client.hdel(worker.key, "last_heartbeat")
    clock[0] += HEARTBEAT_EVERY / 2
    worker.heartbeat()
    assert redis_client.hget(worker.key, "last_heartbeat") is None  # too soon: not sent

    clock[0] += HEARTBEAT_EVERY
    worker.heartbeat()
    assert redis_client.hget(worker.key, "last_heartbeat")  # due again: sent

    redis_client.hdel(worker.key, "last_heartbeat")
    worker.heartbeat(timeout=777)  # an explicit lease is always sent
    assert redis_client.hget(worker.key, "last_heartbeat")
    assert 700 < redis_client.ttl(worker.key) <= 777


def test_a_state_set_in_a_pipeline_that_never_ran_is_written_again(redis_client: redis.Redis) -> None:
    worker = Worker([Queue("work", connection=redis_client)], connection=redis_client)
    worker.register_birth()  # type: ignore[no-untyped-call]
    worker.set_state("idle")
    assert redis_client.hget(worker.key, "state") == b"idle"
    with redis_client.pipeline() as pipe:
        worker.set_state("busy", pipeline=pipe)  # discarded, never executed
    redis_client.hset(worker.key, "state", "busy")  # as if it had run
    worker.set_state("idle")
    assert redis_client.hget(worker.key, "state") == b"idle"


def test_a_task_costs_far_fewer_round_trips_than_with_rqs_simple_worker(
    real_redis: redis.Redis, round_trips: list[int]
) -> None:
    tasks = 20
    spent = {}
    for name, cls in (("simple", SimpleWorker), ("fleet", Worker)):
        queue = Queue(f"work-{name}", connection=real_redis)
        jobs = [queue.enqueue(double, i) for i in range(tasks)]
        before = round_trips[0]
        cls([queue], connection=real_redis).work(burst=True)
        spent[name] = round_trips[0] - before
        assert [job.return_value() for job in jobs] == [2 * i for i in range(tasks)]
    # RQ's loop: three heartbeats of three commands and two idle-state writes per task, here at
    # most one heartbeat a second, pipelined, and no repeated state write.
    assert spent["fleet"] <= spent["simple"] - 8 * tasks, spent


def test_a_redis_away_outside_the_dequeue_does_not_end_the_worker(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RQ's loop waits for Redis only while it dequeues; a failover that fails its suspension
    check, a heartbeat or a state write ended the worker (a sentinel failover in CI left every
    propagation it would have run Admitted). Here each fails once, and the tasks still run."""
    failing = {"suspension": 1, "heartbeat": 1, "state": 1}

    def away(what: str) -> None:
        if failing[what]:
            failing[what] -= 1
            raise redis.exceptions.ConnectionError(f"{what}: Connection refused")

    suspended = getattr(rq_worker_base, "is_suspended")  # noqa: B009 (RQ does not export it)

    def is_suspended(*args: Any, **kwargs: Any) -> Any:
        away("suspension")
        return suspended(*args, **kwargs)

    monkeypatch.setattr(rq_worker_base, "is_suspended", is_suspended)
    beat, state = BaseWorker.heartbeat, BaseWorker.set_state

    def heartbeat(self: BaseWorker, *args: Any, **kwargs: Any) -> Any:
        away("heartbeat")
        return beat(self, *args, **kwargs)

    def set_state(self: BaseWorker, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("pipeline") is None and (len(args) < 2 or args[1] is None):
            away("state")
        return state(self, *args, **kwargs)

    monkeypatch.setattr(BaseWorker, "heartbeat", heartbeat)
    monkeypatch.setattr(BaseWorker, "set_state", set_state)
    queue = Queue("work", connection=redis_client)
    jobs = [queue.enqueue(double, i) for i in range(3)]
    Worker([queue], connection=redis_client).work(burst=True)
    assert failing == {"suspension": 0, "heartbeat": 0, "state": 0}  # each failed once
    assert [job.return_value() for job in jobs] == [0, 2, 4]


def fails_on_its_first_run() -> str:
    """A task whose first run fails, as an eviction does while its member is away."""
    job = get_current_job()
    assert job is not None
    if not job.connection.incr(f"runs:{job.id}") > 1:
        raise RuntimeError("member away")
    return "done"


def test_a_failed_tasks_retry_is_enqueued_by_the_scheduler_thread_which_ends_with_the_worker(
    redis_client: redis.Redis,
) -> None:
    """Evictions and purges retry with backoff (``Retry(interval=...)``): RQ's scheduler enqueues
    them when due. It runs in a thread of the worker, no process of its own: a forked one
    outlived a killed worker holding its sockets (tests/fleet/dispatch/test_handover.py)."""
    queue = Queue("work", connection=redis_client)
    job = queue.enqueue(fails_on_its_first_run, retry=Retry(max=2, interval=1))
    worker = Worker([queue], connection=redis_client)
    before = {t.ident for t in threading.enumerate()}
    seen: list[str] = []

    def watch() -> None:
        while job.get_status(refresh=True) not in ("finished", "failed"):
            seen.extend(t.name for t in threading.enumerate() if t.ident not in before)
            threading.Event().wait(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    worker.work(with_scheduler=True, max_jobs=2, logging_level="WARNING")  # the failure, then the retry
    watcher.join(10)

    assert job.get_status(refresh=True) == "finished" and job.return_value() == "done"
    assert "rq-scheduler" in seen
    assert not [t for t in threading.enumerate() if t.name == "rq-scheduler"]  # stopped with the worker
    assert redis_client.get(RQScheduler.get_locking_key("work")) is None  # its lock released
