"""Fleet's finalizer stays Fleet's (issue 29, item 6 and requirement 5), with real processes.

A user who runs ``kubectl replace -f`` of a running job's own file, ``kubectl patch`` or
``kubectl edit`` that would drop ``fleet.io/dispatch`` is refused (422 naming the finalizer), so
a later ``kubectl delete`` goes the way every delete goes: the copy in the member is deleted
first, then the quota is released, then the fleet object goes. In a leaf of ``max-jobs: 1`` the
next job runs only after that: never two copies at once, never more than one admitted job.
"""

from __future__ import annotations

import re
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fleet.dispatch.conftest import MODULE_POOL, InvariantMonitor, RunningFleet
from tests.fleet.placement.factory import job
from tests.support.fleet_api import FleetApiThread
from tests.support.kubectl import Kubectl, require_kubectl

pytestmark = pytest.mark.integration

MEMBER = "member-1"
NAMESPACE = "team-a"
FINALIZER = "fleet.io/dispatch"
#: One leaf that admits one job at a time.
SOLO_TREE = """
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    max: {huawei.com/Ascend910: 32, kube-queue/max-jobs: 10}
    min: {huawei.com/Ascend910: 32}
    children:
    - name: solo
      max: {huawei.com/Ascend910: 32, kube-queue/max-jobs: 1}
      min: {huawei.com/Ascend910: 32}
      namespaces: [team-a]
"""
LIMITS = {"solo": {"kube-queue/max-jobs": 1}}


def _job_file(directory: Path, name: str) -> Path:
    obj = job(name, workers=0, npus=1, exclusive=False)
    obj["metadata"]["namespace"] = NAMESPACE
    obj["metadata"]["annotations"] = {"sim.fleet.io/duration-seconds": "600"}
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(obj))
    return path


class CopyMonitor:
    """Samples the member's copies while the test goes on: never two jobs' copies at once."""

    def __init__(self, fleet: RunningFleet) -> None:
        self.fleet = fleet
        self.most = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CopyMonitor:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self._sample()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self._sample()

    def _sample(self) -> None:
        """One look at the member; also taken on entry and exit, so the ends are never missed."""
        with_copies = self.fleet.member_copies()
        self.samples += 1
        self.most = max(self.most, len(with_copies))


def test_a_job_whose_finalizer_no_update_can_drop_is_purged_before_the_next_runs(
    fleet_factory: Callable[..., RunningFleet], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = fleet_factory(members={MEMBER: MODULE_POOL}, workers=1, tree=SOLO_TREE)
    first, second = _job_file(tmp_path, "first"), _job_file(tmp_path, "second")
    with FleetApiThread(fleet.client) as api:
        kubectl = Kubectl(require_kubectl(), api.kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")
        where = ("-n", NAMESPACE)
        kubectl("create", "-f", str(first))
        fleet.wait_for("the first job to run", lambda: fleet.states().get("team-a/first") == "Running", 30)
        kubectl("create", "-f", str(second))
        time.sleep(1.0)
        assert fleet.states()["team-a/second"] == "Queued", "max-jobs 1: the second waits"
        uid = yaml.safe_load(kubectl("get", "acjob", "first", *where, "-o", "yaml").stdout)["metadata"]["uid"]
        assert fleet.member_copies().get(uid) == [MEMBER]

        # Every way a user would drop the finalizer is refused, naming it.
        replaced = kubectl("replace", "-f", str(first), ok=False)
        assert replaced.returncode != 0 and f"{FINALIZER} is Fleet's finalizer" in replaced.stderr, (
            replaced.stderr
        )
        patched = kubectl("patch", "acjob", "first", *where, "--type", "merge",
                          "-p", '{"metadata": {"finalizers": null}}', ok=False)  # fmt: skip
        assert patched.returncode != 0 and f"{FINALIZER} is Fleet's finalizer" in patched.stderr, (
            patched.stderr
        )
        editor = tmp_path / "drop-finalizer.sh"
        editor.write_text("#!/bin/sh\nsed -i '/^ *- fleet\\.io\\/dispatch$/d' \"$1\"\n")
        editor.chmod(editor.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setenv("KUBE_EDITOR", str(editor))
        monkeypatch.setenv("TMPDIR", str(tmp_path))
        edited = kubectl("edit", "acjob", "first", *where, ok=False)
        assert edited.returncode != 0, edited.stdout
        kept = Path(re.findall(r'stored to "([^"]+)"', edited.stderr)[-1]).read_text()
        assert f"{FINALIZER} is Fleet's finalizer" in kept
        now: dict[str, Any] = yaml.safe_load(kubectl("get", "acjob", "first", *where, "-o", "yaml").stdout)
        assert now["metadata"]["finalizers"] == [FINALIZER]

        # The delete then waits for the copy; the next job runs only once it is gone.
        with InvariantMonitor(fleet, LIMITS) as quota, CopyMonitor(fleet) as copies:
            kubectl("delete", "acjob", "first", *where, "--timeout=40s")
            assert fleet.member_copies().get(uid) is None, "the delete returned while the copy ran"
            fleet.wait_for(
                "the second job to run", lambda: fleet.states() == {"team-a/second": "Running"}, 30
            )
        assert quota.samples > 0 and copies.samples > 0
        assert fleet.violations == [], fleet.violations
        assert copies.most == 1, f"at most one job's copy at a time (and the first's seen), saw {copies.most}"
