"""Volcano's and Kubernetes' Jobs through one running fleet, applied with the real kubectl.

Volcano: a vcjob runs on a member under the simulator's Volcano job controller and comes back
``Completed`` (``Succeeded`` at the fleet, with Volcano's ``status.state`` and counts); one its
policies restarted until ``maxRetry`` ran out fails over to another member; one whose pods failed
without a policy ends ``Failed`` where it ran, never retried.

Kubernetes: a Job written for Kueue (its queue label, ``suspend: true``) is admitted as Kueue
admits it, runs its pod set under the simulator's job controller and comes back ``Succeeded``; a
plain Job applied suspended waits at the fleet until its owner turns ``suspend`` off; one that
used up its backoff limit fails over; one a ``FailJob`` rule failed is not retried. Both kinds
share one fleet (the suite's time)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleet.endpoint.members import members_from
from fleet.jobs import attempt_of, cluster_of, current_state
from fleet.kinds import fleet_kind
from fleet.members import load_members
from fleet.state import events_for
from fleet.workloads import member_resource
from fleet.workloads.batch_jobs import BATCH_JOB, batch_job
from fleet.workloads.volcano_jobs import vcjob
from tests.fleet.dispatch.conftest import MODULE_POOL, RunningFleet
from tests.support.fleet_api import FleetApiThread
from tests.support.kubectl import Kubectl, require_kubectl, table

FLEET_VCJOB = fleet_kind(vcjob)
FLEET_JOB = fleet_kind(batch_job)


def vcjob_manifest(name: str, *, exit_code: int = 0, policies: str = "") -> str:
    """A vcjob as MindCluster's users write one: ring-controller.atlas, the ssh/svc plugins, one
    task of two 8-NPU pods on Atlas 800T A2 nodes."""
    return f"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: {name}
  namespace: team-a
  labels:
    ring-controller.atlas: ascend-910b
  annotations:
    sim.fleet.io/duration-seconds: "1"
    sim.fleet.io/exit-code: "{exit_code}"
spec:
  minAvailable: 2
  schedulerName: volcano
  maxRetry: 1
  plugins:
    ssh: []
    svc: []
{policies}
  tasks:
  - name: trainer
    replicas: 2
    template:
      metadata:
        labels:
          app: pytorch
          ring-controller.atlas: ascend-910b
      spec:
        restartPolicy: Never
        nodeSelector:
          accelerator-type: module-910b-8
        containers:
        - name: pytorch
          image: pytorch-npu:2.1.0
          command: ["torchrun", "--nnodes=2", "train.py"]
          resources:
            requests:
              huawei.com/Ascend910: 8
            limits:
              huawei.com/Ascend910: 8
"""


RESTART_ON_FAILURE = """  policies:
  - event: PodFailed
    action: RestartJob"""


def batch_manifest(
    name: str, *, exit_code: int = 0, extra: str = "", labels: str = "", suspend: bool = False
) -> str:
    """A Job as Kubernetes' and Kueue's docs write one: two pods of one 910B NPU each."""
    return f"""
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: team-a
  labels:
    app: sample{labels}
  annotations:
    sim.fleet.io/duration-seconds: "1"
    sim.fleet.io/exit-code: "{exit_code}"
spec:
  parallelism: 2
  completions: 2
  suspend: {str(suspend).lower()}
{extra}
  template:
    spec:
      containers:
      - name: main
        image: busybox:1.36
        command: ["sh", "-c", "sleep 2"]
        resources:
          requests:
            cpu: "1"
            huawei.com/Ascend910: 1
          limits:
            huawei.com/Ascend910: 1
      restartPolicy: Never
"""


KUEUE = "\n    kueue.x-k8s.io/queue-name: team-a"
NO_RETRY = "  backoffLimit: 0"
FATAL = """  podFailurePolicy:
    rules:
    - action: FailJob
      onExitCodes:
        operator: In
        values: [42]"""


