"""The simulated Volcano job controller over an in-memory store: Volcano's state machine and policies."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import yaml

from fleet.apiserver import NODE, POD, MemoryStore
from fleet.apiserver.resources import Obj
from fleet.sim.jobs import DURATION_ANNOTATION, EXIT_CODE_ANNOTATION
from fleet.sim.topology import Simulation
from fleet.sim.volcano_controller import VolcanoController, policy_action
from fleet.workloads import VOLCANO_JOB
from tests.fleet.sim.builders import node

SAMPLE = Path(__file__).resolve().parents[3] / "config" / "samples" / "vcjob-mindspore-910b.yaml"
FAST = Simulation(job_duration_seconds=0.3, tick_seconds=0.01, failure_delay_seconds=0.05)


def sample() -> Obj:
    docs = [d for d in yaml.safe_load_all(SAMPLE.read_text()) if d]
    job: Obj = next(d for d in docs if d["kind"] == "Job")
    job["metadata"]["annotations"] = {DURATION_ANNOTATION: "0.2"}
    return job


def cpu_job(
    name: str, *, exit_code: int = 0, policies: list[dict[str, Any]] | None = None, **spec: Any
) -> Obj:
    """Two tasks of one 1-cpu pod each, written as Volcano's own examples write them."""
    template = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
        }
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {DURATION_ANNOTATION: "0.2", EXIT_CODE_ANNOTATION: str(exit_code)},
        },
        "spec": {
            "schedulerName": "volcano",
            "queue": "default",
            "policies": policies or [],
            "tasks": [
                {"name": "master", "replicas": 1, "template": copy.deepcopy(template)},
                {"name": "worker", "replicas": 1, "template": copy.deepcopy(template)},
            ],
            **spec,
        },
    }


def run(test: Callable[[MemoryStore], Coroutine[Any, Any, None]], nodes: list[Obj]) -> None:
    async def main() -> None:
        store = MemoryStore.with_default_namespaces()
        for n in nodes:
            await store.create(NODE, n)
        controller = VolcanoController(store, FAST, member="member-v")
        await controller.start()
        try:
            await asyncio.wait_for(test(store), timeout=20)
        finally:
            await controller.stop()

    asyncio.run(main())


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def status(store: MemoryStore, name: str) -> dict[str, Any]:
    return dict((await store.get(VOLCANO_JOB, "default", name)).get("status") or {})


async def reaches(store: MemoryStore, name: str, phase: str, timeout: float = 5.0) -> dict[str, Any]:
    async def check() -> bool:
        return ((await status(store, name)).get("state") or {}).get("phase") == phase

    await eventually(check, timeout)
    return await status(store, name)


def cpu_nodes(count: int) -> list[Obj]:
    return [node(f"cpu-{i}", npus=0, accelerator_type=None, cpu="1", memory="4Gi") for i in range(count)]


def test_the_sample_runs_its_gang_and_completes_with_volcanos_counts() -> None:
    async def test(store: MemoryStore) -> None:
        await store.create(VOLCANO_JOB, sample())
        running = await reaches(store, "mindspore-vcjob", "Running")
        assert running["running"] == 2 and running["minAvailable"] == 2
        assert running["taskStatusCount"] == {"worker": {"phase": {"Running": 2}}}
        pods, _, _ = await store.list(POD, "default")
        assert sorted(p["metadata"]["name"] for p in pods) == [
            "mindspore-vcjob-worker-0",
            "mindspore-vcjob-worker-1",
        ]
        assert all(p["spec"]["schedulerName"] == "volcano" for p in pods)
        assert {p["metadata"]["labels"]["volcano.sh/task-spec"] for p in pods} == {"worker"}
        assert all(p["metadata"]["labels"]["ring-controller.atlas"] == "ascend-910b" for p in pods)
        done = await reaches(store, "mindspore-vcjob", "Completed")
        assert done["succeeded"] == 2 and "running" not in done
        assert [c["status"] for c in done["conditions"]] == ["Pending", "Running", "Completed"]

    run(test, [node(f"n-{i}") for i in range(2)])


def test_a_gang_that_does_not_fit_stays_pending_with_unschedulable_pods() -> None:
    async def test(store: MemoryStore) -> None:
        await store.create(VOLCANO_JOB, cpu_job("big"))

        async def marked() -> bool:
            pods, _, _ = await store.list(POD, "default")
            return len(pods) == 2 and all(
                any(c.get("reason") == "Unschedulable" for c in p["status"].get("conditions") or [])
                for p in pods
            )

        await eventually(marked)
        assert (await status(store, "big"))["state"]["phase"] == "Pending"
        assert (await status(store, "big"))["pending"] == 2

    run(test, cpu_nodes(1))  # room for one pod of the two


