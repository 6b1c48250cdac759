"""What a syncer reads costs what it acts on, not the length of the queue (issue 30).

Three readers walked every fleet job: the finalizers' resync (at each syncer's start and every
``resync_every``), the cluster failover (every tick while a member is NotReady) and the
companions' resync (a worker task each syncer's start asks for). With 100,000 queued jobs each
walk was 5 s of CPU. Each test queues jobs that none of them may read, forbids the walk, and
checks that what the reader is for still happens.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import redis

from fleet.apiserver import CONFIGMAP
from fleet.dispatch.companions import resync
from fleet.dispatch.context import Context
from fleet.dispatch.syncer import Syncer
from fleet.jobs import cluster_of, current_state, submit, walk_jobs
from fleet.kinds import FLEET_JOB_KINDS, KARMADA_PROPAGATION_POLICY
from fleet.members import load_members
from fleet.state import CopyEntry, Objects, events_for
from fleet.workloads import job_key
from tests.fleet.dispatch.conftest import admitted_on
from tests.fleet.placement.factory import job
from tests.support.job_states import dispatch
from tests.support.kinds import FLEET_ASCENDJOB
from tests.support.sim import RunningSim

QUEUED = 60


class Reads:
    """The fleet jobs read by name (``get_many``), and a walk or list of a job kind made an
    error (other kinds, such as the Events of one job, are read as ever)."""

    def __init__(self, objects: Objects, monkeypatch: pytest.MonkeyPatch) -> None:
        self.read: list[str] = []
        get_many = objects.get_many

        def counted(rt: Any, names: Sequence[tuple[str | None, str]]) -> Any:
            if rt in FLEET_JOB_KINDS:
                self.read += [name for _, name in names]
            return get_many(rt, names)

        monkeypatch.setattr(objects, "get_many", counted)
        for way in ("scan", "list", "list_page"):
            monkeypatch.setattr(objects, way, self._not_of_jobs(getattr(objects, way)))

    @staticmethod
    def _not_of_jobs(read: Callable[..., Any]) -> Callable[..., Any]:
        def guarded(rt: Any, *args: Any, **kwargs: Any) -> Any:
            assert rt not in FLEET_JOB_KINDS, f"every {rt.kind} was read"
            return read(rt, *args, **kwargs)

        return guarded


def queue(ctx: Context, count: int = QUEUED) -> None:
    """Jobs that wait in the queue: none is placed, marked for deletion or anywhere."""
    for i in range(count):
        obj = job(f"queued-{i}", workers=0, npus=1)
        obj["metadata"]["namespace"] = "default"
        submit(ctx.objects, ctx.ledger, obj)


def placed(ctx: Context, name: str, member: str) -> dict[str, Any]:
    """A job sent to ``member`` as the dispatcher leaves it: Dispatched, its copy recorded."""
    admitted_on(ctx, name, member)
    obj = ctx.objects.mutate(FLEET_ASCENDJOB, "default", name, dispatch)
    assert obj is not None
    ctx.copies.expect([CopyEntry(member, job_key(obj), obj["metadata"]["uid"], 1)])
    return obj


def test_the_finalizers_resync_reads_the_jobs_marked_for_deletion_only(
    fake_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = Context(fake_redis)
    queue(ctx)
    marked = admitted_on(ctx, "going", "m1")  # admitted, never sent: no copy to wait for
    ctx.objects.delete(FLEET_ASCENDJOB, "default", "going")
    syncer = Syncer(ctx)
    Reads(ctx.objects, monkeypatch)
    syncer.finalizers.resync()
    monkeypatch.undo()
    assert ctx.objects.try_get(FLEET_ASCENDJOB, "default", "going") is None, "its deletion was not completed"
    assert ctx.ledger.states([job_key(marked)]) == ["absent"], "its quota was not released"
    assert sum(1 for _ in walk_jobs(ctx.objects)) == QUEUED


def test_a_down_members_jobs_fail_over_and_no_other_job_is_read(
    fake_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While m1 has been NotReady for less than any toleration (the default policy's 30 s), no
    job is read. Once it has been down an hour, its two jobs are handed back, m2's job stays,
    and only m1's jobs are read, every tick it stays down."""
    ctx = Context(fake_redis)
    queue(ctx)
    on_m1 = [placed(ctx, f"down-{i}", "m1") for i in range(2)]
    on_m2 = placed(ctx, "up", "m2")
    syncer = Syncer(ctx)
    for _ in range(syncer.settings.failure_threshold):
        syncer.probes.record("m1", healthy=False, error="refused", latency=0.1)
    down = syncer.shared.health["m1"]
    assert down.ready is False

    reads = Reads(ctx.objects, monkeypatch)
    syncer.shared.health["m1"] = dataclasses.replace(down, since=time.time() - 20)
    syncer.failover.cluster()
    assert reads.read == []
    syncer.shared.health["m1"] = dataclasses.replace(down, since=time.time() - 3600)
    syncer.failover.cluster()
    assert sorted(reads.read) == ["down-0", "down-1"]
    syncer.failover.cluster()  # still down: the same two read, nothing more to do
    monkeypatch.undo()
    for obj in on_m1:
        now = ctx.objects.get(FLEET_ASCENDJOB, "default", obj["metadata"]["name"])
        assert cluster_of(now) is None and current_state(now) == "Queued"
        assert [e["reason"] for e in events_for(ctx.objects, now) if e["reason"] == "ClusterFailover"]
    still = ctx.objects.get(FLEET_ASCENDJOB, "default", "up")
    assert cluster_of(still) == "m2" and current_state(still) == current_state(on_m2)


@pytest.fixture
def member_ctx(fake_redis: redis.Redis, member: RunningSim) -> Iterator[Context]:
    ctx = Context(fake_redis, Path(member.kubeconfig))
    yield ctx
    ctx.close()


@pytest.mark.integration
def test_the_companions_resync_brings_a_placed_jobs_configmap_reading_the_placed_jobs_only(
    member_ctx: Context, member: RunningSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A placed job whose policy propagates its dependencies gets its MindCluster ranktable
    ConfigMap (made at the fleet while no syncer followed the changes) in its member; the queued
    jobs are not read."""
    ctx = member_ctx
    ctx.objects.create(
        KARMADA_PROPAGATION_POLICY,
        {
            "apiVersion": "policy.karmada.io/v1alpha1",
            "kind": "PropagationPolicy",
            "metadata": {"name": "with-deps", "namespace": "default"},
            "spec": {
                "resourceSelectors": [{"apiVersion": "mindxdl.gitee.com/v1", "kind": "AscendJob"}],
                "propagateDeps": True,
            },
        },
    )
    queue(ctx)
    placed(ctx, "trainer", "m1")
    ctx.objects.create(
        CONFIGMAP,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "rings-config-trainer", "namespace": "default"},
            "data": {"hccl.json": '{"status": "initializing"}'},
        },
    )
    reads = Reads(ctx.objects, monkeypatch)
    done = resync(ctx)
    assert reads.read.count("trainer") == 1 and not [n for n in reads.read if n.startswith("queued-")]
    monkeypatch.undo()
    assert done == ["m1: ConfigMap/rings-config-trainer"]
    client = load_members(Path(member.kubeconfig))["m1"]
    try:
        held = client.get_core("ConfigMap", "default", "rings-config-trainer")
    finally:
        client.close()
    assert held["data"] == {"hccl.json": '{"status": "initializing"}'}