def test_vcjobs_and_jobs_run_hold_fail_over_and_fail_where_they_ran(
    fleet_factory: Callable[..., RunningFleet], tmp_path: Path
) -> None:
    binary = require_kubectl()
    fleet = fleet_factory(members={"member-1": MODULE_POOL, "member-2": MODULE_POOL}, workers=1)
    with FleetApiThread(fleet.client, members=members_from(fleet.sim.kubeconfig)) as api:
        kubectl = Kubectl(binary, api.kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")
        docs = [
            vcjob_manifest("trains"),
            vcjob_manifest("flaky", exit_code=137, policies=RESTART_ON_FAILURE),
            vcjob_manifest("buggy", exit_code=1),
            batch_manifest("kueue-job", labels=KUEUE, suspend=True),
            batch_manifest("held", suspend=True),
            batch_manifest("retried", exit_code=137, extra=NO_RETRY),
            batch_manifest("fatal", exit_code=42, extra=FATAL),
        ]
        (tmp_path / "jobs.yaml").write_text("---".join(docs))
        applied = kubectl("apply", "-f", str(tmp_path / "jobs.yaml")).stdout
        for name in ("trains", "flaky", "buggy"):
            assert f"job.batch.volcano.sh/{name} created" in applied, applied
        for name in ("kueue-job", "held", "retried", "fatal"):
            assert f"job.batch/{name} created" in applied, applied
        check_vcjobs(fleet, kubectl)
        check_jobs(fleet, kubectl)


def check_vcjobs(fleet: RunningFleet, kubectl: Kubectl) -> None:
    def obj(name: str) -> dict[str, Any]:
        return fleet.objects.get(FLEET_VCJOB, "team-a", name)

    fleet.wait_for("trains Running", lambda: current_state(obj("trains")) in ("Running", "Succeeded"), 60)
    fleet.wait_for("trains Succeeded", lambda: current_state(obj("trains")) == "Succeeded", 60)
    trains = obj("trains")
    assert trains["status"]["state"]["phase"] == "Completed"
    assert trains["status"]["succeeded"] == 2 and trains["status"]["minAvailable"] == 2
    assert cluster_of(trains) in ("member-1", "member-2") and attempt_of(trains) == 1
    rows = table(kubectl("get", "vcjob", "-n", "team-a").stdout)
    assert next(r for r in rows if r[0] == "trains")[:2] == ["trains", "Succeeded"]

    fleet.wait_for("buggy Failed", lambda: current_state(obj("buggy")) == "Failed", 60)
    buggy = obj("buggy")
    assert attempt_of(buggy) == 1  # its pods' own failure: never retried
    assert buggy["status"]["state"]["phase"] == "Failed"
    assert buggy["status"]["conditions"][-1]["reason"] == "PodsFailed"

    fleet.wait_for("flaky placed a second time", lambda: attempt_of(obj("flaky")) >= 2, 90)
    flaky = obj("flaky")
    failovers = [e for e in events_for(fleet.objects, flaky) if e["reason"] == "ApplicationFailover"]
    assert failovers, [e["reason"] for e in events_for(fleet.objects, flaky)]
    assert "MaxRetryExceeded" in str(failovers[0].get("message")), failovers[0]


def check_jobs(fleet: RunningFleet, kubectl: Kubectl) -> None:
    def obj(name: str) -> dict[str, Any]:
        return fleet.objects.get(FLEET_JOB, "team-a", name)

    fleet.wait_for("kueue-job Succeeded", lambda: current_state(obj("kueue-job")) == "Succeeded", 60)
    done = obj("kueue-job")
    assert done["status"]["succeeded"] == 2 and done["spec"]["suspend"] is True
    assert [
        c["type"] for c in done["status"]["conditions"] if c["type"] in ("SuccessCriteriaMet", "Complete")
    ] == [
        "SuccessCriteriaMet",
        "Complete",
    ]
    members = load_members(fleet.sim.kubeconfig)
    try:
        copy = members[cluster_of(done) or ""].get_job(member_resource(BATCH_JOB), "team-a", "kueue-job")
    finally:
        for member in members.values():
            member.close()
    assert copy["spec"]["suspend"] is False
    for resource in ("jobs", "jobs.batch", "job.batch/kueue-job"):  # Kubernetes' Job, not Volcano's
        listed = kubectl("get", resource, "-n", "team-a")
        rows = {r[0]: r for r in table(listed.stdout)}
        assert rows.get("kueue-job", [""])[1:2] == ["Succeeded"], (resource, listed.stdout, listed.stderr)

    assert current_state(obj("held")) == "Suspended" and cluster_of(obj("held")) is None
    kubectl(
        "patch",
        "job.batch",
        "held",
        "-n",
        "team-a",
        "--type",
        "merge",
        "-p",
        '{"spec":{"suspend":false}}',
    )
    fleet.wait_for("held Succeeded once resumed", lambda: current_state(obj("held")) == "Succeeded", 60)

    fleet.wait_for("fatal Failed", lambda: current_state(obj("fatal")) == "Failed", 60)
    fatal = obj("fatal")
    assert attempt_of(fatal) == 1 and fatal["status"]["conditions"][-1]["reason"] == "PodFailurePolicy"

    fleet.wait_for("retried placed a second time", lambda: attempt_of(obj("retried")) >= 2, 90)
    failovers = [e for e in events_for(fleet.objects, obj("retried")) if e["reason"] == "ApplicationFailover"]
    assert failovers and "BackoffLimitExceeded" in str(failovers[0].get("message")), failovers
