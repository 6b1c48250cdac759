"""A job's life as tools read it, against ``fleet up`` (issue 29, requirements 2 and 3).

* ``kubectl wait --for=condition=...`` answers each state as it is now: conditions are one per
  type, the current truth, not a history (``Queued``, ``Queued=False``, ``Admitted``,
  ``Dispatched``, ``Running``, ``Succeeded``), and every time in ``status`` is RFC 3339.
* ``fleet up`` stopped while a job runs and started again with its state kept (its Redis) meets
  members that restarted empty: the job's copy is gone, so its attempt ends (``CopyLost``) and it
  runs again, rather than staying ``Running`` on a member that does not have it and holding the
  seed tree's one job slot for ever.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from fleet.timestamps import parse_rfc3339
from tests.fleet.local.test_up import KUBECTL, ROOT, Up, kubectl_env, start_up, stop_up, wait_ready

pytestmark = pytest.mark.integration

SAMPLE = "config/samples/pytorch_multinodes_acjob_910b.yaml"
FIRST, SECOND = "default-test-pytorch", "second-test-pytorch"


def kubectl(env: dict[str, str], *args: str, stdin: str | None = None, timeout: float = 90) -> str:
    done = subprocess.run(
        [KUBECTL, *args], env=env, cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=timeout,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def wait(env: dict[str, str], condition: str, name: str, seconds: int = 60) -> None:
    """``kubectl wait --for=condition=CONDITION acjob/NAME``, as a script waits for a job."""
    kubectl(env, "wait", f"--for=condition={condition}", f"acjob/{name}", f"--timeout={seconds}s",
            timeout=seconds + 15)  # fmt: skip


def job(env: dict[str, str], name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(kubectl(env, "get", "acjob", name, "-o", "json"))
    return found


def submit_both(env: dict[str, str]) -> None:
    kubectl(env, "apply", "-f", "config/samples/elasticquotatree.yaml")
    kubectl(env, "apply", "-f", SAMPLE)
    second = (ROOT / SAMPLE).read_text().replace(FIRST, SECOND)
    kubectl(env, "apply", "-f", "-", stdin=second)


def test_kubectl_wait_answers_every_state_as_it_is_now(tmp_path: Path) -> None:
    up = start_up(tmp_path, "--job-seconds", "8")
    try:
        env = kubectl_env(up.kubeconfig)
        wait_ready(up, env)
        submit_both(env)
        wait(env, "Running", FIRST)
        for condition in ("Queued=False", "Admitted", "Dispatched"):
            wait(env, condition, FIRST, 5)
        wait(env, "Queued", SECOND, 5)  # the seed tree's one job slot is taken
        running = job(env, FIRST)
        kinds = [c["type"] for c in running["status"]["conditions"]]
        assert len(kinds) == len(set(kinds)), f"one condition per type: {kinds}"
        assert kinds[-1] == "Running"
        for entry in running["status"]["conditions"]:
            assert parse_rfc3339(entry["lastTransitionTime"]) is not None
        wait(env, "Succeeded", FIRST, 60)
        wait(env, "Running=False", FIRST, 5)
        wait(env, "Running", SECOND, 60)  # its slot came free
        done = job(env, FIRST)
        assert [c["type"] for c in done["status"]["conditions"]][-1] == "Succeeded"
    finally:
        stop_up(up)


def test_fleet_up_restarted_with_its_state_runs_the_job_again_instead_of_a_ghost(tmp_path: Path) -> None:
    up: Up | None = start_up(tmp_path, "--job-seconds", "600")
    try:
        assert up is not None
        env = kubectl_env(up.kubeconfig)
        wait_ready(up, env)
        submit_both(env)
        wait(env, "Running", FIRST)
        assert job(env, FIRST)["status"]["attempt"] == 1
        assert stop_up(up) == 0
        up = start_up(tmp_path, "--job-seconds", "600")  # the same state directory: Redis kept
        env = kubectl_env(up.kubeconfig)
        wait_ready(up, env)

        def ran_again() -> bool:
            obj = job(env, FIRST)
            last = obj["status"]["conditions"][-1]["type"]
            return bool(obj["status"].get("attempt") == 2 and last == "Running")

        deadline = time.monotonic() + 60
        while not ran_again():
            assert time.monotonic() < deadline, f"the job did not run again:\n{job(env, FIRST)}\n{up.log()}"
            time.sleep(1)
        described = kubectl(env, "describe", "acjob", FIRST)
        assert "CopyLost" in described and "member-2" in described
        copies = kubectl(env, "--context", "member-2", "get", "acjob", "-o", "name")
        assert f"ascendjob.mindxdl.gitee.com/{FIRST}" in copies.split()
        assert job(env, SECOND)["status"]["conditions"][-1]["type"] == "Queued", "one slot, one job"
    finally:
        if up is not None:
            stop_up(up)
