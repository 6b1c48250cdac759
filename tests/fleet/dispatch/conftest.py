"""A whole running fleet for the dispatch tests: a private redis-server, simulated members over
HTTP, and ``fleet dispatcher``, ``fleet worker`` and ``fleet syncer`` as real processes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from fleet.connections import redis_from_url
from fleet.dispatch.context import Context
from fleet.jobs import current_state, submit
from fleet.jobs.store import list_jobs
from fleet.labels import JOB_UID_LABEL
from fleet.members import load_members
from fleet.sim.kubeconfig import write_atomically
from fleet.state import Objects
from fleet.workloads import T9K_TFJOB, job_key, member_resource
from queues import Ledger, load
from tests.conftest import _require_redis_server
from tests.fleet.placement.factory import job
from tests.support.fleet import FleetProcesses
from tests.support.job_states import admit as admit_to
from tests.support.kinds import FLEET_ASCENDJOB, JOBS, PYTORCHJOBS
from tests.support.redis_server import RedisServer
from tests.support.sim import CARD_POOL, RunningSim, running_sim, small_topology

MODULE_POOL: dict[str, Any] = {
    "prefix": "a2",
    "count": 4,
    "labels": {
        "accelerator": "huawei-Ascend910",
        "accelerator-type": "module-910b-8",
        "host-arch": "huawei-arm",
    },
    "allocatable": {"huawei.com/Ascend910": "8", "cpu": "188", "memory": "1500Gi", "pods": "110"},
}
A800_POOL: dict[str, Any] = {
    "prefix": "a800",
    "count": 4,
    "labels": {"accelerator": "huawei-Ascend910", "accelerator-type": "module", "host-arch": "huawei-arm"},
    "allocatable": {"huawei.com/Ascend910": "8", "cpu": "188", "memory": "720Gi", "pods": "110"},
}

#: Two teams under one root; the NPU and max-jobs limits bind during the runs.
TREE = """
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    max: {huawei.com/Ascend910: 56, kube-queue/max-jobs: 40}
    min: {huawei.com/Ascend910: 56}
    children:
    - name: team-a
      max: {huawei.com/Ascend910: 40, kube-queue/max-jobs: 24}
      min: {huawei.com/Ascend910: 28}
      namespaces: [team-a]
    - name: team-b
      max: {huawei.com/Ascend910: 32, kube-queue/max-jobs: 24}
      min: {huawei.com/Ascend910: 28}
      namespaces: [team-b]
"""


def pytorch_job(name: str, *, workers: int, npus: int, selector: dict[str, str]) -> dict[str, Any]:
    """A Kubeflow PyTorchJob (a Master and ``workers`` Workers of ``npus`` NPUs), as its users write it."""

    def replica(replicas: int) -> dict[str, Any]:
        container = {
            "name": "pytorch",
            "image": "kubeflow/pytorch-dist-mnist:latest",
            "resources": {"limits": {"huawei.com/Ascend910": str(npus)}},
        }
        spec = {"containers": [container], "nodeSelector": dict(selector)}
        return {"replicas": replicas, "restartPolicy": "OnFailure", "template": {"spec": spec}}

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(workers)}},
    }


#: T9k's TensorFlowTrainingJob as member access names it.
T9K_TFJOBS = member_resource(T9K_TFJOB)


def t9k_job(name: str, *, npus: int) -> dict[str, Any]:
    """A T9k TensorFlowTrainingJob of one worker of ``npus`` NPUs, as T9k's users write it."""
    container = {
        "name": "tensorflow",
        "image": "tensorflow/tensorflow:2.11.0",
        "resources": {"limits": {"huawei.com/Ascend910": str(npus), "cpu": "1", "memory": "2Gi"}},
    }
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "TensorFlowTrainingJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": 1,
                    "restartPolicy": "OnFailure",
                    "template": {"spec": {"containers": [container]}},
                }
            ]
        },
    }


def mixed_job(i: int, namespace: str, duration: float) -> dict[str, Any]:
    """Job ``i`` of a mix of kinds: AscendJobs of single pods of 1 or 2 NPUs and 2-NPU card gangs,
    Kubeflow PyTorchJobs of 8-NPU gangs on module nodes, T9k TensorFlowTrainingJobs of one 1-NPU
    worker (every eighth job, in place of a card gang)."""
    kind = i % 4
    if i % 8 == 7:
        obj = t9k_job(f"j{i}", npus=1)
    elif kind == 0:
        obj = job(f"j{i}", workers=0, npus=1, exclusive=False)
    elif kind == 1:
        obj = job(f"j{i}", workers=0, npus=2, exclusive=False)
    elif kind == 2:
        obj = pytorch_job(f"j{i}", workers=1, npus=8, selector={"host-arch": "huawei-arm"})
    else:
        obj = job(f"j{i}", workers=1, npus=2, selector={"accelerator-type": "card-910b-2"})
    obj["metadata"]["namespace"] = namespace
    obj["metadata"]["annotations"] = {
        **(obj["metadata"].get("annotations") or {}),
        "sim.fleet.io/duration-seconds": str(duration),
    }
    return obj


