"""The fleet console through HTTP as a browser meets it: signing in and out with API tokens, what
an admin and a tenant each see (exactly what the API lets them read), user-written text shown as
text, the security headers, live updates, and never an error page for a bad or expired session."""

from __future__ import annotations

import copy
import hashlib
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import fakeredis
import httpx
import pytest
import redis
import yaml

from fleet.endpoint.auth import Identity
from fleet.endpoint.keys import DEFAULT_API_KEYS
from tests.fleet.endpoint.conftest import JOB, JOBS, call
from tests.support.capacity_records import MEMBERS, publish
from tests.support.fleet_api import FleetApiThread

pytestmark = pytest.mark.integration

ADMIN, TEAM_A, TEAM_B = "admin-console-token", "team-a-console-token", "team-b-console-token"
TOKENS = {
    ADMIN: Identity("admin", "u0", frozenset({"fleet:admins"})),
    TEAM_A: Identity("alice", "u1", frozenset({"namespace:team-a"})),
    TEAM_B: Identity("bob", "u2", frozenset({"namespace:team-b"})),
}
TREE = yaml.safe_load(
    """
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    max: {cpu: "1000", memory: 4000Gi, huawei.com/Ascend910: "64"}
    min: {cpu: "1000", memory: 4000Gi, huawei.com/Ascend910: "64"}
    children:
    - name: team-a
      max: {cpu: "500", memory: 2000Gi, huawei.com/Ascend910: "32", kube-queue/max-jobs: "1"}
      min: {cpu: "100", memory: 100Gi, huawei.com/Ascend910: "8"}
      namespaces: [team-a]
    - name: team-b
      max: {cpu: "500", memory: 2000Gi, huawei.com/Ascend910: "32"}
      min: {cpu: "100", memory: 100Gi, huawei.com/Ascend910: "8"}
      namespaces: [team-b]
"""
)
HOSTILE = "<script>alert('owned')</script><img src=x onerror=alert(1)>"


def _job(namespace: str, name: str) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(JOB.read_text())
    job["metadata"]["namespace"] = namespace
    job["metadata"]["name"] = name
    return job


@dataclass
class Console:
    api: FleetApiThread
    client: redis.Redis
    http: httpx.Client

    def sign_in(self, token: str, *, origin: str | None = None) -> httpx.Response:
        headers = {"Origin": origin or self.api.url}
        return self.http.post("/console/sign-in", data={"token": token, "next": "/console/"}, headers=headers)

    def session(self, token: str) -> str:
        response = self.sign_in(token)
        assert response.status_code == 303, response.text
        cookie = response.headers["set-cookie"]
        found = re.match(r"__Host-fleet-console=([^;]+);", cookie)
        assert found is not None, cookie
        return found.group(1)

    def get(self, path: str, session: str | None, **headers: str) -> httpx.Response:
        cookie = {"Cookie": f"__Host-fleet-console={session}"} if session is not None else {}
        return self.http.get(path, headers={**cookie, **headers})


@pytest.fixture
def console() -> Iterator[Console]:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    with (
        FleetApiThread(client, tokens=TOKENS, members=lambda: list(MEMBERS)) as api,
        httpx.Client(base_url=api.url, follow_redirects=False, timeout=20) as http,
    ):
        trees = "/apis/scheduling.sigs.k8s.io/v1beta1/namespaces/kube-system/elasticquotatrees"
        assert call(api, "POST", trees, TREE, token=ADMIN)[0] == 201
        publish(client)
        for namespace, name, token in (
            ("team-a", "alpha-one", TEAM_A),
            ("team-a", "alpha-two", TEAM_A),
            ("team-b", "bravo-secret", TEAM_B),
        ):
            status, body = call(
                api, "POST", f"{JOBS}/namespaces/{namespace}/ascendjobs", _job(namespace, name), token=token
            )
            assert status == 201, body
        yield Console(api, client, http)
    client.close()


def _text(html: str) -> str:
    return re.sub(r"<[^>]+>", " ", html)


def test_without_a_session_every_page_goes_to_sign_in_and_never_errs(console: Console) -> None:
    for path in ("/console/", "/console/jobs?state=Queued", "/console/jobs/ascendjobs/team-a/alpha-one"):
        response = console.get(path, None)
        assert response.status_code == 303
        assert response.headers["location"].startswith("/console/sign-in?next=%2Fconsole%2F")
    for garbage in ("not-a-session", "", "x" * 5000):
        assert console.get("/console/quota", garbage).status_code == 303
    assert console.get("/console/queues", None, **{"X-Console-Fragment": "1"}).status_code == 401
    assert console.get("/console/live", None).status_code == 401
    page = console.get("/console/sign-in", None)
    assert page.status_code == 200
    assert 'name="token"' in page.text and 'type="password"' in page.text
    assert console.get("/console", None).headers["location"] == "/console/"


