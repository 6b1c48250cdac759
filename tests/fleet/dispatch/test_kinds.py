"""Jobs of several kinds through one fleet: a Kubeflow PyTorchJob runs to Succeeded on a member
as its operator runs it, beside an AscendJob of the same name in the same namespace, and both
kinds spend one leaf's quota."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fleet.jobs import cluster_of, condition, current_state
from fleet.jobs.submit import job_key
from fleet.kinds import PROPAGATION_POLICY, fleet_kind
from fleet.labels import JOB_UID_LABEL
from fleet.members import load_members
from fleet.state import events_for
from fleet.workloads.kubeflow_jobs import mpijob as mpi_adapter
from fleet.workloads.kubeflow_jobs import pytorchjob as torch_adapter
from fleet.workloads.kubeflow_jobs import tfjob as tf_adapter
from queues import JobState
from tests.fleet.dispatch.conftest import A800_POOL, MODULE_POOL, RunningFleet
from tests.fleet.placement.factory import job
from tests.support.job_states import admit
from tests.support.kinds import FLEET_ASCENDJOB, FLEET_PYTORCHJOB, PYTORCHJOBS
from tests.support.sim import CARD_POOL

#: One leaf for team-a that admits two jobs at a time, whatever their kind.
TREE = """
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    max: {huawei.com/Ascend910: 1000, kube-queue/max-jobs: 100}
    min: {huawei.com/Ascend910: 1000, kube-queue/max-jobs: 100}
    children:
    - name: team-a
      max: {huawei.com/Ascend910: 64, kube-queue/max-jobs: 2}
      namespaces: [team-a]
"""


FAST_PROBES = ("--probe-interval", "0.3", "--failure-threshold", "2")


def pytorchjob(name: str, *, workers: int = 2, npus: int = 8, seconds: float = 3.0) -> dict[str, Any]:
    """A PyTorchJob as Kubeflow's users write it: a Master and Workers, container ``pytorch``."""

    def replica(replicas: int) -> dict[str, Any]:
        container = {
            "name": "pytorch",
            "image": "kubeflow/pytorch-dist-mnist:latest",
            "command": ["python3", "/opt/mnist/src/mnist.py", "--epochs=1"],
            "resources": {"limits": {"huawei.com/Ascend910": str(npus)}},
        }
        return {
            "replicas": replicas,
            "restartPolicy": "OnFailure",
            "template": {"spec": {"containers": [container], "nodeSelector": {"host-arch": "huawei-arm"}}},
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "annotations": {"sim.fleet.io/duration-seconds": str(seconds)},
        },
        "spec": {
            "nprocPerNode": "8",
            "runPolicy": {"cleanPodPolicy": "None", "schedulingPolicy": {"minAvailable": workers + 1}},
            "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(workers)},
        },
    }


def _state(fleet: RunningFleet, rt: Any, name: str) -> str | None:
    obj = fleet.objects.try_get(rt, "team-a", name)
    return current_state(obj) if obj is not None else None


