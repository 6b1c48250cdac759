"""Hand-over after a kill -9 costs seconds, not tens of seconds (issue 23, req. 7).

Real processes (``fleet dispatcher`` x2 or ``fleet worker`` x2 over a private redis-server and
simulated members). A leader dispatcher killed with SIGKILL never releases its lease: the
standby admits again once the lease (3 s by default) expires, with a larger fencing token. A
worker killed while its member calls are under way never finishes its batch: its claim on the
in-flight attempts (3 s, renewed while it lives) lapses, the dispatcher enqueues them again, and
the other worker creates (or adopts) the copies.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from rq import Queue, Worker
from rq.job import Job
from rq.scheduler import RQScheduler

from fleet.jobs.phases import Phase
from fleet.state.dispatch_keys import DEFAULT_DISPATCH_KEYS, PROPAGATE_QUEUE
from tests.fleet.dispatch.conftest import MODULE_POOL, RunningFleet, mixed_job

pytestmark = pytest.mark.integration

LEASE = DEFAULT_DISPATCH_KEYS.lease
INFLIGHT = DEFAULT_DISPATCH_KEYS.inflight
#: What "a few seconds" is held to: the default lease or claim (3 s), a standby's poll, a round.
BOUND = 6.0


def _decoded(raw: bytes | str | None) -> str | None:
    return raw.decode() if isinstance(raw, bytes) else raw


def _taken_by(fleet: RunningFleet, keys: list[str]) -> list[str]:
    """The workers that took a propagation of ``keys``: a task hands its creates to the
    member's lane and returns, so the worker holding them is read off the task, not off what
    the worker runs now."""
    queue = Queue(DEFAULT_DISPATCH_KEYS.queue(PROPAGATE_QUEUE), connection=fleet.client)
    ids = queue.started_job_registry.get_job_ids() + queue.finished_job_registry.get_job_ids()
    return [
        job.worker_name
        for job in Job.fetch_many(ids, connection=fleet.client)
        if job is not None and job.worker_name and any(item[0] in keys for item in job.args[0])
    ]


def _role_of(fleet: RunningFleet, pid: int, prefix: str) -> str:
    for name, role in fleet.procs.roles.items():
        if name.startswith(prefix) and role.process is not None and role.process.pid == pid:
            return name
    raise AssertionError(f"no {prefix} role has pid {pid}\n{fleet.procs.logs()}")


def _started(fleet: RunningFleet, role: str, line: str) -> Callable[[], bool]:
    return lambda: line in fleet.procs.roles[role].log_path.read_text(errors="replace")


def test_a_standby_dispatcher_admits_within_seconds_of_the_leader_killed(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(members={"member-1": MODULE_POOL}, dispatchers=2, workers=1, syncer=False)
    for role in ("dispatcher", "dispatcher-2"):
        fleet.wait_for(f"{role} to start", _started(fleet, role, "event=dispatcher_started"), 30)
    first = fleet.submit(mixed_job(0, "team-a", 60))
    key = f"team-a/{first['metadata']['name']}"
    fleet.wait_for("the first job admitted", lambda: fleet.states()[key] != Phase.QUEUED, 20)

    holder = _decoded(fleet.client.get(LEASE + ":holder"))
    token = int(_decoded(fleet.client.get(LEASE)) or 0)
    assert holder is not None
    leader = _role_of(fleet, int(holder.rsplit("-", 1)[1]), "dispatcher")
    standby = "dispatcher-2" if leader == "dispatcher" else "dispatcher"

    fleet.procs.kill9(leader)  # no release: the lease lives out its TTL
    killed = time.monotonic()
    second = fleet.submit(mixed_job(4, "team-a", 60))
    key2 = f"team-a/{second['metadata']['name']}"
    fleet.wait_for("the standby to admit", lambda: fleet.states()[key2] != Phase.QUEUED, 20)
    took = time.monotonic() - killed

    assert took < BOUND, f"admissions stopped for {took:.1f}s after the leader was killed"
    new_token = int(_decoded(fleet.client.get(LEASE)) or 0)
    assert new_token > token  # the fence: the dead leader's token is refused from now on
    assert fleet.procs.roles[standby].alive
    assert "event=lease_acquired" in fleet.procs.roles[standby].log_path.read_text(errors="replace")


def test_a_killed_workers_in_flight_propagations_go_to_the_other_worker_within_seconds(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(members={"member-1": MODULE_POOL}, workers=2, syncer=False)
    fleet.wait_for("the dispatcher to start", _started(fleet, "dispatcher", "event=dispatcher_started"), 30)
    fleet.wait_for("both workers", lambda: len(Worker.all(connection=fleet.client)) == 2, 30)
    # The member answers slowly: the batch's create calls are under way when the worker dies.
    fleet.sim.fault("member-1", "slow", ms=2500)
    keys = [f"team-a/{fleet.submit(mixed_job(4 * i, 'team-a', 60))['metadata']['name']}" for i in range(3)]

    def claimed() -> bool:
        """Every attempt in flight with a worker's claim (a deadline seconds away, not 30 s)."""
        entries: list[tuple[bytes, float]] = fleet.client.zrange(INFLIGHT, 0, -1, withscores=True)  # type: ignore[assignment]
        scores = [float(score) for _, score in entries]
        return len(scores) == len(keys) and all(score < time.time() + 10 for score in scores)

    fleet.wait_for("a worker to claim the propagations", claimed, 20)
    # The jobs may have gone out in one batch or several (one per worker): a worker holding
    # one in its lanes is killed; the other's own batch, if any, ends normally.
    busy = _taken_by(fleet, keys)
    assert busy, "no worker took the propagations"
    victim = _role_of(fleet, int(busy[0].rsplit("-", 1)[1]), "worker")
    assert all(fleet.states()[key] == Phase.ADMITTED for key in keys)

    fleet.procs.kill9(victim)
    killed = time.monotonic()
    fleet.sim.fault("member-1", "ok")  # what is measured is the pick-up, not the member
    fleet.wait_for(
        "the other worker to create the copies",
        lambda: all(fleet.states()[key] == Phase.DISPATCHED for key in keys),
        25,
    )
    took = time.monotonic() - killed

    assert took < BOUND, f"the killed worker's propagations waited {took:.1f}s"
    dispatcher_log = fleet.procs.roles["dispatcher"].log_path.read_text(errors="replace")
    assert "event=propagation_retried" in dispatcher_log
    assert fleet.client.zcard(INFLIGHT) == 0
    copies = fleet.member_copies()
    assert sorted(len(members) for members in copies.values()) == [1, 1, 1]