def test_a_bad_token_gets_the_sign_in_page_again_and_no_session(console: Console) -> None:
    response = console.sign_in("not-a-token")
    assert response.status_code == 401
    assert "That token is not accepted by the fleet API." in response.text
    assert "set-cookie" not in response.headers
    assert not console.client.keys("*console-session*")


def test_signing_in_sets_a_strict_session_cookie_and_signing_out_ends_it(console: Console) -> None:
    response = console.sign_in(TEAM_A)
    assert response.status_code == 303
    assert response.headers["location"] == "/console/"
    cookie = response.headers["set-cookie"]
    for attribute in ("HttpOnly", "Secure", "SameSite=strict", "Path=/"):
        assert attribute in cookie
    session = re.match(r"__Host-fleet-console=([^;]+);", cookie).group(1)  # type: ignore[union-attr]
    key = DEFAULT_API_KEYS.console_session(hashlib.sha256(session.encode()).hexdigest())
    assert console.client.get(key) == TEAM_A.encode()  # the token is kept server side
    assert TEAM_A not in cookie
    page = console.get("/console/", session)
    assert page.status_code == 200 and "Signed in as" in page.text and "alice" in page.text
    out = console.http.post(
        "/console/sign-out", headers={"Cookie": f"__Host-fleet-console={session}", "Origin": console.api.url}
    )
    assert out.status_code == 303
    assert out.headers["location"] == "/console/sign-in"
    assert console.client.get(key) is None
    assert console.get("/console/", session).status_code == 303


def test_an_expired_session_or_a_withdrawn_token_gets_the_sign_in_page(console: Console) -> None:
    session = console.session(TEAM_A)
    key = DEFAULT_API_KEYS.console_session(hashlib.sha256(session.encode()).hexdigest())
    console.client.set(key, "a-token-the-api-no-longer-knows")
    assert console.get("/console/jobs", session).status_code == 303
    console.client.delete(key)  # expired
    assert console.get("/console/jobs", session).status_code == 303


def test_a_sign_in_or_out_posted_from_another_site_is_refused(console: Console) -> None:
    assert console.sign_in(ADMIN, origin="https://evil.example").status_code == 403
    assert not console.client.keys("*console-session*")
    session = console.session(ADMIN)
    out = console.http.post(
        "/console/sign-out",
        headers={"Cookie": f"__Host-fleet-console={session}", "Origin": "https://evil.example"},
    )
    assert out.status_code == 403
    assert console.get("/console/", session).status_code == 200


def test_pages_carry_a_strict_content_security_policy(console: Console) -> None:
    session = console.session(ADMIN)
    for path in (
        "/console/",
        "/console/sign-in",
        "/console/static/console.js",
        "/console/static/console.css",
    ):
        response = console.get(path, session)
        assert response.status_code == 200, path
        policy = response.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy and "unsafe" not in policy
        assert response.headers["x-content-type-options"] == "nosniff"
    page = console.get("/console/", session).text
    assert '<script src="/console/static/console.js" defer></script>' in page
    assert "style=" not in page and "onclick" not in page  # nothing inline for the policy to block
    assert console.get("/console/", session).headers["cache-control"] == "no-store"


def test_an_admin_sees_every_team_and_a_tenant_only_its_own(console: Console) -> None:
    admin, alice = console.session(ADMIN), console.session(TEAM_A)
    jobs = console.get("/console/jobs", admin).text
    assert "team-a/alpha-one" in jobs and "team-b/bravo-secret" in jobs
    mine = console.get("/console/jobs", alice).text
    assert "team-a/alpha-one" in mine and "bravo-secret" not in mine and "team-b" not in mine
    # A tenant asking for the other team's job by URL gets "not found", not the job.
    other = console.get("/console/jobs/ascendjobs/team-b/bravo-secret", alice)
    assert other.status_code == 404
    assert "bravo-secret" not in _text(other.text).replace("There is no such job", "")
    assert console.get("/console/jobs/ascendjobs/team-b/bravo-secret", admin).status_code == 200
    # Filters on the server: by namespace, state and name.
    assert "alpha-one" not in console.get("/console/jobs?namespace=team-b", admin).text
    assert "1 job." in console.get("/console/jobs?name=bravo", admin).text
    searched = console.get("/console/jobs?name=bravo", alice).text
    assert "0 jobs." in searched and "bravo-secret" not in searched
    # The quota tree: a tenant sees its leaf and the root above it, not the other team's node.
    quota = console.get("/console/quota", alice).text
    assert "root/team-a" in quota and "root/team-b" not in quota
    assert "root/team-b" in console.get("/console/quota", admin).text
    # The queues: only its leaf's, with the reason and the blocker.
    queues = console.get("/console/queues", alice).text
    assert "root-team-a" in queues and "root-team-b" not in queues and "bravo" not in queues
    assert "2 of 2 in queue root-team-a" in queues
    # The fleet: every member (the API lets every user read them), only its own jobs on them.
    fleet = console.get("/console/", alice).text
    assert all(member in fleet for member in MEMBERS)
    assert "16 of 16 NPUs free" in fleet
    assert "bravo" not in fleet