def test_a_pytorchjob_and_an_ascendjob_of_one_name_both_run_and_share_their_leaf(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(members={"member-1": MODULE_POOL, "member-2": CARD_POOL}, workers=1, tree=TREE)
    ascend = job("train", workers=1, npus=2, selector={"accelerator-type": "card-910b-2"})
    ascend["metadata"]["namespace"] = "team-a"
    ascend["metadata"]["annotations"] = {"sim.fleet.io/duration-seconds": "30"}
    fleet.submit(ascend)
    fleet.submit(pytorchjob("train", seconds=15.0))

    def both_running() -> bool:
        return (
            _state(fleet, FLEET_ASCENDJOB, "train") == "Running"
            and _state(fleet, FLEET_PYTORCHJOB, "train") == "Running"
        )

    fleet.wait_for("the AscendJob and the PyTorchJob named train both running", both_running, 60)
    # The leaf admits two jobs of any kind: a third waits for one of them, for max-jobs.
    assert fleet.ledger.usages(["team-a"])["team-a"]["kube-queue/max-jobs"] == 2
    fleet.submit(pytorchjob("later", workers=1, seconds=1.0))

    def waits_for_quota() -> bool:
        obj = fleet.objects.get(FLEET_PYTORCHJOB, "team-a", "later")
        last = obj["status"]["conditions"][-1]
        return current_state(obj) == "Queued" and "kube-queue/max-jobs 2/2 in use" in str(last.get("message"))

    fleet.wait_for("the third job to wait for the leaf's max-jobs", waits_for_quota, 10)
    assert fleet.ledger.state("pytorchjobs.kubeflow.org:team-a/later") is JobState.PENDING
    torch = fleet.objects.get(FLEET_PYTORCHJOB, "team-a", "train")
    assert cluster_of(torch) == "member-1"
    assert cluster_of(fleet.objects.get(FLEET_ASCENDJOB, "team-a", "train")) == "member-2"

    # The member runs the PyTorchJob as Kubeflow's operator would: its pods carry the
    # training.kubeflow.org labels, its conditions the PyTorchJob reasons.
    members = load_members(fleet.sim.kubeconfig)
    try:
        copy = members["member-1"].get_job(PYTORCHJOBS, "team-a", "train")
        pods = members["member-1"].list_pods("training.kubeflow.org/job-name=train", namespace="team-a")
    finally:
        for member in members.values():
            member.close()
    types = {p["metadata"]["labels"]["training.kubeflow.org/replica-type"] for p in pods}
    assert types == {"master", "worker"}
    assert copy["status"]["conditions"][0]["reason"] == "PyTorchJobCreated"

    fleet.wait_for(
        "the PyTorchJob to succeed and the queued one to run",
        lambda: (
            _state(fleet, FLEET_PYTORCHJOB, "train") == "Succeeded"
            and _state(fleet, FLEET_PYTORCHJOB, "later") in ("Running", "Succeeded")
        ),
        60,
    )
    later = fleet.objects.get(FLEET_PYTORCHJOB, "team-a", "later")
    assert current_state(later) in ("Running", "Succeeded")  # admitted once a slot was free
    done = fleet.objects.get(FLEET_PYTORCHJOB, "team-a", "train")
    assert done["status"]["conditions"][-1]["reason"] == "PyTorchJobSucceeded"
    assert set(done["status"]["replicaStatuses"]) == {"Master", "Worker"}
    events = {e["reason"]: e for e in events_for(fleet.objects, done)}
    assert "Dispatched" in events and "Admitted" not in events  # its condition says it (issue 30)
    binding = events["ScheduleBindingSucceed"]  # as ACK One's scheduler words it
    assert binding["message"].endswith("Result: {member-1:0,[{master 1} {worker 2}]}")
    assert _state(fleet, FLEET_ASCENDJOB, "train") == "Running"  # untouched by its namesake


def _copies(fleet: RunningFleet, uid: str) -> list[str]:
    """The members that hold a copy of the PyTorchJob of fleet uid ``uid`` now."""
    members = load_members(fleet.sim.kubeconfig)
    try:
        return sorted(
            name
            for name, member in members.items()
            if member.list_jobs(PYTORCHJOBS, f"{JOB_UID_LABEL}={uid}", namespace="team-a")
        )
    finally:
        for member in members.values():
            member.close()


def test_a_pytorchjob_is_failed_over_from_a_member_that_goes_down(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(
        members={"member-1": MODULE_POOL, "member-3": A800_POOL},
        workers=2,
        tree=TREE,
        syncer_args=FAST_PROBES,
    )
    policy = {
        "apiVersion": "policy.one.alibabacloud.com/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "pytorch", "namespace": "team-a"},
        "spec": {
            "failover": {
                "application": {"decisionConditions": {"tolerationSeconds": 2}, "purgeMode": "Immediately"}
            },
            "resourceSelectors": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}],
        },
    }
    fleet.objects.create(PROPAGATION_POLICY, policy)
    submitted = fleet.submit(pytorchjob("mover", workers=1, seconds=600))
    uid = str(submitted["metadata"]["uid"])
    fleet.wait_for("the PyTorchJob to run", lambda: _state(fleet, FLEET_PYTORCHJOB, "mover") == "Running", 30)
    first = cluster_of(fleet.objects.get(FLEET_PYTORCHJOB, "team-a", "mover"))
    assert first is not None
    down_at = time.monotonic()
    fleet.sim.fault(first, "down")

    def moved() -> bool:
        obj = fleet.objects.get(FLEET_PYTORCHJOB, "team-a", "mover")
        return cluster_of(obj) not in (None, first) and current_state(obj) == "Running"

    fleet.wait_for("the PyTorchJob to run on the other member", moved, 40)
    assert time.monotonic() - down_at > 2.0, "failed over before the toleration"
    obj = fleet.objects.get(FLEET_PYTORCHJOB, "team-a", "mover")
    assert obj["status"]["attempt"] == 2
    assert "ClusterFailover" in event_counts(fleet, obj)
    fleet.sim.fault(first, "up")
    second = cluster_of(obj)
    fleet.wait_for("the stale copy to be purged", lambda: _copies(fleet, uid) == [second], 30)
    assert fleet.ledger.usages(["root"])["root"]["huawei.com/Ascend910"] == 16, "quota charged once"


