"""The kinds of issue 31 (h31b's part) through one running fleet, applied with kubectl at the
fleet as their users write them, each to Running on a member and Succeeded back: a JobSet of
Ascend NPU workers (config/samples/jobset-ascend.yaml), a Kubeflow Trainer TrainJob on the
torch-npu ClusterTrainingRuntime of config/samples (the runtime sent to the member with it), a
Kubeflow MPIJob written at ``kubeflow.org/v1``, a T9k MPIJob in T9k's later ``spec.worker`` shape
and one in T9k's current shape (``spec.mpiConfig`` and ``spec.replicaSpecs``, as
t9k/tutorial-examples writes it: config/samples/t9k-mpijob-replicaspecs.yaml, two 8-NPU workers);
then a
JobSet whose Jobs fail is restarted by its member up to ``maxRestarts`` and failed over to
another member."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from fleet.jobs import attempt_of, cluster_of, current_state
from fleet.kinds import fleet_kind
from fleet.members import PODS, load_members
from fleet.workloads import JOBSET, ascendjob, member_resource
from fleet.workloads.jobset import jobset as jobset_adapter
from fleet.workloads.kubeflow_jobs import mpijob as mpi_adapter
from fleet.workloads.t9k_jobs import t9k_mpijob
from fleet.workloads.trainjob import TRAINING_RUNTIME
from fleet.workloads.trainjob import trainjob as trainjob_adapter
from tests.fleet.dispatch.conftest import MODULE_POOL, RunningFleet
from tests.fleet.endpoint.test_mpijob_v1 import V1_MPIJOB
from tests.support.fleet_api import FleetApiThread
from tests.support.kubectl import Kubectl, require_kubectl
from tests.support.sim import CARD_POOL

SAMPLES = Path(__file__).resolve().parents[3] / "config" / "samples"
FLEET_JOBSET = fleet_kind(jobset_adapter)
FLEET_MPIJOB = fleet_kind(mpi_adapter)
FLEET_T9K_MPIJOB = fleet_kind(t9k_mpijob)
FLEET_TRAINJOB = fleet_kind(trainjob_adapter)
FLEET_ASCENDJOB = fleet_kind(ascendjob)
FAST_PROBES = ("--probe-interval", "0.3", "--failure-threshold", "2")


def _with_duration(doc: dict[str, Any], seconds: float, **annotations: str) -> dict[str, Any]:
    meta = doc.setdefault("metadata", {})
    meta["annotations"] = {**(meta.get("annotations") or {}), "sim.fleet.io/duration-seconds": str(seconds)}
    meta["annotations"].update(annotations)
    return doc


def test_jobset_trainjob_mpijob_v1_and_t9k_mpijob_run_to_succeeded_and_a_failing_jobset_fails_over(
    fleet_factory: Callable[..., RunningFleet], tmp_path: Path
) -> None:
    fleet = fleet_factory(
        members={"member-1": MODULE_POOL, "member-2": MODULE_POOL, "member-3": CARD_POOL},
        workers=1,
        tree=None,
        syncer_args=FAST_PROBES,
    )
    jobset = _with_duration(yaml.safe_load((SAMPLES / "jobset-ascend.yaml").read_text()), 3)
    mpi = _with_duration(yaml.safe_load(V1_MPIJOB), 1)
    t9k = _with_duration(yaml.safe_load((SAMPLES / "t9k-mpijob-processes.yaml").read_text()), 1)
    t9k_current = _with_duration(yaml.safe_load((SAMPLES / "t9k-mpijob-replicaspecs.yaml").read_text()), 1)
    failing = _with_duration(
        yaml.safe_load((SAMPLES / "jobset-ascend.yaml").read_text()), 1, **{"sim.fleet.io/exit-code": "1"}
    )
    failing["metadata"]["name"] = "flaky"
    failing["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0]["env"] = []
    path = tmp_path / "jobs.yaml"
    runtime = yaml.safe_load((SAMPLES / "trainer-torch-npu-runtime.yaml").read_text())
    train = _with_duration(yaml.safe_load((SAMPLES / "trainjob-torch-npu.yaml").read_text()), 1)
    # Issue 31's AscendJob rules: chip1-node2 on card-910b-2 nodes, a Worker type of replicas: 0.
    card = _with_duration(
        yaml.safe_load((SAMPLES / "ascend" / "pytorch-chip1-node2-card.yaml").read_text()), 1
    )
    path.write_text(yaml.safe_dump_all([jobset, mpi, t9k, t9k_current, failing, runtime, train, card]))

    def state(rt: Any, name: str) -> str | None:
        obj = fleet.objects.try_get(rt, "default", name)
        return current_state(obj) if obj is not None else None

    def succeeded(rt: Any, name: str) -> bool:
        return state(rt, name) == "Succeeded"

    with FleetApiThread(fleet.client) as api:
        kubectl = Kubectl(require_kubectl(), api.kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")
        applied = kubectl("apply", "-f", str(path)).stdout
        assert "jobset.jobset.x-k8s.io/torch-npu-pretrain created" in applied
        assert "mpijob.kubeflow.org/tensorflow-benchmarks created" in applied
        assert "mpijob.batch.tensorstack.dev/mpi-processes created" in applied
        assert "mpijob.batch.tensorstack.dev/horovod-npu created" in applied
        assert "trainjob.trainer.kubeflow.org/qwen-sft created" in applied

        fleet.wait_for(
            "the JobSet to run", lambda: state(FLEET_JOBSET, "torch-npu-pretrain") == "Running", 30
        )
        running = fleet.objects.get(FLEET_JOBSET, "default", "torch-npu-pretrain")
        member = cluster_of(running)
        assert member in ("member-1", "member-2")
        # The member's JobSet controller runs it as JobSet does: one pod per Job, labelled by
        # JobSet, the worker pods on 910B x8 nodes.
        members = load_members(fleet.sim.kubeconfig)
        try:
            copy = members[member].get_job(member_resource(JOBSET), "default", "torch-npu-pretrain")
            assert "suspend" not in copy["spec"]
            pods = (
                members[member]
                .list_objects(PODS, label_selector="jobset.sigs.k8s.io/jobset-name=torch-npu-pretrain")
                .items
            )
            assert sorted(p["metadata"]["name"] for p in pods) == [
                "torch-npu-pretrain-driver-0-0",
                "torch-npu-pretrain-workers-0-0",
                "torch-npu-pretrain-workers-1-0",
            ]
        finally:
            for client in members.values():
                client.close()

        for rt, name in (
            (FLEET_JOBSET, "torch-npu-pretrain"),
            (FLEET_MPIJOB, "tensorflow-benchmarks"),
            (FLEET_T9K_MPIJOB, "mpi-processes"),
            (FLEET_T9K_MPIJOB, "horovod-npu"),
            (FLEET_TRAINJOB, "qwen-sft"),
            (FLEET_ASCENDJOB, "pt-chip1-node2"),
        ):
            fleet.wait_for(f"{name} to succeed", functools.partial(succeeded, rt, name), 60)
        done = fleet.objects.get(FLEET_JOBSET, "default", "torch-npu-pretrain")
        assert done["status"]["terminalState"] == "Completed"
        types = [c["type"] for c in done["status"]["conditions"]]
        assert "Completed" in types and types[-1] == "Succeeded"
        assert {j["name"]: j["succeeded"] for j in done["status"]["replicatedJobsStatus"]} == {
            "driver": 1,
            "workers": 2,
        }
        # The TrainJob: its runtime went to the member first, as a TrainingRuntime of its
        # namespace; Trainer made a JobSet of two 4-NPU nodes of it; its status is Trainer's.
        train_done = fleet.objects.get(FLEET_TRAINJOB, "default", "qwen-sft")
        types = [c["type"] for c in train_done["status"]["conditions"]]
        assert "Complete" in types and types[-1] == "Succeeded"
        assert train_done["status"]["jobsStatus"][0]["name"] == "node"
        where = cluster_of(train_done)
        assert where is not None
        members = load_members(fleet.sim.kubeconfig)
        try:
            sent = members[where].get_job(
                member_resource(TRAINING_RUNTIME), "default", "torch-npu-distributed"
            )
            assert sent["metadata"]["labels"]["fleet.io/companion"] == "true"
            child = members[where].get_job(member_resource(JOBSET), "default", "qwen-sft")
            node = child["spec"]["replicatedJobs"][0]["template"]["spec"]
            assert node["parallelism"] == 2
            container = node["template"]["spec"]["containers"][0]
            assert container["image"] == "registry.example.com/llm/qwen-sft:npu-8.0"
            assert container["resources"]["requests"]["huawei.com/Ascend910"] == "4"
        finally:
            for client in members.values():
                client.close()
        assert cluster_of(fleet.objects.get(FLEET_ASCENDJOB, "default", "pt-chip1-node2")) == "member-3"
        # T9k's current shape: run by the member's T9k controller (launcher and two 8-NPU workers
        # on the 910B x8 nodes its nodeSelector names), its status mirrored back.
        horovod = fleet.objects.get(FLEET_T9K_MPIJOB, "default", "horovod-npu")
        assert cluster_of(horovod) in ("member-1", "member-2")
        assert horovod["status"]["phase"] == "Succeeded"
        assert [t["type"] for t in horovod["status"]["tasks"]] == ["launcher", "worker"]
        assert len(horovod["status"]["tasks"][1]["status"]) == 2
        assert horovod["status"]["aggregate"]["deleted"] == 3  # cleanUpWorkers: true
        # Read back at v1 as it was written.
        at_v1 = yaml.safe_load(
            kubectl("get", "mpijobs.v1.kubeflow.org", "tensorflow-benchmarks", "-o", "yaml").stdout
        )
        assert at_v1["apiVersion"] == "kubeflow.org/v1"

        # The failing JobSet: its member recreates it once (maxRestarts 1), then it fails and is
        # placed again elsewhere (application failover).
        def failed_over() -> bool:
            obj = fleet.objects.try_get(FLEET_JOBSET, "default", "flaky")
            return obj is not None and attempt_of(obj) >= 2

        fleet.wait_for("the failing JobSet to be failed over", failed_over, 60)
