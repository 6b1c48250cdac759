"""Eight processes admitting against one small quota at once never exceed it (real Redis)."""

from __future__ import annotations

import multiprocessing
import threading
from multiprocessing.synchronize import Barrier

import pytest
import redis

from queues import Ledger
from queues.quantity import MAX_JOBS
from tests.queues.support import assert_invariants, make_tree
from tests.support.redis_server import RedisServer

WORKERS = 8
JOBS_PER_WORKER = 25
ROOT_JOBS = 7
ROOT_CPU = 9


def worker(
    url: str, index: int, barrier: Barrier, results: multiprocessing.Queue[tuple[int, int, int]]
) -> None:
    """Queue jobs, then race the other workers to admit them; release some and race again."""
    client = redis.Redis.from_url(url)
    ledger = Ledger(client)
    jobs = [f"w{index}/job-{i}/uid" for i in range(JOBS_PER_WORKER)]
    for i, job in enumerate(jobs):
        ledger.enqueue(job, "a" if i % 2 else "b", {"cpu": 1000 + 250 * (i % 3)}, priority=i % 4)
    barrier.wait()
    admitted = [d.job for d in ledger.admit_pending_many(jobs) if d.admitted and not d.already]
    released = admitted[: len(admitted) // 2]
    for job in released:
        ledger.release(job)
    again = [d.job for d in ledger.admit_pending_many(jobs) if d.admitted and not d.already]
    results.put((index, len(admitted) + len(again), len(released)))
    client.close()


@pytest.mark.integration
def test_eight_processes_never_exceed_a_small_quota(redis_server: RedisServer) -> None:
    client = redis_server.client()
    ledger = Ledger(client)
    ledger.apply(
        make_tree(
            {
                "name": "root",
                "max": {"cpu": ROOT_CPU, MAX_JOBS: ROOT_JOBS},
                "children": [
                    {"name": "a", "max": {"cpu": 4}, "namespaces": ["a"]},
                    {"name": "b", "max": {MAX_JOBS: 5}, "namespaces": ["b"]},
                ],
            }
        )
    )
    limits = {"root": {"cpu": ROOT_CPU * 1000, MAX_JOBS: ROOT_JOBS}, "a": {"cpu": 4000}, "b": {MAX_JOBS: 5}}
    overruns: list[str] = []
    samples: list[int] = []
    done = threading.Event()

    def watch() -> None:  # samples usage while the workers race
        observer = Ledger(redis_server.client())
        while not done.wait(0.002):
            samples.append(1)
            for node, usage in observer.usages(limits).items():
                overruns.extend(
                    f"{node} {r} {usage.get(r, 0)} > {cap}"
                    for r, cap in limits[node].items()
                    if usage.get(r, 0) > cap
                )

    ctx = multiprocessing.get_context("fork")  # workers build their own clients
    barrier = ctx.Barrier(WORKERS)
    results: multiprocessing.Queue[tuple[int, int, int]] = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(redis_server.url, i, barrier, results)) for i in range(WORKERS)]
    watcher = threading.Thread(target=watch)
    try:
        for proc in procs:
            proc.start()
        watcher.start()
        outcomes = [results.get(timeout=60) for _ in procs]
        for proc in procs:
            proc.join(timeout=30)
            assert proc.exitcode == 0
    finally:
        done.set()
        if watcher.is_alive():
            watcher.join()
        for proc in procs:
            if proc.is_alive():
                proc.kill()
    assert samples, "the watcher never sampled usage during the race"
    assert overruns == []
    assert_invariants(ledger)
    still_admitted = sum(n - released for _, n, released in outcomes)
    assert still_admitted == len(ledger.records())
    root = ledger.usage("root")
    # The quota ends full: another job fits nowhere (all 200 jobs were offered).
    assert root[MAX_JOBS] == ROOT_JOBS or root["cpu"] > (ROOT_CPU - 1) * 1000
    assert len(ledger.pending.records()) == WORKERS * JOBS_PER_WORKER - still_admitted - sum(
        r for *_, r in outcomes
    )
    client.close()
