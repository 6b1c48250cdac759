"""``fleet up`` as a newcomer meets it: started as a process, the README walkthrough run with the
real kubectl, line by line as written, then stopped with SIGTERM.

The README's walkthrough block is the single source of the commands: :data:`WALKTHROUGH` holds
what each line must show, and the test first checks that the README says exactly those lines, so
neither can drift from the other. The only change made to a line is where the kubeconfig lives
(a temporary file, not the repository's ``fleet.kubeconfig``) and which ``.venv`` runs ``fleet``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest
import yaml

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
KUBECTL = "kubectl"
#: bash by its full path: one test runs ``fleet up`` with a PATH of kubectl and the venv only.
BASH = shutil.which("bash") or "/bin/bash"
VENV_BIN = Path(sys.executable).parent


def table_rows(text: str) -> list[dict[str, str]]:
    """kubectl's table output as dicts, keyed by the header's column names (repeated headers skipped)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = lines[0].split()
    rows = []
    for line in lines[1:]:
        cells = line.split()
        if cells == header:
            continue
        rows.append(dict(zip(header, cells, strict=False)))
    return rows


def has_row(name: str, **columns: str) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        return any(
            row.get("NAME") == name and all(row.get(k) == v for k, v in columns.items())
            for row in table_rows(text)
        )

    return check


def contains(*needles: str) -> Callable[[str], bool]:
    return lambda text: all(needle in text for needle in needles)


@dataclass(frozen=True)
class Step:
    """One README line and what a newcomer must see when running it."""

    command: str
    expect: Callable[[str], bool]
    #: A ``-w`` watch: read its output until ``expect`` holds, then stop it (the user's Ctrl-C).
    watch: bool = False
    #: How long the outcome may take to show (a plain command is re-run until then).
    within: float = 20.0


SECOND_JOB = (
    "sed 's/default-test-pytorch/second-test-pytorch/' config/samples/pytorch_multinodes_acjob_910b.yaml"
    " | kubectl apply -f -"
)

WALKTHROUGH: list[Step] = [
    Step("export KUBECONFIG=$PWD/fleet.kubeconfig", lambda _: True),
    Step("kubectl get --raw /readyz", lambda out: out.strip() == "ok"),
    Step(
        "kubectl apply -f config/samples/elasticquotatree.yaml",
        contains("elasticquotatree", "created", "Warning: root: max differs from min"),
    ),
    Step(
        "kubectl apply -f config/samples/pytorch_multinodes_acjob_910b.yaml",
        contains("ascendjob.mindxdl.gitee.com/default-test-pytorch created"),
    ),
    Step(
        "kubectl get acjob -w",
        has_row("default-test-pytorch", STATE="Running", CLUSTER="member-2"),
        watch=True,
    ),
    Step("kubectl --context member-2 get acjob", has_row("default-test-pytorch", STATE="Running")),
    Step(SECOND_JOB, contains("ascendjob.mindxdl.gitee.com/second-test-pytorch created")),
    Step("kubectl get acjob", has_row("second-test-pytorch", STATE="Queued")),
    Step(
        "kubectl describe acjob second-test-pytorch",
        contains("QuotaExceeded", "kube-queue/max-jobs 1/1 in use"),
    ),
    Step(
        "kubectl delete acjob default-test-pytorch",
        contains('ascendjob.mindxdl.gitee.com "default-test-pytorch" deleted'),
    ),
    Step(
        "kubectl get acjob -w",
        has_row("second-test-pytorch", STATE="Running", CLUSTER="member-2"),
        watch=True,
    ),
    Step(
        ".venv/bin/fleet sim fault member-2 down",
        contains('"down": true', '"member": "member-2"'),
    ),
    Step(
        "kubectl get acjob -w",
        has_row("second-test-pytorch", STATE="Queued"),
        watch=True,
        within=60.0,
    ),
    Step(
        "kubectl describe acjob second-test-pytorch",
        contains("ClusterFailover", "no member cluster fits", "member-2: NotReady"),
    ),
    Step(
        ".venv/bin/fleet sim fault member-2 up",
        contains('"down": false', '"member": "member-2"'),
    ),
    Step(
        "kubectl get acjob -w",
        has_row("second-test-pytorch", STATE="Running", CLUSTER="member-2"),
        watch=True,
        # The job would avoid the member that lost it for 120 s, but it fits there only: the
        # exclusion gives way as soon as the member is Ready (issue 23, req. 5).
        within=60.0,
    ),
    # A Volcano Job, as MindCluster's users write one, in the same one-job leaf (issue 31).
    Step(
        "kubectl delete acjob second-test-pytorch",
        contains('ascendjob.mindxdl.gitee.com "second-test-pytorch" deleted'),
    ),
    Step(
        "kubectl apply -f config/samples/vcjob-mindspore-910b.yaml",
        contains(
            "configmap/rings-config-mindspore-vcjob created", "job.batch.volcano.sh/mindspore-vcjob created"
        ),
    ),
    Step(
        "kubectl get vcjob -w",
        has_row("mindspore-vcjob", STATE="Running", CLUSTER="member-1"),
        watch=True,
        within=60.0,
    ),
    Step("kubectl --context member-1 get vcjob", has_row("mindspore-vcjob", STATUS="Running", RUNNING="2")),
]


