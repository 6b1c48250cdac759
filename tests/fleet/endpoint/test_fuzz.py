"""Fuzzing the fleet endpoint's kube routes with hypothesis: never a 5xx, and a refused request
changes nothing.

Each example is one HTTP request to a replica with auth on: a method, a route of a served kind
(collection, object, ``status``; namespaced or cluster-wide), a name (existing, random or hostile),
query parameters kubectl and clients send (``dryRun``, selectors, ``limit``/``continue``,
``resourceVersion``), a content type, and a body that is either a valid object of the kind with
one field replaced or removed, random JSON, or not JSON at all. The whole Redis keyspace is read
before and after; whenever the answer is an error it must be a Kubernetes ``Status`` with the same
code, and the keyspace must be exactly as it was.

Hostile bodies are drawn too (issue 17): a field of a sample given a value of the wrong type; the
sample in YAML; YAML with aliases inside it (billion laughs of several sizes, an anchor inside
itself, an unknown anchor, a few honest aliases); a field nested around the depth limit, or 1025
or 10000 levels deep, in JSON or YAML; a body over the size limit in any content type; a job
whose quota label names a tree node (its own, another, the root, none that exists) from a
namespace the node binds or one it does not. Those past a limit must be refused (4xx), never
accepted. A second test sends label and annotation patches without a resourceVersion from
several threads at once through the official client: all succeed and all their labels are there.
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
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
from kubernetes import client as kube

from fleet.apiserver.bodies import MAX_BODY_BYTES, MAX_DEPTH
from fleet.ascend import ASCENDJOB_GROUP, ASCENDJOB_PLURAL, ASCENDJOB_VERSION
from fleet.endpoint.auth import parse_token_file
from tests.fleet.endpoint.conftest import JOB, POLICIES, TREE
from tests.support.fleet_api import FleetApiThread, keyspace

pytestmark = pytest.mark.integration

TOKEN_FILE = 'admin-token-f1,admin,u-1,"fleet:admins"\nalice-token-f2,alice,u-2,"namespace:default"\n'
#: Mostly tokens that get past authentication, so that requests reach the kinds' own code.
TOKENS = ["admin-token-f1"] * 4 + ["alice-token-f2"] * 2 + [None, "not-a-token"]
#: Hostile bodies mostly from the admin, whom nothing but the body can stop.
HOSTILE_TOKENS = ["admin-token-f1"] * 5 + ["alice-token-f2"]

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
YAML_TYPES = ["application/yaml", "application/x-yaml", "text/yaml"]
QUOTA_LABEL = "quota.scheduling.alibabacloud.com/name"
#: Values of a type (or a form) the field does not take.
WRONG = [
    "2",
    True,
    False,
    1.5,
    -1,
    0,
    2**63,
    2**64,
    "",
    "1500m",
    "x" * 300,
    [],
    {},
    None,
    [1, "a"],
    {"a": None},
]
#: One body over the limit, sent whatever the drawn content type says.
OVERSIZED = json.dumps(
    {"metadata": {"name": "oversized", "annotations": {"a": "x" * MAX_BODY_BYTES}}}
).encode()


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


def with_placeholder(draw: st.DrawFn, sample: str) -> Any:
    """The sample with one field (drawn) replaced by the string ``@@@``, to put raw text there."""
    obj = copy.deepcopy(SAMPLES[sample])
    path = draw(st.sampled_from(leaf_paths(obj)[1:]))
    parent: Any = obj
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = "@@@"
    return obj


def laughs(levels: int, fanout: int) -> str:
    """A YAML flow sequence defining each level of a billion laughs inline, then using it."""
    parts = ["&l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in range(1, levels + 1):
        parts.append(f"&l{level} [{', '.join([f'*l{level - 1}'] * fanout)}]")
    return "[" + ", ".join(parts) + "]"


@st.composite
def hostile(draw: st.DrawFn, sample: str, method: str) -> tuple[bytes, str, bool]:
    """A hostile body for ``sample``: the bytes, a content type, and whether it must be refused.

    Patches are JSON: a PATCH gets no YAML, and its deep bodies come as patch types.
    """
    patching = method == "PATCH"
    families = (
        ["typed", "deep", "oversized"]
        if patching
        else ["typed", "yaml", "aliased", "aliased", "deep", "oversized"]
    )
    family = draw(st.sampled_from(families))
    if family == "typed":
        obj = with_placeholder(draw, sample)
        return json.dumps(obj).replace('"@@@"', json.dumps(draw(st.sampled_from(WRONG)))).encode(), "", False
    if family == "yaml":
        yaml_type = draw(st.sampled_from(YAML_TYPES))
        return yaml.safe_dump(mutated(draw, sample), allow_unicode=True).encode(), yaml_type, False
    if family == "oversized":
        return OVERSIZED, draw(st.sampled_from(CONTENT_TYPES[:4] + YAML_TYPES)), True
    obj = with_placeholder(draw, sample)
    flow = json.dumps(obj)  # JSON is YAML's flow style: raw YAML text fits in where "@@@" was
    if family == "aliased":
        levels, fanout = draw(st.integers(2, 9)), draw(st.integers(2, 10))
        bomb = laughs(levels, fanout)
        # (YAML put where the field was, must it be refused?) Recursive and unknown anchors must.
        text, refuse = draw(
            st.sampled_from(
                [
                    *[(bomb, fanout**levels * 9 > 2_000_000)] * 4,
                    ("&s [1, *s]", True),
                    ("{a: &s {b: *s}}", True),
                    ("*nowhere", True),
                    ("[&m {a: 1, b: [x, y]}, *m, *m, {<<: *m, c: 2}]", False),
                ]
            )
        )
        body = flow.replace('"@@@"', text).encode()
        return body, draw(st.sampled_from(YAML_TYPES * 3 + CONTENT_TYPES[:1])), refuse
    depth = draw(st.sampled_from([MAX_DEPTH - 5, MAX_DEPTH - 1, MAX_DEPTH + 1, 1024, 1025, 10_000]))
    opening, closing = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
    inner = opening * depth + ("1" if opening != "[" else "") + closing * depth
    types = CONTENT_TYPES[1:4] if patching else ["application/json", *YAML_TYPES]
    return flow.replace('"@@@"', inner).encode(), draw(st.sampled_from(types)), depth > MAX_DEPTH


@st.composite
def quota_labelled(draw: st.DrawFn) -> tuple[str, str, bytes, str]:
    """A job whose quota label names a tree node, submitted, replaced or patched, from a namespace."""
    node = draw(st.sampled_from(["root", "child-2", "root-child-2", "child-b", "nosuch", "", "x" * 70]))
    namespace = draw(st.sampled_from(["default", "default", "team-b", "kube-system"]))
    name = draw(st.sampled_from(["default-test-pytorch", "quota-job"]))
    job = copy.deepcopy(SAMPLES["job"])
    job["metadata"]["namespace"] = namespace
    job["metadata"]["name"] = name
    job["metadata"]["labels"][QUOTA_LABEL] = node
    collection = f"{JOBS}/namespaces/{namespace}/ascendjobs"
    method = draw(st.sampled_from(["POST", "POST", "PUT", "PATCH"]))
    if method == "POST":
        return method, collection, json.dumps(job).encode(), "application/json"
    if method == "PUT":
        return method, f"{collection}/{name}", json.dumps(job).encode(), "application/json"
    patch = {"metadata": {"labels": {QUOTA_LABEL: node}}}
    return method, f"{collection}/{name}", json.dumps(patch).encode(), "application/merge-patch+json"


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, bytes | None, dict[str, str], bool]:
    """A request: method, path with query, body, headers, and whether it must be refused."""
    method = draw(st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE"]))
    sample = draw(st.sampled_from(sorted(SAMPLES)))
    kind = None
    if method in ("POST", "PUT", "PATCH"):
        kind = draw(st.sampled_from(["mutated"] * 4 + ["json", "bytes"] + ["hostile"] * 4 + ["quota"] * 2))
    # Hostile bodies mostly go where they get decoded: the sample's own place, with a token.
    hostile_body = kind in ("hostile", "quota")
    if draw(st.integers(0, 9)) < (9 if hostile_body else 6):  # aimed: the sample's collection or object
        collection, name = HOMES[sample]
        path = collection if method == "POST" else f"{collection}/{name}"
        if method in ("PUT", "PATCH") and draw(st.integers(0, 3)) == 0:
            path += "/status"
    else:
        path = draw(st.sampled_from(ROUTES)).format(
            ns=urllib.parse.quote(draw(namespaces), safe=""), name=urllib.parse.quote(draw(names), safe="")
        )
    query = urllib.parse.urlencode(draw(queries))
    headers = {"Accept": "application/json"}
    token = draw(st.sampled_from(HOSTILE_TOKENS if hostile_body else TOKENS))
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body: bytes | None = None
    refuse = False
    if kind is not None:
        content_type = draw(st.sampled_from(CONTENT_TYPES[:3] * 3 + CONTENT_TYPES))
        if kind == "mutated":
            body = json.dumps(mutated(draw, sample)).encode()
        elif kind == "json":
            body = json.dumps(draw(json_values)).encode()
        elif kind == "hostile":
            body, drawn_type, refuse = draw(hostile(sample, method))
            content_type = drawn_type or content_type
        elif kind == "quota":
            method, path, body, content_type = draw(quota_labelled())
        else:
            body = draw(st.binary(max_size=64))
        headers["Content-Type"] = content_type
    return method, path + (f"?{query}" if query else ""), body, headers, refuse


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
    fuzzed: tuple[FleetApiThread, redis.Redis], request: tuple[str, str, bytes | None, dict[str, str], bool]
) -> None:
    api, client = fuzzed
    method, path, body, headers, refuse = request
    before = keyspace(client)
    code, answer = send(api, method, path, body, headers)
    shown = body[:300] if body else body
    assert code < 500, (method, path, shown, code, answer[:500])
    assert code >= 400 or not refuse, (method, path, shown, code, answer[:500])
    if code >= 400:
        status = json.loads(answer)
        assert (status["kind"], status["status"], status["code"]) == ("Status", "Failure", code), status
        assert status["message"], status
        assert keyspace(client) == before, (method, path, shown, code, status)


@pytest.fixture(scope="module")
def labelled() -> Iterator[Any]:
    """A replica of its own with the tree and one job (annotated), and an admin's official client."""
    redis_client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    with FleetApiThread(redis_client, tokens=parse_token_file(TOKEN_FILE)) as api:
        admin = {"Authorization": "Bearer admin-token-f1", "Content-Type": "application/json"}
        job = copy.deepcopy(SAMPLES["job"])
        job["metadata"]["annotations"] = {"seed": "1"}
        for path, obj in [
            (f"{TREES}/namespaces/kube-system/elasticquotatrees", SAMPLES["tree"]),
            (f"{JOBS}/namespaces/default/ascendjobs", job),
        ]:
            assert send(api, "POST", path, json.dumps(obj).encode(), admin)[0] == 201
        configuration = kube.Configuration(host=api.url, api_key={"authorization": "Bearer admin-token-f1"})
        api_client = kube.ApiClient(configuration)
        yield kube.CustomObjectsApi(api_client)
        api_client.close()  # type: ignore[no-untyped-call]
    redis_client.close()


