"""The official ``kubernetes`` client against the serving core, over real HTTP.

The API objects are typed ``Any`` here: the generated client's signatures ask for its models, but
it accepts plain dicts (and these tests send dicts on purpose, as Fleet's member access does).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator
from typing import Any, cast

import httpx
import pytest
from kubernetes import client, watch

from fleet.apiserver import NODE, MemoryStore, Store, WatchEvent
from fleet.ascend import ASCENDJOB_GROUP, ASCENDJOB_PLURAL, ASCENDJOB_VERSION
from fleet.cancelling import AGAIN_AFTER_SECONDS
from tests.support.apiserver import ApiServerThread

pytestmark = pytest.mark.integration

G, V, P = ASCENDJOB_GROUP, ASCENDJOB_VERSION, ASCENDJOB_PLURAL


def pod(name: str, labels: dict[str, str] | None = None, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


def node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "allocatable": {"huawei.com/Ascend910": "2"},
        },
    }


def job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{G}/{V}",
        "kind": "AscendJob",
        "metadata": {"name": name, "labels": {"framework": "pytorch"}},
        "spec": {"replicaSpecs": {"Master": {"replicas": 1}}},
        "status": {"conditions": [{"type": "Succeeded"}]},
    }


def new_watch() -> Any:
    return watch.Watch()  # type: ignore[no-untyped-call]


def error_body(error: client.ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(error.body or "{}")
    return body


def test_core_crud(core: Any) -> None:
    created = core.create_namespaced_pod(namespace="default", body=pod("web", {"app": "web"}))
    assert created.metadata.uid and created.metadata.resource_version
    assert created.status.phase == "Pending"  # create-time defaulting, as Kubernetes does
    fetched = core.read_namespaced_pod(name="web", namespace="default")
    assert fetched.metadata.uid == created.metadata.uid
    fetched.metadata.labels["tier"] = "front"
    replaced = core.replace_namespaced_pod(name="web", namespace="default", body=fetched)
    assert replaced.metadata.labels == {"app": "web", "tier": "front"}
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    core.delete_namespaced_pod(name="web", namespace="default")
    with pytest.raises(client.ApiException) as missing:
        core.read_namespaced_pod(name="web", namespace="default")
    assert missing.value.status == 404
    assert error_body(missing.value)["reason"] == "NotFound"


def test_cluster_scoped_kinds_and_namespaces(core: Any) -> None:
    core.create_node(body=node("n1", {"accelerator-type": "card-910b-2"}))
    assert core.read_node(name="n1").status.conditions[0].type == "Ready"  # Node keeps status on create
    core.create_namespace(body={"metadata": {"name": "team-a"}})
    assert core.read_namespace(name="team-a").status.phase == "Active"
    core.create_namespaced_pod(namespace="team-a", body=pod("p"))
    with pytest.raises(client.ApiException) as no_ns:
        core.create_namespaced_pod(namespace="team-b", body=pod("p"))
    assert no_ns.value.status == 404 and 'namespaces "team-b" not found' in error_body(no_ns.value)["message"]
    names = [ns.metadata.name for ns in core.list_namespace().items]
    assert names == ["default", "kube-public", "kube-system", "team-a"]


def test_conflicts_and_already_exists(core: Any) -> None:
    core.create_node(body=node("n1"))
    first = core.read_node(name="n1")
    second = core.read_node(name="n1")
    first.metadata.labels = {"a": "1"}
    core.replace_node(name="n1", body=first)
    second.metadata.labels = {"b": "2"}
    with pytest.raises(client.ApiException) as stale:
        core.replace_node(name="n1", body=second)
    assert stale.value.status == 409 and error_body(stale.value)["reason"] == "Conflict"
    assert core.read_node(name="n1").metadata.labels == {"a": "1"}
    with pytest.raises(client.ApiException) as dup:
        core.create_node(body=node("n1"))
    assert dup.value.status == 409 and error_body(dup.value)["reason"] == "AlreadyExists"


def test_invalid_objects_get_field_causes_and_change_nothing(core: Any, apiserver: ApiServerThread) -> None:
    before = apiserver.store.resource_version
    bad = pod("Bad_Name")
    bad["spec"]["containers"][0]["image"] = ""
    with pytest.raises(client.ApiException) as invalid:
        core.create_namespaced_pod(namespace="default", body=bad)
    status = error_body(invalid.value)
    assert invalid.value.status == 422 and status["reason"] == "Invalid"
    fields = {cause["field"] for cause in status["details"]["causes"]}
    assert fields == {"metadata.name", "spec.containers[0].image"}
    assert 'Pod "Bad_Name" is invalid' in status["message"]
    # The typed client refuses unknown fields itself, so this one goes over plain HTTP.
    strict = {"fieldValidation": "Strict"}
    unknown = httpx.post(f"{apiserver.url}/api/v1/nodes", params=strict, json={**node("n1"), "spex": {}})
    assert unknown.status_code == 400 and 'unknown field "spex"' in unknown.json()["message"]
    assert apiserver.store.resource_version == before
    # Without fieldValidation the server's default is Warn: the field is dropped and said so.
    warned = httpx.post(f"{apiserver.url}/api/v1/nodes", json={**node("n1"), "spex": {}})
    assert warned.status_code == 201 and "spex" not in warned.json()
    assert warned.headers.get_list("warning") == ['299 - "unknown field \\"spex\\""']


def test_label_and_field_selectors(core: Any) -> None:
    core.create_namespaced_pod(namespace="default", body=pod("a", {"app": "web", "tier": "front"}, node="n1"))
    core.create_namespaced_pod(namespace="default", body=pod("b", {"app": "db"}, node="n2"))
    core.create_namespaced_pod(namespace="kube-system", body=pod("c", {"app": "web"}))

    def names(**kwargs: Any) -> list[str]:
        return sorted(p.metadata.name for p in core.list_pod_for_all_namespaces(**kwargs).items)

    assert names(label_selector="app=web") == ["a", "c"]
    assert names(label_selector="app in (web,db),!tier") == ["b", "c"]
    assert names(label_selector="app notin (web)") == ["b"]
    assert names(label_selector="tier") == ["a"]
    assert names(field_selector="spec.nodeName=n2") == ["b"]
    assert names(field_selector="metadata.namespace!=default") == ["c"]
    assert names(field_selector="status.phase=Pending,metadata.name=a") == ["a"]
    with pytest.raises(client.ApiException) as bad:
        names(field_selector="spec.image=x")
    assert bad.value.status == 400


def test_event_field_selectors(core: Any) -> None:
    for i, kind in enumerate(["AscendJob", "Pod"]):
        core.create_namespaced_event(
            namespace="default",
            body={
                "metadata": {"name": f"e{i}"},
                "involvedObject": {"kind": kind, "name": "x", "namespace": "default", "uid": f"u{i}"},
                "reason": "Created",
                "message": "m",
                "type": "Normal",
            },
        )
    found = core.list_namespaced_event(
        namespace="default",
        field_selector="involvedObject.kind=AscendJob,involvedObject.name=x,involvedObject.uid=u0",
    )
    assert [e.metadata.name for e in found.items] == ["e0"]


def test_limit_and_continue(core: Any) -> None:
    for i in range(7):
        core.create_node(body=node(f"n{i}"))
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        page = core.list_node(limit=3, _continue=token)
        seen += [n.metadata.name for n in page.items]
        pages += 1
        token = page.metadata._continue
        if not token:
            break
    assert pages == 3 and seen == [f"n{i}" for i in range(7)]


def test_dry_run_changes_nothing(core: Any, apiserver: ApiServerThread) -> None:
    before = apiserver.store.resource_version
    preview = core.create_namespaced_pod(namespace="default", body=pod("p"), dry_run="All")
    assert preview.metadata.name == "p"
    assert core.list_namespaced_pod(namespace="default").items == []
    assert apiserver.store.resource_version == before


def test_status_subresource(custom: Any) -> None:
    created = custom.create_namespaced_custom_object(G, V, "default", P, job("j"))
    assert "status" not in created  # status is not settable on create
    with_status = custom.patch_namespaced_custom_object_status(
        G, V, "default", P, "j", {"status": {"conditions": [{"type": "Created"}, {"type": "Running"}]}}
    )
    assert with_status["status"]["conditions"][-1]["type"] == "Running"
    assert with_status["metadata"]["generation"] == 1
    spec_patched = custom.patch_namespaced_custom_object(
        G, V, "default", P, "j", {"spec": {"replicaSpecs": {"Worker": {"replicas": 2}}}, "status": None}
    )
    assert spec_patched["status"] == with_status["status"]  # the main resource ignores status
    assert spec_patched["metadata"]["generation"] == 2
    assert (
        custom.get_namespaced_custom_object_status(G, V, "default", P, "j")["status"] == with_status["status"]
    )


def test_patch_types(core: Any, apiserver: ApiServerThread) -> None:
    core.create_node(body=node("n1", {"a": "1"}))
    # A dict body goes out as a strategic merge patch (the client's choice for core kinds).
    core.patch_node(name="n1", body={"metadata": {"labels": {"b": "2"}}, "spec": {"unschedulable": True}})
    core.patch_node_status(name="n1", body={"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    core.patch_node(name="n1", body=[{"op": "replace", "path": "/metadata/labels/a", "value": "9"}])
    core.patch_node(
        name="n1", body={"metadata": {"labels": {"b": None}}}, _content_type="application/merge-patch+json"
    )
    result = core.read_node(name="n1")
    assert result.metadata.labels == {"a": "9"}
    assert result.spec.unschedulable is True
    assert [(c.type, c.status) for c in result.status.conditions] == [("Ready", "False")]
    with pytest.raises(client.ApiException) as failed:
        core.patch_node(name="n1", body=[{"op": "test", "path": "/metadata/labels/a", "value": "1"}])
    assert failed.value.status == 422


def test_strategic_patch_is_refused_for_ascendjob(apiserver: ApiServerThread, custom: Any) -> None:
    custom.create_namespaced_custom_object(G, V, "default", P, job("j"))
    response = httpx.patch(
        f"{apiserver.url}/apis/{G}/{V}/namespaces/default/{P}/j",
        content=b'{"metadata":{"labels":{"a":"b"}}}',
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert response.status_code == 415
    assert "application/merge-patch+json" in response.json()["message"]


def test_watch_resumes_from_a_resource_version(core: Any) -> None:
    listed = core.list_node()
    core.create_node(body=node("n1"))
    core.patch_node(name="n1", body={"metadata": {"labels": {"x": "y"}}})
    resume_at = core.read_node(name="n1").metadata.resource_version
    core.delete_node(name="n1")
    core.create_node(body=node("n2"))
    events = [
        (e["type"], e["object"].metadata.name)
        for e in new_watch().stream(
            core.list_node, resource_version=listed.metadata.resource_version, timeout_seconds=1
        )
    ]
    assert events == [("ADDED", "n1"), ("MODIFIED", "n1"), ("DELETED", "n1"), ("ADDED", "n2")]
    resumed = [
        (e["type"], e["object"].metadata.name)
        for e in new_watch().stream(core.list_node, resource_version=resume_at, timeout_seconds=1)
    ]
    assert resumed == [("DELETED", "n1"), ("ADDED", "n2")]


def test_watch_delivers_live_changes_with_selectors(core: Any) -> None:
    start = core.list_namespaced_pod(namespace="default").metadata.resource_version

    def writer() -> None:
        time.sleep(0.2)
        core.create_namespaced_pod(namespace="default", body=pod("skip", {"app": "db"}))
        core.create_namespaced_pod(namespace="default", body=pod("keep", {"app": "web"}))

    thread = threading.Thread(target=writer)
    thread.start()
    stream = new_watch()
    seen = []
    for event in stream.stream(
        core.list_namespaced_pod,
        namespace="default",
        label_selector="app=web",
        resource_version=start,
        timeout_seconds=5,
    ):
        seen.append((event["type"], event["object"].metadata.name))
        stream.stop()
    thread.join()
    assert seen == [("ADDED", "keep")]


def test_watch_too_old_is_410() -> None:
    server = ApiServerThread(history=5).start()
    try:
        with server.api_client() as api:
            core: Any = client.CoreV1Api(api)
            old = core.list_node().metadata.resource_version
            for i in range(10):
                core.create_node(body=node(f"n{i}"))
            with pytest.raises(client.ApiException) as gone:
                list(new_watch().stream(core.list_node, resource_version=old, timeout_seconds=2))
            assert gone.value.status == 410
            raw = httpx.get(f"{server.url}/api/v1/nodes", params={"watch": "1", "resourceVersion": old})
            event = json.loads(raw.text.splitlines()[0])
            assert raw.status_code == 200 and event["type"] == "ERROR"
            assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
    finally:
        server.close()


def test_watch_bookmarks_and_timeout(apiserver: ApiServerThread) -> None:
    started = time.monotonic()
    response = httpx.get(
        f"{apiserver.url}/api/v1/namespaces/default/pods",
        params={
            "watch": "true",
            "resourceVersion": "1",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": "2",
        },
        timeout=10,
    )
    elapsed = time.monotonic() - started
    events = [json.loads(line) for line in response.text.splitlines()]
    assert 1.8 <= elapsed < 5  # timeoutSeconds ends the stream
    assert response.headers["content-type"].startswith("application/json")
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert len(bookmarks) >= 2  # the fixture sends one every 0.5 s
    assert bookmarks[-1]["object"]["metadata"]["resourceVersion"] == str(apiserver.store.resource_version)


class _LosesOneCancellation:
    """A store whose watch, with nothing to send, loses the first cancellation of its read and
    goes back to waiting: what a Redis-backed watch did when ``timeoutSeconds`` cancelled it
    while a command was being written (redis-py's ``wait_for`` on Python 3.11, gh-86296)."""

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def watch(self, rt: Any, namespace: str | None, **_: Any) -> AsyncIterator[WatchEvent]:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
        await asyncio.Event().wait()
        yield WatchEvent("ADDED", {})  # never reached


@contextlib.asynccontextmanager
async def _losing_store() -> AsyncIterator[Store]:
    yield cast(Store, _LosesOneCancellation(MemoryStore.with_default_namespaces()))


def test_a_watch_ends_at_timeout_seconds_even_when_its_store_loses_a_cancellation() -> None:
    """``kubectl get -w --request-timeout`` and client-go's watch timeouts rely on the stream
    ending at ``timeoutSeconds``; before, this one never ended."""
    server = ApiServerThread(store_factory=_losing_store).start()
    try:
        started = time.monotonic()
        response = httpx.get(
            f"{server.url}/api/v1/namespaces/default/pods",
            params={"watch": "true", "resourceVersion": "1", "timeoutSeconds": "1"},
            timeout=15,
        )
        elapsed = time.monotonic() - started
        assert response.status_code == 200 and response.text == ""
        assert 0.9 <= elapsed < 1 + AGAIN_AFTER_SECONDS + 3, f"ended after {elapsed:.1f}s"
    finally:
        server.close()


def test_discovery_and_version(apiserver: ApiServerThread, api: Any) -> None:
    assert client.VersionApi(api).get_code().git_version.startswith("v1.32")
    resources = client.CoreV1Api(api).get_api_resources()
    by_name = {r.name: r for r in resources.resources}
    assert by_name["nodes"].namespaced is False and by_name["pods"].short_names == ["po"]
    assert "pods/status" in by_name
    groups = client.ApisApi(api).get_api_versions()
    served = {rt.group for rt in apiserver.registry if rt.group}
    assert G in served and {g.name for g in groups.groups} == served
    assert groups.groups[0].name == G  # AscendJob's first
    kubeflow = next(g for g in groups.groups if g.name == "kubeflow.org")  # a member serves every job kind
    assert sorted(v.version for v in kubeflow.versions) == ["v1", "v2beta1"]
    custom = httpx.get(f"{apiserver.url}/apis/{G}/{V}").json()
    acjob = next(r for r in custom["resources"] if r["name"] == P)
    assert acjob["shortNames"] == ["acjob"] and acjob["kind"] == "AscendJob" and "watch" in acjob["verbs"]
    for probe in ("/readyz", "/livez", "/healthz"):
        assert httpx.get(apiserver.url + probe).text == "ok"
    client.CoreV1Api(api).list_namespaced_pod(namespace="default")
    metrics = httpx.get(apiserver.url + "/metrics").text
    assert 'apiserver_requests_total{code="200",resource="pods",verb="list"} 1.0' in metrics


def test_table_output(apiserver: ApiServerThread, core: Any) -> None:
    core.create_node(body=node("n1"))
    table_accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    table = httpx.get(f"{apiserver.url}/api/v1/nodes", headers={"Accept": table_accept}).json()
    assert table["kind"] == "Table"
    assert table["rows"][0]["cells"][:2] == ["n1", "Ready"]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    full = httpx.get(
        f"{apiserver.url}/api/v1/nodes/n1",
        params={"includeObject": "Object"},
        headers={"Accept": table_accept},
    ).json()
    assert full["rows"][0]["object"]["kind"] == "Node"


def test_a_client_leaving_a_watch_releases_it(apiserver: ApiServerThread) -> None:
    with (
        httpx.Client(base_url=apiserver.url, timeout=5) as http,
        http.stream("GET", "/api/v1/nodes", params={"watch": "1"}) as response,
    ):
        assert response.status_code == 200
        deadline = time.monotonic() + 5
        while apiserver.store.watcher_count(NODE) != 1:
            assert time.monotonic() < deadline, "the watch never registered"
            time.sleep(0.02)
    deadline = time.monotonic() + 5
    while apiserver.store.watcher_count(NODE) != 0:
        assert time.monotonic() < deadline, "the watch outlived its client"
        time.sleep(0.02)
