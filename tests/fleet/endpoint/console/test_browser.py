"""The console in a real headless Chromium, on ``fleet up``: sign in, see the three members and
their capacity, a waiting job's reason on its queue and on its page, watch it turn Running with no
reload, and a tenant that cannot see another team's job.

Chromium and its driver are Debian's packages (``.ci/run`` installs them); Selenium drives them
with both paths given, so nothing is downloaded. The tenant signs in to a second API replica of
the same fleet (same Redis, same members, ``fleet up``'s certificate) started with a token file
that holds a tenant, as a deployment with several replicas serves one fleet.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.remote.webdriver import WebDriver

from tests.fleet.local.test_up import KUBECTL, ROOT, Up, kubectl_env, start_up, stop_up, wait_ready
from tests.support.browser import chromium, require_chromium
from tests.support.net import free_port

pytestmark = [pytest.mark.integration, pytest.mark.browser]

SAMPLE = ROOT / "config" / "samples" / "pytorch_multinodes_acjob_910b.yaml"
TENANT_TOKEN = "team-b-browser-token-7f3a"
TREE = """
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    max: {cpu: "999900", memory: 400000Gi, kube-queue/max-jobs: "10000000000"}
    min: {cpu: "9999", memory: 40Gi}
    children:
    - name: child-2
      max: {kube-queue/max-jobs: "1", cpu: "10000", memory: 10000Gi}
      namespaces: [default]
    - name: team-b
      max: {cpu: "10000", memory: 10000Gi}
      namespaces: [team-b]
