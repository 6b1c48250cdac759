"""Members of the local fleet managed as in a cluster (issue 33, req. 2), against one ``fleet up``:
``fleet member add/remove`` act on the fleet the kubeconfig points at (the local fleet's members
file; never the fleet endpoint's own Secrets), the commands that need the fleet's Redis find it
as the roles do, or from the running ``fleet up``, or refuse (no guessed default), and ``fleet
member cordon|drain|uncordon`` take a member out of service as Karmada's taints do."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.fleet.local.test_up import (
    ROOT,
    VENV_BIN,
    kubectl_env,
    start_up,
    stop_up,
    table_rows,
    wait_ready,
)

pytestmark = pytest.mark.integration


def fleet(env: dict[str, str], *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / "fleet"), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip


def kubectl_out(env: dict[str, str], *args: str) -> str:
    return subprocess.run(["kubectl", *args], env=env, capture_output=True, text=True, check=True).stdout


def job_states(env: dict[str, str], kind: str) -> dict[str, str]:
    listed = subprocess.run(["kubectl", "get", kind], env=env, capture_output=True, text=True, check=False)
    return {row["NAME"]: row["STATE"] for row in table_rows(listed.stdout)}


def wait_copies(env: dict[str, str], kind: str, done: Callable[[list[str]], object]) -> list[str]:
    """The members holding a copy of the one job of ``kind`` (``fleet get KIND -M``), once ``done``
    holds of them, stable for a second (a duplicate would show within it)."""
    deadline = time.monotonic() + 40
    while True:
        rows = table_rows(fleet(env, "get", kind, "-M").stdout)
        copies = sorted(r["CLUSTER"] for r in rows if r.get("CLUSTER") not in (None, "<none>"))
        if done(copies):
            time.sleep(1.0)
            again = table_rows(fleet(env, "get", kind, "-M").stdout)
            if sorted(r["CLUSTER"] for r in again if r.get("CLUSTER") not in (None, "<none>")) == copies:
                return copies
        assert time.monotonic() < deadline, copies
        time.sleep(0.5)


def clusters(env: dict[str, str]) -> dict[str, str]:
    done = fleet(env, "clusters")
    assert done.returncode == 0, done.stderr
    return {row["NAME"]: row["READY"] for row in table_rows(done.stdout)}


@pytest.mark.timeout(240)
def test_member_add_and_remove_act_on_the_local_fleet(tmp_path: Path) -> None:
    up = start_up(tmp_path)
    try:
        env = {k: v for k, v in kubectl_env(up.kubeconfig).items() if k != "FLEET_REDIS_URL"}
        wait_ready(up, env)
        state = ["--state-dir", str(up.state_dir)]

        member_3 = ["--kubeconfig", str(up.kubeconfig), "--context", "member-3"]
        added = fleet(env, "member", "add", "member-4", *member_3)
        assert added.returncode == 0, added.stderr
        assert f"member member-4 added in the local fleet's members ({up.state_dir.resolve()}" in added.stdout
        deadline = time.monotonic() + 30
        while clusters(env).get("member-4") != "True":
            assert time.monotonic() < deadline, clusters(env)
            time.sleep(0.5)
        memberclusters = subprocess.run(
            ["kubectl", "get", "memberclusters"], env=env, capture_output=True, text=True, check=True
        ).stdout
        assert "member-4" in memberclusters

        subprocess.run(
            ["kubectl", "apply", "-f", "config/samples/pytorch_multinodes_acjob_910b.yaml"],
            env=env, cwd=ROOT, check=True, capture_output=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while True:
            get = ["kubectl", "get", "acjob"]
            listed = subprocess.run(get, env=env, capture_output=True, text=True, check=False)
            rows = table_rows(listed.stdout)
            if rows and rows[0].get("STATE") == "Running":
                break
            assert time.monotonic() < deadline, rows
            time.sleep(0.3)
        # The fleet's own Redis (the running fleet up's), not a guessed localhost:6379.
        # Logs (req. 6): the simulated member serves pod logs to kubectl, and fleet logs finds
        # the job's pods on its member.
        lines = kubectl_out(env, "--context", "member-2", "logs", "default-test-pytorch-master-0")
        assert "fleet-sim: container ascend of pod default/default-test-pytorch-master-0 started" in lines
        every = fleet(env, "logs", "default-test-pytorch")
        assert every.returncode == 0, every.stderr
        assert "[default-test-pytorch-master-0] fleet-sim: container ascend" in every.stdout
        assert "[default-test-pytorch-worker-0] fleet-sim: container ascend" in every.stdout
        worker = fleet(env, "logs", "default-test-pytorch", "-r", "worker")
        assert "started on node" in worker.stdout and "master-0" not in worker.stdout
        short = yaml.safe_load((ROOT / "config/samples/pytorch_multinodes_acjob_910b.yaml").read_text())
        short["metadata"]["name"] = "short"
        short["metadata"].setdefault("annotations", {})["sim.fleet.io/duration-seconds"] = "4"
        subprocess.run(
            ["kubectl", "apply", "-f", "-"], input=yaml.safe_dump(short), env=env, check=True, text=True,
            capture_output=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while job_states(env, "acjob").get("short") != "Running":
            assert time.monotonic() < deadline, job_states(env, "acjob")
            time.sleep(0.3)
        followed = fleet(env, "logs", "short", "-f", "-r", "master-0")
        assert followed.returncode == 0, followed.stderr
        last = followed.stdout.splitlines()[-1]
        assert last == "fleet-sim: container ascend exited with code 0 (Completed)"
        while job_states(env, "acjob").get("short") != "Succeeded":
            assert time.monotonic() < deadline + 30, job_states(env, "acjob")
            time.sleep(0.3)
        assert fleet(env, "logs", "nope").stderr.strip() == 'error: no job named "nope" in namespace default'

        refused = fleet(env, "member", "remove", "member-2", *state)
        assert refused.returncode == 1
        assert "member member-2 has 1 job(s) placed: default/default-test-pytorch" in refused.stderr

        removed = fleet(env, "member", "remove", "member-4", *state)
        assert removed.returncode == 0, removed.stderr
        assert "member member-4 removed from the local fleet's members" in removed.stdout
        deadline = time.monotonic() + 30
        while "member-4" in clusters(env):
            assert time.monotonic() < deadline
            time.sleep(0.5)

        # Cordon: no new job goes there, the running one stays; shown by kubectl and the CLI.
        cordoned = fleet(env, "member", "cordon", "member-2")
        assert cordoned.returncode == 0, cordoned.stderr
        mc = table_rows(kubectl_out(env, "get", "mc"))
        assert {r["NAME"]: r["SCHEDULING"] for r in mc}["member-2"] == "Cordoned"
        assert table_rows(fleet(env, "clusters").stdout)[1]["SCHEDULING"] == "Cordoned"
        taints = yaml.safe_load(kubectl_out(env, "get", "mc", "member-2", "-o", "yaml"))["spec"]["taints"]
        assert [(t["key"], t["effect"]) for t in taints] == [
            ("cluster.karmada.io/unschedulable", "NoSchedule")
        ]
        sample = (ROOT / "config/samples/pytorch_multinodes_acjob_910b.yaml").read_text()
        other = sample.replace("default-test-pytorch", "other")
        explained = subprocess.run(
            [str(VENV_BIN / "fleet"), "explain", "-f", "-"], input=other,
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert "member-2: cordoned" in explained.stdout, explained.stdout + explained.stderr
        time.sleep(2.5)  # the dispatcher reads taints every policy refresh
        subprocess.run(
            ["kubectl", "apply", "-f", "config/samples/t9k-tensorflowtrainingjob.yaml"],
            env=env, cwd=ROOT, check=True, capture_output=True,
        )  # fmt: skip
        where = wait_copies(env, "tensorflowtrainingjob", lambda copies: len(copies) == 1)
        assert where[0] != "member-2", where
        assert job_states(env, "acjob")["default-test-pytorch"] == "Running"

        # Drain where the T9k job runs: its copy goes first, then it runs elsewhere, once.
        drained = fleet(env, "member", "drain", where[0])
        assert drained.returncode == 0, drained.stderr
        moved = wait_copies(env, "tensorflowtrainingjob", lambda copies: copies and where[0] not in copies)
        assert len(moved) == 1 and moved[0] not in (where[0], "member-2"), moved
        described = kubectl_out(env, "describe", "tensorflowtrainingjob", "tensorflow-example")
        assert f"{where[0]} is being drained (fleet member drain): moved to another member" in described
        assert "CopyLost" not in described
        for name in (where[0], "member-2"):
            assert fleet(env, "member", "uncordon", name).returncode == 0
        mc = table_rows(kubectl_out(env, "get", "mc"))
        assert {r["SCHEDULING"] for r in mc} == {"Schedulable"}
        # The same through the API: spec.taints, the one field of a MemberCluster an admin sets.
        taint = '{"spec":{"taints":[{"key":"cluster.karmada.io/unschedulable","effect":"NoSchedule"}]}}'
        assert "patched" in kubectl_out(env, "patch", "mc", "member-3", "--type", "merge", "-p", taint)
        assert table_rows(kubectl_out(env, "get", "mc", "member-3"))[0]["SCHEDULING"] == "Cordoned"
        wrong = subprocess.run(
            ["kubectl", "patch", "mc", "member-3", "--type", "merge", "-p",
             '{"spec":{"taints":[{"key":"k","effect":"PreferNoSchedule"}]}}'],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert wrong.returncode == 1
        assert 'spec.taints[0].effect: Invalid value: "PreferNoSchedule"' in wrong.stderr
        kubectl_out(env, "patch", "mc", "member-3", "--type", "merge", "-p", '{"spec":{"taints":null}}')
        assert table_rows(kubectl_out(env, "get", "mc", "member-3"))[0]["SCHEDULING"] == "Schedulable"

        queues = fleet(env, "quota", "queues", *state)
        assert queues.returncode == 0 and "root" in queues.stdout, queues.stderr

        # A kubeconfig pointing at a fleet endpoint that is not the local fleet's: refused, saying why.
        other = yaml.safe_load(up.kubeconfig.read_text())
        other["clusters"][0]["cluster"].pop("extensions")
        elsewhere = tmp_path / "elsewhere.kubeconfig"
        elsewhere.write_text(yaml.safe_dump(other))
        wrong = fleet(
            {**env, "KUBECONFIG": str(elsewhere)},
            "member", "add", "member-5", "--kubeconfig", str(up.kubeconfig), "--context", "member-3",
        )  # fmt: skip
        assert wrong.returncode == 1
        assert "points at a fleet endpoint, not at the cluster Fleet runs in" in wrong.stderr
    finally:
        assert stop_up(up) == 0, up.log()


def test_no_redis_given_and_no_fleet_up_running_is_refused(tmp_path: Path) -> None:
    env = {"PATH": str(VENV_BIN) + ":/usr/bin:/bin", "HOME": str(tmp_path)}
    done = fleet(env, "quota", "queues", "--state-dir", str(tmp_path / "none"), cwd=tmp_path)
    assert done.returncode == 2
    assert "which Redis is the fleet's? Pass --redis URL or set $FLEET_REDIS_URL" in done.stderr
    assert "no default is guessed" in done.stderr
