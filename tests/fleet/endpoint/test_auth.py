"""The auth matrix: admin, a user of namespace A, a user of namespace B and no token, over every
verb and kind, as plain HTTP against one replica with a token file.

401 without a (known) token, 403 for a user outside their namespace or writing an admin kind,
both as Kubernetes Status objects; everything else goes through to the kind's own answer. A
refused request changes nothing.
"""

from __future__ import annotations

import copy
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import fakeredis
import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from fleet.endpoint.auth import TokenFileError, parse_token_file
from tests.fleet.endpoint.conftest import JOB, JOBS, POLICIES, call
from tests.support.fleet_api import FleetApiThread, official_client

pytestmark = pytest.mark.integration

TOKEN_FILE = """\
# token,user,uid,"groups"
admin-token-3a1f,admin,u-1,"fleet:admins"
alice-token-77b2,alice,u-2,"namespace:team-a"
bob-token-09c4,bob,u-3,"namespace:team-b,some:other"
prom-token-5d2e,prometheus,u-4,"fleet:metrics-readers"
"""
TOKENS: Final = {
    "admin": "admin-token-3a1f",
    "alice": "alice-token-77b2",
    "bob": "bob-token-09c4",
    "prometheus": "prom-token-5d2e",
}
WHO: Final = ("admin", "alice", "bob", "anonymous")
VERBS: Final = ("get", "list", "watch", "create", "delete")

TREE: Final[dict[str, Any]] = {
    "apiVersion": "scheduling.sigs.k8s.io/v1beta1",
    "kind": "ElasticQuotaTree",
    "metadata": {"name": "elasticquotatree", "namespace": "kube-system"},
    "spec": {
        "root": {
            "name": "root",
            "max": {"huawei.com/Ascend910": 64},
            "min": {"huawei.com/Ascend910": 64},
            "children": [
                {"name": "a", "max": {"huawei.com/Ascend910": 32}, "namespaces": ["team-a"]},
                {"name": "b", "max": {"huawei.com/Ascend910": 32}, "namespaces": ["team-b"]},
            ],
        }
    },
}


@dataclass(frozen=True)
class Kind:
    collection: str
    existing: str
    #: What an authorized request of each verb gets (the kind's own answer, past authorization).
    allowed: dict[str, int]
    #: Whether a user of namespace A may write it (AscendJobs of team-a only).
    user_writes: bool = False
    #: Whether a user of namespace B may read it.
    shared: bool = True


READ_ONLY = {"get": 200, "list": 200, "watch": 200, "create": 405, "delete": 405}
KINDS: Final = {
    "acjob": Kind(
        f"{JOBS}/namespaces/team-a/ascendjobs",
        "job",
        {"get": 200, "list": 200, "watch": 200, "create": 201, "delete": 200},
        user_writes=True,
        shared=False,
    ),
    # A second tree is refused (422) and the tree cannot be deleted (405): both past authorization.
    "elasticquotatree": Kind(
        "/apis/scheduling.sigs.k8s.io/v1beta1/namespaces/kube-system/elasticquotatrees",
        "elasticquotatree",
        {"get": 200, "list": 200, "watch": 200, "create": 422, "delete": 405},
    ),
    "propagationpolicy": Kind(
        "/apis/policy.one.alibabacloud.com/v1alpha1/namespaces/team-a/propagationpolicies",
        "policy",
        {"get": 200, "list": 200, "watch": 200, "create": 201, "delete": 200},
    ),
    # Every user reads the classes a job may name; only an admin writes them.
    "priorityclass": Kind(
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        "high",
        {"get": 200, "list": 200, "watch": 200, "create": 201, "delete": 200},
    ),
    "membercluster": Kind("/apis/fleet.io/v1alpha1/memberclusters", "member-1", READ_ONLY),
    "queue": Kind("/apis/fleet.io/v1alpha1/queues", "root", READ_ONLY),
}