def test_a_pytorchjob_that_fails_by_its_own_code_is_retried_then_failed(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(members={"member-1": MODULE_POOL, "member-3": A800_POOL}, workers=1, tree=TREE)
    policy = {
        "apiVersion": "policy.one.alibabacloud.com/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "pytorch", "namespace": "team-a"},
        "spec": {
            "failover": {"backoffLimit": 1, "backoffSeconds": 0.3},
            "resourceSelectors": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}],
        },
    }
    fleet.objects.create(PROPAGATION_POLICY, policy)
    doomed = pytorchjob("doomed", workers=1, seconds=0.1)
    doomed["metadata"]["annotations"]["sim.fleet.io/exit-code"] = "1"  # fails by its own code, anywhere
    doomed["spec"]["runPolicy"]["backoffLimit"] = 0  # no restart in the member: the attempt fails
    fleet.submit(doomed)
    fleet.wait_for(
        "the job to fail for good", lambda: _state(fleet, FLEET_PYTORCHJOB, "doomed") == "Failed", 60
    )
    obj = fleet.objects.get(FLEET_PYTORCHJOB, "team-a", "doomed")
    # Each attempt failed in its member with the training operator's reason, then retries ran out.
    assert (condition(obj, "Failed") or {})["reason"] == "BackoffLimitExceeded"
    assert settled_count(fleet, obj, "PyTorchJobFailed", 2) == 2, "each attempt's failure, in Events"
    assert obj["status"]["failures"] == 2
    fleet.wait_for(  # stored Failed first, then released: a reader may see the first alone
        "its quota released",
        lambda: fleet.ledger.usages(["root"])["root"].get("huawei.com/Ascend910", 0) == 0,
        10,
    )


def test_jobs_of_two_kinds_with_one_name_are_kept_on_different_members(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    """Their operators would name their pods alike (``twin-master-0``): one member cannot run both."""
    fleet = fleet_factory(members={"member-1": MODULE_POOL, "member-3": A800_POOL}, workers=1, tree=TREE)
    ascend = job("twin", workers=0, npus=8, selector={"host-arch": "huawei-arm"}, exclusive=False)
    ascend["metadata"]["namespace"] = "team-a"
    ascend["metadata"]["annotations"] = {"sim.fleet.io/duration-seconds": "60"}
    fleet.submit(ascend)
    fleet.submit(pytorchjob("twin", workers=0, seconds=60.0))

    def both_running() -> bool:
        return (
            _state(fleet, FLEET_ASCENDJOB, "twin") == "Running"
            and _state(fleet, FLEET_PYTORCHJOB, "twin") == "Running"
        )

    fleet.wait_for("both jobs named twin to run", both_running, 40)
    members = {
        cluster_of(fleet.objects.get(FLEET_ASCENDJOB, "team-a", "twin")),
        cluster_of(fleet.objects.get(FLEET_PYTORCHJOB, "team-a", "twin")),
    }
    assert members == {"member-1", "member-3"}


def test_a_pytorchjob_its_member_cannot_schedule_is_failed_over_by_what_its_pods_say(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    """Kubeflow's operator never says on the job that its gang waits: the copy stays Created
    (PyTorchJobCreated) and only its pods say it (``PodScheduled`` False, ``Unschedulable``). The
    syncer reads them and fails the job over past the toleration, avoiding that member; the
    dispatcher then places it where it fits. The job is put on a member too small for it by hand
    (no dispatcher yet), as a member whose capacity changed after the decision would be."""
    wide_pool = {**MODULE_POOL, "prefix": "wide", "count": 8}
    fleet = fleet_factory(
        members={"member-1": MODULE_POOL, "member-2": wide_pool},
        workers=1,
        dispatchers=0,
        tree=TREE,
        syncer_args=FAST_PROBES,
    )
    policy = {
        "apiVersion": "policy.one.alibabacloud.com/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "pytorch", "namespace": "team-a"},
        "spec": {
            "failover": {
                "application": {"decisionConditions": {"tolerationSeconds": 2}, "purgeMode": "Immediately"}
            },
            "resourceSelectors": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}],
        },
    }
    fleet.objects.create(PROPAGATION_POLICY, policy)
    stored = fleet.submit(pytorchjob("wide", workers=4, seconds=600))  # 5 x 8 NPUs; member-1 has 4 nodes
    key, uid = job_key(stored), str(stored["metadata"]["uid"])
    assert fleet.ledger.admit_pending_many([key])[0].admitted

    def on_member_1(obj: dict[str, Any]) -> dict[str, Any]:
        return admit(obj, "member-1", attempt=1)

    assert fleet.objects.mutate(FLEET_PYTORCHJOB, "team-a", "wide", on_member_1) is not None
    members = load_members(fleet.sim.kubeconfig)
    try:
        members["member-1"].create_job(PYTORCHJOBS, "team-a", torch_adapter.member_copy(stored, uid, 1))
    finally:
        for member in members.values():
            member.close()

    def failed_over() -> bool:
        obj = fleet.objects.get(FLEET_PYTORCHJOB, "team-a", "wide")
        return "ApplicationFailover" in event_counts(fleet, obj)

    fleet.wait_for("the job to be failed over from member-1", failed_over, 30)
    obj = fleet.objects.get(FLEET_PYTORCHJOB, "team-a", "wide")
    assert "PodGroupPending" not in event_counts(fleet, obj)  # nothing on the job said it waited
    moved = condition(obj, "Queued")
    assert moved is not None and moved["reason"] == "ApplicationFailover"
    assert "its pods waited in member-1 for 2" in moved["message"]
    assert "is unschedulable" in moved["message"] and "Insufficient huawei.com/Ascend910" in moved["message"]
    assert "member-1" in (obj["status"].get("excluded") or {}) or "member-1" in (
        obj["status"].get("excludedFirmly") or {}
    )
    fleet.wait_for("the copy on member-1 to be purged", lambda: _copies(fleet, uid) == [], 30)

    fleet.procs.start("dispatcher", "dispatcher")
    fleet.wait_for(
        "the job to run on member-2",
        lambda: (
            cluster_of(fleet.objects.get(FLEET_PYTORCHJOB, "team-a", "wide")) == "member-2"
            and _state(fleet, FLEET_PYTORCHJOB, "wide") == "Running"
        ),
        40,
    )


