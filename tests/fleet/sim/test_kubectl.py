"""The real ``kubectl`` against ``fleet sim`` (the default topology): what an operator would type."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet.sim.builders import SAMPLE
from tests.support.sim import RunningSim, running_sim

pytestmark = pytest.mark.integration

KUBECTL = shutil.which("kubectl")
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
MEMBER = "member-2"  # the card-910b-2 member the sample job asks for


@pytest.fixture(scope="module")
def fleet_sim() -> Iterator[RunningSim]:
    if KUBECTL is None:
        if IN_CI:
            pytest.fail("kubectl is not installed; CI must run the kubectl tests")
        pytest.skip("kubectl is not installed")
    with running_sim() as running:
        yield running


def kubectl(sim: RunningSim, *args: str, check: bool = True) -> str:
    assert KUBECTL is not None
    done = subprocess.run(
        [KUBECTL, "--kubeconfig", str(sim.kubeconfig), "--context", MEMBER, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "KUBECACHEDIR": str(sim.kubeconfig.parent / "cache")},
    )
    if check:
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def wait_for(sim: RunningSim, jsonpath: str, wanted: str, *args: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while (got := kubectl(sim, "get", *args, "-o", f"jsonpath={jsonpath}", check=False)) != wanted:
        assert time.monotonic() < deadline, f"{jsonpath} is {got!r}, not {wanted!r}"
        time.sleep(0.1)


def test_get_nodes_looks_like_a_cluster(fleet_sim: RunningSim) -> None:
    lines = kubectl(fleet_sim, "get", "nodes").splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert len(lines) == 5
    assert all(line.split()[1] == "Ready" for line in lines[1:])
    labels = kubectl(
        fleet_sim, "get", "nodes", "-l", "accelerator-type=card-910b-2,host-arch=huawei-arm", "-o", "name"
    )
    assert len(labels.split()) == 4


def test_the_sample_job_from_apply_to_delete(fleet_sim: RunningSim, tmp_path: Path) -> None:
    assert "created" in kubectl(fleet_sim, "apply", "-f", str(SAMPLE))
    wait_for(fleet_sim, "{.status.conditions[-1].type}", "Running", "acjob", "default-test-pytorch")

    table = kubectl(fleet_sim, "get", "acjob").splitlines()
    assert table[0].split() == ["NAME", "STATE", "AGE"]
    assert table[1].split()[:2] == ["default-test-pytorch", "Running"]

    pods = kubectl(fleet_sim, "get", "pods", "-o", "wide", "-l", "job-name=default-test-pytorch").splitlines()
    assert len(pods) == 3
    assert len({line.split()[6] for line in pods[1:]}) == 2  # NODE column: one pod per node

    described = kubectl(fleet_sim, "describe", "acjob", "default-test-pytorch")
    assert "Events:" in described
    assert "JobRunning" in described
    assert "Scheduled" in described

    log = tmp_path / "watch.log"
    with log.open("w") as out:
        watcher = subprocess.Popen(
            [
                KUBECTL or "kubectl",
                "--kubeconfig",
                str(fleet_sim.kubeconfig),
                "--context",
                MEMBER,
                "get",
                "acjob",
                "-w",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 10
        while "Running" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        fleet_sim.fault(MEMBER, "fail-job", job="default/default-test-pytorch")
        while "Failed" not in log.read_text():
            assert time.monotonic() < deadline + 10, log.read_text()
            time.sleep(0.05)
    finally:
        watcher.terminate()
        watcher.wait(10)
    lines = [line.split() for line in log.read_text().splitlines()]
    assert ["default-test-pytorch", "Failed"] in [line[:2] for line in lines]

    assert "deleted" in kubectl(fleet_sim, "delete", "acjob", "default-test-pytorch")
    deadline = time.monotonic() + 10
    while kubectl(fleet_sim, "get", "pods", "-l", "job-name=default-test-pytorch", "-o", "name"):
        assert time.monotonic() < deadline, "the job's pods were not deleted"
        time.sleep(0.1)


def test_label_and_cordon_a_node(fleet_sim: RunningSim) -> None:
    node = "m2-a300t-a2-3"
    assert "labeled" in kubectl(fleet_sim, "label", "node", node, "team=vision")
    assert kubectl(fleet_sim, "get", "nodes", "-l", "team=vision", "-o", "name").split() == [f"node/{node}"]
    assert "cordoned" in kubectl(fleet_sim, "cordon", node)
    status = {
        line.split()[0]: line.split()[1] for line in kubectl(fleet_sim, "get", "nodes").splitlines()[1:]
    }
    assert status[node] == "Ready,SchedulingDisabled"
    assert "uncordoned" in kubectl(fleet_sim, "uncordon", node)
    wait_for(fleet_sim, "{.spec.unschedulable}", "", "node", node)



def test_kubectl_create_namespace_takes_a_dns_label_only(fleet_sim: RunningSim) -> None:
    """As on a real cluster: a dotted namespace name is refused with the field and the rule,
    and nothing is created; a label is created."""
    assert KUBECTL is not None
    command = [KUBECTL, "--kubeconfig", str(fleet_sim.kubeconfig), "--context", MEMBER]
    refused = subprocess.run(
        [*command, "create", "namespace", "team.a"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode != 0
    assert 'metadata.name: Invalid value: "team.a": must not contain dots' in refused.stderr
    assert "team.a" not in kubectl(fleet_sim, "get", "namespaces", "-o", "name")
    assert "created" in kubectl(fleet_sim, "create", "namespace", "team-a")


T9K_SAMPLES = SAMPLE.parent


def test_the_t9k_samples_run_on_a_member_by_cpu_and_memory(fleet_sim: RunningSim) -> None:
    """T9k's kinds as their own CRDs serve them: names and the PHASE column; the pods placed by
    cpu and memory alone; MPIJob named by its group beside Kubeflow's kind of the same name."""
    for name in ("t9k-tensorflowtrainingjob.yaml", "t9k-mpijob.yaml"):
        assert "created" in kubectl(fleet_sim, "apply", "-f", str(T9K_SAMPLES / name))
    wait_for(fleet_sim, "{.status.phase}", "Running", "tensorflowtrainingjob", "tensorflow-example")
    wait_for(fleet_sim, "{.status.phase}", "Running", "mpijobs.batch.tensorstack.dev", "mpi-example")
    table = kubectl(fleet_sim, "get", "tensorflowtrainingjobs").splitlines()
    assert table[0].split() == ["NAME", "PHASE", "AGE"]
    assert table[1].split()[:2] == ["tensorflow-example", "Running"]
    pods = kubectl(fleet_sim, "get", "pods", "-l", "batch.tensorstack.dev/job-name=mpi-example", "-o", "name")
    assert sorted(pods.split()) == ["pod/mpi-example-launcher"] + [
        f"pod/mpi-example-worker-{i}" for i in range(5)
    ]
    aggregate = kubectl(
        fleet_sim,
        "get",
        "tensorflowtrainingjob",
        "tensorflow-example",
        "-o",
        "jsonpath={.status.aggregate.running}",
    )
    assert aggregate == "4"
    for kind, name in (
        ("tensorflowtrainingjob", "tensorflow-example"),
        ("mpijobs.batch.tensorstack.dev", "mpi-example"),
    ):
        assert "deleted" in kubectl(fleet_sim, "delete", kind, name)
    deadline = time.monotonic() + 10
    while kubectl(fleet_sim, "get", "pods", "-l", "batch.tensorstack.dev/job-name", "-o", "name"):
        assert time.monotonic() < deadline, "the jobs' pods were not deleted"
        time.sleep(0.1)