def body(kind: str, name: str) -> dict[str, Any]:
    if kind == "acjob":
        job: dict[str, Any] = yaml.safe_load(JOB.read_text())
        job["metadata"].update(name=name, namespace="team-a")
        return job
    if kind == "propagationpolicy":
        policy: dict[str, Any] = yaml.safe_load(POLICIES[0].read_text())
        policy["metadata"].update(name=name, namespace="team-a")
        return policy
    if kind == "priorityclass":
        return {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": 1000,
        }
    if kind == "elasticquotatree":
        tree: dict[str, Any] = copy.deepcopy(TREE)
        tree["metadata"]["name"] = name
        return tree
    api = "fleet.io/v1alpha1"
    return {
        "apiVersion": api,
        "kind": "Queue" if kind == "queue" else "MemberCluster",
        "metadata": {"name": name},
    }


def expected(who: str, kind: str, verb: str) -> int:
    rights = KINDS[kind]
    if who == "anonymous":
        return 401
    if who == "admin":
        return rights.allowed[verb]
    reads = verb in ("get", "list", "watch")
    mine = who == "alice"
    if (reads and (rights.shared or mine)) or (rights.user_writes and mine):
        return rights.allowed[verb]
    return 403


@pytest.fixture(scope="module")
def server() -> Iterator[FleetApiThread]:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    with FleetApiThread(client, tokens=parse_token_file(TOKEN_FILE), members=lambda: ["member-1"]) as api:
        admin = TOKENS["admin"]
        assert call(api, "POST", KINDS["elasticquotatree"].collection, TREE, token=admin)[0] == 201
        for kind in ("acjob", "propagationpolicy", "priorityclass"):
            names = [KINDS[kind].existing, *(f"delete-by-{who}" for who in WHO)]
            for name in names:
                assert call(api, "POST", KINDS[kind].collection, body(kind, name), token=admin)[0] == 201
        yield api
    client.close()


