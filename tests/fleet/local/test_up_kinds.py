"""The README's Kubeflow walkthrough (the ACK One fleet document's PyTorchJob, then a TFJob and an
MPIJob) against ``fleet up``, with the real kubectl, line by line as written: the same harness as
the AscendJob walkthrough (:mod:`tests.fleet.local.test_up`), its own README block and
expectations. ``fleet up`` runs its jobs for :data:`JOB_SECONDS` here, as the README says to
start it: long enough for the PyTorchJob's first steps, short enough to see the TFJob and the
MPIJob end with their own kinds' ``Succeeded``."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

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


def _pods_running(text: str) -> bool:
    rows = {r.get("NAME"): r for r in table_rows(text)}
    names = ("pytorch-test-master-0", "pytorch-test-worker-0", "pytorch-test-worker-1")
    return all(
        rows.get(n, {}).get("CLUSTER") == "member-1"
        and rows[n].get("READY") == "1/1"
        and rows[n].get("STATUS") == "Running"
        for n in names
    )


def _member_copy(text: str) -> bool:
    try:
        copy = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    if not isinstance(copy, dict) or copy.get("kind") != "PyTorchJob":
        return False
    status = copy.get("status") or {}
    reasons = [c.get("reason") for c in status.get("conditions") or []]
    return "PyTorchJobRunning" in reasons and set(status.get("replicaStatuses") or {}) == {"Master", "Worker"}


def _fleet_story(described: str) -> bool:
    """``kubectl describe`` of a running job: its Events are the fleet's three acts, the binding
    worded as ACK One's (the seed); the member's Running is a condition, not an Event (issue 30)."""
    if "Result: {member-1:0,[{master 1} {worker 2}]}" not in described:
        return False
    rows = [line.split() for line in described.split("Events:", 1)[-1].splitlines()]
    reasons = {row[1] for row in rows if len(row) > 1 and row[0] in ("Normal", "Warning")}
    fleets = {"Submitted", "ScheduleBindingSucceed", "Dispatched"}
    return fleets <= reasons and "PyTorchJobRunning" not in reasons


#: How long a simulated job runs (``fleet up --job-seconds``, as the README starts it).
JOB_SECONDS = "45"
SUSPEND = 'kubectl patch pytorchjob pytorch-test --type merge -p \'{"spec":{"runPolicy":{"suspend":%s}}}\''


def _ended_as_their_kinds_end(text: str) -> bool:
    """After the TFJob and the MPIJob: the training replicas and the launcher succeeded; the
    parameter server and the MPI workers, serving on after the end, were cleaned up
    (``cleanPodPolicy: Running`` in both samples)."""
    rows = {r.get("NAME", ""): r for r in table_rows(text)}
    launchers = [n for n in rows if n.startswith("pi-launcher-")]
    done = ["tf-mnist-worker-0", "tf-mnist-worker-1", *launchers]
    return (
        len(launchers) == 1
        and all(rows.get(n, {}).get("STATUS") == "Succeeded" for n in done)
        and not any(n.startswith(("tf-mnist-ps-", "pi-worker-")) for n in rows)
    )


WALKTHROUGH: list[Step] = [
    Step("export KUBECONFIG=$PWD/fleet.kubeconfig", lambda _: True),
    Step("kubectl apply -f config/samples/elasticquotatree.yaml", contains("elasticquotatree")),
    Step(
        "kubectl apply -f config/samples/propagationpolicy-gang-queue.yaml",
        contains("propagationpolicy", "example-policy"),
    ),
    Step(
        "kubectl apply -f config/samples/pytorchjob.yaml",
        contains("pytorchjob.kubeflow.org/pytorch-test created"),
    ),
    Step(
        "kubectl get pytorchjob -w", has_row("pytorch-test", STATE="Running", CLUSTER="member-1"), watch=True
    ),
    Step("kubectl describe pytorchjob pytorch-test", _fleet_story),
    Step(
        ".venv/bin/fleet get pytorchjob -M",
        has_row("pytorch-test", CLUSTER="member-1", STATE="Running", ADOPTION="Y"),
    ),
    Step(".venv/bin/fleet get pod -M", _pods_running),
    Step(".venv/bin/fleet get pytorchjob pytorch-test -m member-1 -o yaml", _member_copy),
    Step("kubectl --context member-1 get pytorchjob", has_row("pytorch-test", STATE="Running")),
    Step(SUSPEND % "true", contains("pytorchjob.kubeflow.org/pytorch-test patched")),
    Step("kubectl get pytorchjob", has_row("pytorch-test", STATE="Suspended", CLUSTER="<none>")),
    Step("kubectl --context member-1 get pytorchjob", contains("No resources found")),
    Step("kubectl apply -f config/samples/tfjob.yaml", contains("tfjob.kubeflow.org/tf-mnist created")),
    Step(
        "kubectl get tfjob -w",
        has_row("tf-mnist", STATE="Succeeded", CLUSTER="member-1"),
        watch=True,
        within=120.0,
    ),
    Step("kubectl apply -f config/samples/mpijob-kubeflow.yaml", contains("mpijob.kubeflow.org/pi created")),
    Step(
        "kubectl get mpijob -w",
        has_row("pi", STATE="Succeeded", CLUSTER="member-1"),
        watch=True,
        within=120.0,
    ),
    Step(".venv/bin/fleet get pod -M", _ended_as_their_kinds_end),
    Step(SUSPEND % "false", contains("pytorchjob.kubeflow.org/pytorch-test patched")),
    Step(
        "kubectl get pytorchjob -w",
        has_row("pytorch-test", STATE="Running", CLUSTER="member-1"),
        watch=True,
        within=60.0,
    ),
    Step(
        "kubectl delete pytorchjob pytorch-test",
        contains('pytorchjob.kubeflow.org "pytorch-test" deleted'),
    ),
]


def _scrape(up: Up, role: str) -> str:
    """The /metrics of ``role`` in this run, as Prometheus scrapes it (its prometheus.yml)."""
    prometheus = yaml.safe_load((up.state_dir / "prometheus.yml").read_text())
    for job in prometheus["scrape_configs"]:
        for config in job["static_configs"]:
            if config["labels"]["role"] == role:
                with urllib.request.urlopen(f"http://{config['targets'][0]}/metrics", timeout=10) as response:
                    return str(response.read().decode())
    raise AssertionError(f"no {role} in prometheus.yml")


def readme_kind_walkthrough() -> list[str]:
    """The commands of the README's Kubeflow walkthrough block, trailing ``# comments`` dropped."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### Walkthrough: Kubeflow's PyTorchJob, TFJob and MPIJob", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None, "README.md: the Kubeflow walkthrough has no ```sh block"
    return [
        command
        for line in block.group(1).splitlines()
        if (command := re.sub(r"\s+#.*$", "", line).strip()) and not command.startswith("#")
    ]


def test_readme_kind_walkthrough_matches_the_steps_checked_here() -> None:
    assert readme_kind_walkthrough() == [step.command for step in WALKTHROUGH]


@pytest.fixture
def kinds_up(tmp_path: Path) -> Iterator[Up]:
    """``fleet up --job-seconds JOB_SECONDS``, as the README starts it for this walkthrough."""
    up = start_up(tmp_path, "--job-seconds", JOB_SECONDS)
    yield up
    if up.process.poll() is None:
        stop_up(up)


@pytest.mark.timeout(480)
def test_the_kubeflow_walkthrough_against_fleet_up(kinds_up: Up) -> None:
    env = kubectl_env(kinds_up.kubeconfig)
    wait_ready(kinds_up, env)
    for step in WALKTHROUGH[1:]:  # the export is what ``env`` already does
        run_step(step, env, kinds_up.kubeconfig)
    metrics = _scrape(kinds_up, "dispatcher")
    # The PyTorchJob was admitted twice: before it was suspended, and once resumed.
    for kind, times in (("PyTorchJob", 2), ("TFJob", 1), ("MPIJob", 1)):
        assert f'fleet_jobs_admitted_total{{job_kind="{kind}"}} {times}.0' in metrics, kind
    finished = _scrape(kinds_up, "syncer").splitlines()
    for kind in ("TFJob", "MPIJob"):  # each ended with its own operator's reason
        wanted = (f'job_kind="{kind}"', f'reason="{kind}Succeeded"', 'state="Succeeded"')
        lines = [
            x for x in finished if x.startswith("fleet_jobs_finished_total{") and all(w in x for w in wanted)
        ]
        assert [x.rsplit(" ", 1)[1] for x in lines] == ["1.0"], (kind, lines)
    member = kubectl_env(kinds_up.kubeconfig)
    run_step(
        Step("kubectl --context member-1 get pytorchjob", contains("No resources found")),
        member,
        kinds_up.kubeconfig,
    )
    assert stop_up(kinds_up) == 0, kinds_up.log()
