"""The simulated Kubeflow controllers over an in-memory store: the TFJob controller's and the MPI
operator's own state machines (who decides success, what a failure does under each restart
policy, what serves on after the end and what ``cleanPodPolicy`` cleans), and what a member
shows of a gang it cannot place (the pods' ``Unschedulable`` condition, nothing on the job)."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from fleet.apiserver import EVENT, POD, MemoryStore
from fleet.apiserver.resources import Obj, ResourceType
from fleet.sim.jobs import launcher_pod_name, tf_succeeded
from fleet.sim.operator import Operator
from fleet.workloads import Outcome
from fleet.workloads.base import unschedulable
from fleet.workloads.kubeflow_jobs import MPIJOB, PYTORCHJOB, TFJOB, mpijob, pytorchjob
from tests.fleet.sim.builders import node
from tests.fleet.sim.test_operator import eventually, run

NODES = [node(f"a2-{i}", npus=8, cpu="64", memory="256Gi") for i in range(3)]


def _container(name: str, cpu: str = "1") -> dict[str, Any]:
    return {"name": name, "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}


def _replica(container: str, replicas: int, restart: str | None = None, cpu: str = "1") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicas": replicas,
        "template": {"spec": {"containers": [_container(container, cpu)]}},
    }
    if restart is not None:
        spec["restartPolicy"] = restart
    return spec


def tfjob(
    name: str, *, chief: bool = True, workers: int = 2, restart: str | None = None, **run_policy: Any
) -> Obj:
    specs: dict[str, Any] = {
        "PS": _replica("tensorflow", 1),
        "Worker": _replica("tensorflow", workers, restart),
    }
    if chief:
        specs["Chief"] = _replica("tensorflow", 1, restart)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {"sim.fleet.io/duration-seconds": "0.3"},
        },
        "spec": {"runPolicy": dict(run_policy), "tfReplicaSpecs": specs},
    }


def mpi(name: str, *, workers: int = 2, launcher_restart: str | None = None, **run_policy: Any) -> Obj:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {"sim.fleet.io/duration-seconds": "0.3"},
        },
        "spec": {
            "slotsPerWorker": 1,
            "runPolicy": dict(run_policy),
            "mpiReplicaSpecs": {
                "Launcher": _replica("mpi-launcher", 1, launcher_restart),
                "Worker": _replica("mpi-worker", workers),
            },
        },
    }


async def conditions(store: MemoryStore, rt: ResourceType, name: str) -> list[dict[str, Any]]:
    job = await store.get(rt, "default", name)
    return list((job.get("status") or {}).get("conditions") or [])


async def state(store: MemoryStore, rt: ResourceType, name: str) -> str | None:
    """The last true condition: the job's state as its controller means it."""
    true = [c for c in await conditions(store, rt, name) if c.get("status") == "True"]
    return str(true[-1]["type"]) if true else None


async def pods(store: MemoryStore, name: str) -> dict[str, Obj]:
    found, _, _ = await store.list(POD, "default", label_selector=f"training.kubeflow.org/job-name={name}")
    return {p["metadata"]["name"]: p for p in found}


def phases(found: dict[str, Obj]) -> dict[str, str]:
    return {name: pod["status"]["phase"] for name, pod in found.items()}


# --- TFJob ---------------------------------------------------------------------------------------


def test_a_tfjob_succeeds_with_its_chief_and_its_parameter_server_serves_on() -> None:
    async def test(store: MemoryStore, operator: Operator) -> None:
        await store.create(TFJOB, tfjob("mnist"))
        await eventually(lambda: _state_is(store, TFJOB, "mnist", "Succeeded"))
        reasons = [c["reason"] for c in await conditions(store, TFJOB, "mnist")]
        assert reasons == ["TFJobCreated", "TFJobRunning", "TFJobSucceeded"]
        job = await store.get(TFJOB, "default", "mnist")
        assert job["status"]["conditions"][-1]["message"] == "TFJob default/mnist successfully completed."
        assert phases(await pods(store, "mnist")) == {
            "mnist-chief-0": "Succeeded",
            "mnist-worker-0": "Succeeded",
            "mnist-worker-1": "Succeeded",
            "mnist-ps-0": "Running",  # cleanPodPolicy None (the default): it serves on
        }
        # Active replicas are counted as succeeded once the job is (ReconcileJobs).
        assert job["status"]["replicaStatuses"] == {
            "PS": {"succeeded": 1},
            "Worker": {"succeeded": 2},
            "Chief": {"succeeded": 1},
        }
        chief = (await pods(store, "mnist"))["mnist-chief-0"]["metadata"]["labels"]
        assert chief["training.kubeflow.org/replica-type"] == "chief"
        assert chief["training.kubeflow.org/job-role"] == "master"

        await store.create(TFJOB, tfjob("cleaned", cleanPodPolicy="Running"))
        await eventually(lambda: _state_is(store, TFJOB, "cleaned", "Succeeded"))
        await eventually(lambda: _no_pod(store, "cleaned-ps-0"))
        assert set(phases(await pods(store, "cleaned")).values()) == {"Succeeded"}

    run(test, NODES)