def _policy(backoff_limit: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy.one.alibabacloud.com/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "kubeflow", "namespace": "team-a"},
        "spec": {
            "failover": {"backoffLimit": backoff_limit, "backoffSeconds": 0.3},
            "resourceSelectors": [
                {"apiVersion": "kubeflow.org/v1", "kind": "TFJob"},
                {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob"},
            ],
        },
    }


def _replica(container: str, replicas: int, *, npus: int = 0, restart: str | None = None) -> dict[str, Any]:
    resources = {"limits": {"huawei.com/Ascend910": str(npus)}} if npus else {"requests": {"cpu": "1"}}
    spec: dict[str, Any] = {
        "replicas": replicas,
        "template": {
            "spec": {
                "containers": [{"name": container, "image": "busybox", "resources": resources}],
                "nodeSelector": {"host-arch": "huawei-arm"},
            }
        },
    }
    if restart:
        spec["restartPolicy"] = restart
    return spec


def tfjob(name: str, *, restart: str, seconds: float, exit_code: int = 0) -> dict[str, Any]:
    """A TFJob as Kubeflow's users write it: a Chief and a Worker of 8 NPUs, a cpu PS."""
    annotations = {"sim.fleet.io/duration-seconds": str(seconds)}
    if exit_code:
        annotations["sim.fleet.io/exit-code"] = str(exit_code)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": "team-a", "annotations": annotations},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "Running"},
            "tfReplicaSpecs": {
                "Chief": _replica("tensorflow", 1, npus=8, restart=restart),
                "PS": _replica("tensorflow", 1),
                "Worker": _replica("tensorflow", 1, npus=8, restart=restart),
            },
        },
    }


def mpijob(name: str, *, seconds: float, exit_code: int = 0) -> dict[str, Any]:
    """An MPIJob v2beta1: a cpu launcher (restartPolicy Never, no retry in its Job) and one
    8-NPU worker."""
    annotations = {"sim.fleet.io/duration-seconds": str(seconds)}
    if exit_code:
        annotations["sim.fleet.io/exit-code"] = str(exit_code)
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": "team-a", "annotations": annotations},
        "spec": {
            "slotsPerWorker": 8,
            "runPolicy": {"backoffLimit": 0},
            "mpiReplicaSpecs": {
                "Launcher": _replica("mpi-launcher", 1, restart="Never"),
                "Worker": _replica("mpi-worker", 1, npus=8),
            },
        },
    }


FLEET_TFJOB = fleet_kind(tf_adapter)
FLEET_MPIJOB = fleet_kind(mpi_adapter)


def event_counts(fleet: RunningFleet, obj: dict[str, Any]) -> dict[str, int]:
    """The job's Events by reason, with how often each happened (its history)."""
    return {str(e["reason"]): int(e.get("count") or 1) for e in events_for(fleet.objects, obj)}


