"""Fuzzing the fleet endpoint's kube routes with hypothesis: never a 5xx, and a refused request
changes nothing.

Each example is one HTTP request to a replica with auth on: a method, a route of a served kind
(collection, object, ``status``; namespaced or cluster-wide), a name (existing, random or hostile),
query parameters kubectl and clients send (``dryRun``, selectors, ``limit``/``continue``,
``resourceVersion``), a content type, and a body that is either a valid object of the kind with
one field replaced or removed, random JSON, or not JSON at all. The whole Redis keyspace is read
before and after; whenever the answer is an error it must be a Kubernetes ``Status`` with the same
code, and the keyspace must be exactly as it was.
"""

from __future__ import annotations

import copy
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import fakeredis
import pytest
import redis
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet.api.auth import parse_token_file
from tests.fleet.api.conftest import JOB, POLICIES, TREE
from tests.support.fleet_api import FleetApiThread

pytestmark = pytest.mark.integration

TOKEN_FILE = 'admin-token-f1,admin,u-1,"fleet:admins"\nalice-token-f2,alice,u-2,"namespace:default"\n'
#: Mostly tokens that get past authentication, so that requests reach the kinds' own code.
TOKENS = ["admin-token-f1"] * 4 + ["alice-token-f2"] * 2 + [None, "not-a-token"]

JOBS = "/apis/mindxdl.gitee.com/v1"
TREES = "/apis/scheduling.sigs.k8s.io/v1beta1"
POLICY = "/apis/policy.one.alibabacloud.com/v1alpha1"
FLEET = "/apis/fleet.io/v1alpha1"
#: Route templates: ``{ns}`` and ``{name}`` are drawn per example.
ROUTES = [
    f"{JOBS}/ascendjobs",
    f"{JOBS}/namespaces/{{ns}}/ascendjobs",
    f"{JOBS}/namespaces/{{ns}}/ascendjobs/{{name}}",
    f"{JOBS}/namespaces/{{ns}}/ascendjobs/{{name}}/status",
    f"{TREES}/namespaces/{{ns}}/elasticquotatrees",
    f"{TREES}/namespaces/{{ns}}/elasticquotatrees/{{name}}",
    f"{TREES}/namespaces/{{ns}}/elasticquotatrees/{{name}}/status",
    f"{POLICY}/namespaces/{{ns}}/propagationpolicies",
    f"{POLICY}/namespaces/{{ns}}/propagationpolicies/{{name}}",
    f"{FLEET}/memberclusters",
    f"{FLEET}/memberclusters/{{name}}",
    f"{FLEET}/queues",
    f"{FLEET}/queues/{{name}}",
    "/api/v1/namespaces/{ns}/events",
    "/api/v1/namespaces/{ns}/events/{name}",
    "/api/v1/namespaces",
    "/api/v1/namespaces/{name}",
    f"{JOBS}/namespaces/{{ns}}/nosuchkinds/{{name}}",
]
CONTENT_TYPES = [
    "application/json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/json-patch+json",
    "application/apply-patch+yaml",
    "text/plain",
]


def samples() -> dict[str, dict[str, Any]]:
    job = yaml.safe_load(JOB.read_text())
    job["metadata"]["namespace"] = "default"
    policy = yaml.safe_load(POLICIES[0].read_text())
    policy["metadata"]["namespace"] = "default"
    return {"job": job, "tree": yaml.safe_load(TREE.read_text()), "policy": policy}


SAMPLES = samples()

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
names = st.sampled_from(["default-test-pytorch", "elasticquotatree", "member-1", "root", "x"]) | st.text(
    min_size=0, max_size=40
)
namespaces = st.sampled_from(["default", "kube-system", "team-b"]) | st.text(max_size=20)
queries = st.dictionaries(
    st.sampled_from(["dryRun", "labelSelector", "fieldSelector", "limit", "continue", "resourceVersion"]),
    st.sampled_from(["All", "", "-1", "0", "3", "a=b", "metadata.name=x", "spec.x=1", "!!", "a in (b"])
    | st.text(max_size=15),
    max_size=3,
)


