"""``kubectl explain`` at every depth at the fleet, from the kinds' schemas, and validation by the
same schemas: the OpenAPI the fleet serves and what it refuses can never disagree."""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from fleet.api.registry import fleet_registry
from tests.fleet.api.conftest import JOB, POLICIES, TREE, call
from tests.support.fleet_api import FleetApiThread
from tests.support.kubectl import Kubectl

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("path", "kind", "says"),
    [
        ("acjob.spec.replicaSpecs", "FIELD: replicaSpecs <map[string]ReplicaSpec>", "replicas\t<integer>"),
        ("acjob.spec.replicaSpecs.template.spec", "FIELD: spec <Object>", "PodSpec"),
        ("acjob.spec.runPolicy.schedulingPolicy.minAvailable", "FIELD: minAvailable <integer>", "at once"),
        ("elasticquotatree.spec.root", "FIELD: root <QuotaNode>", "children\t<[]QuotaNode>"),
        ("elasticquotatree.spec.root.children.children.namespaces", "FIELD: namespaces <[]string>", "leaves"),
        ("propagationpolicy.spec.failover.application.purgeMode", "FIELD: purgeMode <string>", "Gracefully"),
        ("priorityclass.value", "FIELD: value <integer>", "higher first"),
        (
            "memberclusters.status.accelerators.nodesByFreeNPUs",
            "FIELD: nodesByFreeNPUs <map[string]integer>",
            "8",
        ),
        ("queue.status.share", "FIELD: share <string>", "dominant share"),
        ("namespace.status.quotaNode", "FIELD: quotaNode <string>", "quota tree"),
        ("event.involvedObject.name", "FIELD: name <string>", "Its name"),
    ],
)
def test_explain_at_depth(kubectl: Kubectl, path: str, kind: str, says: str) -> None:
    out = kubectl("explain", path).stdout
    assert kind in out
    assert says in out


def test_every_served_kind_is_explained(kubectl: Kubectl) -> None:
    for rt in fleet_registry():
        out = kubectl("explain", f"{rt.plural}.{rt.group}" if rt.group else rt.plural).stdout
        assert f"KIND:       {rt.kind}" in out
        assert "DESCRIPTION:" in out


def typed_fields(
    schemas: dict[str, Any], name: str, prefix: str = "", depth: int = 0
) -> Iterator[tuple[str, str]]:
    """Every (dotted path, type) of a scalar field the served schema declares, maps and arrays
    stepped into with a sample key ``k`` and index 0."""
    schema = schemas[name] if isinstance(name, str) else name
    if depth > 6:
        return
    if "$ref" in schema:
        yield from typed_fields(schemas, schema["$ref"].rsplit("/", 1)[-1], prefix, depth + 1)
        return
    kind = schema.get("type")
    if kind in ("integer", "boolean", "number") or (kind == "string" and prefix):
        yield prefix, kind
    for key, child in (schema.get("properties") or {}).items():
        if key not in ("apiVersion", "kind", "metadata", "status"):
            yield from typed_fields(schemas, child, f"{prefix}.{key}" if prefix else key, depth + 1)
    if isinstance(schema.get("additionalProperties"), dict):
        yield from typed_fields(schemas, schema["additionalProperties"], f"{prefix}.k", depth + 1)
    if isinstance(schema.get("items"), dict):
        yield from typed_fields(schemas, schema["items"], f"{prefix}[0]", depth + 1)


def put(obj: dict[str, Any], path: str, value: Any) -> None:
    """Set ``path`` (``a.b[0].c``) in ``obj``, creating what is missing."""
    parts: list[str | int] = []
    for part in path.split("."):
        name, _, index = part.partition("[")
        parts.append(name)
        if index:
            parts.append(int(index.rstrip("]")))
    node: Any = obj
    for here, after in itertools.pairwise(parts):
        empty: Any = [] if isinstance(after, int) else {}
        if isinstance(here, int):
            while len(node) <= here:
                node.append(copy.deepcopy(empty))
            if not isinstance(node[here], dict | list):
                node[here] = empty
            node = node[here]
        else:
            if not isinstance(node.get(here), dict | list):
                node[here] = empty
            node = node[here]
    last = parts[-1]
    if isinstance(last, int):
        while len(node) <= last:
            node.append(None)
    node[last] = value


SAMPLES = {
    "ascendjobs": ("/apis/mindxdl.gitee.com/v1/namespaces/default/ascendjobs", JOB),
    "propagationpolicies": (
        "/apis/policy.one.alibabacloud.com/v1alpha1/namespaces/default/propagationpolicies",
        POLICIES[0],
    ),
    "elasticquotatrees": (
        "/apis/scheduling.sigs.k8s.io/v1beta1/namespaces/kube-system/elasticquotatrees",
        TREE,
    ),
}


@pytest.mark.parametrize("plural", sorted(SAMPLES))
def test_every_typed_field_the_openapi_serves_is_enforced(fleet_api: FleetApiThread, plural: str) -> None:
    """Walk the served OpenAPI v3 document: each scalar field, given a value of the wrong type,
    is refused (422) naming that field; the sample itself passes."""
    collection, sample = SAMPLES[plural]
    group_version = collection.split("/namespaces/")[0].removeprefix("/")
    code, document = call(fleet_api, "GET", f"/openapi/v3/{group_version}")
    assert code == 200
    schemas = document["components"]["schemas"]
    [root] = [
        n
        for n, s in schemas.items()
        if any(g.get("kind") for g in s.get("x-kubernetes-group-version-kind", []))
        and n.rsplit(".", 1)[-1].lower() + "s" == plural.replace("policies", "policys")
    ]
    base = yaml.safe_load(sample.read_text())
    assert call(fleet_api, "POST", f"{collection}?dryRun=All", base)[0] == 201
    fields = list(typed_fields(schemas, root))
    assert len(fields) >= {"ascendjobs": 10, "propagationpolicies": 10}.get(plural, 3)
    for path, kind in fields:
        obj = copy.deepcopy(base)
        wrong: Any = {"wrong": True} if kind == "string" else "wrong"
        put(obj, path, wrong)
        code, answer = call(fleet_api, "POST", f"{collection}?dryRun=All", obj)
        assert code == 422, (path, answer)
        causes = [c["field"] for c in answer["details"]["causes"]]
        assert path in causes, (path, json.dumps(answer)[:400])