_ROUNDS = itertools.count()
_JOB: dict[str, Any] = {
    "group": ASCENDJOB_GROUP,
    "version": ASCENDJOB_VERSION,
    "plural": ASCENDJOB_PLURAL,
    "namespace": "default",
    "name": "default-test-pytorch",
}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    patches=st.lists(
        st.sampled_from(["merge-label", "json-label", "merge-annotation", "json-annotation"]),
        min_size=2,
        max_size=8,
    )
)
def test_concurrent_patches_without_a_resource_version_all_succeed(labelled: Any, patches: list[str]) -> None:
    custom = labelled
    round_ = next(_ROUNDS)
    start = threading.Barrier(len(patches))
    failures: list[BaseException] = []

    def one(index: int, kind: str) -> None:
        how, what = kind.split("-")
        field = "labels" if what == "label" else "annotations"
        key = f"r{round_}-{index}"
        try:
            start.wait()
            if how == "merge":
                custom.patch_namespaced_custom_object(**_JOB, body={"metadata": {field: {key: "v"}}})
            else:
                custom.patch_namespaced_custom_object(
                    **_JOB,
                    body=[{"op": "add", "path": f"/metadata/{field}/{key}", "value": "v"}],
                    _content_type="application/json-patch+json",
                )
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=one, args=(i, kind)) for i, kind in enumerate(patches)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert failures == []
    meta = custom.get_namespaced_custom_object(**_JOB)["metadata"]
    for index, kind in enumerate(patches):
        field = "labels" if kind.endswith("label") else "annotations"
        assert meta[field].get(f"r{round_}-{index}") == "v", (kind, meta)
