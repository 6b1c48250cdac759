"""The simulated JobSet and Trainer controllers over an in-memory store, by their own rules:
a JobSet's pods, its restarts up to ``maxRestarts``, a ``FailJobSet`` rule, suspension; a
TrainJob's child JobSet built from its runtime, and its status following the JobSet's."""

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
from fleet.sim.jobset_controller import JobSetController
from fleet.sim.topology import Simulation
from fleet.sim.trainer_controller import TrainerController
from fleet.workloads import JOBSET, RUNTIME_KINDS, TRAINJOB
from tests.fleet.sim.builders import node

SAMPLES = Path(__file__).resolve().parents[3] / "config" / "samples"
FAST = Simulation(job_duration_seconds=0.2, tick_seconds=0.01, failure_delay_seconds=0.05)


def sample(name: str, **annotations: str) -> Obj:
    obj: Obj = yaml.safe_load((SAMPLES / name).read_text())
    obj["metadata"]["namespace"] = "default"
    obj["metadata"]["annotations"] = {DURATION_ANNOTATION: "0.2", **annotations}
    return obj


def run(test: Callable[[MemoryStore], Coroutine[Any, Any, None]]) -> None:
    async def main() -> None:
        store = MemoryStore.with_default_namespaces()
        for i in range(3):
            await store.create(NODE, node(f"a2-{i}", npus=8, accelerator_type="module-910b-8"))
        jobsets = JobSetController(store, FAST, member="m")
        trainer = TrainerController(store, FAST, member="m")
        await jobsets.start()
        await trainer.start()
        try:
            await asyncio.wait_for(test(store), timeout=20)
        finally:
            await trainer.stop()
            await jobsets.stop()

    asyncio.run(main())


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def status(store: MemoryStore, rt: Any, name: str) -> dict[str, Any]:
    return dict((await store.get(rt, "default", name)).get("status") or {})


def test_a_jobset_runs_its_pods_as_one_gang_and_completes() -> None:
    async def test(store: MemoryStore) -> None:
        await store.create(JOBSET, sample("jobset-ascend.yaml"))

        async def pods_bound() -> bool:
            pods, _, _ = await store.list(POD, "default")
            return len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods)

        await eventually(pods_bound)

        async def done() -> bool:
            return (await status(store, JOBSET, "torch-npu-pretrain")).get("terminalState") == "Completed"

        await eventually(done)
        st = await status(store, JOBSET, "torch-npu-pretrain")
        assert {j["name"]: j["succeeded"] for j in st["replicatedJobsStatus"]} == {"driver": 1, "workers": 2}
        assert [(c["type"], c["reason"]) for c in st["conditions"]] == [("Completed", "AllJobsCompleted")]

    run(test)


def test_failed_jobs_restart_the_jobset_up_to_max_restarts_then_fail_it() -> None:
    async def test(store: MemoryStore) -> None:
        await store.create(JOBSET, sample("jobset-ascend.yaml", **{EXIT_CODE_ANNOTATION: "1"}))

        async def failed() -> bool:
            return (await status(store, JOBSET, "torch-npu-pretrain")).get("terminalState") == "Failed"

        await eventually(failed)
        st = await status(store, JOBSET, "torch-npu-pretrain")
        assert st["restarts"] == 1  # maxRestarts: 1
        assert st["conditions"][-1]["reason"] == "ReachedMaxRestarts"
        ruled = sample("jobset-ascend.yaml", **{EXIT_CODE_ANNOTATION: "1"})
        ruled["metadata"]["name"] = "ruled"
        ruled["spec"]["failurePolicy"]["rules"] = [{"name": "no-retry", "action": "FailJobSet"}]
        await store.create(JOBSET, ruled)

        async def ruled_failed() -> bool:
            return (await status(store, JOBSET, "ruled")).get("terminalState") == "Failed"

        await eventually(ruled_failed)
        st = await status(store, JOBSET, "ruled")
        assert st["restarts"] == 0 and st["conditions"][-1]["reason"] == "FailJobSetActionMatched"

    run(test)


def test_a_trainjob_becomes_a_jobset_of_its_runtime_and_follows_its_status() -> None:
    async def test(store: MemoryStore) -> None:
        runtime = yaml.safe_load((SAMPLES / "trainer-torch-npu-runtime.yaml").read_text())
        cluster_rt = next(rt for rt in RUNTIME_KINDS if not rt.namespaced)
        await store.create(cluster_rt, runtime)
        await store.create(TRAINJOB, sample("trainjob-torch-npu.yaml"))

        async def complete() -> bool:
            st = await status(store, TRAINJOB, "qwen-sft")
            return any(c["type"] == "Complete" and c["status"] == "True" for c in st.get("conditions") or [])

        await eventually(complete)
        child = await store.get(JOBSET, "default", "qwen-sft")
        node_job = child["spec"]["replicatedJobs"][0]
        assert node_job["replicas"] == 1 and node_job["template"]["spec"]["parallelism"] == 2
        container = node_job["template"]["spec"]["template"]["spec"]["containers"][0]
        assert container["resources"]["limits"] == {"huawei.com/Ascend910": "4"}
        assert (await status(store, TRAINJOB, "qwen-sft"))["jobsStatus"][0]["succeeded"] == 1
        missing = copy.deepcopy(sample("trainjob-torch-npu.yaml"))
        missing["metadata"]["name"] = "orphan"
        missing["spec"]["runtimeRef"]["name"] = "nope"
        await store.create(TRAINJOB, missing)

        async def refused() -> bool:
            st = await status(store, TRAINJOB, "orphan")
            return any(c.get("reason") == "TrainingRuntimeNotSupported" for c in st.get("conditions") or [])

        await eventually(refused)

    run(test)