def test_a_job_page_has_its_state_reason_and_where_it_would_fit_now(console: Console) -> None:
    alice = console.session(TEAM_A)
    page = console.get("/console/jobs/ascendjobs/team-a/alpha-two", alice)
    assert page.status_code == 200
    text = " ".join(_text(page.text).split())
    assert "State Queued" in text
    assert "Position 2 of 2 in queue root-team-a" in text
    assert "Where would it fit now" in text
    assert "member-2 True yes fits" in text
    # The timeline: its submission, from its Event.
    timeline = " ".join(_text(page.text.split('id="timeline"', 1)[1]).split())
    assert "Normal Submitted : queued in root-team-a" in timeline, timeline


def test_html_and_script_a_user_wrote_are_shown_as_text(console: Console) -> None:
    job = copy.deepcopy(_job("team-a", "hostile"))
    job["metadata"]["annotations"] = {"note": HOSTILE}
    assert call(console.api, "POST", f"{JOBS}/namespaces/team-a/ascendjobs", job, token=TEAM_A)[0] == 201
    path = f"{JOBS}/namespaces/team-a/ascendjobs/hostile"
    _, stored = call(console.api, "GET", path, token=ADMIN)
    stored["status"]["conditions"][-1]["message"] = HOSTILE
    status, body = call(console.api, "PUT", path + "/status", stored, token=ADMIN)
    assert status == 200, body
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "hostile.1", "namespace": "team-a"},
        "involvedObject": {
            "apiVersion": stored["apiVersion"],
            "kind": "AscendJob",
            "name": "hostile",
            "namespace": "team-a",
            "uid": stored["metadata"]["uid"],
        },
        "reason": "Hostile",
        "message": HOSTILE,
        "type": "Normal",
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
        "count": 1,
    }
    assert call(console.api, "POST", "/api/v1/namespaces/team-a/events", event, token=ADMIN)[0] == 201
    alice = console.session(TEAM_A)
    deadline = time.monotonic() + 10
    while "Hostile" not in (page := console.get("/console/jobs/ascendjobs/team-a/hostile", alice).text):
        assert time.monotonic() < deadline, page
        time.sleep(0.2)
    for html in (page, console.get("/console/jobs", alice).text, console.get("/console/queues", alice).text):
        assert "<script>alert" not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert(&#39;owned&#39;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in html


def test_a_fragment_is_the_main_part_only(console: Console) -> None:
    admin = console.session(ADMIN)
    whole = console.get("/console/jobs", admin).text
    part = console.get("/console/jobs", admin, **{"X-Console-Fragment": "1"}).text
    assert whole.lstrip().startswith("<!doctype html>") and "<main" in whole
    assert "<main" not in part and "<html" not in part and "<h1>Jobs</h1>" in part


def test_the_live_stream_says_change_when_a_job_changes(console: Console) -> None:
    admin = console.session(ADMIN)
    console.get("/console/jobs", admin)  # the index is up
    with console.http.stream(
        "GET", "/console/live", headers={"Cookie": f"__Host-fleet-console={admin}"}
    ) as live:
        assert live.status_code == 200
        assert live.headers["content-type"].startswith("text/event-stream")
        lines = live.iter_lines()
        assert next(lines).startswith("retry:")
        job = _job("team-b", "bravo-two")
        assert call(console.api, "POST", f"{JOBS}/namespaces/team-b/ascendjobs", job, token=TEAM_B)[0] == 201
        deadline = time.monotonic() + 15
        for line in lines:
            if line == "event: change":
                break
            assert time.monotonic() < deadline
    assert "team-b/bravo-two" in console.get("/console/jobs", admin).text


def test_without_a_token_file_the_console_serves_everyone_like_the_api() -> None:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    with (
        FleetApiThread(client, members=lambda: list(MEMBERS)) as api,
        httpx.Client(base_url=api.url, follow_redirects=False, timeout=20) as http,
    ):
        page = http.get("/console/jobs")
        assert page.status_code == 200
        assert "Sign out" not in page.text
        assert http.get("/console/sign-in").headers["location"] == "/console/"
    client.close()
