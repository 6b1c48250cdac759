"""The ``explain`` subresource of the job kinds: the fleet says whether it would accept, admit and
place a job now, with a tenant's token, from the records the roles keep in Redis (capacity node
by node as the dispatcher's feed publishes it, health as the syncer probes it), never calling a
member; a job the endpoint would refuse gets the same Status as its create."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

import fakeredis
import pytest
import redis
import yaml

from fleet.endpoint.auth import Identity
from fleet.placement import NEVER
from fleet.state import DEFAULT_DISPATCH_KEYS, Objects
from fleet.state.member_health import MemberHealth, write_health
from queues import Ledger
from tests.fleet.endpoint.conftest import JOB, JOBS, TREE, call
from tests.support.capacity_records import MEMBERS, publish
from tests.support.fleet_api import FleetApiThread, keyspace
from tests.support.kinds import FLEET_ASCENDJOB

pytestmark = pytest.mark.integration

ADMIN, TEAM, OTHER = "admin-token", "team-token", "other-token"
TOKENS = {
    ADMIN: Identity("admin", "u0", frozenset({"fleet:admins"})),
    TEAM: Identity("team", "u1", frozenset({"namespace:default"})),
    OTHER: Identity("other", "u2", frozenset({"namespace:team-b"})),
}
EXPLAIN = f"{JOBS}/namespaces/default/ascendjobs/default-test-pytorch/explain"


def _sample() -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(JOB.read_text())
    return job


@pytest.fixture
def fleet() -> Iterator[tuple[FleetApiThread, redis.Redis]]:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    with FleetApiThread(client, tokens=TOKENS, members=lambda: list(MEMBERS)) as api:
        trees = "/apis/scheduling.sigs.k8s.io/v1beta1/namespaces/kube-system/elasticquotatrees"
        status, _ = call(api, "POST", trees, yaml.safe_load(TREE.read_text()), token=ADMIN)
        assert status == 201
        publish(client)
        yield api, client
    client.close()


def test_a_tenant_learns_where_its_job_would_run_and_nothing_is_stored(
    fleet: tuple[FleetApiThread, redis.Redis],
) -> None:
    api, client = fleet
    before = keyspace(client)
    status, answer = call(api, "POST", EXPLAIN, _sample(), token=TEAM)
    assert status == 201, answer
    assert answer["kind"] == "Explanation"
    assert answer["apiVersion"] == "fleet.io/v1alpha1"
    result = answer["status"]
    assert result["verdict"] == "Fits"
    assert result["placement"]["member"] == "member-2"
    assert sorted(r["replicaType"] for r in result["placement"]["nodes"]) == ["Master", "Worker"]
    assert result["queue"] == "root-child-2"
    assert result["position"] == "1 of 1 in queue root-child-2"
    assert result["quota"] == "quota admits it now"
    by_member = {m["name"]: m for m in result["members"]}
    assert by_member["member-2"] == {"name": "member-2", "ready": "True", "fits": True, "never": False,
                                     "message": "fits"}  # fmt: skip
    assert by_member["member-1"]["never"] is True
    assert by_member["member-1"]["message"] == f"{NEVER}: no node matches accelerator-type=card-910b-2"
    assert keyspace(client) == before


def test_an_unknown_field_is_the_400_a_create_gets(fleet: tuple[FleetApiThread, redis.Redis]) -> None:
    api, _ = fleet
    job = _sample()
    job["spec"]["replicaSpecs"]["Master"]["replicass"] = 1
    explained = call(api, "POST", EXPLAIN + "?fieldValidation=Strict", job, token=TEAM)
    created = call(api, "POST", f"{JOBS}/namespaces/default/ascendjobs?dryRun=All&fieldValidation=Strict",
                   job, token=TEAM)  # fmt: skip
    assert explained[0] == created[0] == 400
    assert explained[1]["message"] == created[1]["message"]
    assert "replicass" in explained[1]["message"]


def test_a_namespace_no_quota_node_binds_is_the_422_a_create_gets(
    fleet: tuple[FleetApiThread, redis.Redis],
) -> None:
    api, _ = fleet
    job = _sample()
    job["metadata"]["namespace"] = "team-b"
    path = EXPLAIN.replace("/namespaces/default/", "/namespaces/team-b/")
    explained = call(api, "POST", path, job, token=OTHER)
    created = call(api, "POST", f"{JOBS}/namespaces/team-b/ascendjobs?dryRun=All", job, token=OTHER)
    assert explained[0] == created[0] == 422
    assert explained[1]["message"] == created[1]["message"]
    assert "team-b" in explained[1]["message"]


def test_another_teams_token_may_not_ask(fleet: tuple[FleetApiThread, redis.Redis]) -> None:
    api, _ = fleet
    status, answer = call(api, "POST", EXPLAIN, _sample(), token=OTHER)
    assert status == 403
    assert 'cannot create resource "ascendjobs/explain"' in answer["message"]
    assert call(api, "POST", EXPLAIN, _sample())[0] == 401


def test_a_job_larger_than_its_leaf_max_can_never_be_admitted(
    fleet: tuple[FleetApiThread, redis.Redis],
) -> None:
    api, _ = fleet
    job = _sample()
    for spec in job["spec"]["replicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "6000"
    status, answer = call(api, "POST", EXPLAIN, job, token=TEAM)
    assert status == 201, answer
    assert answer["status"]["verdict"] == "NeverAdmitted"
    assert answer["status"]["quota"].startswith("can never be admitted: quota root/child-2: cpu")


def test_a_full_quota_holds_it_with_the_admission_scripts_words(
    fleet: tuple[FleetApiThread, redis.Redis],
) -> None:
    api, client = fleet
    ledger = Ledger(client)
    ledger.enqueue("mindxdl.gitee.com/ascendjobs/default/running", "child-2", {"cpu": 1}, 0)
    assert ledger.admit_pending("mindxdl.gitee.com/ascendjobs/default/running").admitted
    status, answer = call(api, "POST", EXPLAIN, _sample(), token=TEAM)
    assert status == 201, answer
    assert answer["status"]["verdict"] == "Waits"
    assert answer["status"]["quota"] == "quota root/child-2: kube-queue/max-jobs 1/1 in use"


def test_no_room_now_and_a_member_down_are_said_per_member(fleet: tuple[FleetApiThread, redis.Redis]) -> None:
    api, client = fleet
    publish(client, busy_card_nodes=3)
    _, answer = call(api, "POST", EXPLAIN, _sample(), token=TEAM)
    assert answer["status"]["verdict"] == "Waits", answer
    member_2 = next(m for m in answer["status"]["members"] if m["name"] == "member-2")
    assert member_2["fits"] is False and member_2["never"] is False
    assert "the job needs 2 nodes" in member_2["message"]
    write_health(client, DEFAULT_DISPATCH_KEYS, "member-2", MemberHealth(ready=False, since=time.time()))
    _, answer = call(api, "POST", EXPLAIN, _sample(), token=TEAM)
    member_2 = next(m for m in answer["status"]["members"] if m["name"] == "member-2")
    assert member_2["ready"] == "False"
    assert member_2["message"] == "NotReady (failing its health probes)"
    assert answer["status"]["verdict"] == "Waits"


def test_a_stored_queued_job_is_explained_where_it_stands(fleet: tuple[FleetApiThread, redis.Redis]) -> None:
    api, _ = fleet
    assert call(api, "POST", f"{JOBS}/namespaces/default/ascendjobs", _sample(), token=TEAM)[0] == 201
    second = copy.deepcopy(_sample())
    second["metadata"]["name"] = "second"
    assert call(api, "POST", f"{JOBS}/namespaces/default/ascendjobs", second, token=TEAM)[0] == 201
    status, answer = call(api, "GET", EXPLAIN.replace("default-test-pytorch", "second"), token=TEAM)
    assert status == 200, answer
    assert answer["status"]["state"] == "Queued"
    assert answer["status"]["position"] == "2 of 2 in queue root-child-2"
    assert answer["status"]["placement"]["member"] == "member-2"
    missing = call(api, "GET", EXPLAIN.replace("default-test-pytorch", "nobody"), token=TEAM)
    assert missing[0] == 404


def test_a_job_stored_before_a_rule_came_is_explained_as_the_dispatcher_reads_it(
    fleet: tuple[FleetApiThread, redis.Redis],
) -> None:
    """A job accepted before a rule came (here the framework label, as if required later) is
    never judged again (the dispatcher reads its demand as accepted): explaining it says where
    it stands, not that it is invalid."""
    api, client = fleet
    assert call(api, "POST", f"{JOBS}/namespaces/default/ascendjobs", _sample(), token=TEAM)[0] == 201

    def unlabel(obj: dict[str, Any]) -> dict[str, Any]:
        del obj["metadata"]["labels"]["framework"]
        return obj

    Objects(client).mutate(FLEET_ASCENDJOB, "default", "default-test-pytorch", unlabel, subresource=None)
    status, answer = call(api, "GET", EXPLAIN, token=TEAM)
    assert status == 200, answer
    assert answer["status"]["state"] == "Queued"
    assert answer["status"]["position"] == "1 of 1 in queue root-child-2"
    assert answer["status"]["verdict"] != "NeverFits", answer


def test_discovery_lists_the_subresource_with_its_kind(fleet: tuple[FleetApiThread, redis.Redis]) -> None:
    api, _ = fleet
    _, found = call(api, "GET", JOBS, token=TEAM)
    entry = next(r for r in found["resources"] if r["name"] == "ascendjobs/explain")
    assert entry == {
        "name": "ascendjobs/explain",
        "singularName": "",
        "namespaced": True,
        "group": "fleet.io",
        "version": "v1alpha1",
        "kind": "Explanation",
        "verbs": ["create", "get"],
    }
    assert call(api, "PUT", EXPLAIN, _sample(), token=ADMIN)[0] == 405