def status_of(server: FleetApiThread, path: str, token: str | None) -> int:
    """The status of a watch request, without waiting for its stream to end."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(server.url + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        with error:
            return int(error.code)


def request(server: FleetApiThread, who: str, kind: str, verb: str) -> tuple[int, Any]:
    rt = KINDS[kind]
    token = TOKENS.get(who)
    if verb == "get":
        return call(server, "GET", f"{rt.collection}/{rt.existing}", token=token)
    if verb == "list":
        return call(server, "GET", rt.collection, token=token)
    if verb == "watch":
        code = status_of(server, f"{rt.collection}?watch=1&timeoutSeconds=5", token)
        return code, None if code == 200 else call(server, "GET", f"{rt.collection}?watch=1", token=token)[1]
    if verb == "create":
        return call(server, "POST", rt.collection, body(kind, f"created-by-{who}"), token=token)
    return call(server, "DELETE", f"{rt.collection}/delete-by-{who}", token=token)


CASES = [
    pytest.param(who, kind, verb, id=f"{who}-{verb}-{kind}")
    for who in WHO
    for kind in KINDS
    for verb in VERBS
]


@pytest.mark.parametrize(("who", "kind", "verb"), CASES)
def test_auth_matrix(server: FleetApiThread, who: str, kind: str, verb: str) -> None:
    want = expected(who, kind, verb)
    code, answer = request(server, who, kind, verb)
    assert code == want, answer
    if code in (401, 403):
        reason = "Unauthorized" if code == 401 else "Forbidden"
        assert (answer["kind"], answer["status"], answer["reason"], answer["code"]) == (
            "Status",
            "Failure",
            reason,
            code,
        )
        if code == 403:
            assert f'User "{who}" cannot {verb} resource' in answer["message"]
        assert_unchanged(server, kind, verb, who)


def assert_unchanged(server: FleetApiThread, kind: str, verb: str, who: str) -> None:
    """A refused write left nothing behind: no created object, the target not marked for deletion."""
    rt = KINDS[kind]
    admin = TOKENS["admin"]
    if verb == "create" and kind in ("acjob", "propagationpolicy", "priorityclass"):
        assert call(server, "GET", f"{rt.collection}/created-by-{who}", token=admin)[0] == 404
    if verb == "delete" and kind in ("acjob", "propagationpolicy", "priorityclass"):
        code, obj = call(server, "GET", f"{rt.collection}/delete-by-{who}", token=admin)
        assert code == 200
        assert "deletionTimestamp" not in obj["metadata"]


def test_a_forbidden_answer_reads_as_kube_apiserver_words_it(server: FleetApiThread) -> None:
    code, answer = call(server, "GET", f"{KINDS['acjob'].collection}/job", token=TOKENS["bob"])
    assert code == 403
    assert answer["message"].startswith(
        'ascendjobs.mindxdl.gitee.com "job" is forbidden: User "bob" cannot get resource "ascendjobs" '
        'in API group "mindxdl.gitee.com" in the namespace "team-a"'
    )
    assert answer["details"] == {"group": "mindxdl.gitee.com", "kind": "ascendjobs", "name": "job"}


@pytest.mark.parametrize(("who", "want"), [("admin", 200), ("alice", 403), ("bob", 403), ("anonymous", 401)])
def test_jobs_across_all_namespaces_are_for_admins(server: FleetApiThread, who: str, want: int) -> None:
    assert call(server, "GET", f"{JOBS}/ascendjobs", token=TOKENS.get(who))[0] == want


@pytest.mark.parametrize(("who", "want"), [("admin", 200), ("alice", 200), ("bob", 403), ("anonymous", 401)])
def test_events_of_a_namespace_are_readable_by_its_users(server: FleetApiThread, who: str, want: int) -> None:
    code, answer = call(server, "GET", "/api/v1/namespaces/team-a/events", token=TOKENS.get(who))
    assert code == want
    if code == 200:
        assert {e["reason"] for e in answer["items"]} == {"Submitted"}


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_users_may_not_change_a_job_or_its_status(server: FleetApiThread, who: str) -> None:
    """The owner's update reaches the backend, which keeps the status (a main-resource update
    never writes it) and refuses a changed spec; the status subresource is Fleet's; another
    namespace's user is refused both."""
    job = f"{KINDS['acjob'].collection}/job"
    _, current = call(server, "GET", job, token=TOKENS["admin"])
    changed = copy.deepcopy(current)
    changed["status"] = {"conditions": [{"type": "Succeeded", "status": "True"}]}
    code, answer = call(server, "PUT", f"{job}/status", changed, token=TOKENS[who])
    assert (code, answer["reason"]) == (403, "Forbidden")
    code, answer = call(server, "PUT", job, changed, token=TOKENS[who])
    if who == "bob":
        assert (code, answer["reason"]) == (403, "Forbidden")
    else:
        assert code == 200, answer
        assert answer["status"]["conditions"] == current["status"]["conditions"]
        changed["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = 1
        code, answer = call(server, "PUT", job, changed, token=TOKENS[who])
        assert (code, answer["details"]["causes"][0]["field"]) == (422, "spec"), answer
        assert "immutable" in answer["message"]
    assert call(server, "GET", job, token=TOKENS["admin"])[1]["status"] == current["status"]


def test_probes_are_public_and_everything_else_needs_a_token(server: FleetApiThread) -> None:
    for path in ("/readyz", "/healthz", "/livez", "/version"):
        with urllib.request.urlopen(server.url + path, timeout=10) as response:
            assert response.status == 200
    for path in ("/api", "/apis", "/openapi/v2", "/metrics"):
        assert call(server, "GET", path)[0] == 401
        assert call(server, "GET", path, token="not-a-token")[0] == 401
    for path in ("/api", "/apis", "/openapi/v2"):
        assert status_of(server, path, TOKENS["bob"]) == 200


@pytest.mark.parametrize(("who", "want"), [("admin", 200), ("prometheus", 200), ("alice", 403), ("bob", 403)])
def test_metrics_need_a_grant_of_their_own(
    server: FleetApiThread, who: str, want: int, tmp_path: Path
) -> None:
    """As Kubernetes grants ``/metrics`` by a ``nonResourceURLs`` rule (``system:monitoring``):
    admins and ``fleet:metrics-readers`` read it, a tenant gets a 403 Status naming the path.
    The official client's raw call gets the same."""
    assert status_of(server, "/metrics", TOKENS[who]) == want
    api = official_client(server, tmp_path, token=TOKENS[who])
    headers = {"Authorization": api.configuration.api_key["BearerToken"]}
    try:
        got = api.call_api("GET", f"{api.configuration.host}/metrics", header_params=headers).status
    except ApiException as error:
        got = int(error.status)
    assert got == want
    if want == 403:
        code, answer = call(server, "GET", "/metrics", token=TOKENS[who])
        assert (code, answer["kind"], answer["reason"]) == (403, "Status", "Forbidden")
        assert answer["message"] == f'forbidden: User "{who}" cannot get path "/metrics"'
    else:
        request = urllib.request.Request(
            server.url + "/metrics", headers={"Authorization": f"Bearer {TOKENS[who]}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert b"apiserver_requests_total" in response.read()


def test_the_token_file_refuses_ambiguity_without_echoing_tokens() -> None:
    with pytest.raises(TokenFileError) as listed_twice:
        parse_token_file("secret-1,alice,u1\nsecret-1,bob,u2\n")
    with pytest.raises(TokenFileError) as two_groups:
        parse_token_file('secret-2,alice,u1,"namespace:a"\nsecret-3,alice,u1,"namespace:b"\n')
    for error in (listed_twice, two_groups):
        assert "line 2" in str(error.value)
        assert "secret" not in str(error.value)


def can_i(server: FleetApiThread, who: str, kind: str, verb: str) -> tuple[int, Any]:
    """A SelfSubjectAccessReview of ``verb`` on the matrix's ``kind``, as kubectl auth can-i posts it."""
    parts = KINDS[kind].collection.strip("/").split("/")
    group = "" if parts[0] == "api" else parts[1]
    namespace = parts[parts.index("namespaces") + 1] if "namespaces" in parts else ""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {
            "resourceAttributes": {
                "namespace": namespace,
                "verb": verb,
                "group": group,
                "resource": parts[-1],
                "name": KINDS[kind].existing if verb in ("get", "delete") else "",
            }
        },
    }
    return call(
        server,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        review,
        token=TOKENS.get(who),
    )


@pytest.mark.parametrize(("who", "kind", "verb"), CASES)
def test_can_i_answers_what_the_request_would_get(
    server: FleetApiThread, who: str, kind: str, verb: str
) -> None:
    """Yes exactly where the request is let through (not 401, 403, nor 405: a verb the kind does
    not serve is a no)."""
    code, answer = can_i(server, who, kind, verb)
    if who == "anonymous":
        assert code == 401
        return
    assert code == 201, answer
    assert answer["status"]["allowed"] is (expected(who, kind, verb) not in (401, 403, 405))


SECRET_BODY: Final = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "obs"},
    "stringData": {"key": "s3cret-value"},
}


