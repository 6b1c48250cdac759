"""Quota routing is authorised: a job lands only in a quota node its namespace may use.

Through the API with namespace-scoped tokens (plain HTTP and the real kubectl): a quota label
naming another team's leaf is refused (403, naming the label and the node) unless the tree makes
that leaf available in the job's namespace (``fleet.io/available-in-namespaces``); a namespace no
node binds is refused whatever its labels say; a label naming the leaf that binds the namespace
works, one naming a parent does not. A refused request leaves every Redis key as it was, and a
server-side dry run decides exactly as the real request.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import fakeredis
import pytest
import redis
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from fleet.endpoint.auth import parse_token_file
from fleet.state import Objects
from queues import AVAILABLE_ATTRIBUTE, QUOTA_LABEL, Ledger
from queues.quantity import MAX_JOBS
from tests.fleet.endpoint.conftest import JOB, JOBS, call
from tests.support.dispatch_pass import dispatch_once
from tests.support.fleet_api import FleetApiThread
from tests.support.kinds import FLEET_ASCENDJOB
from tests.support.kubectl import Kubectl

pytestmark = pytest.mark.integration

TOKEN_FILE = """\
admin-token-q1,admin,u-1,"fleet:admins"
alice-token-q2,alice,u-2,"namespace:team-a"
bob-token-q3,bob,u-3,"namespace:team-b"
carol-token-q4,carol,u-4,"namespace:team-c"
"""
TOKENS: Final = {
    "admin": "admin-token-q1",
    "alice": "alice-token-q2",
    "bob": "bob-token-q3",
    "carol": "carol-token-q4",
}
TREES: Final = "/apis/scheduling.sigs.k8s.io/v1beta1/namespaces/kube-system/elasticquotatrees"
#: The Status cause field of the quota label.
LABEL_FIELD: Final = f"metadata.labels[{QUOTA_LABEL}]"
NPU: Final = "huawei.com/Ascend910"


def tree(**attributes: dict[str, str]) -> dict[str, Any]:
    """root/teams/{child-a (team-a), child-b (team-b)}, one job at a time each; team-c is bound
    nowhere. ``attributes`` by node name."""

    def node(name: str, **fields: Any) -> dict[str, Any]:
        return {"name": name, **fields, **({"attributes": attributes[name]} if name in attributes else {})}

    leaf = {"max": {NPU: 64, MAX_JOBS: 1}}
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1beta1",
        "kind": "ElasticQuotaTree",
        "metadata": {"name": "elasticquotatree", "namespace": "kube-system"},
        "spec": {
            "root": node(
                "root",
                max={NPU: 128},
                min={NPU: 128},
                children=[
                    node(
                        "teams",
                        max={NPU: 128},
                        children=[
                            node("child-a", namespaces=["team-a"], **leaf),
                            node("child-b", namespaces=["team-b"], **leaf),
                        ],
                    )
                ],
            )
        },
    }


def job(namespace: str, name: str, quota: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(JOB.read_text())
    body["metadata"].update(name=name, namespace=namespace)
    if quota is not None:
        body["metadata"]["labels"][QUOTA_LABEL] = quota
    return body


def jobs_of(namespace: str) -> str:
    return f"{JOBS}/namespaces/{namespace}/ascendjobs"


def keyspace(client: redis.Redis) -> dict[Any, Any]:
    """Every key and its whole value: what a refused request must leave as it was."""
    return {key: client.dump(key) for key in sorted(client.keys("*"))}


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    redis_client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    yield redis_client
    redis_client.close()


@pytest.fixture
def api(client: redis.Redis) -> Iterator[FleetApiThread]:
    with FleetApiThread(client, tokens=parse_token_file(TOKEN_FILE), members=lambda: ["member-1"]) as server:
        yield server


def apply_tree(api: FleetApiThread, document: dict[str, Any]) -> None:
    """Create the tree, or replace it at its current resourceVersion (as the admin)."""
    admin = TOKENS["admin"]
    code, current = call(api, "GET", f"{TREES}/elasticquotatree", token=admin)
    if code == 404:
        code, answer = call(api, "POST", TREES, document, token=admin)
        assert code == 201, answer
        return
    body = copy.deepcopy(document)
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    code, answer = call(api, "PUT", f"{TREES}/elasticquotatree", body, token=admin)
    assert code == 200, answer


def submit(api: FleetApiThread, who: str, body: dict[str, Any], *, dry_run: bool = False) -> tuple[int, Any]:
    path = jobs_of(body["metadata"]["namespace"]) + ("?dryRun=All" if dry_run else "")
    return call(api, "POST", path, body, token=TOKENS[who])


def assert_forbidden_label(answer: dict[str, Any], name: str, node: str) -> None:
    assert (answer["kind"], answer["status"], answer["reason"], answer["code"]) == (
        "Status",
        "Failure",
        "Forbidden",
        403,
    )
    assert answer["message"].startswith(
        f"ascendjobs.mindxdl.gitee.com \"{name}\" is forbidden: label {QUOTA_LABEL}='{node}': "
        f"quota node '{node}' is not available in namespace 'team-a'"
    )
    assert AVAILABLE_ATTRIBUTE in answer["message"]
    (cause,) = answer["details"]["causes"]
    assert (cause["field"], cause["reason"]) == (LABEL_FIELD, "FieldValueForbidden")
    assert f"quota node '{node}'" in cause["message"]


def test_a_label_naming_another_teams_node_is_refused_and_changes_nothing(
    api: FleetApiThread, client: redis.Redis
) -> None:
    apply_tree(api, tree())
    before = keyspace(client)
    for dry_run in (True, False):
        code, answer = submit(api, "alice", job("team-a", "steal", "child-b"), dry_run=dry_run)
        assert code == 403, answer
        assert_forbidden_label(answer, "steal", "child-b")
        assert keyspace(client) == before
    ledger = Ledger(client)
    assert ledger.pending.records() == {}
    assert ledger.records() == {}
    assert ledger.usage("child-b").get(MAX_JOBS, 0) == 0
    assert Objects(client).list(FLEET_ASCENDJOB)[0] == []
    # team b's own job is not held back by it.
    assert submit(api, "bob", job("team-b", "own"))[0] == 201
    assert dispatch_once(client, ["team-b/own"]) == {"own": "admitted; placed on member-1"}


def test_the_official_client_with_a_namespace_token_gets_the_403(
    api: FleetApiThread, client: redis.Redis, tmp_path: Path
) -> None:
    apply_tree(api, tree())
    before = keyspace(client)
    kubeconfig = api.kubeconfig(tmp_path / "alice", token=TOKENS["alice"])
    api_client = k8s_config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    with api_client:
        jobs = k8s.CustomObjectsApi(api_client)
        for dry_run in ("All", None):
            with pytest.raises(k8s.ApiException) as caught:
                jobs.create_namespaced_custom_object(
                    "mindxdl.gitee.com",
                    "v1",
                    "team-a",
                    "ascendjobs",
                    job("team-a", "steal", "child-b"),
                    dry_run=dry_run,
                )
            assert caught.value.status == 403
            assert_forbidden_label(json.loads(str(caught.value.body)), "steal", "child-b")
            assert keyspace(client) == before


def test_kubectl_prints_the_refusal_with_the_label_and_the_node(
    kubectl: Kubectl, fleet_redis: redis.Redis
) -> None:
    """kubectl sends no token over plain HTTP: this replica has no token file, as in test_jobs."""
    kubectl("create", "-f", "-", stdin=yaml.safe_dump(tree()))
    before = keyspace(fleet_redis)
    manifest = yaml.safe_dump(job("team-a", "steal", "child-b"))
    for extra in (["--dry-run=server"], []):
        done = kubectl("create", *extra, "-f", "-", stdin=manifest, ok=False)
        assert done.returncode == 1
        assert done.stderr.startswith(
            'Error from server (Forbidden): error when creating "STDIN": ascendjobs.mindxdl.gitee.com '
            f"\"steal\" is forbidden: label {QUOTA_LABEL}='child-b': quota node 'child-b' is not "
            "available in namespace 'team-a'"
        ), done.stderr
        assert keyspace(fleet_redis) == before


def test_the_tree_switch_lets_a_namespace_use_another_node(api: FleetApiThread, client: redis.Redis) -> None:
    apply_tree(api, tree())
    assert submit(api, "alice", job("team-a", "borrowed", "child-b"))[0] == 403
    apply_tree(api, tree(**{"child-b": {AVAILABLE_ATTRIBUTE: "team-a"}}))
    code, dry = submit(api, "alice", job("team-a", "borrowed", "child-b"), dry_run=True)
    assert code == 201, dry
    assert dry["status"]["queue"] == "root-teams-child-b"
    code, stored = submit(api, "alice", job("team-a", "borrowed", "child-b"))
    assert code == 201, stored
    assert stored["status"]["queue"] == "root-teams-child-b"
    ledger = Ledger(client)
    assert ledger.pending.records()["team-a/borrowed"].leaf == "child-b"
    assert dispatch_once(client, ["team-a/borrowed"]) == {"borrowed": "admitted; placed on member-1"}
    assert ledger.records()["team-a/borrowed"].leaf == "child-b"
    assert ledger.usage("child-b")[MAX_JOBS] == 1
    assert ledger.usage("child-a").get(MAX_JOBS, 0) == 0
    # What the switch gives, it takes from team b: its own job now waits on child-b's max-jobs.
    assert submit(api, "bob", job("team-b", "own"))[0] == 201
    assert "kube-queue/max-jobs" in dispatch_once(client, ["team-b/own"])["own"]
    # It opens child-b to team-a only, and one way.
    code, answer = submit(api, "bob", job("team-b", "other-way", "child-a"))
    assert code == 403, answer
    assert "quota node 'child-a' is not available in namespace 'team-b'" in answer["message"]


@pytest.mark.parametrize("quota", [None, "child-a", "child-b", "teams", "root", "nope"])
def test_a_namespace_no_node_binds_is_refused_whatever_its_label(
    api: FleetApiThread, client: redis.Redis, quota: str | None
) -> None:
    apply_tree(api, tree(root={AVAILABLE_ATTRIBUTE: "*"}, **{"child-a": {AVAILABLE_ATTRIBUTE: "team-c"}}))
    before = keyspace(client)
    for dry_run in (True, False):
        code, answer = submit(api, "carol", job("team-c", "homeless", quota), dry_run=dry_run)
        assert (code, answer["reason"]) == (422, "Invalid"), answer
        (cause,) = answer["details"]["causes"]
        assert cause["field"] == "metadata.namespace"
        assert cause["message"] == "namespace 'team-c' is bound to no node of the ElasticQuotaTree"
        assert keyspace(client) == before


def test_a_label_naming_the_namespaces_own_leaf_works_and_a_parent_does_not(
    api: FleetApiThread, client: redis.Redis
) -> None:
    apply_tree(api, tree())
    code, stored = submit(api, "alice", job("team-a", "mine", "child-a"))
    assert code == 201, stored
    assert stored["status"]["queue"] == "root-teams-child-a"
    assert Ledger(client).pending.records()["team-a/mine"].leaf == "child-a"
    before = keyspace(client)
    for parent in ("teams", "root"):
        code, answer = submit(api, "alice", job("team-a", "above", parent))
        assert (code, answer["reason"]) == (422, "Invalid"), answer
        (cause,) = answer["details"]["causes"]
        assert cause["field"] == LABEL_FIELD
        assert cause["message"] == f"label {QUOTA_LABEL}='{parent}' names no leaf of the ElasticQuotaTree"
    assert keyspace(client) == before


def test_a_refused_label_is_refused_for_an_admin_too(api: FleetApiThread, client: redis.Redis) -> None:
    """The rule is the tree's, not the token's: whoever submits, team-a's jobs stay in team-a's
    quota unless the tree says otherwise."""
    apply_tree(api, tree())
    code, answer = call(
        api, "POST", jobs_of("team-a"), job("team-a", "steal", "child-b"), token=TOKENS["admin"]
    )
    assert code == 403, answer
    assert_forbidden_label(answer, "steal", "child-b")


def test_applying_the_switch_is_validated_and_warns_of_unbound_namespaces(
    kubectl: Kubectl, fleet_api: FleetApiThread, fleet_redis: redis.Redis
) -> None:
    bad = tree(**{"child-b": {AVAILABLE_ATTRIBUTE: "team-a,Team C"}})
    code, answer = call(fleet_api, "POST", TREES, bad)
    assert (code, answer["reason"]) == (422, "Invalid"), answer
    (cause,) = answer["details"]["causes"]
    assert cause["field"] == f"spec.root.children[0].children[1].attributes.{AVAILABLE_ATTRIBUTE}"
    assert cause["message"] == (
        f"root/teams/child-b: attributes.{AVAILABLE_ATTRIBUTE}: 'Team C' is not a namespace name "
        "(a comma-separated list of namespaces, or '*')"
    )
    assert Ledger(fleet_redis).tree() is None
    done = kubectl(
        "create", "-f", "-", stdin=yaml.safe_dump(tree(teams={AVAILABLE_ATTRIBUTE: "team-a,team-z"}))
    )
    assert (
        f"Warning: root/teams: attributes.{AVAILABLE_ATTRIBUTE}: namespace 'team-z' is bound by no node, "
        "so its jobs are refused whatever this attribute says"
    ) in done.stderr
    applied = Ledger(fleet_redis).tree()
    assert applied is not None
    assert applied.leaf_for("team-a", {QUOTA_LABEL: "child-b"}) == "child-b"


#: Where the Kubeflow kinds and AscendJob name their queue (kubeflow/common ``SchedulingPolicy``).
QUEUE_FIELD: Final = "spec.runPolicy.schedulingPolicy.queue"
PYTORCHJOB: Final = Path(__file__).resolve().parents[3] / "config" / "samples" / "pytorchjob.yaml"


def pytorchjob(name: str, queue: str | None) -> dict[str, Any]:
    """The ACK seed's PyTorchJob in team-a, naming ``queue`` in its scheduling policy."""
    body: dict[str, Any] = yaml.safe_load(PYTORCHJOB.read_text())
    body["metadata"].update(name=name, namespace="team-a")
    if queue is not None:
        body["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = queue
    return body


def submit_pytorchjob(api: FleetApiThread, body: dict[str, Any], *, dry_run: bool = False) -> tuple[int, Any]:
    path = "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs" + ("?dryRun=All" if dry_run else "")
    return call(api, "POST", path, body, token=TOKENS["alice"])


@pytest.mark.parametrize(
    ("queue", "leaf"),
    [
        (None, "child-a"),
        ("default", "child-a"),  # Volcano's default queue: the namespace decides
        ("child-a", "child-a"),  # the leaf's own name
        ("root-teams-child-a", "child-a"),  # its derived queue, as status.queue shows it
    ],
)
def test_the_scheduling_policy_queue_names_the_namespaces_own_leaf(
    api: FleetApiThread, client: redis.Redis, queue: str | None, leaf: str
) -> None:
    apply_tree(api, tree())
    code, stored = submit_pytorchjob(api, pytorchjob("torch", queue))
    assert code == 201, stored
    assert stored["status"]["queue"] == "root-teams-child-a"
    assert Ledger(client).pending.records()["pytorchjobs.kubeflow.org:team-a/torch"].leaf == leaf


def test_the_scheduling_policy_queue_routes_like_the_quota_label(
    api: FleetApiThread, client: redis.Redis
) -> None:
    """Another team's leaf: 403 naming the field, until the tree opens it; an inner node or a
    name the tree does not have: 422. A refusal changes nothing; a dry run decides the same."""
    apply_tree(api, tree())
    before = keyspace(client)
    for queue in ("child-b", "root-teams-child-b"):
        for dry_run in (True, False):
            code, answer = submit_pytorchjob(api, pytorchjob("steal", queue), dry_run=dry_run)
            assert (code, answer["reason"]) == (403, "Forbidden"), answer
            (cause,) = answer["details"]["causes"]
            assert (cause["field"], cause["reason"]) == (QUEUE_FIELD, "FieldValueForbidden")
            assert cause["message"].startswith(f"{QUEUE_FIELD}='{queue}' names the job's quota leaf: ")
            assert "quota node 'child-b' is not available in namespace 'team-a'" in cause["message"]
    for queue in ("teams", "root-teams", "root", "research"):
        code, answer = submit_pytorchjob(api, pytorchjob("above", queue))
        assert (code, answer["reason"]) == (422, "Invalid"), answer
        (cause,) = answer["details"]["causes"]
        assert cause["field"] == QUEUE_FIELD
        assert "names no leaf of the ElasticQuotaTree" in cause["message"]
    assert keyspace(client) == before

    apply_tree(api, tree(**{"child-b": {AVAILABLE_ATTRIBUTE: "team-a"}}))
    code, stored = submit_pytorchjob(api, pytorchjob("borrowed", "root-teams-child-b"))
    assert code == 201, stored
    assert stored["status"]["queue"] == "root-teams-child-b"
    key = "pytorchjobs.kubeflow.org:team-a/borrowed"
    assert Ledger(client).pending.records()[key].leaf == "child-b"
    assert Ledger(client).admit_pending(key).admitted
    assert Ledger(client).usage("child-b")[MAX_JOBS] == 1
    assert Ledger(client).usage("child-a").get(MAX_JOBS, 0) == 0


def test_an_ascendjob_queue_routes_too_and_the_quota_label_wins(
    api: FleetApiThread, client: redis.Redis
) -> None:
    """AscendJob has the same runPolicy: its queue routes as the Kubeflow kinds' does. A quota
    label on the job, when it has both, decides."""
    apply_tree(api, tree(**{"child-b": {AVAILABLE_ATTRIBUTE: "team-a"}}))
    queued = job("team-a", "queued")
    queued["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = "child-b"
    code, stored = submit(api, "alice", queued)
    assert code == 201, stored
    assert stored["status"]["queue"] == "root-teams-child-b"
    both = job("team-a", "both", "child-a")
    both["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = "child-b"
    code, stored = submit(api, "alice", both)
    assert code == 201, stored
    assert stored["status"]["queue"] == "root-teams-child-a"
    nowhere = job("team-a", "nowhere")
    nowhere["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = "teams"
    code, answer = submit(api, "alice", nowhere)
    assert code == 422, answer
    assert answer["details"]["causes"][0]["field"] == QUEUE_FIELD
