"""T9k's samples end to end: ``fleet up`` as a process, driven only with the real kubectl.

The admin applies the seed's quota tree (``default`` is bound to ``child-2``, one job at a time);
a user applies T9k's two samples as the seeds write them (``config/samples/t9k-*.yaml``, cpu and
memory only). The TensorFlowTrainingJob runs; the MPIJob waits for the quota. Pausing the first
(``kubectl patch``, as T9k lets a user flip ``spec.runMode.pause.enabled``) gives its quota back
and deletes its copy in the member, so the MPIJob runs; resumed, the first waits for the quota
again, and runs once the MPIJob has finished. Both end ``Succeeded``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fleet.local.test_up import KUBECTL, ROOT, Up, kubectl_env, stop_up, table_rows, wait_ready

pytestmark = pytest.mark.integration

SAMPLES = ROOT / "config" / "samples"
TF = ("tensorflowtrainingjob", "tensorflow-example")
MPI = ("mpijobs.batch.tensorstack.dev", "mpi-example")
#: How long a simulated job runs: long enough to watch the MPIJob hold the quota.
JOB_SECONDS = "6"


def start_up(tmp_path: Path) -> Up:
    kubeconfig = tmp_path / "fleet.kubeconfig"
    state_dir = tmp_path / "state"
    output = tmp_path / "up.out"
    with output.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable, "-c", "from fleet.cli import main; main(prog_name='fleet')",
                "up", "--kubeconfig", str(kubeconfig), "--state-dir", str(state_dir),
                "--job-seconds", JOB_SECONDS,
            ],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    return Up(process, kubeconfig, state_dir, output)


@pytest.fixture
def fleet_up(tmp_path: Path) -> Iterator[tuple[Up, dict[str, str]]]:
    up = start_up(tmp_path)
    try:
        env = kubectl_env(up.kubeconfig)
        wait_ready(up, env)
        yield up, env
    finally:
        code = stop_up(up)
    assert code == 0, up.log()


def kubectl(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [KUBECTL, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


def row(env: dict[str, str], job: tuple[str, str]) -> dict[str, str]:
    rows = [r for r in table_rows(kubectl(env, "get", job[0])) if r.get("NAME") == job[1]]
    return rows[0] if rows else {}


def eventually(
    what: str, check: Callable[[], bool], up: Up, env: dict[str, str], within: float = 40.0
) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            overview = "\n".join(kubectl(env, "get", kind, "-o", "wide") for kind, _ in (TF, MPI))
            pytest.fail(f"{what} not seen in {within:g}s:\n{overview}\n--- fleet up ---\n{up.log()}")
        time.sleep(0.3)


def test_t9k_samples_run_pause_gives_the_quota_back_and_resume_takes_it_again(
    fleet_up: tuple[Up, dict[str, str]],
) -> None:
    up, env = fleet_up
    kubectl(env, "apply", "-f", str(SAMPLES / "elasticquotatree.yaml"))
    assert "created" in kubectl(env, "apply", "-f", str(SAMPLES / "t9k-tensorflowtrainingjob.yaml"))
    eventually("the TensorFlowTrainingJob Running", lambda: row(env, TF).get("STATE") == "Running", up, env)
    member = row(env, TF)["CLUSTER"]
    copy = kubectl(
        env, "--context", member, "get", "tensorflowtrainingjob", "-o", "jsonpath={.items[*].status.phase}"
    )
    assert copy == "Running"
    fleet_copy = kubectl(
        env, "get", "tensorflowtrainingjob", TF[1], "-o", "jsonpath={.status.aggregate.running}"
    )
    assert fleet_copy == "4"  # status.aggregate mirrored from the member

    assert "created" in kubectl(env, "apply", "-f", str(SAMPLES / "t9k-mpijob.yaml"))
    eventually("the MPIJob Queued", lambda: row(env, MPI).get("STATE") == "Queued", up, env)
    assert "kube-queue/max-jobs" in kubectl(env, "describe", *MPI)

    pause = '{"spec":{"runMode":{"pause":{"enabled":%s}}}}'
    kubectl(env, "patch", *TF, "--type", "merge", "-p", pause % "true")
    eventually("the TensorFlowTrainingJob Paused", lambda: row(env, TF).get("STATE") == "Paused", up, env)
    eventually("the MPIJob Running in its place", lambda: row(env, MPI).get("STATE") == "Running", up, env)
    eventually(
        "the paused job's copy deleted in its member",
        lambda: not kubectl(env, "--context", member, "get", "tensorflowtrainingjob", "-o", "name").strip(),
        up,
        env,
    )

    kubectl(env, "patch", *TF, "--type", "merge", "-p", pause % "false")
    eventually(
        "the TensorFlowTrainingJob Queued again", lambda: row(env, TF).get("STATE") == "Queued", up, env
    )
    eventually("the MPIJob Succeeded", lambda: row(env, MPI).get("STATE") == "Succeeded", up, env)
    eventually(
        "the TensorFlowTrainingJob Succeeded", lambda: row(env, TF).get("STATE") == "Succeeded", up, env
    )
    phase = kubectl(env, "get", *TF, "-o", "jsonpath={.status.phase}")
    assert phase == "Succeeded"