async def _state_is(store: MemoryStore, rt: ResourceType, name: str, wanted: str) -> bool:
    return await state(store, rt, name) == wanted


async def _no_pod(store: MemoryStore, name: str) -> bool:
    found, _, _ = await store.list(POD, "default", field_selector=f"metadata.name={name}")
    return not found


def test_the_tfjob_success_rule_worker_0_or_all_workers() -> None:
    """Without a chief, worker 0 decides (the default successPolicy); with ``AllWorkers``, every
    worker must have succeeded; with a chief, only the chief counts."""

    def pod(rtype: str, index: int, phase: str) -> Obj:
        labels = {
            "training.kubeflow.org/replica-type": rtype,
            "training.kubeflow.org/replica-index": str(index),
        }
        return {"metadata": {"labels": labels}, "status": {"phase": phase}}

    job = tfjob("w", chief=False)
    half = [pod("worker", 0, "Succeeded"), pod("worker", 1, "Running"), pod("ps", 0, "Running")]
    assert tf_succeeded(job, half)
    all_workers = copy.deepcopy(job)
    all_workers["spec"]["successPolicy"] = "AllWorkers"
    assert not tf_succeeded(all_workers, half)
    assert tf_succeeded(all_workers, [pod("worker", 0, "Succeeded"), pod("worker", 1, "Succeeded")])
    assert not tf_succeeded(job, [pod("worker", 1, "Succeeded"), pod("worker", 0, "Running")])
    chief = tfjob("c")
    assert not tf_succeeded(chief, [pod("worker", 0, "Succeeded"), pod("worker", 1, "Succeeded")])
    assert tf_succeeded(chief, [pod("chief", 0, "Succeeded"), pod("worker", 0, "Running")])


def test_a_killed_chief_under_exit_code_is_made_again_and_the_job_succeeds() -> None:
    async def test(store: MemoryStore, operator: Operator) -> None:
        job = tfjob("retried", restart="ExitCode")
        job["metadata"]["annotations"]["sim.fleet.io/duration-seconds"] = "0.6"
        await store.create(TFJOB, job)
        await eventually(lambda: _state_is(store, TFJOB, "retried", "Running"))
        first = (await pods(store, "retried"))["retried-chief-0"]["metadata"]["uid"]
        operator.fail_job("default", "retried")  # killed: exit 137, retryable
        await eventually(lambda: _state_is(store, TFJOB, "retried", "Succeeded"))
        reasons = [c["reason"] for c in await conditions(store, TFJOB, "retried")]
        assert "TFJobRestarting" not in reasons  # replaced by Running again (one of the two)
        events, _, _ = await store.list(EVENT, "default")
        restarting = [e["message"] for e in events if e["reason"] == "TFJobRestarting"]
        assert restarting == ["job retried is restarting because Chief replica(s) failed."]
        again = (await pods(store, "retried"))["retried-chief-0"]["metadata"]["uid"]
        assert again != first  # the operator deleted the failed pod and made it again

    run(test, NODES)


def test_a_chief_exiting_by_its_own_code_fails_the_tfjob_under_exit_code_and_never() -> None:
    async def test(store: MemoryStore, operator: Operator) -> None:
        for name, restart in (("coded", "ExitCode"), ("never", "Never")):
            job = tfjob(name, restart=restart)
            job["metadata"]["annotations"]["sim.fleet.io/exit-code"] = "2"
            await store.create(TFJOB, job)
            await eventually(lambda n=name: _state_is(store, TFJOB, n, "Failed"))  # type: ignore[misc]
            last = (await conditions(store, TFJOB, name))[-1]
            assert (last["reason"], last["message"]) == (
                "TFJobFailed",
                f"TFJob default/{name} has failed because 1 Chief replica(s) failed.",
            )
            found = await pods(store, name)
            assert found[f"{name}-chief-0"]["status"]["phase"] == "Failed"
            assert found[f"{name}-ps-0"]["status"]["phase"] == "Running"  # cleanPodPolicy None

    run(test, NODES)


