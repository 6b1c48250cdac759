"""Fixtures: a fleet API replica per test over a fresh fakeredis, and kubectl pointed at it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fakeredis
import pytest
import redis

from tests.support.fleet_api import FleetApiThread
from tests.support.kubectl import Kubectl, require_kubectl

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "config" / "samples"
TREE = SAMPLES / "elasticquotatree.yaml"
JOB = SAMPLES / "pytorch_multinodes_acjob_910b.yaml"
JOB_NAME = "default-test-pytorch"
POLICIES = (SAMPLES / "propagationpolicy-gang.yaml", SAMPLES / "propagationpolicy-gang-queue.yaml")


@pytest.fixture
def fleet_redis() -> Iterator[redis.Redis]:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    yield client
    client.close()


@pytest.fixture
def fleet_api(fleet_redis: redis.Redis) -> Iterator[FleetApiThread]:
    with FleetApiThread(fleet_redis, members=lambda: ["member-1", "member-2"]) as server:
        yield server


@pytest.fixture
def kubectl(fleet_api: FleetApiThread, tmp_path: Path) -> Kubectl:
    binary = require_kubectl()
    return Kubectl(binary, fleet_api.kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")


#: The URL prefix of the fleet's AscendJobs.
JOBS = "/apis/mindxdl.gitee.com/v1"


def call(
    server: FleetApiThread,
    method: str,
    path: str,
    body: Any = None,
    *,
    token: str | None = None,
    timeout: float = 10.0,
    merge: bool = False,
) -> tuple[int, Any]:
    """One plain HTTP request: the status code and the decoded JSON body (a Status on errors).
    ``merge``: the body is a JSON merge patch (for PATCH)."""
    headers = {"Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/merge-patch+json" if merge else "application/json"
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(server.url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read() or b"null")