@dataclass
class RunningFleet:
    redis_server: RedisServer
    sim: RunningSim
    procs: FleetProcesses
    client: redis.Redis
    objects: Objects
    ledger: Ledger
    violations: list[str] = field(default_factory=list)

    def submit(self, obj: dict[str, Any]) -> dict[str, Any]:
        return submit(self.objects, self.ledger, obj)

    def states(self) -> dict[str, str | None]:
        """Job key -> state, for the jobs of every kind."""
        items, _ = list_jobs(self.objects)
        return {job_key(o): current_state(o) for o in items}

    def wait_for(self, what: str, done: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}\n{self.procs.logs()}")
            time.sleep(0.25)

    def member_copies(self) -> dict[str, list[str]]:
        """Fleet job uid -> the members that hold a live copy of it now."""
        members = load_members(self.sim.kubeconfig)
        out: dict[str, list[str]] = {}
        try:
            for name, member in members.items():
                for kind in (JOBS, PYTORCHJOBS, T9K_TFJOBS):
                    for obj in member.list_objects(kind, label_selector=JOB_UID_LABEL).items:
                        uid = obj["metadata"]["labels"][JOB_UID_LABEL]
                        out.setdefault(uid, []).append(name)
        finally:
            for member in members.values():
                member.close()
        return out


class InvariantMonitor:
    """Samples the quota ledger (invariant 1) while a run goes on, in a thread of the test."""

    def __init__(self, fleet: RunningFleet, limits: Mapping[str, Mapping[str, int]]) -> None:
        self.fleet = fleet
        self.limits = limits
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> InvariantMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                usages = self.fleet.ledger.usages(list(self.limits))
            except redis.RedisError:
                continue  # Redis is being restarted by the test
            self.samples += 1
            for node, limit in self.limits.items():
                for resource, most in limit.items():
                    used = usages.get(node, {}).get(resource, 0)
                    if used > most:
                        self.fleet.violations.append(f"{node}: {resource} used {used} > max {most}")


@pytest.fixture
def fleet_factory(tmp_path: Path) -> Iterator[Callable[..., RunningFleet]]:
    """Start a fleet: ``fleet_factory(members={...}, workers=2, tree=TREE, **simulation)``
    (``member_labels={member: {...}}``: the members' own labels, in their kubeconfig contexts;
    (``redis_password=``, ``redis_tls=True``: a Redis that demands them, its URL given to every role)."""
    _require_redis_server()
    stack: list[Any] = []

    def start(
        members: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        workers: int = 2,
        dispatchers: int = 1,
        syncer: bool = True,
        tree: str | None = TREE,
        dispatcher_args: tuple[str, ...] = (),
        syncer_args: tuple[str, ...] = (),
        redis_password: str | None = None,
        redis_tls: bool = False,
        member_labels: Mapping[str, Mapping[str, str]] | None = None,
        **simulation: Any,
    ) -> RunningFleet:
        (tmp_path / "redis").mkdir(exist_ok=True)
        server = RedisServer(tmp_path / "redis", password=redis_password, tls=redis_tls)
        server.start()
        stack.append(server.stop)
        topology = {
            "simulation": {
                "jobDurationSeconds": 1,
                "tickSeconds": 0.02,
                "failureDelaySeconds": 0.1,
                **simulation,
            },
            "members": [
                {"name": name, "nodePools": [dict(pool)], "labels": dict((member_labels or {}).get(name, {}))}
                for name, pool in (
                    members or {"member-1": MODULE_POOL, "member-2": CARD_POOL, "member-3": A800_POOL}
                ).items()
            ],
        }
        sim_cm = running_sim(topology)
        sim = sim_cm.__enter__()
        stack.append(lambda: sim_cm.__exit__(None, None, None))
        client = redis_from_url(server.url)
        ledger = Ledger(client)
        if tree is not None:
            ledger.apply(load(tree)[0])
        procs = FleetProcesses(server.url, sim.kubeconfig, tmp_path)
        stack.append(procs.stop)
        for n in range(dispatchers):
            name = "dispatcher" if n == 0 else f"dispatcher-{n + 1}"
            procs.start(name, "dispatcher", *dispatcher_args)
        for n in range(workers):
            procs.start(f"worker-{n + 1}", "worker")
        if syncer:
            procs.start("syncer", "syncer", *syncer_args)
        return RunningFleet(server, sim, procs, client, Objects(client), ledger)

    yield start
    for undo in reversed(stack):
        undo()


@pytest.fixture
def member() -> Iterator[RunningSim]:
    """One simulated member, ``m1``, whose jobs run for an hour."""
    with running_sim(small_topology({"m1": CARD_POOL}, jobDurationSeconds=3600)) as sim:
        yield sim


def admitted_on(ctx: Context, name: str, member: str) -> dict[str, Any]:
    """A submitted job as the dispatcher leaves it: Admitted (its quota held in the ledger),
    attempt 1, bound for ``member``."""
    obj = job(name, workers=0, npus=1)
    obj["metadata"]["namespace"] = "default"
    stored = submit(ctx.objects, ctx.ledger, obj)
    assert ctx.ledger.admit_pending(f"default/{stored['metadata']['name']}").admitted

    def admit(obj: dict[str, Any]) -> dict[str, Any]:
        return admit_to(obj, member, attempt=1)

    out = ctx.objects.mutate(FLEET_ASCENDJOB, "default", stored["metadata"]["name"], admit)
    assert out is not None
    return out


def members_only(source: Path, target: Path, names: set[str]) -> None:
    """Write ``target`` as the simulator's kubeconfig ``source`` with only the members ``names``,
    at once (as ``fleet member add``/``remove`` leave the members' Secret)."""
    config = yaml.safe_load(source.read_text())
    for section in ("clusters", "contexts"):
        config[section] = [e for e in config[section] if e["name"] in names]
    config["users"] = [u for u in config["users"] if u["name"].removesuffix("-admin") in names]
    write_atomically(target, config)
