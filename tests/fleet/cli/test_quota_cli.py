"""``fleet quota``: validate a tree file (and apply it to Redis), in-process and as the real script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from fleet.cli import main
from queues import Ledger
from tests.support.redis_server import RedisServer

ROOT = Path(__file__).parents[3]
SAMPLE = ROOT / "config" / "samples" / "elasticquotatree.yaml"
FLEET = Path(sys.executable).parent / "fleet"
WARNING = (
    "warning: root: max differs from min in cpu, kube-queue/max-jobs, memory, nvidia.com/gpu: "
    "the root's max should equal its min (accepted; the root's max is what limits)"
)


@pytest.fixture
def invalid_tree(tmp_path: Path) -> Path:
    document = yaml.safe_load(SAMPLE.read_text())
    child = document["spec"]["root"]["children"][0]
    child["min"] = {"cpu": 20}
    child["max"]["cpu"] = 10
    child["namespaces"].append("default")
    path = tmp_path / "tree.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


ERRORS = [
    "error: root/child-2: min.cpu 20 exceeds max.cpu 10",
    "error: root/child-2: namespaces: 'default' is already bound by root/child-2",
]


def test_validate_accepts_the_sample_with_its_warning() -> None:
    result = CliRunner().invoke(main, ["quota", "validate", "-f", str(SAMPLE)])
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [WARNING, f"{SAMPLE}: valid"]


def test_validate_prints_every_error_and_exits_1(invalid_tree: Path) -> None:
    result = CliRunner().invoke(main, ["quota", "validate", "-f", str(invalid_tree)])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == ERRORS
    assert "valid" not in result.stdout


def test_validate_malformed_yaml(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("spec: {root: [unclosed\n")
    result = CliRunner().invoke(main, ["quota", "validate", "-f", str(path)])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ElasticQuotaTree: not valid YAML: ")


def run_fleet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(FLEET), *args], check=False, capture_output=True, text=True, timeout=60)


@pytest.mark.integration
def test_fleet_script_validates_as_a_real_process(invalid_tree: Path) -> None:
    ok = run_fleet("quota", "validate", "-f", str(SAMPLE))
    assert (ok.returncode, ok.stdout.splitlines()[0], ok.stderr) == (0, WARNING, "")
    bad = run_fleet("quota", "validate", "-f", str(invalid_tree))
    assert (bad.returncode, bad.stderr.splitlines()) == (1, ERRORS)


@pytest.mark.integration
def test_apply_then_list_queues(redis_server: RedisServer, invalid_tree: Path) -> None:
    runner = CliRunner()
    url = ["--redis", redis_server.url]
    refused = runner.invoke(main, ["quota", "apply", "-f", str(invalid_tree), *url])
    assert refused.exit_code == 1
    assert Ledger(redis_server.client()).version() == 0
    first = runner.invoke(main, ["quota", "apply", "-f", str(SAMPLE), *url])
    assert (first.exit_code, first.stdout.splitlines()[-1]) == (0, "elasticquotatree applied, version 1")
    again = runner.invoke(main, ["quota", "apply", "-f", str(SAMPLE), *url, "--expected-version", "1"])
    assert again.stdout.splitlines()[-1] == "elasticquotatree unchanged, version 1"
    stale = runner.invoke(main, ["quota", "apply", "-f", str(SAMPLE), *url, "--expected-version", "3"])
    assert (stale.exit_code, stale.stderr) == (1, "error: the applied tree is version 1, not 3\n")
    listed = runner.invoke(main, ["quota", "queues", *url])
    assert listed.exit_code == 0
    assert [line.split()[0] for line in listed.stdout.splitlines()] == ["NAME", "root", "root-child-2"]


def test_apply_reports_an_unreachable_redis() -> None:
    result = CliRunner().invoke(
        main, ["quota", "apply", "-f", str(SAMPLE), "--redis", "redis://127.0.0.1:1/0"]
    )
    assert result.exit_code == 1
    assert result.stderr.startswith("error: redis at redis://127.0.0.1:1/0: ")