def settled_count(fleet: RunningFleet, obj: dict[str, Any], reason: str, expected: int) -> int:
    """How often ``reason`` was recorded for ``obj``, once it reached ``expected`` or 10 s passed.

    A role writes a state before its Event (as kube's recorder sends Events after the change), so
    a reader that saw the state may see its Event a moment later; the count must settle, not grow
    past ``expected``."""
    deadline = time.monotonic() + 10
    while (count := event_counts(fleet, obj).get(reason, 0)) < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return count


def test_a_tfjob_restarts_in_its_member_by_its_exit_code_rule_and_fails_over_by_its_own_code(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    """A chief killed (137) under ExitCode is made again in its member (TFJobRestarting, the same
    attempt) and the job ends TFJobSucceeded; a chief exiting by its own code (2) fails the job in
    its member (TFJobFailed), which Fleet retries elsewhere until its backoffLimit."""
    fleet = fleet_factory(members={"member-1": MODULE_POOL, "member-3": A800_POOL}, workers=1, tree=TREE)
    fleet.objects.create(PROPAGATION_POLICY, _policy(backoff_limit=1))
    fleet.submit(tfjob("killed", restart="ExitCode", seconds=5))
    fleet.wait_for("the TFJob to run", lambda: _state(fleet, FLEET_TFJOB, "killed") == "Running", 30)
    member = cluster_of(fleet.objects.get(FLEET_TFJOB, "team-a", "killed"))
    assert member is not None
    fleet.sim.fault(member, "fail-job", job="team-a/killed")
    fleet.wait_for("the TFJob to succeed", lambda: _state(fleet, FLEET_TFJOB, "killed") == "Succeeded", 40)
    done = fleet.objects.get(FLEET_TFJOB, "team-a", "killed")
    assert done["status"]["attempt"] == 1 and cluster_of(done) == member  # restarted where it ran
    assert done["status"]["conditions"][-1]["reason"] == "TFJobSucceeded"
    assert done["status"]["replicaStatuses"] == {
        "Chief": {"succeeded": 1},
        "PS": {"succeeded": 1},
        "Worker": {"succeeded": 1},
    }
    reasons = {e["reason"] for e in events_for(fleet.objects, done)}
    assert "TFJobRestarting" in reasons and "ApplicationFailover" not in reasons

    fleet.submit(tfjob("coded", restart="ExitCode", seconds=0.2, exit_code=2))
    fleet.wait_for("the TFJob to fail for good", lambda: _state(fleet, FLEET_TFJOB, "coded") == "Failed", 60)
    failed = fleet.objects.get(FLEET_TFJOB, "team-a", "coded")
    assert (condition(failed, "Failed") or {})["reason"] == "BackoffLimitExceeded"
    assert settled_count(fleet, failed, "TFJobFailed", 2) == 2
    assert failed["status"]["failures"] == 2
    fleet.wait_for(
        "the quota to be returned",
        lambda: fleet.ledger.usages(["root"])["root"].get("huawei.com/Ascend910", 0) == 0,
        10,
    )


def test_an_mpijob_ends_with_its_launcher_and_a_failing_launcher_fails_it_over(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(members={"member-1": MODULE_POOL, "member-3": A800_POOL}, workers=1, tree=TREE)
    fleet.objects.create(PROPAGATION_POLICY, _policy(backoff_limit=1))
    fleet.submit(mpijob("pi", seconds=2))
    fleet.submit(mpijob("broken", seconds=0.2, exit_code=1))
    fleet.wait_for(
        "both MPIJobs to end",
        lambda: (
            _state(fleet, FLEET_MPIJOB, "pi") == "Succeeded"
            and _state(fleet, FLEET_MPIJOB, "broken") == "Failed"
        ),
        60,
    )
    done = fleet.objects.get(FLEET_MPIJOB, "team-a", "pi")
    assert [c["reason"] for c in done["status"]["conditions"][-3:]] == [
        "MPIJobCreated",
        "MPIJobRunning",
        "MPIJobSucceeded",
    ]
    # The launcher decided; the worker (sshd) serves on: cleanPodPolicy is None by default.
    assert done["status"]["replicaStatuses"] == {"Launcher": {"succeeded": 1}, "Worker": {"active": 1}}
    broken = fleet.objects.get(FLEET_MPIJOB, "team-a", "broken")
    # The launcher's batch Job failed past its backoffLimit 0, in two members' attempts.
    assert (condition(broken, "Failed") or {})["reason"] == "BackoffLimitExceeded"
    assert settled_count(fleet, broken, "BackoffLimitExceeded/", 2) == 2  # the launcher's, each attempt
    assert broken["status"]["failures"] == 2