def test_a_worker_only_tfjob_fails_with_worker_0_under_never() -> None:
    async def test(store: MemoryStore, operator: Operator) -> None:
        job = tfjob("workers", chief=False, restart="Never", cleanPodPolicy="All")
        job["metadata"]["annotations"]["sim.fleet.io/duration-seconds"] = "30"
        await store.create(TFJOB, job)
        await eventually(lambda: _state_is(store, TFJOB, "workers", "Running"))
        operator.fail_job("default", "workers")
        await eventually(lambda: _state_is(store, TFJOB, "workers", "Failed"))
        last = (await conditions(store, TFJOB, "workers"))[-1]
        assert last["message"] == "TFJob default/workers has failed because 1 Worker replica(s) failed."
        await eventually(lambda: _pods_gone(store, "workers"))  # cleanPodPolicy All

    run(test, NODES)


async def _pods_gone(store: MemoryStore, name: str) -> bool:
    return not await pods(store, name)


def test_on_failure_restarts_in_place_until_the_backoff_limit() -> None:
    """OnFailure: the kubelet restarts the container, the job stays Running (no Restarting);
    the restarts count against ``backoffLimit`` (``PastBackoffLimit``), then Failed."""

    async def test(store: MemoryStore, operator: Operator) -> None:
        job = tfjob("flaky", restart="OnFailure", backoffLimit=2)
        job["metadata"]["annotations"]["sim.fleet.io/exit-code"] = "1"
        await store.create(TFJOB, job)
        seen: list[str] = []

        async def failed() -> bool:
            now = await state(store, TFJOB, "flaky")
            if now is not None and (not seen or seen[-1] != now):
                seen.append(now)
            return now == "Failed"

        await eventually(failed)
        assert seen in (["Created", "Running", "Failed"], ["Running", "Failed"])
        last = (await conditions(store, TFJOB, "flaky"))[-1]
        assert last["message"] == "Job flaky has failed because it has reached the specified backoff limit"

    run(test, NODES)


# --- MPIJob --------------------------------------------------------------------------------------


def test_an_mpijob_succeeds_with_its_launcher_while_its_workers_serve_on() -> None:
    async def test(store: MemoryStore, operator: Operator) -> None:
        created = await store.create(MPIJOB, mpi("pi"))
        await eventually(lambda: _state_is(store, MPIJOB, "pi", "Running"))
        launcher = launcher_pod_name("pi", created["metadata"]["uid"])
        found = await pods(store, "pi")
        assert set(found) == {launcher, "pi-worker-0", "pi-worker-1"}
        roles = {n: p["metadata"]["labels"]["training.kubeflow.org/job-role"] for n, p in found.items()}
        assert roles == {launcher: "launcher", "pi-worker-0": "worker", "pi-worker-1": "worker"}
        assert found["pi-worker-1"]["metadata"]["labels"]["training.kubeflow.org/replica-index"] == "1"
        assert "training.kubeflow.org/replica-index" not in found[launcher]["metadata"]["labels"]
        await eventually(lambda: _state_is(store, MPIJOB, "pi", "Succeeded"))
        job = await store.get(MPIJOB, "default", "pi")
        reasons = [c["reason"] for c in job["status"]["conditions"]]
        assert reasons == ["MPIJobCreated", "MPIJobRunning", "MPIJobSucceeded"]
        assert job["status"]["replicaStatuses"] == {"Launcher": {"succeeded": 1}, "Worker": {"active": 2}}
        assert phases(await pods(store, "pi")) == {
            launcher: "Succeeded",
            "pi-worker-0": "Running",
            "pi-worker-1": "Running",
        }
        await store.create(MPIJOB, mpi("cleaned", cleanPodPolicy="Running"))
        await eventually(lambda: _state_is(store, MPIJOB, "cleaned", "Succeeded"))
        await eventually(lambda: _no_pod(store, "cleaned-worker-0"))
        cleaned = await store.get(MPIJOB, "default", "cleaned")
        assert cleaned["status"]["replicaStatuses"] == {"Launcher": {"succeeded": 1}, "Worker": {}}

    run(test, NODES)