@pytest.mark.parametrize(("who", "want"), [("admin", 201), ("alice", 201), ("bob", 403), ("anonymous", 401)])
def test_secrets_are_their_namespaces_like_jobs(server: FleetApiThread, who: str, want: int) -> None:
    path = "/api/v1/namespaces/team-a/secrets"
    code, answer = call(server, "POST", path, SECRET_BODY, token=TOKENS.get(who))
    assert code == want, answer
    if code != 201:
        assert "s3cret-value" not in str(answer)
        assert call(server, "GET", f"{path}/obs", token=TOKENS["admin"])[0] == 404
        return
    for reader, can in (("alice", 200), ("bob", 403)):
        assert call(server, "GET", f"{path}/obs", token=TOKENS[reader])[0] == can
        assert call(server, "GET", path, token=TOKENS[reader])[0] == can
    assert call(server, "GET", "/api/v1/secrets", token=TOKENS["alice"])[0] == 403  # all namespaces
    assert call(server, "DELETE", f"{path}/obs", token=TOKENS["bob"])[0] == 403
    assert call(server, "DELETE", f"{path}/obs", token=TOKENS["alice"])[0] == 200


def test_a_namespace_token_grants_every_job_kind_there_and_no_other() -> None:
    """The job kinds are authorised alike: each one of the registry, in the user's namespace."""
    from fleet.apiserver.app import Access
    from fleet.endpoint.auth import FleetAuthorizer, Identity
    from fleet.kinds import FLEET_JOB_KINDS

    authorizer = FleetAuthorizer([Identity("alice", "1", frozenset({"namespace:team-a"}))])
    assert len(FLEET_JOB_KINDS) >= 4
    for rt in FLEET_JOB_KINDS:
        for verb in ("create", "get", "list", "delete"):
            assert authorizer.allows(Access("alice", verb, rt, "team-a", "j", None)), (rt.kind, verb)
        assert not authorizer.allows(Access("alice", "create", rt, "team-b", "j", None)), rt.kind
        assert not authorizer.allows(Access("alice", "update", rt, "team-a", "j", "status")), rt.kind