def readme_walkthrough() -> list[str]:
    """The commands of the README's Walkthrough block, trailing ``# comments`` dropped."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Walkthrough", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None, "README.md: the Walkthrough section has no ```sh block"
    commands = []
    for line in block.group(1).splitlines():
        command = re.sub(r"\s+#.*$", "", line).strip()
        if command and not command.startswith("#"):
            commands.append(command)
    return commands


# ---- running fleet up ------------------------------------------------------------------------


@dataclass
class Up:
    process: subprocess.Popen[bytes]
    kubeconfig: Path
    state_dir: Path
    output: Path

    def log(self) -> str:
        text = self.output.read_text(errors="replace")
        logs = self.state_dir / "logs"
        for path in sorted(logs.glob("*.log")) if logs.exists() else []:
            tail = path.read_text(errors="replace").splitlines()[-15:]
            text += f"\n--- {path.name} ---\n" + "\n".join(tail)
        return text


def start_up(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Up:
    kubeconfig = tmp_path / "fleet.kubeconfig"
    state_dir = tmp_path / "state"
    output = tmp_path / "up.out"
    with output.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable, "-c", "from fleet.cli import main; main(prog_name='fleet')",
                "up", "--kubeconfig", str(kubeconfig), "--state-dir", str(state_dir), *args,
            ],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    return Up(process, kubeconfig, state_dir, output)


def kubectl_env(kubeconfig: Path, path: str | None = None) -> dict[str, str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    if path is not None:
        env["PATH"] = path
    return env


def wait_ready(up: Up, env: dict[str, str], timeout: float = 60.0) -> None:
    """What a script does after ``fleet up``: poll ``kubectl get --raw /readyz`` until ``ok``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert up.process.poll() is None, f"fleet up exited with {up.process.returncode}:\n{up.log()}"
        if up.kubeconfig.exists():
            done = subprocess.run(
                [KUBECTL, "get", "--raw", "/readyz"],
                check=False,
                env=env,
                capture_output=True,
                text=True,
                timeout=10,
            )
            if done.returncode == 0 and done.stdout.strip() == "ok":
                return
        time.sleep(0.3)
    pytest.fail(f"fleet up not ready in {timeout:g}s:\n{up.log()}")


def listening_ports(up: Up) -> set[int]:
    """Every port this run listens on: the kubeconfig's servers, the sim's control, metrics, Redis."""
    config = yaml.safe_load(up.kubeconfig.read_text())
    urls = [c["cluster"]["server"] for c in config["clusters"]]
    for cluster in config["clusters"]:
        for extension in cluster["cluster"].get("extensions") or []:
            if "control" in (extension.get("extension") or {}):
                urls.append(extension["extension"]["control"])
    prometheus = yaml.safe_load((up.state_dir / "prometheus.yml").read_text())
    targets = [t for job in prometheus["scrape_configs"] for c in job["static_configs"] for t in c["targets"]]
    ports = {int(url.rsplit(":", 1)[1]) for url in urls} | {int(t.rsplit(":", 1)[1]) for t in targets}
    redis_line = re.search(r"^redis .* on 127\.0\.0\.1:(\d+)", up.output.read_text(), re.M)
    assert redis_line is not None, up.output.read_text()
    ports.add(int(redis_line.group(1)))
    return ports


