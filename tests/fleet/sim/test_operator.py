"""The simulated ascend-operator over an in-memory store: the job lifecycle, without HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fleet.apiserver import EVENT, NODE, POD, MemoryStore
from fleet.apiserver.resources import Obj
from fleet.sim.operator import Operator
from fleet.sim.topology import Simulation
from tests.fleet.sim.builders import node, sample_job, simple_job
from tests.support.kinds import ASCENDJOB

FAST = Simulation(job_duration_seconds=0.3, tick_seconds=0.01, failure_delay_seconds=0.05)
CARDS = [
    node(f"card-{i}", npus=2, accelerator_type="card-910b-2", cpu="60", memory="240Gi") for i in range(4)
]


def run(test: Callable[[MemoryStore, Operator], Coroutine[Any, Any, None]], nodes: list[Obj]) -> None:
    async def main() -> None:
        store = MemoryStore.with_default_namespaces()
        for n in nodes:
            await store.create(NODE, n)
        operator = Operator(store, FAST, member="member-t")
        await operator.start()
        try:
            await asyncio.wait_for(test(store, operator), timeout=20)
        finally:
            await operator.stop()

    asyncio.run(main())


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def job_state(store: MemoryStore, name: str) -> str | None:
    job = await store.get(ASCENDJOB, "default", name)
    conditions = (job.get("status") or {}).get("conditions") or []
    return str(conditions[-1]["type"]) if conditions else None


async def states_seen(store: MemoryStore, name: str, until: str, timeout: float = 10.0) -> list[str]:
    """The sequence of states a watcher sees for the job (consecutive repeats folded)."""
    seen: list[str] = []

    async def watch() -> None:
        async for event in store.watch(ASCENDJOB, "default", field_selector=f"metadata.name={name}"):
            conditions = (event.object.get("status") or {}).get("conditions") or []
            if conditions and (not seen or seen[-1] != conditions[-1]["type"]):
                seen.append(conditions[-1]["type"])
            if seen and seen[-1] == until:
                return

    await asyncio.wait_for(watch(), timeout)
    return seen


def strip(job: Obj) -> Obj:
    job["metadata"].pop("uid", None)
    return job


def test_sample_job_runs_then_succeeds_with_the_status_kubectl_shows() -> None:
    async def test(store: MemoryStore, operator: Operator) -> None:
        await store.create(ASCENDJOB, strip(sample_job()))
        seen = await states_seen(store, "default-test-pytorch", "Succeeded")
        assert seen == ["Created", "Running", "Succeeded"]
        job = await store.get(ASCENDJOB, "default", "default-test-pytorch")
        status = job["status"]
        assert status["startTime"] <= status["completionTime"]
        assert status["replicaStatuses"] == {"Master": {"succeeded": 1}, "Worker": {"succeeded": 1}}
        assert [c["reason"] for c in status["conditions"]] == ["JobCreated", "JobRunning", "JobSucceeded"]
        pods, _, _ = await store.list(POD, "default")
        assert {p["status"]["phase"] for p in pods} == {"Succeeded"}
        assert len({p["spec"]["nodeName"] for p in pods}) == 2
        for pod in pods:
            assert pod["status"]["hostIP"].startswith("10.")
            assert pod["metadata"]["annotations"]["huawei.com/Ascend910"] == "Ascend910-0,Ascend910-1"
        events, _, _ = await store.list(EVENT, "default")
        reasons = [e["reason"] for e in events if e["involvedObject"]["uid"] == job["metadata"]["uid"]]
        assert {"JobCreated", "JobRunning", "JobSucceeded"} <= set(reasons)

    run(test, CARDS)


def test_a_gang_that_does_not_fit_waits_with_a_reason_then_runs_when_nodes_free_up() -> None:
    async def test(store: MemoryStore, operator: Operator) -> None:
        big = simple_job("big", workers=3, npus=2)
        big["metadata"]["annotations"] = {"sim.fleet.io/duration-seconds": "60"}
        await store.create(ASCENDJOB, strip(big))
        await eventually(lambda: _is(store, "big", "Running"))
        await store.create(ASCENDJOB, strip(sample_job()))
        await eventually(lambda: _is(store, "default-test-pytorch", "Created", "PodGroupPending"))
        job = await store.get(ASCENDJOB, "default", "default-test-pytorch")
        message = job["status"]["conditions"][-1]["message"]
        assert "at most 1 do" in message
        assert "Insufficient huawei.com/Ascend910" in message
        pods, _, _ = await store.list(POD, "default", label_selector="job-name=default-test-pytorch")
        assert [p["spec"].get("nodeName") for p in pods] == [None, None]  # gang: neither pod binds
        await store.delete(ASCENDJOB, "default", "big")
        await eventually(lambda: _is(store, "default-test-pytorch", "Running"))
        remaining, _, _ = await store.list(POD, "default", label_selector="job-name=big")
        assert remaining == []

    run(test, CARDS)


async def _is(store: MemoryStore, name: str, kind: str, reason: str | None = None) -> bool:
    job = await store.get(ASCENDJOB, "default", name)
    conditions = (job.get("status") or {}).get("conditions") or []
    if not conditions or conditions[-1]["type"] != kind:
        return False
    return reason is None or conditions[-1]["reason"] == reason


def test_injected_failures_restart_until_the_backoff_limit_then_fail() -> None:
    async def test(store: MemoryStore, operator: Operator) -> None:
        job = sample_job()
        job["spec"]["runPolicy"]["backoffLimit"] = 2
        await store.create(ASCENDJOB, strip(job))
        operator.fail_job("default", "default-test-pytorch", always=True)
        seen = await states_seen(store, "default-test-pytorch", "Failed")
        assert seen == ["Created", "Running", "Restarting", "Running", "Restarting", "Running", "Failed"]
        final = (await store.get(ASCENDJOB, "default", "default-test-pytorch"))["status"]
        last = final["conditions"][-1]
        assert (last["reason"], last["message"]) == (
            "JobFailed",
            "Job default-test-pytorch has failed because it has reached the specified backoff limit",
        )
        assert final["replicaStatuses"]["Master"] == {"failed": 1}
        assert "completionTime" in final
        events, _, _ = await store.list(EVENT, "default", field_selector="reason=jobRestarting")
        assert len(events) == 2

    run(test, CARDS)


def test_a_single_injected_failure_restarts_once_then_succeeds() -> None:
    async def test(store: MemoryStore, operator: Operator) -> None:
        job = sample_job()
        job["spec"]["runPolicy"]["backoffLimit"] = 3
        await store.create(ASCENDJOB, strip(job))
        operator.fail_job("default", "default-test-pytorch")
        seen = await states_seen(store, "default-test-pytorch", "Succeeded")
        assert seen == ["Created", "Running", "Restarting", "Running", "Succeeded"]

    run(test, CARDS)


def test_without_backoff_limit_a_never_restart_job_fails_at_once() -> None:
    async def test(store: MemoryStore, operator: Operator) -> None:
        await store.create(ASCENDJOB, strip(sample_job()))
        operator.fail_job("default", "default-test-pytorch")
        seen = await states_seen(store, "default-test-pytorch", "Failed")
        assert seen == ["Created", "Running", "Failed"]
        job = await store.get(ASCENDJOB, "default", "default-test-pytorch")
        assert job["status"]["conditions"][-1]["message"] == (
            "Job default/default-test-pytorch has failed because has pod failed."
        )

    run(test, CARDS)


def test_a_job_annotated_with_an_exit_code_fails_by_it_on_every_run_after_its_duration() -> None:
    async def test(store: MemoryStore, operator: Operator) -> None:
        job = sample_job()
        job["metadata"]["annotations"] = {
            "sim.fleet.io/exit-code": "3",
            "sim.fleet.io/duration-seconds": "0.2",
        }
        job["spec"]["runPolicy"]["backoffLimit"] = 1
        await store.create(ASCENDJOB, strip(job))
        seen = await states_seen(store, "default-test-pytorch", "Failed")
        assert seen == ["Created", "Running", "Restarting", "Running", "Failed"]
        pods, _, _ = await store.list(POD, "default")
        codes = sorted(p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] for p in pods)
        assert 3 in codes and 0 not in codes
        # A new copy of the same job fails by its code again: the failure is the job's own.
        await store.delete(ASCENDJOB, "default", "default-test-pytorch")
        await eventually(lambda: _gone(store))
        await store.create(ASCENDJOB, strip(sample_job()) | {"metadata": strip(job)["metadata"]})
        again = await states_seen(store, "default-test-pytorch", "Failed")
        assert again[-1] == "Failed"

    run(test, CARDS)


async def _gone(store: MemoryStore) -> bool:
    jobs, _, _ = await store.list(ASCENDJOB, "default")
    pods, _, _ = await store.list(POD, "default")
    return not jobs and not pods


def test_an_unusable_spec_is_marked_job_valid_failed() -> None:
    async def test(store: MemoryStore, operator: Operator) -> None:
        job = sample_job("broken")
        job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"] = []
        await store.create(ASCENDJOB, strip(job))
        await eventually(lambda: _is(store, "broken", "Failed", "JobValidFailed"))
        job = await store.get(ASCENDJOB, "default", "broken")
        assert (
            "spec.replicaSpecs.Worker.template.spec.containers" in job["status"]["conditions"][-1]["message"]
        )
        pods, _, _ = await store.list(POD, "default")
        assert pods == []

    run(test, CARDS)


def test_a_not_ready_node_takes_no_new_pods() -> None:
    async def test(store: MemoryStore, operator: Operator) -> None:
        for name in ("card-0", "card-1", "card-2"):
            current = await store.get(NODE, None, name)
            current["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
            await store.update(NODE, current, subresource="status")
        await store.create(ASCENDJOB, strip(sample_job()))
        await eventually(lambda: _is(store, "default-test-pytorch", "Created", "PodGroupPending"))
        job = await store.get(ASCENDJOB, "default", "default-test-pytorch")
        assert "3 node(s) were not ready" in job["status"]["conditions"][-1]["message"]
        current = await store.get(NODE, None, "card-0")
        current["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        await store.update(NODE, current, subresource="status")
        await eventually(lambda: _is(store, "default-test-pytorch", "Running"))

    run(test, CARDS)


def test_deleting_a_finished_job_deletes_its_pods() -> None:
    async def test(store: MemoryStore, operator: Operator) -> None:
        await store.create(ASCENDJOB, strip(sample_job()))
        await eventually(lambda: _is(store, "default-test-pytorch", "Succeeded"), timeout=10)
        await store.delete(ASCENDJOB, "default", "default-test-pytorch")

        async def no_pods() -> bool:
            return not (await store.list(POD, "default"))[0]

        await eventually(no_pods)

    run(test, CARDS)