def leaf_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``value`` (object keys and list indexes)."""
    paths = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            paths += leaf_paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            paths += leaf_paths(child, (*prefix, index))
    return paths


#: Where each sample lives: its collection (for POST) and the object (PUT, PATCH, DELETE).
HOMES = {
    "job": (f"{JOBS}/namespaces/default/ascendjobs", "default-test-pytorch"),
    "tree": (f"{TREES}/namespaces/kube-system/elasticquotatrees", "elasticquotatree"),
    "policy": (f"{POLICY}/namespaces/default/propagationpolicies", "example-policy"),
}


def mutated(draw: st.DrawFn, sample: str) -> Any:
    """The sample with one field replaced by random JSON or removed."""
    obj = copy.deepcopy(SAMPLES[sample])
    path = draw(st.sampled_from(leaf_paths(obj)[1:]))
    parent: Any = obj
    for step in path[:-1]:
        parent = parent[step]
    if draw(st.booleans()):
        parent[path[-1]] = draw(json_values)
    elif isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent.pop(path[-1])
    return obj


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, bytes | None, dict[str, str]]:
    method = draw(st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE"]))
    sample = draw(st.sampled_from(sorted(SAMPLES)))
    if draw(st.integers(0, 9)) < 6:  # aimed: the sample's own collection or object
        collection, name = HOMES[sample]
        path = collection if method == "POST" else f"{collection}/{name}"
        if method in ("PUT", "PATCH") and draw(st.booleans()):
            path += "/status"
    else:
        path = draw(st.sampled_from(ROUTES)).format(
            ns=urllib.parse.quote(draw(namespaces), safe=""), name=urllib.parse.quote(draw(names), safe="")
        )
    query = urllib.parse.urlencode(draw(queries))
    headers = {"Accept": "application/json"}
    token = draw(st.sampled_from(TOKENS))
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body: bytes | None = None
    if method in ("POST", "PUT", "PATCH"):
        kind = draw(st.sampled_from(["mutated"] * 4 + ["json", "bytes"]))
        if kind == "mutated":
            body = json.dumps(mutated(draw, sample)).encode()
        elif kind == "json":
            body = json.dumps(draw(json_values)).encode()
        else:
            body = draw(st.binary(max_size=64))
        headers["Content-Type"] = draw(st.sampled_from(CONTENT_TYPES[:3] * 3 + CONTENT_TYPES))
    return method, path + (f"?{query}" if query else ""), body, headers


def keyspace(client: redis.Redis) -> dict[Any, Any]:
    """Every key with its whole value: the state a refused request must leave alone."""
    state: dict[Any, Any] = {}
    for key in sorted(client.keys("*")):
        kind = client.type(key)
        if kind == b"string":
            state[key] = client.get(key)
        elif kind == b"hash":
            state[key] = client.hgetall(key)
        elif kind == b"zset":
            state[key] = client.zrange(key, 0, -1, withscores=True)
        elif kind == b"set":
            state[key] = client.smembers(key)
        elif kind == b"list":
            state[key] = client.lrange(key, 0, -1)
        elif kind == b"stream":
            state[key] = client.xrange(key)
        else:
            state[key] = kind
    return state


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[tuple[FleetApiThread, redis.Redis]]:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    with FleetApiThread(client, tokens=parse_token_file(TOKEN_FILE), members=lambda: ["member-1"]) as api:
        admin = {"Authorization": "Bearer admin-token-f1", "Content-Type": "application/json"}
        for path, obj in [
            (f"{TREES}/namespaces/kube-system/elasticquotatrees", SAMPLES["tree"]),
            (f"{JOBS}/namespaces/default/ascendjobs", SAMPLES["job"]),
            (f"{POLICY}/namespaces/default/propagationpolicies", SAMPLES["policy"]),
        ]:
            assert send(api, "POST", path, json.dumps(obj).encode(), admin)[0] == 201
        yield api, client
    client.close()


def send(
    api: FleetApiThread, method: str, path: str, body: bytes | None, headers: dict[str, str]
) -> tuple[int, bytes]:
    request = urllib.request.Request(api.url + path, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read()


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request=requests())
def test_no_request_gets_a_5xx_and_a_refused_one_changes_nothing(
    fuzzed: tuple[FleetApiThread, redis.Redis], request: tuple[str, str, bytes | None, dict[str, str]]
) -> None:
    api, client = fuzzed
    method, path, body, headers = request
    before = keyspace(client)
    code, answer = send(api, method, path, body, headers)
    assert code < 500, (method, path, body, code, answer[:500])
    if code >= 400:
        status = json.loads(answer)
        assert (status["kind"], status["status"], status["code"]) == ("Status", "Failure", code), status
        assert status["message"], status
        assert keyspace(client) == before, (method, path, body, code, status)
