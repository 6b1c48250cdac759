"""Two deployments in one Redis: each runs its jobs and sees only its own.

One redis-server and one simulator; the default deployment (no ``--key-prefix``) and ``blue``
each run ``fleet dispatcher``, ``worker`` and ``syncer`` as real processes, each over a member of
its own (a member copy carries no deployment's name, so a syncer would take another deployment's
copies in its member for orphans). A job submitted to each runs, and neither deployment's ledger,
objects, lease or RQ queues hold anything of the other's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from rq import Queue, Worker

from fleet.connections import redis_from_url
from fleet.jobs import current_state, submit
from fleet.jobs.store import list_jobs
from fleet.state import PROPAGATE_QUEUE, DispatchKeys, Objects, StateKeys
from fleet.workloads import job_key
from queues import DEFAULT_SPACE, Keys, KeySpace, Ledger
from tests.conftest import _require_redis_server
from tests.fleet.placement.factory import job
from tests.support.fleet import FleetProcesses
from tests.support.redis_server import RedisServer
from tests.support.sim import CARD_POOL, RunningSim, running_sim, small_topology

pytestmark = pytest.mark.integration


@dataclass
class Deployment:
    space: KeySpace
    member: str
    objects: Objects
    ledger: Ledger
    procs: FleetProcesses

    @property
    def keys(self) -> DispatchKeys:
        return DispatchKeys.within(self.space)

    def states(self) -> dict[str, str | None]:
        items, _ = list_jobs(self.objects)
        return {job_key(o): current_state(o) for o in items}


def _kubeconfig_of(sim: RunningSim, member: str, path: Path) -> Path:
    """The simulator's kubeconfig with only ``member``'s context."""
    config: dict[str, Any] = yaml.safe_load(sim.kubeconfig.read_text())
    config["contexts"] = [c for c in config["contexts"] if c["name"] == member]
    config["current-context"] = member
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def two_deployments(tmp_path: Path) -> Iterator[tuple[redis.Redis, Deployment, Deployment]]:
    _require_redis_server()
    (tmp_path / "redis").mkdir()
    server = RedisServer(tmp_path / "redis")
    server.start()
    deployments: list[Deployment] = []
    try:
        topology = small_topology({"m-default": CARD_POOL, "m-blue": CARD_POOL}, jobDurationSeconds=3)
        with running_sim(topology) as sim:
            client = redis_from_url(server.url)
            for space, member, extra in (
                (DEFAULT_SPACE, "m-default", ()),  # no option: the default prefix
                (KeySpace(prefix="blue"), "m-blue", ("--key-prefix", "blue")),
            ):
                directory = tmp_path / space.prefix
                directory.mkdir()
                kubeconfig = _kubeconfig_of(sim, member, directory / "kubeconfig")
                procs = FleetProcesses(server.url, kubeconfig, directory)
                objects = Objects(client, StateKeys.within(space))
                deployment = Deployment(space, member, objects, Ledger(client, Keys.within(space)), procs)
                deployments.append(deployment)
                for role in ("dispatcher", "worker", "syncer"):
                    procs.start(f"{space.prefix}-{role}", role, *extra)
            yield client, deployments[0], deployments[1]
    finally:
        for deployment in deployments:
            deployment.procs.stop()
        server.stop()


def _wait(what: str, done: Any, deployments: tuple[Deployment, ...], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            logs = "\n".join(d.procs.logs() for d in deployments)
            pytest.fail(f"timed out waiting for {what}\n{logs}")
        time.sleep(0.2)


def test_two_deployments_in_one_redis_each_run_only_their_own_jobs(
    two_deployments: tuple[redis.Redis, Deployment, Deployment],
) -> None:
    client, default, blue = two_deployments
    both = (default, blue)
    for d in both:
        obj = job(f"train-{d.space.prefix}", workers=0, npus=1, exclusive=False)
        obj["metadata"]["namespace"] = "default"
        submit(d.objects, d.ledger, obj)
    mine = {d.space.prefix: f"default/train-{d.space.prefix}" for d in both}

    # both dispatchers lead at once (each its own lease) and each job runs in its deployment's member
    _wait(
        "both jobs to run", lambda: all(d.states().get(mine[d.space.prefix]) == "Running" for d in both), both
    )
    listening: dict[str, list[str]] = {}
    for d in both:
        assert client.exists(d.keys.lease), f"{d.space.prefix}'s dispatcher does not lead"
        assert list(d.states()) == [mine[d.space.prefix]]
        assert list(d.ledger.records()) == [mine[d.space.prefix]]
        (stored,) = list_jobs(d.objects)[0]
        assert stored["status"]["cluster"] == d.member
        queue = Queue(d.keys.queue(PROPAGATE_QUEUE), connection=client)
        listening[queue.name] = [w.name for w in Worker.all(connection=client, queue=queue)]
    assert set(listening) == {"fleet-propagate", "blue-propagate"}
    assert [len(names) for names in listening.values()] == [1, 1], listening  # each its own worker
    assert listening["fleet-propagate"] != listening["blue-propagate"]

    _wait(
        "both jobs to succeed",
        lambda: all(d.states().get(mine[d.space.prefix]) == "Succeeded" for d in both),
        both,
    )
    for d in both:
        assert d.ledger.records() == {} and d.ledger.pending.records() == {}

    queues = {q.name for q in Queue.all(connection=client)}
    assert {"fleet-propagate", "blue-propagate"} <= queues
    # every key either deployment wrote carries its prefix (RQ's own keys name the queues)
    keys = {k.decode() for k in client.scan_iter(count=1000)}
    ours = {k for k in keys if not k.startswith("rq:")}
    assert {k.split(":", 1)[0] for k in ours} == {"fleet", "blue"}, sorted(ours)
