"""An admin lowers a team's ``max-jobs`` below what it runs, with kubectl against ``fleet up``
(issue 33, req. 4): the apply is accepted with a Warning naming the node, the field and the
figures (no refusal, so kubectl prints no patch), the running jobs stay, and a new job waits
until use falls below the new limit, as Kubernetes' ResourceQuota treats a hard limit below use."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fleet.local.test_up import ROOT, kubectl_env, start_up, stop_up, table_rows, wait_ready

pytestmark = pytest.mark.integration

SAMPLE = ROOT / "config/samples/pytorch_multinodes_acjob_910b.yaml"
TREE = ROOT / "config/samples/elasticquotatree.yaml"


def kubectl(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["kubectl", *args], input=stdin, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout + done.stderr


def states(env: dict[str, str]) -> dict[str, str]:
    return {row["NAME"]: row["STATE"] for row in table_rows(kubectl(env, "get", "acjob"))}


def until(check: Callable[[], bool], what: str, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {within:g}s: {what}")
        time.sleep(0.3)


@pytest.mark.timeout(240)
def test_lowering_max_jobs_below_use_keeps_running_jobs_and_holds_new_ones(tmp_path: Path) -> None:
    up = start_up(tmp_path)
    try:
        env = kubectl_env(up.kubeconfig)
        wait_ready(up, env)
        two_slots = TREE.read_text().replace("kube-queue/max-jobs: 1 ", "kube-queue/max-jobs: 2 ")
        assert two_slots != TREE.read_text()
        kubectl(env, "apply", "-f", "-", stdin=two_slots)
        for name in ("one", "two"):
            kubectl(env, "apply", "-f", "-", stdin=SAMPLE.read_text().replace("default-test-pytorch", name))
        until(lambda: states(env) == {"one": "Running", "two": "Running"}, "one and two Running")

        shrunk = kubectl(env, "apply", "-f", str(TREE))
        assert "elasticquotatree.scheduling.sigs.k8s.io/elasticquotatree configured" in shrunk
        assert (
            "Warning: root/child-2: max.kube-queue/max-jobs 1 is below the 2 in use: the admitted jobs keep "
            "running, new ones wait until use falls below it"
        ) in shrunk
        assert "patch" not in shrunk

        kubectl(env, "apply", "-f", "-", stdin=SAMPLE.read_text().replace("default-test-pytorch", "three"))
        until(lambda: states(env).get("three") == "Queued", "three Queued")
        described = kubectl(env, "describe", "acjob", "three")
        assert "quota root/child-2: kube-queue/max-jobs 2/1 in use" in described
        assert states(env) == {"one": "Running", "two": "Running", "three": "Queued"}

        kubectl(env, "delete", "acjob", "one")
        time.sleep(2)  # one slot in use of one: three still waits
        assert states(env) == {"two": "Running", "three": "Queued"}
        kubectl(env, "delete", "acjob", "two")
        until(lambda: states(env) == {"three": "Running"}, "three Running once use fell below max")
    finally:
        assert stop_up(up) == 0, up.log()
