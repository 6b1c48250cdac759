"""App behaviour beyond the client's everyday calls: auth, pluggable validation, odd requests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest

from fleet.apiserver import (
    Cause,
    MemoryStore,
    Server,
    TokenAuthenticator,
    build_app,
)
from fleet.sim import member_registry
from tests.support.apiserver import ApiServerThread
from tests.support.kinds import ASCENDJOB

pytestmark = pytest.mark.integration

JOBS = "/apis/mindxdl.gitee.com/v1/namespaces/default/ascendjobs"


@pytest.fixture
def http(apiserver: ApiServerThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=apiserver.url, timeout=10) as client:
        yield client


def test_unknown_resources_and_methods(http: httpx.Client) -> None:
    missing = http.get("/api/v1/widgets")
    assert missing.status_code == 404 and missing.json()["reason"] == "NotFound"
    assert http.get("/apis/example.com/v1").status_code == 404
    not_allowed = http.put("/api/v1/nodes", json={})
    assert not_allowed.status_code == 405 and not_allowed.json()["reason"] == "MethodNotAllowed"
    no_scope = http.post("/api/v1/pods", json={"metadata": {"name": "p"}})
    assert no_scope.status_code == 405


def test_body_and_url_must_agree(http: httpx.Client) -> None:
    wrong_ns = http.post(
        "/api/v1/namespaces/default/pods",
        json={
            "metadata": {"name": "p", "namespace": "kube-system"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        },
    )
    assert wrong_ns.status_code == 400 and "namespace of the provided object" in wrong_ns.json()["message"]
    wrong_kind = http.post(
        "/api/v1/nodes", json={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "n"}}
    )
    assert wrong_kind.status_code == 400 and "kind in the data (Pod)" in wrong_kind.json()["message"]
    http.post("/api/v1/nodes", json={"metadata": {"name": "n"}})
    renamed = http.put("/api/v1/nodes/n", json={"metadata": {"name": "m"}})
    assert renamed.status_code == 400 and "does not match the name on the URL" in renamed.json()["message"]
    garbage = http.post("/api/v1/nodes", content=b"{nope", headers={"Content-Type": "application/json"})
    assert garbage.status_code == 400 and garbage.json()["reason"] == "BadRequest"
    huge = {"metadata": {"name": "n", "annotations": {"a": "x" * (4 * 1024 * 1024)}}}
    assert http.post("/api/v1/nodes", json=huge).status_code == 413
    protobuf = http.post(
        "/api/v1/nodes", content=b"k8s\x00", headers={"Content-Type": "application/vnd.kubernetes.protobuf"}
    )
    assert protobuf.status_code == 415 and protobuf.json()["reason"] == "UnsupportedMediaType"
    assert http.get("/api/v1/nodes").json()["items"] == [{**http.get("/api/v1/nodes/n").json()}]


def test_delete_collection_with_selector(http: httpx.Client) -> None:
    for name, pool in [("a", "x"), ("b", "x"), ("c", "y")]:
        http.post("/api/v1/nodes", json={"metadata": {"name": name, "labels": {"pool": pool}}})
    deleted = http.delete("/api/v1/nodes", params={"labelSelector": "pool=x"})
    assert [n["metadata"]["name"] for n in deleted.json()["items"]] == ["a", "b"]
    assert [n["metadata"]["name"] for n in http.get("/api/v1/nodes").json()["items"]] == ["c"]


def test_delete_preconditions(http: httpx.Client) -> None:
    http.post("/api/v1/nodes", json={"metadata": {"name": "n"}})
    refused = http.request("DELETE", "/api/v1/nodes/n", json={"preconditions": {"uid": "other"}})
    assert refused.status_code == 409 and "Precondition failed: uid" in refused.json()["message"]
    assert http.get("/api/v1/nodes/n").status_code == 200


def test_a_namespace_name_is_a_dns_label(http: httpx.Client) -> None:
    """As kube-apiserver: ``kubectl create namespace team.a`` is refused (a label has no dots),
    naming the field and the rule; ``team-a`` is created."""
    refused = http.post("/api/v1/namespaces", json={"metadata": {"name": "team.a"}})
    assert refused.status_code == 422
    (cause,) = refused.json()["details"]["causes"]
    assert cause["field"] == "metadata.name" and cause["message"].endswith("must not contain dots")
    assert http.get("/api/v1/namespaces/team.a").status_code == 404
    assert http.post("/api/v1/namespaces", json={"metadata": {"name": "team-a"}}).status_code == 201


def test_pluggable_validation_and_strictness() -> None:
    def needs_replicas(obj: dict[str, object]) -> list[Cause]:
        spec = obj.get("spec")
        if not isinstance(spec, dict) or "replicaSpecs" not in spec:
            return [Cause("spec.replicaSpecs", "Required value", "FieldValueRequired")]
        return []

    server = ApiServerThread(registry=member_registry([replace(ASCENDJOB, validate=needs_replicas)])).start()
    try:
        with httpx.Client(base_url=server.url) as http:
            refused = http.post(JOBS, json={"metadata": {"name": "j"}, "spec": {}})
            assert refused.status_code == 422
            assert refused.json()["details"]["causes"] == [
                {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.replicaSpecs"}
            ]
            assert refused.json()["message"].startswith('AscendJob.mindxdl.gitee.com "j" is invalid')
            accepted = http.post(JOBS, json={"metadata": {"name": "j"}, "spec": {"replicaSpecs": {}}})
            assert accepted.status_code == 201
            ignored = http.post(
                JOBS,
                params={"fieldValidation": "Ignore"},
                json={"metadata": {"name": "k"}, "spec": {"replicaSpecs": {}}, "extra": 1},
            )
            assert ignored.status_code == 201 and "extra" not in ignored.json()
    finally:
        server.close()


def test_token_authentication() -> None:
    async def scenario() -> None:
        auth = TokenAuthenticator({"s3cret": "admin"})
        assert "s3cret" not in repr(auth)
        app = build_app(member_registry(), MemoryStore.with_default_namespaces(), authenticator=auth)
        async with (
            Server(app, "127.0.0.1", 0, grace=1) as server,
            httpx.AsyncClient(base_url=server.url) as http,
        ):
            denied = await http.get("/api/v1/nodes")
            assert denied.status_code == 401 and denied.json()["reason"] == "Unauthorized"
            wrong = await http.get("/api/v1/nodes", headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            allowed = await http.get("/api/v1/nodes", headers={"Authorization": "Bearer s3cret"})
            assert allowed.status_code == 200
            assert (await http.get("/readyz")).text == "ok"  # probes stay open

    asyncio.run(scenario())


def test_openapi_documents_kubectl_reads(http: httpx.Client) -> None:
    index = http.get("/openapi/v3").json()
    assert set(index["paths"]) == {
        "api/v1",
        "apis/mindxdl.gitee.com/v1",
        "apis/kubeflow.org/v1",
        "apis/kubeflow.org/v2beta1",
        "apis/authorization.k8s.io/v1",
        "apis/authentication.k8s.io/v1",
        "apis/batch.tensorstack.dev/v1beta1",
        "apis/jobset.x-k8s.io/v1alpha2",
        "apis/trainer.kubeflow.org/v1alpha1",
        "apis/batch.volcano.sh/v1alpha1",
        "apis/batch/v1",
    }
    document = http.get(index["paths"]["apis/mindxdl.gitee.com/v1"]["serverRelativeURL"]).json()
    patch = document["paths"]["/apis/mindxdl.gitee.com/v1/namespaces/{namespace}/ascendjobs/{name}"]["patch"]
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    proto = http.get(
        "/openapi/v2", headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"}
    )
    assert proto.headers["content-type"] == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    assert proto.content.startswith(b"\x0a\x032.0")  # field 1 (swagger) = "2.0"