def test_a_failing_launcher_is_retried_as_a_batch_job_then_fails_the_mpijob() -> None:
    async def test(store: MemoryStore, operator: Operator) -> None:
        job = mpi("broken", launcher_restart="Never", backoffLimit=1)
        job["metadata"]["annotations"]["sim.fleet.io/exit-code"] = "1"
        created = await store.create(MPIJOB, job)
        uid = created["metadata"]["uid"]
        await eventually(lambda: _state_is(store, MPIJOB, "broken", "Failed"))
        job = await store.get(MPIJOB, "default", "broken")
        last = job["status"]["conditions"][-1]
        # The launcher Job's reason, and "/" plus its last failed pod's (empty) reason.
        assert (last["reason"], last["message"]) == (
            "BackoffLimitExceeded/",
            "Job has reached the specified backoff limit: ",
        )
        assert [c["reason"] for c in job["status"]["conditions"] if c["status"] == "True"][:1] == [
            "MPIJobCreated"
        ]
        assert "MPIJobRestarting" not in str(job["status"]["conditions"])  # it never says Restarting
        assert job["status"]["replicaStatuses"]["Launcher"] == {"failed": 2}
        found = phases(await pods(store, "broken"))
        assert found[launcher_pod_name("broken", uid, 0)] == "Failed"  # a new pod per retry
        assert found[launcher_pod_name("broken", uid, 1)] == "Failed"
        assert found["broken-worker-0"] == "Running"  # cleanPodPolicy None

    run(test, NODES)


def test_a_launcher_run_as_a_worker_takes_replica_index_0() -> None:
    async def test(store: MemoryStore, operator: Operator) -> None:
        job = mpi("as-worker")
        job["spec"]["runLauncherAsWorker"] = True
        created = await store.create(MPIJOB, job)
        await eventually(lambda: _has_pods(store, "as-worker", 3))
        found = await pods(store, "as-worker")
        index = {
            n: p["metadata"]["labels"].get("training.kubeflow.org/replica-index") for n, p in found.items()
        }
        launcher = launcher_pod_name("as-worker", created["metadata"]["uid"])
        assert index == {launcher: "0", "as-worker-worker-0": "1", "as-worker-worker-1": "2"}

    run(test, NODES)


async def _has_pods(store: MemoryStore, name: str, count: int) -> bool:
    return len(await pods(store, name)) == count


# --- what a member shows of a gang it cannot place -----------------------------------------------


def test_a_kubeflow_gang_that_cannot_fit_shows_it_on_its_pods_not_on_the_job() -> None:
    """Kubeflow's operators write no PodGroupPending: the job stays Created (PyTorchJobCreated)
    and the scheduler marks each pod ``PodScheduled`` False, ``Unschedulable``; the adapter,
    given those pods, classifies the copy as stuck pending."""

    async def test(store: MemoryStore, operator: Operator) -> None:
        job = {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "huge", "namespace": "default"},
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": _replica("pytorch", 1, cpu="60"),
                    "Worker": _replica("pytorch", 3, cpu="60"),  # four 60-cpu pods, three nodes
                }
            },
        }
        await store.create(PYTORCHJOB, job)
        await eventually(lambda: _all_unschedulable(store, "huge", 4))
        copy_ = await store.get(PYTORCHJOB, "default", "huge")
        assert [c["reason"] for c in copy_["status"]["conditions"]] == ["PyTorchJobCreated"]
        seen = pytorchjob.map_status(copy_)
        assert pytorchjob.classify(seen) is Outcome.STARTING  # the job alone says nothing
        found = list((await pods(store, "huge")).values())
        evidence = unschedulable(found)
        assert evidence is not None and "Insufficient cpu" in evidence
        assert pytorchjob.classify(replace(seen, unschedulable=evidence)) is Outcome.STUCK_PENDING
        assert mpijob.reads_pods and pytorchjob.reads_pods

    run(test, NODES)


async def _all_unschedulable(store: MemoryStore, name: str, count: int) -> bool:
    found = await pods(store, name)
    flagged = [
        p
        for p in found.values()
        if any(
            c.get("type") == "PodScheduled"
            and c.get("status") == "False"
            and c.get("reason") == "Unschedulable"
            for c in p["status"].get("conditions") or ()
        )
    ]
    return len(found) == count and len(flagged) == count