def test_a_worker_killed_while_it_waits_for_tasks_takes_none_with_it(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    """A worker killed with SIGKILL while it waits for a task: Redis drops its connections at
    once, and the next propagation goes to a live worker within seconds. Before, RQ's forked
    scheduler outlived the worker with copies of its sockets: Redis gave the dead worker's
    blocking read the next task, and the job waited out the dispatcher's ``inflight_timeout``
    (30 s)."""
    fleet = fleet_factory(members={"member-1": MODULE_POOL}, workers=1, syncer=False)
    fleet.wait_for("the dispatcher to start", _started(fleet, "dispatcher", "event=dispatcher_started"), 30)
    lock = RQScheduler.get_locking_key(DEFAULT_DISPATCH_KEYS.queue(PROPAGATE_QUEUE))
    fleet.wait_for("the worker's scheduler", lambda: bool(fleet.client.exists(lock)), 30)
    fleet.wait_for(
        "the worker to wait for tasks",
        lambda: [w.get_state() for w in Worker.all(connection=fleet.client)] == ["idle"],
        30,
    )
    name = Worker.all(connection=fleet.client)[0].name

    fleet.procs.kill9("worker-1")
    fleet.wait_for(
        "Redis to drop the killed worker's connections",
        lambda: not any(c["name"] == name for c in fleet.client.client_list()),
        BOUND,
    )
    fleet.procs.start("worker-2", "worker")
    fleet.wait_for(
        "the new worker to wait for tasks",
        lambda: "idle" in [w.get_state() for w in Worker.all(connection=fleet.client) if w.name != name],
        30,
    )
    key = f"team-a/{fleet.submit(mixed_job(0, 'team-a', 60))['metadata']['name']}"
    submitted = time.monotonic()
    fleet.wait_for("the copy", lambda: fleet.states()[key] == Phase.DISPATCHED, 40)
    took = time.monotonic() - submitted
    assert took < BOUND, f"the propagation waited {took:.1f}s for a worker"
