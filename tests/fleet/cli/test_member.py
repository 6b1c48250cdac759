"""``fleet member add/remove`` against the simulator (issue 21, req. 3).

One ``fleet sim`` plays both sides: member ``control`` is the cluster Fleet runs in (where the
members' Secret lives) and ``m1`` the member being registered. ``add`` checks that it reaches
the member and stores its credentials inline in the Secret; ``remove`` refuses while a job is
placed on the member and, with ``--force``, sends the job back to its queue first.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from kubernetes.client import CoreV1Api, V1Namespace, V1ObjectMeta

from fleet.cli import main
from fleet.connections import redis_from_url
from fleet.dispatch.context import Context
from fleet.jobs import current_state
from fleet.jobs.phases import Phase
from fleet.members import load_members
from tests.fleet.dispatch.conftest import admitted_on
from tests.support.kinds import FLEET_ASCENDJOB
from tests.support.redis_server import RedisServer
from tests.support.sim import CARD_POOL, RunningSim, running_sim, small_topology

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sims() -> Iterator[RunningSim]:
    with running_sim(small_topology({"control": CARD_POOL, "m1": CARD_POOL})) as sim:
        CoreV1Api(sim.api_client("control")).create_namespace(
            V1Namespace(metadata=V1ObjectMeta(name="fleet-system"))
        )
        yield sim


def _fleet(sim: RunningSim, *args: str) -> Result:
    cluster = ["--cluster-kubeconfig", str(sim.kubeconfig), "--cluster-context", "control"]
    return CliRunner().invoke(main, ["member", *args, *cluster])


def _stored(sim: RunningSim) -> dict[str, Any] | None:
    core = CoreV1Api(sim.api_client("control"))
    secrets = core.list_namespaced_secret("fleet-system").items
    found = [s for s in secrets if s.metadata is not None and s.metadata.name == "fleet-members"]
    if not found:
        return None
    loaded: dict[str, Any] = yaml.safe_load(base64.b64decode((found[0].data or {})["kubeconfig"]))
    return loaded


def test_add_stores_credentials_that_reach_the_member(sims: RunningSim, tmp_path: Path) -> None:
    added = _fleet(sims, "add", "gpu-east", "--kubeconfig", str(sims.kubeconfig), "--context", "m1")
    assert added.exit_code == 0, added.output
    assert "member gpu-east added" in added.output
    stored = _stored(sims)
    assert stored is not None and [c["name"] for c in stored["contexts"]] == ["gpu-east"]
    # What the roles will read: the member, under its new name, reachable with what is stored.
    path = tmp_path / "members"
    path.write_text(yaml.safe_dump(stored))
    members = load_members(path)
    try:
        assert list(members) == ["gpu-east"]
        assert members["gpu-east"].probe().healthy
    finally:
        for member in members.values():
            member.close()


def test_add_refuses_a_member_it_cannot_reach_and_stores_nothing(sims: RunningSim, tmp_path: Path) -> None:
    before = _stored(sims)
    config = yaml.safe_load(sims.kubeconfig.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = "https://127.0.0.1:1"
    broken = tmp_path / "broken"
    broken.write_text(yaml.safe_dump(config))
    refused = _fleet(sims, "add", "gone", "--kubeconfig", str(broken), "--context", "m1")
    assert refused.exit_code != 0
    assert "not reachable" in refused.output and "nothing stored" in refused.output
    assert _stored(sims) == before


def test_remove_refuses_while_a_job_is_placed_and_requeues_it_with_force(
    sims: RunningSim, redis_server: RedisServer
) -> None:
    assert _fleet(sims, "add", "m1", "--kubeconfig", str(sims.kubeconfig), "--context", "m1").exit_code == 0
    client = redis_from_url(redis_server.url)
    try:
        placed = admitted_on(Context(client, None), "trainer", "m1")
        key = placed["metadata"]["name"]

        refused = _fleet(sims, "remove", "m1", "--redis", redis_server.url)
        assert refused.exit_code != 0
        assert f"default/{key}" in refused.output and "--force" in refused.output
        stored = _stored(sims)
        assert stored is not None and "m1" in [c["name"] for c in stored["contexts"]]

        forced = _fleet(sims, "remove", "m1", "--redis", redis_server.url, "--force")
        assert forced.exit_code == 0, forced.output
        assert "1 job(s) requeued" in forced.output
        stored = _stored(sims)
        assert stored is not None and "m1" not in [c["name"] for c in stored["contexts"]]
        obj = Context(client, None).objects.get(FLEET_ASCENDJOB, "default", key)
        assert current_state(obj) == Phase.QUEUED
        assert "m1 is being removed from the fleet" in json.dumps(obj["status"])
    finally:
        client.close()
