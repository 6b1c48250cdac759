"""``fleet explain`` as a user runs it: a subprocess with a tenant's kubeconfig (``$KUBECONFIG``),
the job file or standard input, asking the fleet API, which answers from the records in Redis.
No member credentials anywhere: the kubeconfig has the fleet context only."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fakeredis
import pytest
import yaml
from click.testing import CliRunner

from fleet.cli import main
from fleet.endpoint.auth import Identity
from fleet.placement import NEVER
from tests.fleet.endpoint.conftest import JOB, TREE, call
from tests.support.capacity_records import publish
from tests.support.fleet_api import FleetApiThread

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
WITH_COMPANIONS = ROOT / "config" / "samples" / "ascend" / "pytorch-with-companions.yaml"
ADMIN, TEAM = "admin-token-x", "team-token-x"
TOKENS = {
    ADMIN: Identity("admin", "u0", frozenset({"fleet:admins"})),
    TEAM: Identity("team-a", "u1", frozenset({"namespace:default"})),
}


@pytest.fixture(scope="module")
def tenant_kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    with FleetApiThread(client, tokens=TOKENS, members=lambda: ["member-1", "member-2", "member-3"]) as api:
        trees = "/apis/scheduling.sigs.k8s.io/v1beta1/namespaces/kube-system/elasticquotatrees"
        assert call(api, "POST", trees, yaml.safe_load(TREE.read_text()), token=ADMIN)[0] == 201
        publish(client)
        yield api.kubeconfig(tmp_path_factory.mktemp("tenant") / "kubeconfig", token=TEAM)
    client.close()


def _sample() -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(JOB.read_text())
    return job


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


def _explain(kubeconfig: Path, *args: str, stdin: str | None = None, process: bool = False) -> Ran:
    """``fleet explain ARGS`` with ``$KUBECONFIG`` set: in this process (click's runner), or, with
    ``process``, as its own process, exactly as a user runs it."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    if process:
        command = [
            sys.executable,
            "-c",
            "from fleet.cli import main; main(prog_name='fleet')",
            "explain",
            *args,
        ]
        done = subprocess.run(
            command, input=stdin, capture_output=True, text=True, timeout=60, check=False, env=env
        )
        return Ran(done.returncode, done.stdout, done.stderr)
    result = CliRunner().invoke(main, ["explain", *args], input=stdin, env={"KUBECONFIG": str(kubeconfig)})
    return Ran(result.exit_code, result.stdout, result.stderr)


def test_the_sample_from_stdin_fits_on_the_member_with_card_910b_2_nodes(tenant_kubeconfig: Path) -> None:
    result = _explain(tenant_kubeconfig, "-f", "-", stdin=JOB.read_text(), process=True)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("default/default-test-pytorch fits on member-2 (pack): m2-")
    assert "(Master)" in lines[0] and "(Worker)" in lines[0]
    assert lines[1:4] == [
        f"  member-1: {NEVER}: no node matches accelerator-type=card-910b-2",
        "  member-2: fits",
        f"  member-3: {NEVER}: no node matches accelerator-type=card-910b-2",
    ]
    assert "queue: 1 of 1 in queue root-child-2" in lines
    assert "quota: quota admits it now" in lines


def test_a_placeholder_selector_can_never_fit_and_exits_3(tenant_kubeconfig: Path, tmp_path: Path) -> None:
    job = _sample()
    for spec in job["spec"]["replicaSpecs"].values():
        spec["template"]["spec"]["nodeSelector"] = {"example-key": "example-value"}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    result = _explain(tenant_kubeconfig, "-f", str(path))
    assert result.returncode == 3, result.stderr
    assert result.stdout.splitlines()[:4] == [
        "default/default-test-pytorch can never fit on any member as the fleet is:",
        f"  member-1: {NEVER}: no node matches example-key=example-value",
        f"  member-2: {NEVER}: no node matches example-key=example-value",
        f"  member-3: {NEVER}: no node matches example-key=example-value",
    ]


def test_an_unknown_field_is_refused_as_the_endpoint_refuses_it(tenant_kubeconfig: Path) -> None:
    job = _sample()
    job["spec"]["replicaSpecs"]["Master"]["replicass"] = 1
    result = _explain(tenant_kubeconfig, "-f", "-", stdin=yaml.safe_dump(job))
    assert result.returncode == 1
    assert result.stdout == ""
    assert 'unknown field "spec.replicaSpecs.Master.replicass"' in result.stderr


def test_a_namespace_no_quota_node_binds_is_refused_naming_it(tenant_kubeconfig: Path) -> None:
    job = _sample()
    job["metadata"]["namespace"] = "team-b"
    result = _explain(tenant_kubeconfig, "-f", "-", stdin=yaml.safe_dump(job))
    assert result.returncode == 1
    assert 'cannot create resource "ascendjobs/explain"' in result.stderr  # not the tenant's namespace


def test_a_request_above_its_leaf_max_can_never_be_admitted(tenant_kubeconfig: Path) -> None:
    job = _sample()
    for spec in job["spec"]["replicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "6000"
    result = _explain(tenant_kubeconfig, "-f", "-", stdin=yaml.safe_dump(job))
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stdout.splitlines()[0] == "default/default-test-pytorch can never be admitted by its quota:"
    assert any(line.startswith("quota: can never be admitted: quota root/child-2: cpu") for line in
               result.stdout.splitlines())  # fmt: skip


def test_a_job_file_with_its_companions_lists_them(tenant_kubeconfig: Path) -> None:
    result = _explain(tenant_kubeconfig, "-f", str(WITH_COMPANIONS))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("default/companions-pytorch fits on member-2 (pack): ")
    assert lines[-4:] == [
        "with:",
        "  ConfigMap rings-config-companions-pytorch: in this file, sent with the job (propagateDeps)",
        "  Secret companions-pytorch-obs: in this file, sent with the job (propagateDeps)",
        "  Service companions-pytorch: in this file, sent with the job (propagateDeps)",
    ]


def test_a_file_with_two_jobs_or_no_served_kind_is_refused_naming_what_it_holds(
    tenant_kubeconfig: Path, tmp_path: Path
) -> None:
    path = tmp_path / "two.yaml"
    second = _sample()
    second["metadata"]["name"] = "second"
    path.write_text(yaml.safe_dump_all([_sample(), second, {"apiVersion": "v1", "kind": "ConfigMap"}]))
    result = _explain(tenant_kubeconfig, "-f", str(path))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: {path}: must hold exactly one job object, holds 2 (AscendJob, ConfigMap)"
    )
    alone = _explain(tenant_kubeconfig, "-f", "-", stdin="apiVersion: apps/v1\nkind: Deployment\n")
    assert alone.returncode == 1
    assert alone.stderr.startswith("error: <stdin>: ")
    assert "Deployment" in alone.stderr


def test_a_vcjob_file_is_explained_with_its_rings_config(tenant_kubeconfig: Path) -> None:
    """Volcano's Job as MindCluster's users write it: its gang fits where module-910b-8 nodes are,
    and the rings-config ConfigMap beside it travels with it."""
    result = _explain(tenant_kubeconfig, "-f", str(ROOT / "config" / "samples" / "vcjob-mindspore-910b.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("default/mindspore-vcjob fits on member-1"), lines
    assert "(worker)" in lines[0]
    assert lines[-2:] == [
        "with:",
        "  ConfigMap rings-config-mindspore-vcjob: in this file, sent with the job (propagateDeps)",
    ]
