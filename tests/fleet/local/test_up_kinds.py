"""The README's PyTorchJob walkthrough (the ACK One fleet document's flow) against ``fleet up``,
with the real kubectl, line by line as written: the same harness as the AscendJob walkthrough
(:mod:`tests.fleet.local.test_up`), its own README block and expectations."""

from __future__ import annotations

import re
import urllib.request

import pytest
import yaml

from tests.fleet.local.test_up import (
    ROOT,
    Step,
    Up,
    contains,
    fleet_up,  # noqa: F401 - the fixture
    has_row,
    kubectl_env,
    run_step,
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
    Step(
        "kubectl describe pytorchjob pytorch-test",
        contains("ScheduleBindingSucceed", "Result: {member-1:0,[{master 1} {worker 2}]}"),
    ),
    Step(
        ".venv/bin/fleet get pytorchjob -M",
        has_row("pytorch-test", CLUSTER="member-1", STATE="Running", ADOPTION="Y"),
    ),
    Step(".venv/bin/fleet get pod -M", _pods_running),
    Step(".venv/bin/fleet get pytorchjob pytorch-test -m member-1 -o yaml", _member_copy),
    Step("kubectl --context member-1 get pytorchjob", has_row("pytorch-test", STATE="Running")),
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
    """The commands of the README's PyTorchJob walkthrough block, trailing ``# comments`` dropped."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### Walkthrough: a Kubeflow PyTorchJob", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None, "README.md: the PyTorchJob walkthrough has no ```sh block"
    return [
        command
        for line in block.group(1).splitlines()
        if (command := re.sub(r"\s+#.*$", "", line).strip()) and not command.startswith("#")
    ]


def test_readme_kind_walkthrough_matches_the_steps_checked_here() -> None:
    assert readme_kind_walkthrough() == [step.command for step in WALKTHROUGH]


@pytest.mark.timeout(300)
def test_the_pytorchjob_walkthrough_against_fleet_up(fleet_up: Up) -> None:  # noqa: F811 - the fixture
    env = kubectl_env(fleet_up.kubeconfig)
    wait_ready(fleet_up, env)
    for step in WALKTHROUGH[1:]:  # the export is what ``env`` already does
        run_step(step, env, fleet_up.kubeconfig)
    assert 'fleet_jobs_admitted_total{job_kind="PyTorchJob"} 1.0' in _scrape(fleet_up, "dispatcher")
    member = kubectl_env(fleet_up.kubeconfig)
    run_step(
        Step("kubectl --context member-1 get pytorchjob", contains("No resources found")),
        member,
        fleet_up.kubeconfig,
    )
    assert stop_up(fleet_up) == 0, fleet_up.log()
