"""``fleet explain`` as a user runs it: a real subprocess against a running ``fleet sim``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.placement import NEVER
from tests.fleet.placement.factory import sample_job
from tests.support.sim import RunningSim, running_sim

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def default_sim() -> Iterator[RunningSim]:
    """The default topology: member-1 module-910b-8, member-2 card-910b-2, member-3 module."""
    with running_sim() as running:
        yield running


def _explain(
    sim: RunningSim, job: dict[str, Any], tmp_path: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    command = [sys.executable, "-c", "from fleet.cli import main; main(prog_name='fleet')", "explain"]
    return subprocess.run(
        [*command, "-f", str(path), "--kubeconfig", str(sim.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_sample_fits_only_on_the_member_with_card_910b_2_nodes(
    default_sim: RunningSim, tmp_path: Path
) -> None:
    result = _explain(default_sim, sample_job(), tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("default/default-test-pytorch fits on member-2 (pack): m2-a300t-a2-")
    assert "(Master)" in lines[0] and "(Worker)" in lines[0]
    assert lines[1:] == [
        f"  member-1: {NEVER}: no node matches accelerator-type=card-910b-2",
        "  member-2: fits",
        f"  member-3: {NEVER}: no node matches accelerator-type=card-910b-2",
    ]


def test_the_seed_placeholder_selector_fits_nowhere_and_names_it(
    default_sim: RunningSim, tmp_path: Path
) -> None:
    job = sample_job()
    for spec in job["spec"]["replicaSpecs"].values():
        spec["template"]["spec"]["nodeSelector"] = {"example-key": "example-value"}
    result = _explain(default_sim, job, tmp_path, "--policy", "spread")
    assert result.returncode == 2, result.stderr
    assert result.stdout.splitlines() == [
        "default/default-test-pytorch can never fit on any member as the fleet is:",
        f"  member-1: {NEVER}: no node matches example-key=example-value",
        f"  member-2: {NEVER}: no node matches example-key=example-value",
        f"  member-3: {NEVER}: no node matches example-key=example-value",
    ]


def test_an_invalid_job_exits_1_with_its_field_errors(default_sim: RunningSim, tmp_path: Path) -> None:
    job = sample_job()
    job["spec"]["replicaSpecs"]["Master"]["replicas"] = 2
    worker = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["resources"]["requests"]["cpu"] = "two"
    result = _explain(default_sim, job, tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines()[1:] == [
        "  spec.replicaSpecs.Master.replicas: must be 1 for the pytorch leader",
        "  spec.replicaSpecs.Worker.template.spec.containers[0].resources.requests[cpu]: "
        'Invalid value: "two": quantities must match the regular expression '
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    ]


def test_a_job_too_big_for_any_member_says_how_close_each_came(
    default_sim: RunningSim, tmp_path: Path
) -> None:
    job = sample_job()
    job["spec"]["replicaSpecs"]["Worker"]["replicas"] = 4  # five 2-NPU pods, one per node
    job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = 5
    result = _explain(default_sim, job, tmp_path)
    assert result.returncode == 2
    # Four card-910b-2 nodes can never hold five pods one per node: waiting would not help.
    assert (
        f"  member-2: {NEVER}: 4 nodes have 2 free huawei.com/Ascend910 but the job needs 5 nodes "
        "(one pod per node)" in (result.stdout.splitlines())
    )


WITH_COMPANIONS = (
    Path(__file__).resolve().parents[3] / "config" / "samples" / "ascend" / "pytorch-with-companions.yaml"
)


def _explain_file(sim: RunningSim, path: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "from fleet.cli import main; main(prog_name='fleet')", "explain"]
    return subprocess.run(
        [*command, "-f", str(path), "--kubeconfig", str(sim.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_job_file_with_its_companions_evaluates_the_job_and_lists_them(default_sim: RunningSim) -> None:
    result = _explain_file(default_sim, WITH_COMPANIONS)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("default/companions-pytorch fits on member-2 (pack): ")
    assert lines[-4:] == [
        "with:",
        "  ConfigMap rings-config-companions-pytorch: in this file, sent with the job (propagateDeps)",
        "  Secret companions-pytorch-obs: in this file, sent with the job (propagateDeps)",
        "  Service companions-pytorch: in this file, sent with the job (propagateDeps)",
    ]


def test_a_file_with_two_jobs_is_refused_naming_what_it_holds(
    default_sim: RunningSim, tmp_path: Path
) -> None:
    path = tmp_path / "two.yaml"
    second = sample_job()
    second["metadata"]["name"] = "second"
    path.write_text(yaml.safe_dump_all([sample_job(), second, {"apiVersion": "v1", "kind": "ConfigMap"}]))
    result = _explain_file(default_sim, path)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: {path}: must hold exactly one job object, holds 2 (AscendJob, ConfigMap)"
    )
