"""The simulated Kubernetes Job controller over an in-memory store: parallelism and completions,
the backoff limit, the pod failure policy, Indexed jobs, suspend."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import yaml

from fleet.apiserver import NODE, POD, MemoryStore
from fleet.apiserver.resources import Obj
from fleet.sim.batch_controller import JobController, exit_action
from fleet.sim.jobs import DURATION_ANNOTATION, EXIT_CODE_ANNOTATION
from fleet.sim.topology import Simulation
from fleet.workloads import BATCH_JOB
from tests.fleet.sim.builders import node

SAMPLE = Path(__file__).resolve().parents[3] / "config" / "samples" / "kueue-batch-job.yaml"
FAST = Simulation(job_duration_seconds=0.2, tick_seconds=0.01, failure_delay_seconds=0.05)


def job(name: str, *, exit_code: int = 0, restart: str = "Never", **spec: Any) -> Obj:
    """A Job as the Kubernetes docs write one (the pi example's shape), of 1-cpu pods."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {DURATION_ANNOTATION: "0.1", EXIT_CODE_ANNOTATION: str(exit_code)},
        },
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "pi", "image": "perl:5.34.0", "resources": {"requests": {"cpu": "1"}}}
                    ],
                    "restartPolicy": restart,
                }
            },
            **spec,
        },
    }


def run(test: Callable[[MemoryStore], Coroutine[Any, Any, None]], nodes: list[Obj]) -> None:
    async def main() -> None:
        store = MemoryStore.with_default_namespaces()
        for n in nodes:
            await store.create(NODE, n)
        controller = JobController(store, FAST, member="member-j")
        await controller.start()
        try:
            await asyncio.wait_for(test(store), timeout=20)
        finally:
            await controller.stop()

    asyncio.run(main())


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 6.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def status(store: MemoryStore, name: str) -> dict[str, Any]:
    return dict((await store.get(BATCH_JOB, "default", name)).get("status") or {})


def true_types(st: dict[str, Any]) -> list[str]:
    return [c["type"] for c in st.get("conditions") or [] if c["status"] == "True"]


async def reaches(store: MemoryStore, name: str, condition: str) -> dict[str, Any]:
    async def check() -> bool:
        return condition in true_types(await status(store, name))

    await eventually(check)
    return await status(store, name)


def cpu_nodes(count: int) -> list[Obj]:
    return [node(f"cpu-{i}", npus=0, accelerator_type=None, cpu="1", memory="4Gi") for i in range(count)]


def test_the_kueue_sample_runs_its_three_pods_to_complete() -> None:
    async def test(store: MemoryStore) -> None:
        sample = yaml.safe_load(SAMPLE.read_text())
        sample["spec"]["suspend"] = False  # as Fleet sends it
        sample["metadata"]["annotations"] = {DURATION_ANNOTATION: "0.1"}
        await store.create(BATCH_JOB, sample)

        async def running() -> bool:
            return (await status(store, "npu-sample-job")).get("ready") == 3

        await eventually(running)
        pods, _, _ = await store.list(POD, "default")
        assert all(p["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "npu-sample-job" for p in pods)
        assert all(p["metadata"]["name"].startswith("npu-sample-job-") for p in pods)
        done = await reaches(store, "npu-sample-job", "Complete")
        assert done["succeeded"] == 3 and done["active"] == 0 and "completionTime" in done
        assert true_types(done) == ["SuccessCriteriaMet", "Complete"]

    run(test, [node(f"c-{i}", npus=2, accelerator_type="card-910b-2") for i in range(2)])


def test_completions_beyond_parallelism_run_in_waves() -> None:
    async def test(store: MemoryStore) -> None:
        await store.create(BATCH_JOB, job("waves", parallelism=2, completions=5))
        seen: set[int] = set()

        async def complete() -> bool:
            st = await status(store, "waves")
            seen.add(int(st.get("active") or 0))
            return "Complete" in true_types(st)

        await eventually(complete)
        assert max(seen) == 2 and (await status(store, "waves"))["succeeded"] == 5

    run(test, cpu_nodes(2))


def test_failures_past_the_backoff_limit_fail_the_job() -> None:
    async def test(store: MemoryStore) -> None:
        await store.create(BATCH_JOB, job("flaky", exit_code=1, backoffLimit=2))
        failed = await reaches(store, "flaky", "Failed")
        assert failed["failed"] == 3
        assert [c["reason"] for c in failed["conditions"]] == ["BackoffLimitExceeded", "BackoffLimitExceeded"]
        assert true_types(failed) == ["FailureTarget", "Failed"]

    run(test, cpu_nodes(1))


def test_a_fail_job_rule_fails_at_once_and_ignore_does_not_count() -> None:
    policy = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}
    ignore = {"rules": [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [137]}}]}
    assert exit_action(job("j", podFailurePolicy=policy), 42) == "FailJob"
    assert exit_action(job("j", podFailurePolicy=policy), 1) is None
    assert exit_action(job("j", podFailurePolicy=ignore), 137) == "Ignore"

    async def test(store: MemoryStore) -> None:
        await store.create(BATCH_JOB, job("fatal", exit_code=42, podFailurePolicy=policy))
        failed = await reaches(store, "fatal", "Failed")
        assert failed["failed"] == 1 and failed["conditions"][-1]["reason"] == "PodFailurePolicy"

    run(test, cpu_nodes(1))


def test_an_indexed_job_names_its_pods_by_index() -> None:
    async def test(store: MemoryStore) -> None:
        await store.create(BATCH_JOB, job("indexed", completionMode="Indexed", completions=3, parallelism=3))
        done = await reaches(store, "indexed", "Complete")
        assert done["completedIndexes"] == "0-2"
        pods, _, _ = await store.list(POD, "default")
        indexes = sorted(
            p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in pods
        )
        assert indexes == ["0", "1", "2"]
        assert sorted(p["metadata"]["name"].rsplit("-", 1)[0] for p in pods) == [
            "indexed-0",
            "indexed-1",
            "indexed-2",
        ]

    run(test, cpu_nodes(3))


def test_a_suspended_job_has_no_pods_until_resumed() -> None:
    async def test(store: MemoryStore) -> None:
        await store.create(BATCH_JOB, job("held", suspend=True))
        held = await reaches(store, "held", "Suspended")
        assert held["conditions"][-1]["reason"] == "JobSuspended"
        assert not (await store.list(POD, "default"))[0]
        current = await store.get(BATCH_JOB, "default", "held")
        current["spec"]["suspend"] = False
        current["metadata"].pop("resourceVersion", None)
        await store.update(BATCH_JOB, current)
        done = await reaches(store, "held", "Complete")
        assert "Suspended" not in true_types(done)

    run(test, cpu_nodes(1))
