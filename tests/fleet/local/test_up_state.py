"""``fleet up`` says on start whether it resumed an earlier run's state, and how much, and ``make
up FRESH=1`` (``fleet up --fresh``) starts clean (issue 33, req. 1); the README's tenant
walkthrough, line by line (req. 5).

One state directory, three starts: a clean one where the tenant walkthrough runs and then an
admin applies the tree, a policy and a job with kubectl, a second that reports them resumed (and
keeps the token the walkthrough added), and a ``--fresh`` one that reports a clean fleet. The
second and third are stopped as soon as they have said it (the count is made before the members
start)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import fakeredis
import pytest
import yaml

from fleet.kinds import ELASTIC_QUOTA_TREE
from fleet.local import Resumed, resumed_state
from fleet.state import Objects
from tests.fleet.local.test_up import BASH, ROOT, Up, kubectl_env, start_up, stop_up, wait_ready

STATE_LINE = re.compile(r"^state +(.*)$", re.M)

#: The README's tenant walkthrough: each line, what it must print, and whether it must succeed
#: (``auth can-i`` answering no, and a refusal, exit 1 as kubectl's do).
TENANT_WALKTHROUGH: list[tuple[str, tuple[str, ...], bool]] = [
    ("export KUBECONFIG=$PWD/fleet.kubeconfig", (), True),
    ("kubectl config get-contexts -o name", ("fleet\nmember-1\nmember-2\nmember-3\nteam-a",), True),
    ("kubectl --context team-a auth whoami", ("team-a", "[namespace:default system:authenticated]"), True),
    ("kubectl --context team-a auth can-i create acjob", ("yes",), True),
    ("kubectl --context team-a auth can-i create acjob -n kube-system", ("no",), False),
    (
        "kubectl --context team-a apply -f config/samples/elasticquotatree.yaml",
        ('User "team-a" cannot', "elasticquotatrees"),
        False,
    ),
    (
        "kubectl --context team-a apply -f config/samples/pytorch_multinodes_acjob_910b.yaml",
        ("ascendjob.mindxdl.gitee.com/default-test-pytorch created",),
        True,
    ),
    ("kubectl --context team-a get acjob", ("default-test-pytorch",), True),
    ("kubectl --context team-a get acjob -n kube-system", ("Forbidden", 'User "team-a" cannot list'), False),
    ("echo 'bob-token,bob,bob,\"namespace:team-b\"' >> .fleet/tokens.csv", (), True),
    ("kubectl --context team-a --token bob-token auth whoami", ("bob", "namespace:team-b"), True),
    (
        "kubectl --context team-a delete acjob default-test-pytorch",
        ('ascendjob.mindxdl.gitee.com "default-test-pytorch" deleted',),
        True,
    ),
]


def readme_block(title: str) -> list[str]:
    """The commands of the first ```sh block after ``title`` in the README, comments dropped."""
    section = (ROOT / "README.md").read_text().split(title, 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None, title
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def run_tenant_walkthrough(up: Up, env: dict[str, str], state_dir: Path) -> None:
    for command, needles, succeeds in TENANT_WALKTHROUGH[1:]:  # the export is what ``env`` does
        here = command.replace(".fleet/", f"{state_dir}/")
        deadline = time.monotonic() + 10.0  # the token file is read again within a second
        while True:
            done = subprocess.run(
                [BASH, "-c", here], check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
            )
            out = done.stdout + done.stderr
            if (done.returncode == 0) == succeeds and all(n in out for n in needles):
                break
            if time.monotonic() > deadline:
                shown = f"{command!r} (exit {done.returncode}) did not show {needles}"
                pytest.fail(f"{shown}:\n{out}\n{up.log()}")
            time.sleep(0.3)


def start(tmp_path: Path, run: str, *args: str) -> Up:
    """A ``fleet up`` of its own output and kubeconfig, on the one state directory of the test."""
    (tmp_path / run).mkdir()
    return start_up(tmp_path / run, "--state-dir", str(tmp_path / "state"), *args)


def state_line(up: Up, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = STATE_LINE.search(up.output.read_text(errors="replace"))
        if found:
            return found.group(1)
        assert up.process.poll() is None, up.log()
        time.sleep(0.1)
    pytest.fail(f"fleet up printed no state line in {timeout:g}s:\n{up.log()}")


def test_readme_tenant_walkthrough_matches_the_steps_checked_here() -> None:
    assert readme_block("### Walkthrough: a tenant's view") == [c for c, _, _ in TENANT_WALKTHROUGH]


def test_make_up_fresh_passes_fresh_to_fleet_up() -> None:
    def recipe(*args: str) -> str:
        command = ["make", "--no-print-directory", "-n", "up", *args]
        # As a user runs it: not as a sub-make of `make test` (whose MAKEFLAGS would carry over).
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True, env=env)
        return done.stdout.strip().splitlines()[-1]

    assert recipe("FRESH=1").endswith("fleet up --fresh")
    assert recipe().endswith("fleet up")
    assert recipe("FRESH=0").endswith("fleet up")


def test_resumed_state_counts_jobs_tree_nodes_and_policies() -> None:
    client = fakeredis.FakeRedis()
    assert resumed_state(client) == Resumed()
    tree = yaml.safe_load((ROOT / "config/samples/elasticquotatree.yaml").read_text())
    tree["metadata"].setdefault("namespace", "kube-system")
    Objects(client).create(ELASTIC_QUOTA_TREE, tree)
    found = resumed_state(client)
    assert found == Resumed(jobs=0, tree_nodes=2, policies=0)
    assert found.describe("make up FRESH=1") == (
        "state      resumed from the last run: 0 jobs, a quota tree of 2 nodes, 0 propagation policies "
        "(start clean: make up FRESH=1)"
    )
    assert Resumed().describe("x") == "state      clean: no jobs, no quota tree, no policies"


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_fleet_up_says_what_it_resumed_and_fresh_starts_clean(tmp_path: Path) -> None:
    first = start(tmp_path, "1")
    try:
        assert state_line(first).startswith("clean: no jobs, no quota tree, no policies")
        env = kubectl_env(first.kubeconfig)
        wait_ready(first, env)
        # The hint names a fleet the user can run (make up puts no virtualenv on PATH).
        hint = re.search(r"^  (\S+) sim fault member-2 down", first.output.read_text(), re.M)
        assert hint is not None, first.log()
        assert shutil.which(hint.group(1)) is not None or (ROOT / hint.group(1)).is_file(), hint.group(1)
        run_tenant_walkthrough(first, env, tmp_path / "state")
        for sample in ("elasticquotatree.yaml", "propagationpolicy-gang-queue.yaml", "pytorchjob.yaml"):
            subprocess.run(
                ["kubectl", "apply", "-f", f"config/samples/{sample}"], cwd=ROOT, env=env, check=True
            )
            if sample.startswith("propagationpolicy"):
                time.sleep(2.5)  # the dispatcher reads the policies again every 2 s
        # The job's status names the policy that governs it (issue 33, req. 2).
        ref = ".status.propagationPolicy"
        jsonpath = f"{{{ref}.kind}} {{{ref}.namespace}}/{{{ref}.name}}"
        deadline = time.monotonic() + 30
        while True:
            governed = subprocess.run(
                ["kubectl", "get", "pytorchjob", "pytorch-test", "-o", f"jsonpath={jsonpath}"],
                env=env, capture_output=True, text=True, check=False,
            ).stdout  # fmt: skip
            if governed == "PropagationPolicy default/example-policy":
                break
            assert time.monotonic() < deadline, governed
            time.sleep(0.3)
    finally:
        assert stop_up(first) == 0, first.log()

    second = start(tmp_path, "2")
    try:
        line = state_line(second)
    finally:
        stop_up(second)
    # The token the walkthrough added stays; fleet up's own two are new.
    kept = (tmp_path / "state" / "tokens.csv").read_text()
    assert 'bob-token,bob,bob,"namespace:team-b"' in kept
    assert line == (
        "resumed from the last run: 1 job, a quota tree of 2 nodes, 1 propagation policy "
        "(start clean: make up FRESH=1, or fleet up --fresh)"
    ), second.log()

    third = start(tmp_path, "3", "--fresh")
    try:
        line = state_line(third)
    finally:
        stop_up(third)
    assert line.startswith("clean:"), third.log()
