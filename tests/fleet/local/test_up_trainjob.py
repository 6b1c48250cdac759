"""The README's Trainer v2 walkthrough (a TrainJob on the sample torch-npu runtime, then a JobSet)
against ``fleet up``, with the real kubectl, line by line as written: the harness of
:mod:`tests.fleet.local.test_up`; a line the README says is refused must exit non-zero and say
why."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet.local.test_up import (
    BASH,
    ROOT,
    Step,
    Up,
    as_run_here,
    contains,
    has_row,
    kubectl_env,
    run_step,
    start_up,
    stop_up,
    wait_ready,
)
from tests.fleet.local.test_up_state import readme_block

pytestmark = pytest.mark.integration

TITLE = "### Walkthrough: a Kubeflow Trainer v2 TrainJob on a torch-npu runtime, and a JobSet"
#: How long a simulated job runs (``fleet up --job-seconds``, as the README starts it).
JOB_SECONDS = "45"
#: The line the README says is refused, and what kubectl must print.
REFUSED = (
    "kubectl apply -f config/samples/trainjob-torch-npu.yaml",
    ("spec.runtimeRef", "torch-npu-distributed", "not found"),
)

WALKTHROUGH: list[Step] = [
    Step("export KUBECONFIG=$PWD/fleet.kubeconfig", lambda _: True),
    Step("kubectl apply -f config/samples/elasticquotatree.yaml", contains("elasticquotatree")),
    Step(REFUSED[0], lambda _: False),  # before its runtime exists: refused (run_refused)
    Step(
        "kubectl apply -f config/samples/trainer-torch-npu-runtime.yaml",
        contains("clustertrainingruntime.trainer.kubeflow.org/torch-npu-distributed created"),
    ),
    Step(
        "kubectl apply -f config/samples/trainjob-torch-npu.yaml",
        contains("trainjob.trainer.kubeflow.org/qwen-sft created"),
    ),
    Step("kubectl get trainjob -w", has_row("qwen-sft", CLUSTER="member-1"), watch=True, within=60.0),
    Step(
        "kubectl --context member-1 get trainingruntime,jobset",
        contains("torch-npu-distributed", "qwen-sft", "TERMINALSTATE"),
    ),
    Step(
        "kubectl apply -f config/samples/jobset-ascend.yaml",
        contains("jobset.jobset.x-k8s.io/torch-npu-pretrain created"),
    ),
    Step(
        "kubectl get jobset torch-npu-pretrain -o jsonpath='{.status.replicatedJobsStatus}'",
        contains('"name"'),
        within=150.0,
    ),
]


#: The refused line's place: the TrainJob applied before its runtime.
REFUSED_AT = 2


def run_refused(env: dict[str, str], kubeconfig: Path) -> None:
    command, needles = REFUSED
    done = subprocess.run(
        [BASH, "-c", as_run_here(command, kubeconfig)],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    out = done.stdout + done.stderr
    assert done.returncode != 0 and all(n in out for n in needles), (done.returncode, out)


def test_readme_trainjob_walkthrough_matches_the_steps_checked_here() -> None:
    assert readme_block(TITLE) == [step.command for step in WALKTHROUGH]


@pytest.fixture
def trainer_up(tmp_path: Path) -> Iterator[Up]:
    """``fleet up --job-seconds JOB_SECONDS``, as the README starts it for this walkthrough."""
    up = start_up(tmp_path, "--job-seconds", JOB_SECONDS)
    yield up
    if up.process.poll() is None:
        stop_up(up)


@pytest.mark.timeout(420)
def test_the_trainjob_walkthrough_against_fleet_up(trainer_up: Up) -> None:
    env = kubectl_env(trainer_up.kubeconfig)
    wait_ready(trainer_up, env)
    for index, step in enumerate(WALKTHROUGH[1:], start=1):  # the export is what ``env`` does
        if index == REFUSED_AT:
            run_refused(env, trainer_up.kubeconfig)
        else:
            run_step(step, env, trainer_up.kubeconfig)
    # The TrainJob ran to its end on member-1 (the JobSet ran once its slot was free).
    run_step(
        Step("kubectl get trainjob qwen-sft", has_row("qwen-sft", STATE="Succeeded", CLUSTER="member-1")),
        env,
        trainer_up.kubeconfig,
    )
    assert stop_up(trainer_up) == 0, trainer_up.log()