#: What each role's /metrics must show once the walkthrough has run (a job admitted, dispatched,
#: mirrored, failed over and placed again).
METRICS: dict[str, set[str]] = {
    "api": {"fleet_queue_pending_jobs", "fleet_quota_used", "fleet_quota_min", "fleet_quota_max"},
    "dispatcher": {
        "fleet_admission_wait_seconds_bucket",
        "fleet_dispatch_decisions_total",
        "fleet_placement_free_npus",
        "fleet_dispatcher_leader",
    },
    "syncer": {"fleet_sync_seconds_bucket", "fleet_member_ready", "fleet_failovers_total"},
    "worker": {"fleet_member_request_seconds_bucket", "fleet_member_requests_total"},
}


def assert_metrics(up: Up) -> None:
    """Scrape every target of the run's prometheus.yml as Prometheus would."""
    prometheus = yaml.safe_load((up.state_dir / "prometheus.yml").read_text())
    seen: dict[str, set[str]] = {}
    for job in prometheus["scrape_configs"]:
        for config in job["static_configs"]:
            role = config["labels"]["role"]
            for target in config["targets"]:
                with urllib.request.urlopen(f"http://{target}/metrics", timeout=10) as response:
                    text = response.read().decode()
                seen[role] = {
                    line.split("{")[0].split()[0] for line in text.splitlines() if line[:1].isalpha()
                }
    for role, families in METRICS.items():
        assert families <= seen.get(role, set()), (role, families - seen.get(role, set()))


