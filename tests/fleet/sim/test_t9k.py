"""The simulated T9k job controller over an in-memory store: the T9k seeds' state machine."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.apiserver import NODE, POD, MemoryStore
from fleet.apiserver.resources import Obj, ResourceType
from fleet.sim.jobs import DURATION_ANNOTATION, EXIT_CODE_ANNOTATION
from fleet.sim.t9k_controller import T9kController, restarts
from fleet.sim.topology import Simulation
from fleet.workloads import T9K_MPIJOB, T9K_TFJOB
from tests.fleet.sim.builders import node

SAMPLES = Path(__file__).resolve().parents[3] / "config" / "samples"
FAST = Simulation(job_duration_seconds=0.3, tick_seconds=0.01, failure_delay_seconds=0.05)


def sample(name: str) -> Obj:
    obj: Obj = yaml.safe_load((SAMPLES / name).read_text())
    obj["metadata"]["namespace"] = "default"
    return obj


def cpu_nodes(count: int, cpu: str = "1", memory: str = "4Gi") -> list[Obj]:
    return [node(f"cpu-{i}", npus=0, accelerator_type=None, cpu=cpu, memory=memory) for i in range(count)]


def run(test: Callable[[MemoryStore, T9kController], Coroutine[Any, Any, None]], nodes: list[Obj]) -> None:
    async def main() -> None:
        store = MemoryStore.with_default_namespaces()
        for n in nodes:
            await store.create(NODE, n)
        controller = T9kController(store, FAST, member="member-t")
        await controller.start()
        try:
            await asyncio.wait_for(test(store, controller), timeout=20)
        finally:
            await controller.stop()

    asyncio.run(main())


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def status(store: MemoryStore, rt: ResourceType, name: str) -> dict[str, Any]:
    job = await store.get(rt, "default", name)
    return dict(job.get("status") or {})


async def reaches(
    store: MemoryStore, rt: ResourceType, name: str, phase: str, timeout: float = 5.0
) -> dict[str, Any]:
    async def check() -> bool:
        return (await status(store, rt, name)).get("phase") == phase

    await eventually(check, timeout)
    return await status(store, rt, name)


async def pod_names(store: MemoryStore) -> set[str]:
    pods, _, _ = await store.list(POD, "default")
    return {p["metadata"]["name"] for p in pods}


def true_conditions(st: dict[str, Any]) -> set[str]:
    return {c["type"] for c in st.get("conditions") or [] if c["status"] == "True"}


def tf_job(name: str, replicas: list[dict[str, Any]], **spec: Any) -> Obj:
    template = {
        "spec": {
            "containers": [{"name": "tensorflow", "image": "tf", "resources": {"requests": {"cpu": "100m"}}}]
        }
    }
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "TensorFlowTrainingJob",
        "metadata": {"name": name, "namespace": "default", "annotations": {DURATION_ANNOTATION: "0.2"}},
        "spec": {"replicaSpecs": [{"template": copy.deepcopy(template), **r} for r in replicas], **spec},
    }


def test_the_tensorflow_sample_places_by_cpu_and_memory_runs_and_succeeds_by_worker_0() -> None:
    """Four workers of 500m cpu and 1Gi: two 1-cpu nodes hold them, two per node."""

    async def test(store: MemoryStore, controller: T9kController) -> None:
        job = sample("t9k-tensorflowtrainingjob.yaml")
        job["metadata"]["annotations"] = {DURATION_ANNOTATION: "0.3"}
        await store.create(T9K_TFJOB, job)
        running = await reaches(store, T9K_TFJOB, "tensorflow-example", "Running")
        assert running["aggregate"]["running"] == 4
        assert {"Initialized", "Running"} <= true_conditions(running)
        pods, _, _ = await store.list(POD, "default")
        assert sorted({p["spec"]["nodeName"] for p in pods}) == ["cpu-0", "cpu-1"]
        done = await reaches(store, T9K_TFJOB, "tensorflow-example", "Succeeded")
        assert true_conditions(done) == {"Initialized", "Completed"}
        [task] = done["tasks"]
        assert task["type"] == "worker"
        assert [r["phase"] for r in task["replicas"]] == ["Succeeded"] * 4
        assert task["replicas"][0]["containers"] == [
            {"name": "tensorflow", "state": "Terminated", "exitCode": 0}
        ]
        assert len(await pod_names(store)) == 4  # no clean-up policy: None keeps the pods

    run(test, cpu_nodes(2))


def test_a_gang_that_does_not_fit_by_memory_stays_pending_with_no_pod_bound() -> None:
    async def test(store: MemoryStore, controller: T9kController) -> None:
        await store.create(T9K_TFJOB, sample("t9k-tensorflowtrainingjob.yaml"))
        pending = await reaches(store, T9K_TFJOB, "tensorflow-example", "Pending")
        await asyncio.sleep(0.1)
        pods, _, _ = await store.list(POD, "default")
        assert len(pods) == 4 and not any(p["spec"].get("nodeName") for p in pods)
        assert pending["aggregate"]["pending"] == 4
        assert "Initialized" in true_conditions(pending)

    run(test, cpu_nodes(1, cpu="8", memory="3Gi"))  # cpu for all four, memory for three: none bound


def test_the_chief_decides_and_unfinished_clean_up_deletes_the_ps_still_running() -> None:
    async def test(store: MemoryStore, controller: T9kController) -> None:
        job = tf_job(
            "chief",
            [
                {"type": "chief", "replicas": 1},
                {"type": "ps", "replicas": 1},
                {"type": "worker", "replicas": 2},
            ],
            runPolicy={"cleanUpPolicy": "Unfinished"},
        )
        await store.create(T9K_TFJOB, job)
        done = await reaches(store, T9K_TFJOB, "chief", "Succeeded")
        assert await pod_names(store) == {"chief-chief-0", "chief-worker-0", "chief-worker-1"}
        assert done["aggregate"]["deleted"] == 1 and done["aggregate"]["succeeded"] == 3
        assert [t["type"] for t in done["tasks"]] == ["chief", "worker", "ps"]

    run(test, cpu_nodes(2, cpu="4"))


@pytest.mark.parametrize(
    ("policy", "code", "restarted"),
    [("ExitCode", 137, True), ("ExitCode", 1, False), ("OnFailure", 1, True), ("Never", 137, False)],
)
def test_restart_policies_decide_which_exits_restart(policy: str, code: int, restarted: bool) -> None:
    assert restarts(policy, code) is restarted


def test_retriable_exits_restart_within_the_shared_backoff_limit_then_fail() -> None:
    async def test(store: MemoryStore, controller: T9kController) -> None:
        job = tf_job("retry", [{"type": "worker", "replicas": 2, "restartPolicy": "ExitCode"}])
        job["spec"]["runPolicy"] = {"backoffLimit": 2}
        job["metadata"]["annotations"][EXIT_CODE_ANNOTATION] = "137"
        await store.create(T9K_TFJOB, job)
        failed = await reaches(store, T9K_TFJOB, "retry", "Failed")
        assert failed["backoffCount"] == 2
        [task] = failed["tasks"]
        assert task["restartCount"] == 2
        assert task["replicas"][0]["containers"][0]["exitCode"] == 137
        assert {"Failed", "ReplicaFailure"} <= true_conditions(failed)
        assert "backoffLimit" in next(c["message"] for c in failed["conditions"] if c["type"] == "Failed")

    run(test, cpu_nodes(2))


def test_a_code_error_under_exit_code_fails_at_once() -> None:
    async def test(store: MemoryStore, controller: T9kController) -> None:
        job = tf_job("bug", [{"type": "worker", "replicas": 1, "restartPolicy": "ExitCode"}])
        job["metadata"]["annotations"][EXIT_CODE_ANNOTATION] = "1"
        await store.create(T9K_TFJOB, job)
        failed = await reaches(store, T9K_TFJOB, "bug", "Failed")
        assert failed["backoffCount"] == 0
        assert "Completed" not in true_conditions(failed)

    run(test, cpu_nodes(1))


def test_the_active_deadline_fails_a_job_that_runs_too_long() -> None:
    async def test(store: MemoryStore, controller: T9kController) -> None:
        job = tf_job("slow", [{"type": "worker", "replicas": 1}], runPolicy={"activeDeadlineSeconds": 1})
        job["metadata"]["annotations"][DURATION_ANNOTATION] = "60"
        await store.create(T9K_TFJOB, job)
        failed = await reaches(store, T9K_TFJOB, "slow", "Failed", timeout=5)
        reason = next(c["reason"] for c in failed["conditions"] if c["type"] == "Failed")
        assert reason == "DeadlineExceeded"

    run(test, cpu_nodes(1))


def test_debug_mode_brings_the_environment_up_and_never_trains() -> None:
    async def test(store: MemoryStore, controller: T9kController) -> None:
        job = tf_job("debug", [{"type": "worker", "replicas": 1}], runMode={"debug": {"enabled": True}})
        await store.create(T9K_TFJOB, job)
        running = await reaches(store, T9K_TFJOB, "debug", "Running")
        assert "debug" in next(c["message"] for c in running["conditions"] if c["type"] == "Running")
        await asyncio.sleep(0.6)  # three times its duration
        assert (await status(store, T9K_TFJOB, "debug"))["phase"] == "Running"

    run(test, cpu_nodes(1))


def test_pause_deletes_the_replicas_and_resuming_recreates_them() -> None:
    async def test(store: MemoryStore, controller: T9kController) -> None:
        job = tf_job("pausing", [{"type": "worker", "replicas": 2}])
        job["metadata"]["annotations"][DURATION_ANNOTATION] = "60"
        await store.create(T9K_TFJOB, job)
        await reaches(store, T9K_TFJOB, "pausing", "Running")
        current = await store.get(T9K_TFJOB, "default", "pausing")
        current["spec"]["runMode"] = {"pause": {"enabled": True}}
        await store.update(T9K_TFJOB, current)
        paused = await reaches(store, T9K_TFJOB, "pausing", "Paused")
        assert "Paused" in true_conditions(paused)

        async def no_pods() -> bool:
            return not await pod_names(store)

        await eventually(no_pods)
        assert (await status(store, T9K_TFJOB, "pausing"))["aggregate"]["deleted"] == 2
        current = await store.get(T9K_TFJOB, "default", "pausing")
        current["spec"]["runMode"]["pause"]["enabled"] = False
        await store.update(T9K_TFJOB, current)
        running = await reaches(store, T9K_TFJOB, "pausing", "Running")
        assert "Paused" not in true_conditions(running)
        assert await pod_names(store) == {"pausing-worker-0", "pausing-worker-1"}

    run(test, cpu_nodes(1))


def test_the_mpi_sample_runs_a_launcher_and_its_workers_and_cleans_them_up() -> None:
    async def test(store: MemoryStore, controller: T9kController) -> None:
        job = sample("t9k-mpijob.yaml")
        job["metadata"]["annotations"] = {DURATION_ANNOTATION: "0.2"}
        await store.create(T9K_MPIJOB, job)
        running = await reaches(store, T9K_MPIJOB, "mpi-example", "Running")
        assert [t["type"] for t in running["tasks"]] == ["launcher", "worker"]
        assert [s["name"] for s in running["tasks"][0]["status"]] == ["mpi-example-launcher"]
        assert running["aggregate"]["running"] == 6
        done = await reaches(store, T9K_MPIJOB, "mpi-example", "Succeeded")
        assert done["aggregate"]["deleted"] == 6  # cleanUpWorkers: true
        assert not await pod_names(store)

    run(test, cpu_nodes(1, cpu="500m", memory="1Gi"))  # 5 x 50m workers + a launcher of nothing


def test_an_mpijob_in_t9k_s_current_shape_runs_its_npu_workers_and_the_controller_s_launcher() -> None:
    """spec.mpiConfig and spec.replicaSpecs (t9k/tutorial-examples' shape): the worker entry's
    pods on the 910B nodes its nodeSelector names, the launcher (template: {}) made by the
    controller from the worker's template, requesting no NPU."""

    async def test(store: MemoryStore, controller: T9kController) -> None:
        job = sample("t9k-mpijob-replicaspecs.yaml")
        job["metadata"]["annotations"] = {DURATION_ANNOTATION: "0.2"}
        await store.create(T9K_MPIJOB, job)
        running = await reaches(store, T9K_MPIJOB, "horovod-npu", "Running")
        assert [t["type"] for t in running["tasks"]] == ["launcher", "worker"]
        assert [s["name"] for s in running["tasks"][1]["status"]] == [
            "horovod-npu-worker-0",
            "horovod-npu-worker-1",
        ]
        pods, _, _ = await store.list(POD, "default")
        nodes = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
        assert nodes["horovod-npu-worker-0"] != nodes["horovod-npu-worker-1"]  # 8 NPUs each
        launcher = next(p for p in pods if p["metadata"]["name"] == "horovod-npu-launcher")
        assert "huawei.com/Ascend910" not in str(launcher["spec"]["containers"])
        assert launcher["spec"]["schedulerName"] == "t9k-scheduler"
        done = await reaches(store, T9K_MPIJOB, "horovod-npu", "Succeeded")
        assert done["aggregate"]["deleted"] == 3  # cleanUpWorkers: true
        assert not await pod_names(store)

    run(test, [node(f"npu-{i}") for i in range(2)])


def test_an_mpijob_mixing_both_shapes_cannot_run() -> None:
    async def test(store: MemoryStore, controller: T9kController) -> None:
        job = sample("t9k-mpijob-replicaspecs.yaml")
        job["spec"]["worker"] = sample("t9k-mpijob.yaml")["spec"]["worker"]
        await store.create(T9K_MPIJOB, job)
        failed = await reaches(store, T9K_MPIJOB, "horovod-npu", "Failed")
        reasons = {c["type"]: c["reason"] for c in failed["conditions"] if c["status"] == "True"}
        assert reasons["Failed"] == "InvalidSpec"
        assert not await pod_names(store)

    run(test, [node("npu-0")])


def test_deleting_a_job_deletes_its_pods() -> None:
    async def test(store: MemoryStore, controller: T9kController) -> None:
        job = tf_job("gone", [{"type": "worker", "replicas": 2}])
        job["metadata"]["annotations"][DURATION_ANNOTATION] = "60"
        await store.create(T9K_TFJOB, job)
        await reaches(store, T9K_TFJOB, "gone", "Running")
        await store.delete(T9K_TFJOB, "default", "gone")

        async def no_pods() -> bool:
            return not await pod_names(store)

        await eventually(no_pods)

    run(test, cpu_nodes(1))


def test_an_injected_kill_restarts_the_main_replica_once_then_the_job_succeeds() -> None:
    async def test(store: MemoryStore, controller: T9kController) -> None:
        job = tf_job("killed", [{"type": "chief", "replicas": 1, "restartPolicy": "ExitCode"}])
        controller.fail_job("default", "killed")
        await store.create(T9K_TFJOB, job)
        done = await reaches(store, T9K_TFJOB, "killed", "Succeeded")
        assert done["backoffCount"] == 1
        assert done["tasks"][0]["restartCount"] == 1
        assert done["tasks"][0]["replicas"][0]["containers"][0]["exitCode"] == 0

    run(test, cpu_nodes(1))
