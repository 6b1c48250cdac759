"""T9k's samples end to end: the README's T9k walkthrough against ``fleet up``, with the real
kubectl, line by line as written (the harness of :mod:`tests.fleet.local.test_up`), then both
samples applied again to run to their own terminal state.

The walkthrough: the admin applies the seed's quota tree (``default`` is bound to ``child-2``, one
job at a time); the TensorFlowTrainingJob runs; the MPIJob waits for the quota. Pausing the first
(``kubectl patch``, as T9k lets a user flip ``spec.runMode.pause.enabled``) gives its quota back
and deletes its copy, so the MPIJob runs; resumed, the first waits for the quota again, and runs
once the MPIJob is deleted. ``fleet up`` runs its jobs for :data:`JOB_SECONDS` here, so that
after the walkthrough both samples, applied again under a tree that admits two jobs, end
``Succeeded``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet.local.test_up import (
    ROOT,
    Step,
    Up,
    contains,
    has_row,
    kubectl_env,
    run_step,
    start_up,
    stop_up,
    table_rows,
    wait_ready,
)

pytestmark = pytest.mark.integration

#: How long a simulated job runs: longer than the walkthrough's steps between a job starting and
#: its pause or deletion, short enough to see both samples finish.
JOB_SECONDS = "20"
TF = "tensorflowtrainingjob"
MPI = "mpijobs.batch.tensorstack.dev"
PAUSE = (
    "kubectl patch tensorflowtrainingjob tensorflow-example --type merge -p "
    """'{"spec":{"runMode":{"pause":{"enabled":%s}}}}'"""
)


def _on_a_member(state: str) -> Step:
    def check(text: str) -> bool:
        rows = [r for r in table_rows(text) if r.get("NAME") == "tensorflow-example"]
        return any(r.get("STATE") == state and r.get("CLUSTER", "").startswith("member-") for r in rows)

    return Step(f"kubectl get {TF} -w", check, watch=True)


WALKTHROUGH: list[Step] = [
    Step("export KUBECONFIG=$PWD/fleet.kubeconfig", lambda _: True),
    Step("kubectl apply -f config/samples/elasticquotatree.yaml", contains("elasticquotatree")),
    Step(
        "kubectl apply -f config/samples/t9k-tensorflowtrainingjob.yaml",
        contains("tensorflowtrainingjob.batch.tensorstack.dev/tensorflow-example created"),
    ),
    _on_a_member("Running"),
    Step(
        "kubectl apply -f config/samples/t9k-mpijob.yaml",
        contains("mpijob.batch.tensorstack.dev/mpi-example created"),
    ),
    Step(f"kubectl describe {MPI} mpi-example", contains("QuotaExceeded", "kube-queue/max-jobs")),
    Step(PAUSE % "true", contains("tensorflow-example patched")),
    Step(f"kubectl get {TF}", has_row("tensorflow-example", STATE="Paused", CLUSTER="<none>")),
    Step(f"kubectl get {MPI} -w", has_row("mpi-example", STATE="Running"), watch=True),
    Step(PAUSE % "false", contains("tensorflow-example patched")),
    Step(f"kubectl get {TF}", has_row("tensorflow-example", STATE="Queued")),
    Step(f"kubectl delete {MPI} mpi-example", contains('"mpi-example" deleted')),
    _on_a_member("Running"),
    Step(
        f"kubectl get {TF} tensorflow-example -o jsonpath='{{.status.phase}} {{.status.aggregate.running}}'",
        lambda text: text.strip() == "Running 4",
    ),
    Step(f"kubectl delete {TF} tensorflow-example", contains('"tensorflow-example" deleted')),
]


def readme_t9k_walkthrough() -> list[str]:
    """The commands of the README's T9k walkthrough block, trailing ``# comments`` dropped."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### Walkthrough: T9k's TensorFlowTrainingJob and MPIJob", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None, "README.md: the T9k walkthrough has no ```sh block"
    return [
        command
        for line in block.group(1).splitlines()
        if (command := re.sub(r"\s+#.*$", "", line).strip()) and not command.startswith("#")
    ]


def test_readme_t9k_walkthrough_matches_the_steps_checked_here() -> None:
    assert readme_t9k_walkthrough() == [step.command for step in WALKTHROUGH]


@pytest.fixture
def t9k_up(tmp_path: Path) -> Iterator[Up]:
    """``fleet up`` as test_up starts it, its jobs running :data:`JOB_SECONDS`."""
    up = start_up(tmp_path, "--job-seconds", JOB_SECONDS)
    yield up
    if up.process.poll() is None:
        stop_up(up)


@pytest.mark.timeout(300)
def test_the_t9k_walkthrough_then_both_samples_to_succeeded(t9k_up: Up) -> None:
    env = kubectl_env(t9k_up.kubeconfig)
    wait_ready(t9k_up, env)
    for step in WALKTHROUGH[1:]:  # the export is what ``env`` already does
        run_step(step, env, t9k_up.kubeconfig)

    # With two jobs at a time in the leaf, both samples run at once and end as their kinds end.
    two = "sed 's|kube-queue/max-jobs: 1 |kube-queue/max-jobs: 2 |' config/samples/elasticquotatree.yaml"
    run_step(Step(f"{two} | kubectl apply -f -", contains("configured")), env, t9k_up.kubeconfig)
    for sample in ("t9k-tensorflowtrainingjob.yaml", "t9k-mpijob.yaml"):
        run_step(
            Step(f"kubectl apply -f config/samples/{sample}", contains("created")), env, t9k_up.kubeconfig
        )
    for kind, name in ((TF, "tensorflow-example"), (MPI, "mpi-example")):
        run_step(
            Step(f"kubectl get {kind} -w", has_row(name, STATE="Succeeded"), watch=True, within=90.0),
            env,
            t9k_up.kubeconfig,
        )
    done = json.loads(
        run_step(
            Step(f"kubectl get {MPI} mpi-example -o json", contains("Succeeded")), env, t9k_up.kubeconfig
        )
    )
    assert done["status"]["phase"] == "Succeeded"
    assert [t["type"] for t in done["status"]["tasks"]] == ["launcher", "worker"]
    assert done["status"]["aggregate"]["deleted"] == 6  # cleanUpWorkers: true, as the sample says
    assert stop_up(t9k_up) == 0, t9k_up.log()