def test_without_a_policy_failed_pods_fail_the_job() -> None:
    async def test(store: MemoryStore) -> None:
        await store.create(VOLCANO_JOB, cpu_job("buggy", exit_code=1))
        failed = await reaches(store, "buggy", "Failed")
        assert failed["failed"] == 2 and failed.get("retryCount", 0) == 0

    run(test, cpu_nodes(2))


def test_restart_job_retries_until_max_retry_then_fails() -> None:
    async def test(store: MemoryStore) -> None:
        policies = [{"event": "PodFailed", "action": "RestartJob"}]
        await store.create(VOLCANO_JOB, cpu_job("flaky", exit_code=137, policies=policies, maxRetry=2))
        failed = await reaches(store, "flaky", "Failed")
        assert failed["retryCount"] == 2
        phases = [c["status"] for c in failed["conditions"]]
        assert phases == ["Pending", "Running", "Restarting", "Pending", "Running", "Restarting", "Failed"]

    run(test, cpu_nodes(2))


def test_abort_and_complete_policies_end_the_job_their_way() -> None:
    async def test(store: MemoryStore) -> None:
        abort = [{"exitCode": 3, "action": "AbortJob"}]
        await store.create(VOLCANO_JOB, cpu_job("aborted", exit_code=3, policies=abort))
        complete = [{"event": "*", "action": "CompleteJob"}]
        await store.create(VOLCANO_JOB, cpu_job("completed", exit_code=1, policies=complete))
        aborted = await reaches(store, "aborted", "Aborted")
        assert [c["status"] for c in aborted["conditions"]][-2:] == ["Aborting", "Aborted"]
        completed = await reaches(store, "completed", "Completed")
        assert [c["status"] for c in completed["conditions"]][-2:] == ["Completing", "Completed"]

    run(test, cpu_nodes(4))


def test_task_policies_come_before_the_jobs() -> None:
    job = cpu_job("j", policies=[{"event": "PodFailed", "action": "AbortJob"}])
    job["spec"]["tasks"][0]["policies"] = [{"event": "PodFailed", "action": "RestartTask"}]
    assert policy_action(job, "master", "PodFailed", 1) == "RestartTask"
    assert policy_action(job, "worker", "PodFailed", 1) == "AbortJob"
    assert policy_action(job, "worker", "PodEvicted", 1) is None


def test_a_node_gone_not_ready_evicts_and_podevicted_restarts_the_job_elsewhere() -> None:
    """MindCluster's vcjob policy (the sample's): ``PodEvicted`` -> ``RestartJob``."""

    async def test(store: MemoryStore) -> None:
        job = sample()
        job["metadata"]["annotations"] = {DURATION_ANNOTATION: "30"}
        await store.create(VOLCANO_JOB, job)
        await reaches(store, "mindspore-vcjob", "Running")
        pods, _, _ = await store.list(POD, "default")
        lost = pods[0]["spec"]["nodeName"]
        down = await store.get(NODE, None, lost)
        down["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]
        down["metadata"].pop("resourceVersion", None)
        await store.update(NODE, down, subresource="status")

        async def restarted() -> bool:
            st = await status(store, "mindspore-vcjob")
            return st.get("retryCount") == 1 and st["state"]["phase"] == "Running"

        await eventually(restarted)
        pods, _, _ = await store.list(POD, "default")
        assert len(pods) == 2 and lost not in {p["spec"].get("nodeName") for p in pods}
        phases = [c["status"] for c in (await status(store, "mindspore-vcjob"))["conditions"]]
        assert phases == ["Pending", "Running", "Restarting", "Pending", "Running"]

    run(test, [node(f"n-{i}") for i in range(3)])


def test_without_a_policy_an_evicted_pod_fails_and_the_job_fails_at_its_end() -> None:
    async def test(store: MemoryStore) -> None:
        job = cpu_job("unguarded")
        job["metadata"]["annotations"][DURATION_ANNOTATION] = "0.5"
        await store.create(VOLCANO_JOB, job)
        await reaches(store, "unguarded", "Running")
        pods, _, _ = await store.list(POD, "default")
        down = await store.get(NODE, None, pods[0]["spec"]["nodeName"])
        down["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]
        down["metadata"].pop("resourceVersion", None)
        await store.update(NODE, down, subresource="status")
        failed = await reaches(store, "unguarded", "Failed")
        assert failed["failed"] == 1 and failed["succeeded"] == 1

    run(test, cpu_nodes(2))
