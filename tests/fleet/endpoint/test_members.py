"""MemberClusters at the fleet: one per member context of the kubeconfig, health from the syncer's
hash, and never a credential of the members in any answer or log line."""

from __future__ import annotations

import base64
import logging
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import yaml

from fleet.endpoint.members import members_from
from fleet.state.dispatch_keys import DEFAULT_DISPATCH_KEYS
from fleet.state.member_health import MemberHealth, write_health
from tests.fleet.endpoint.conftest import TREE
from tests.support.fleet_api import FleetApiThread
from tests.support.kubectl import Kubectl, require_kubectl, table

pytestmark = pytest.mark.integration

#: Everything secret or private in the members' kubeconfig; none of it may leave the fleet.
SECRETS = {
    "member-1": "tok-member-1-4f9c2a7e",
    "member-2": "tok-member-2-81bd03c5",
    "member-3": "tok-member-3-c0ffee99",
}
PASSWORD = "pw-member-3-a61d"
KEY = base64.b64encode(b"-----BEGIN PRIVATE KEY-----key-member-2-----END-----").decode()
HOSTS = {name: f"https://{name}.internal.example:6443" for name in SECRETS}


def members_kubeconfig(path: Path, fleet_url: str, names: list[str]) -> Path:
    """A kubeconfig as ``fleet up`` writes one: ``fleet`` plus a context per member, with secrets."""
    users: list[dict[str, object]] = [{"name": "fleet", "user": {"token": "fleet-user-token"}}]
    for name in names:
        user: dict[str, object] = {"token": SECRETS[name]}
        if name == "member-2":
            user["client-key-data"] = KEY
        if name == "member-3":
            user = {"username": "admin", "password": PASSWORD}
        users.append({"name": name, "user": user})
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "fleet",
        "clusters": [{"name": "fleet", "cluster": {"server": fleet_url}}]
        + [{"name": n, "cluster": {"server": HOSTS[n]}} for n in names],
        "users": users,
        "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in ["fleet", *names]],
    }
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def members_api(fleet_redis: redis.Redis, tmp_path: Path) -> Iterator[tuple[FleetApiThread, Path]]:
    config = members_kubeconfig(
        tmp_path / "members.kubeconfig", "http://127.0.0.1:1", ["member-1", "member-2"]
    )
    now = time.time()
    write_health(fleet_redis, DEFAULT_DISPATCH_KEYS, "member-1", MemberHealth(True, now, probed=now))
    write_health(
        fleet_redis, DEFAULT_DISPATCH_KEYS, "member-2", MemberHealth(False, now, error="connection refused")
    )
    with FleetApiThread(fleet_redis, members=members_from(config)) as server:
        yield server, config


@pytest.fixture
def mkubectl(members_api: tuple[FleetApiThread, Path], tmp_path: Path) -> Kubectl:
    server, _ = members_api
    return Kubectl(require_kubectl(), server.kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")


def test_kubectl_lists_members_with_their_health(mkubectl: Kubectl) -> None:
    rows = table(mkubectl("get", "memberclusters", "-o", "wide").stdout)
    assert rows[0] == [
        "NAME",
        "READY",
        "SINCE",
        "LAST-PROBE",
        "FREE-NPUS",
        "SCHEDULING",
        "ALLOCATABLE-NPUS",
        "NODES-BY-FREE-NPUS",
        "FREE-CPU",
        "FREE-MEMORY",
        "MESSAGE",
    ]
    assert rows[1][4] == "<unknown>" and rows[1][6:10] == ["<unknown>"] * 4  # no capacity seen yet
    assert rows[1][5] == "Schedulable"
    assert rows[1][:2] == ["member-1", "True"]
    assert rows[2][:2] == ["member-2", "False"]
    assert rows[2][-2:] == ["connection", "refused"]
    obj = yaml.safe_load(mkubectl("get", "mc", "member-2", "-o", "yaml").stdout)
    [ready] = obj["status"]["conditions"]
    assert (ready["type"], ready["status"], ready["reason"], ready["message"]) == (
        "Ready",
        "False",
        "ProbeFailed",
        "connection refused",
    )
    assert "namespace" not in obj["metadata"]  # cluster-scoped


def test_a_member_added_to_the_kubeconfig_shows_up_unprobed(
    members_api: tuple[FleetApiThread, Path], mkubectl: Kubectl
) -> None:
    server, config = members_api
    time.sleep(0.01)  # a new mtime
    members_kubeconfig(config, server.url, ["member-1", "member-2", "member-3"])
    rows = table(mkubectl("get", "mc").stdout)
    assert [row[:2] for row in rows[1:]] == [
        ["member-1", "True"],
        ["member-2", "False"],
        ["member-3", "Unknown"],
    ]


def _fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def test_member_credentials_never_appear_in_a_response_or_a_log_line(
    members_api: tuple[FleetApiThread, Path], mkubectl: Kubectl, caplog: pytest.LogCaptureFixture
) -> None:
    server, config = members_api
    caplog.set_level(logging.DEBUG)
    members_kubeconfig(config, server.url, ["member-1", "member-2", "member-3"])
    mkubectl("apply", "-f", str(TREE))
    seen = [
        mkubectl("get", "mc", "-o", "yaml").stdout,
        mkubectl("describe", "mc").stdout,
        mkubectl("get", "mc", "member-3", "-o", "json").stdout,
        mkubectl("api-resources").stdout,
        mkubectl("get", "--raw", "/apis/fleet.io/v1alpha1/memberclusters?watch=1&timeoutSeconds=1").stdout,
        mkubectl("get", "mc", "member-404", ok=False).stderr,
    ]
    for path in (
        "/api",
        "/apis",
        "/apis/fleet.io/v1alpha1",
        "/openapi/v2",
        "/openapi/v3",
        "/metrics",
        "/version",
    ):
        seen.append(_fetch(server.url + path))
    seen.append(repr(members_from(config)))
    text = "\n".join(seen + [record.getMessage() for record in caplog.records])
    assert "member-3" in text and "Unknown" in text  # the members are there...
    for secret in [*SECRETS.values(), PASSWORD, KEY, "key-member-2", *HOSTS.values(), "internal.example"]:
        assert secret not in text  # ...but nothing of how the fleet reaches them