"""


@dataclass
class Fleet:
    up: Up
    env: dict[str, str]
    console: str
    token: str
    tenant_console: str


def _kubectl(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [KUBECTL, *args], input=stdin, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def _job(name: str, namespace: str = "default") -> str:
    job: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    job["metadata"]["name"] = name
    job["metadata"]["namespace"] = namespace
    return yaml.safe_dump(job)


@pytest.fixture
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    require_chromium()
    tmp = tmp_path_factory.mktemp("console-up")
    up = start_up(tmp, "--job-seconds", "600")
    replica: subprocess.Popen[bytes] | None = None
    try:
        env = kubectl_env(up.kubeconfig)
        wait_ready(up, env, timeout=180)
        output = up.output.read_text()
        console = re.search(r"^console\s+(https://\S+/console/)", output, re.M)
        redis_port = re.search(r"^redis .* on 127\.0\.0\.1:(\d+)", output, re.M)
        assert console is not None and redis_port is not None, output
        config = yaml.safe_load(up.kubeconfig.read_text())
        user = next(c["context"]["user"] for c in config["contexts"] if c["name"] == "fleet")
        token = next(u["user"]["token"] for u in config["users"] if u["name"] == user)
        tokens = tmp / "tenant-tokens.csv"
        tokens.write_text(
            f'{token},fleet-admin,fleet-admin,"fleet:admins"\n{TENANT_TOKEN},bob,u-bob,"namespace:team-b"\n'
        )
        port = free_port()
        tls = up.state_dir / "tls"
        with (tmp / "tenant-api.log").open("wb") as log:
            replica = subprocess.Popen(
                [
                    sys.executable, "-c", "from fleet.cli import main; main(prog_name='fleet')", "api",
                    "--redis", f"redis://127.0.0.1:{redis_port.group(1)}/0",
                    "--kubeconfig", str(up.state_dir / "members.kubeconfig"),
                    "--token-file", str(tokens), "--port", str(port),
                    "--tls-cert-file", str(tls / "fleet-api.crt"),
                    "--tls-private-key-file", str(tls / "fleet-api.key"),
                ],
                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip
        _kubectl(env, "apply", "-f", "-", stdin=TREE)
        yield Fleet(up, env, console.group(1), token, f"https://127.0.0.1:{port}/console/")
    finally:
        if replica is not None:
            replica.terminate()
            replica.wait(30)
        stop_up(up)


def _wait(driver: WebDriver, what: str, check: Callable[[], bool], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout

    def holds() -> bool:
        try:
            return check()
        except StaleElementReferenceException:  # the live page replaced its main part meanwhile
            return False

    while not holds():
        if time.monotonic() > deadline:
            shown = driver.find_element("tag name", "main").text
            pytest.fail(f"timed out waiting for {what}; the page says:\n{shown}")
        time.sleep(0.3)


def _sign_in(driver: WebDriver, console: str, token: str) -> None:
    driver.get(console)
    _wait(driver, "the sign-in page", lambda: "sign-in" in driver.current_url, 60)
    driver.find_element("id", "token").send_keys(token)
    driver.find_element("css selector", "form.sign-in button").click()
    _wait(driver, "signed in", lambda: "Signed in as" in driver.page_source, 30)


def _main(driver: WebDriver) -> str:
    return str(driver.find_element("tag name", "main").text)


def test_an_admin_follows_a_waiting_job_until_it_runs_and_a_tenant_sees_only_its_team(fleet: Fleet) -> None:
    """One test, so that one fleet up serves both halves (xdist would start one per worker)."""
    _an_admin_follows_a_waiting_job_until_it_runs(fleet)
    _a_tenant_cannot_see_another_teams_job(fleet)


def _an_admin_follows_a_waiting_job_until_it_runs(fleet: Fleet) -> None:
    _kubectl(fleet.env, "apply", "-f", "-", stdin=_job("first-job"))
    with chromium() as driver:
        _sign_in(driver, fleet.console, fleet.token)
        _wait(driver, "three members with their capacity", lambda: _main(driver).count("NPUs free") >= 3)
        page = _main(driver)
        for member in ("member-1", "member-2", "member-3"):
            assert member in page
        assert "3 of 3 members Ready." in page
        _wait(
            driver,
            "the first job running",
            lambda: "Running" in _kubectl(fleet.env, "get", "acjob", "first-job"),
        )
        _kubectl(fleet.env, "apply", "-f", "-", stdin=_job("waiting-job"))
        driver.get(fleet.console + "queues")
        # The blocker is computed when the page is made; the reason is the dispatcher's, written
        # on its next cycle: the page shows it without a reload.
        wanted = ("waiting-job", "QuotaExceeded", "kube-queue/max-jobs 1/1 in use")
        _wait(driver, "the job's reason on its queue", lambda: all(w in _main(driver) for w in wanted))
        driver.find_element("link text", "default/waiting-job").click()
        _wait(driver, "the job page", lambda: driver.find_element("id", "job-state").text == "Queued")
        _wait(
            driver,
            "the job's blocker on its page",
            lambda: "kube-queue/max-jobs 1/1 in use" in driver.find_element("id", "job-blocker").text,
        )
        assert "Where would it fit now" in _main(driver)
        driver.execute_script("window.fleetMarker = 42;")
        _kubectl(fleet.env, "delete", "acjob", "first-job", "--wait=false")
        _wait(
            driver,
            "the job turning Running on its page",
            lambda: driver.find_element("id", "job-state").text == "Running",
        )
        assert driver.execute_script("return window.fleetMarker;") == 42, "the page was reloaded"
        assert "member-2" in _main(driver)


def _a_tenant_cannot_see_another_teams_job(fleet: Fleet) -> None:
    _kubectl(fleet.env, "apply", "-f", "-", stdin=_job("bravo", "team-b"))
    _kubectl(fleet.env, "apply", "-f", "-", stdin=_job("hidden-from-b"))
    with chromium(width=390, height=844) as driver:  # a phone's width
        _sign_in(driver, fleet.tenant_console, TENANT_TOKEN)
        driver.get(fleet.tenant_console + "jobs")
        _wait(driver, "the tenant's own job", lambda: "team-b/bravo" in _main(driver))
        assert "hidden-from-b" not in driver.page_source and "default/" not in _main(driver)
        driver.get(fleet.tenant_console + "jobs/ascendjobs/default/hidden-from-b")
        assert "Not found" in _main(driver)
        assert "hidden-from-b" not in _main(driver)
        driver.get(fleet.tenant_console + "quota")
        assert "root/team-b" in _main(driver) and "root/child-2" not in _main(driver)
        wide = driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth];")
        assert wide[1] == 390 and wide[0] <= wide[1], f"the page is {wide[0]}px wide on a {wide[1]}px screen"