def fleet_cli(up: Up, *args: str) -> str:
    """``.venv/bin/fleet ARGS`` as a user types it, with the kubeconfig ``fleet up`` wrote."""
    done = subprocess.run(
        [str(VENV_BIN / "fleet"), *args, "--kubeconfig", str(up.kubeconfig)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def assert_fleet_cli(up: Up) -> None:
    """The everyday commands over the run's HTTPS endpoint, once the sample job runs on member-2."""
    rows = table_rows(fleet_cli(up, "get", "acjob"))
    assert [(r["NAME"], r["STATE"], r["CLUSTER"]) for r in rows] == [
        ("default-test-pytorch", "Running", "member-2")
    ]
    copies = table_rows(fleet_cli(up, "get", "acjob", "-M"))
    assert [(r["NAME"], r["CLUSTER"]) for r in copies] == [("default-test-pytorch", "member-2")]
    described = fleet_cli(up, "describe", "acjob", "default-test-pytorch")
    assert "Cluster:" in described and "member-2" in described and "Dispatched" in described
    queues = {r["NAME"]: r for r in table_rows(fleet_cli(up, "queues"))}
    assert queues["root-child-2"]["ADMITTED"] == "1"
    clusters = {r["NAME"]: r["READY"] for r in table_rows(fleet_cli(up, "clusters"))}
    assert clusters == {"member-1": "True", "member-2": "True", "member-3": "True"}


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def processes_mentioning(text: str) -> list[str]:
    """Command lines of running processes that name ``text`` (this run's state directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


def stop_up(up: Up, timeout: float = 30.0) -> int:
    if up.process.poll() is None:
        up.process.send_signal(signal.SIGTERM)
    try:
        return up.process.wait(timeout)
    except subprocess.TimeoutExpired:
        up.process.kill()
        up.process.wait()
        pytest.fail(f"fleet up did not stop within {timeout:g}s of SIGTERM:\n{up.log()}")


@pytest.fixture
def fleet_up(tmp_path: Path) -> Iterator[Up]:
    up = start_up(tmp_path)
    yield up
    if up.process.poll() is None:  # the test failed before stopping it
        stop_up(up)


# ---- running a README line -------------------------------------------------------------------


def as_run_here(command: str, kubeconfig: Path) -> str:
    """The README line with this test's kubeconfig and virtualenv."""
    command = command.replace("--kubeconfig fleet.kubeconfig", f"--kubeconfig {kubeconfig}")
    return command.replace(".venv/bin/fleet", str(VENV_BIN / "fleet"))


def run_step(step: Step, env: dict[str, str], kubeconfig: Path) -> str:
    command = as_run_here(step.command, kubeconfig)
    if step.watch:
        return watch_until(command, env, step.expect, step.within)
    deadline = time.monotonic() + step.within
    while True:
        done = subprocess.run(
            [BASH, "-c", command],
            check=False,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        out = done.stdout + done.stderr
        if done.returncode == 0 and step.expect(out):
            return out
        if time.monotonic() > deadline:
            pytest.fail(
                f"{step.command!r} (exit {done.returncode}) did not show what the README says:\n{out}"
            )
        time.sleep(0.5)


def watch_until(command: str, env: dict[str, str], expect: Callable[[str], bool], within: float) -> str:
    """Run a watch, read its lines until ``expect`` holds on what it printed, then Ctrl-C it."""
    process = subprocess.Popen(
        [BASH, "-c", f"exec {command}"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert process.stdout is not None
    os.set_blocking(process.stdout.fileno(), False)
    seen = b""
    deadline = time.monotonic() + within
    try:
        while time.monotonic() < deadline:
            seen += read_available(process.stdout)
            if expect(seen.decode(errors="replace")):
                return seen.decode(errors="replace")
            if process.poll() is not None:
                seen += read_available(process.stdout)
                break
            time.sleep(0.2)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        process.stdout.close()
    shown = seen.decode(errors="replace")
    pytest.fail(f"{command!r} did not show the expected row within {within:g}s:\n{shown}")


def read_available(stream: IO[bytes]) -> bytes:
    try:
        return stream.read() or b""
    except BlockingIOError:
        return b""


# ---- the tests -------------------------------------------------------------------------------


def test_readme_walkthrough_matches_the_steps_checked_here() -> None:
    assert readme_walkthrough() == [step.command for step in WALKTHROUGH]


@pytest.mark.timeout(600)  # the walkthrough waits out a failover and the 120 s avoidance after it
def test_the_readme_walkthrough_against_fleet_up(fleet_up: Up) -> None:
    env = kubectl_env(fleet_up.kubeconfig)
    wait_ready(fleet_up, env)

    contexts = subprocess.run(
        [KUBECTL, "config", "get-contexts", "-o", "name"], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert sorted(contexts) == ["fleet", "member-1", "member-2", "member-3", "team-a"]
    current = subprocess.run(
        [KUBECTL, "config", "current-context"], env=env, capture_output=True, text=True, check=True
    )
    assert current.stdout.strip() == "fleet"
    printed = fleet_up.output.read_text()
    # A clean start, as the walkthrough asks for (make up FRESH=1), says so.
    assert re.search(r"^state +clean: no jobs, no quota tree, no policies$", printed, re.M), printed
    assert "Fleet is up." in printed and "kubectl apply -f config/samples/elasticquotatree.yaml" in printed

    assert readme_walkthrough() == [step.command for step in WALKTHROUGH]
    for step in WALKTHROUGH[1:]:  # the export is what ``env`` already does
        run_step(step, env, fleet_up.kubeconfig)

    assert_metrics(fleet_up)
    ports = listening_ports(fleet_up)
    assert all(port_open(port) for port in ports), ports
    assert stop_up(fleet_up) == 0, fleet_up.log()
    assert "Fleet stopped." in fleet_up.output.read_text()
    assert not fleet_up.kubeconfig.exists()
    assert [port for port in ports if port_open(port)] == []
    assert processes_mentioning(str(fleet_up.state_dir)) == []


def test_without_redis_server_fleet_up_serves_an_in_memory_redis(tmp_path: Path) -> None:
    # Only kubectl on PATH: no redis-server to find (it sits beside kubectl in /usr/bin here).
    kubectl = subprocess.run(["bash", "-c", "command -v kubectl"], capture_output=True, text=True, check=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").symlink_to(Path(kubectl.stdout.strip()).resolve())
    path = f"{bin_dir}:{VENV_BIN}"
    up = start_up(tmp_path, env={"PATH": path})
    try:
        env = kubectl_env(up.kubeconfig, path)
        wait_ready(up, env)
        assert re.search(r"^redis +fakeredis on 127\.0\.0\.1:\d+", up.output.read_text(), re.M), up.log()
        # The quota ledger's Lua runs on it: a job is admitted and lands where it fits.
        for step in WALKTHROUGH[2:5]:
            run_step(step, env, up.kubeconfig)
        assert_fleet_cli(up)
        ports = listening_ports(up)
    finally:
        code = stop_up(up)
    assert code == 0, up.log()
    assert not up.kubeconfig.exists()
    assert [port for port in ports if port_open(port)] == []
    assert processes_mentioning(str(up.state_dir)) == []
