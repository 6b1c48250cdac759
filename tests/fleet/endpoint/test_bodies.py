"""Hostile bodies and concurrent unconditional patches at the fleet endpoint (issue 17).

Hostile bodies go over raw HTTP (kubectl turns YAML into JSON itself, and its own YAML library
refuses the bombs first): an alias bomb, 10000-deep JSON and YAML, and bodies over the limit in
every content type each get a 4xx ``Status``, quickly and in bounded memory, and leave Redis as
it was. Label and annotation patches without a resourceVersion, sent at once by the official
client and by kubectl, all succeed, as the Kubernetes API server retries them; a patch or an
update that names a stale resourceVersion still gets 409.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import tracemalloc
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from kubernetes import client

from fleet.apiserver.bodies import MAX_BODY_BYTES, MAX_DEPTH
from fleet.ascend import ASCENDJOB_GROUP, ASCENDJOB_PLURAL, ASCENDJOB_VERSION
from tests.fleet.endpoint.conftest import JOB, JOB_NAME, JOBS, TREE
from tests.support.fleet_api import FleetApiThread, keyspace
from tests.support.kubectl import Kubectl

pytestmark = pytest.mark.integration

EVENTS = "/api/v1/namespaces/default/events"
JOB_PATH = f"{JOBS}/namespaces/default/ascendjobs/{JOB_NAME}"
EVENT_HEAD = (
    "apiVersion: v1\nkind: Event\nmetadata: {name: bomb, namespace: default}\n"
    "involvedObject: {kind: AscendJob, name: x, namespace: default}\nreason: Bomb\nmessage: m\n"
)


def send(server: FleetApiThread, method: str, path: str, body: bytes, content_type: str) -> tuple[int, Any]:
    request = urllib.request.Request(
        server.url + path, data=body, method=method, headers={"Content-Type": content_type}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


def laughs(levels: int, fanout: int = 9) -> str:
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels + 1):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * fanout)}]")
    return "\n".join(lines) + "\n"


@pytest.fixture
def with_job(kubectl: Kubectl) -> Kubectl:
    kubectl("apply", "-f", str(TREE))
    kubectl("create", "-f", str(JOB))
    return kubectl


def test_an_alias_bomb_is_refused_in_bounded_memory(
    fleet_api: FleetApiThread, fleet_redis: redis.Redis
) -> None:
    before = keyspace(fleet_redis)
    tracemalloc.start()
    try:
        # 500 bytes that were 3.7 MB returned with 201; 9 levels would be 387 million strings.
        for levels, query in ((5, "?dryRun=All"), (5, ""), (9, "")):
            started = time.monotonic()
            code, status = send(
                fleet_api, "POST", EVENTS + query, (EVENT_HEAD + laughs(levels)).encode(), "application/yaml"
            )
            assert code == 400 and status["reason"] == "BadRequest", status
            assert "document contains excessive aliasing" in status["message"]
            assert time.monotonic() - started < 2
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024, peak
    assert keyspace(fleet_redis) == before


def test_ten_thousand_levels_of_json_or_yaml_are_a_400_naming_the_limit(
    with_job: Kubectl, fleet_api: FleetApiThread, fleet_redis: redis.Redis
) -> None:
    before = keyspace(fleet_redis)
    deep = "[" * 10_000 + "]" * 10_000
    for method, path, body, content_type in [
        ("POST", EVENTS, '{"metadata":{"name":"d"},"x":' + deep + "}", "application/json"),
        ("POST", EVENTS, EVENT_HEAD + "x: " + deep + "\n", "application/yaml"),
        ("POST", EVENTS, EVENT_HEAD + "x:\n" + "".join(" " * i + "a:\n" for i in range(1, 300)), "text/yaml"),
        ("PUT", JOB_PATH, '{"metadata":{"name":"' + JOB_NAME + '"},"spec":' + deep + "}", "application/json"),
        ("PATCH", JOB_PATH, '{"metadata":{"labels":' + deep + "}}", "application/merge-patch+json"),
        ("PATCH", JOB_PATH, '[{"op":"add","path":"/x","value":' + deep + "}]", "application/json-patch+json"),
    ]:
        code, status = send(fleet_api, method, path, body.encode(), content_type)
        assert (code, status["reason"]) == (400, "BadRequest"), (method, content_type, status)
        assert f"exceeded max depth of {MAX_DEPTH}" in status["message"], status
    assert keyspace(fleet_redis) == before


def test_every_content_type_has_a_size_limit_answered_with_413(
    with_job: Kubectl, fleet_api: FleetApiThread, fleet_redis: redis.Redis
) -> None:
    before = keyspace(fleet_redis)
    filler = "x" * MAX_BODY_BYTES
    for method, path, body, content_type in [
        ("POST", EVENTS, '{"metadata":{"name":"big"},"message":"' + filler + '"}', "application/json"),
        ("POST", EVENTS, EVENT_HEAD + "note: " + filler + "\n", "application/yaml"),
        (
            "PUT",
            JOB_PATH,
            '{"metadata":{"name":"' + JOB_NAME + '","annotations":{"a":"' + filler + '"}}}',
            "application/json",
        ),
        (
            "PATCH",
            JOB_PATH,
            '{"metadata":{"annotations":{"a":"' + filler + '"}}}',
            "application/merge-patch+json",
        ),
        (
            "PATCH",
            JOB_PATH,
            '[{"op":"add","path":"/x","value":"' + filler + '"}]',
            "application/json-patch+json",
        ),
        ("PATCH", f"{EVENTS}/none", '{"message":"' + filler + '"}', "application/strategic-merge-patch+json"),
        ("DELETE", JOB_PATH, '{"kind":"DeleteOptions","x":"' + filler + '"}', "application/json"),
    ]:
        code, status = send(fleet_api, method, path, body.encode(), content_type)
        assert code == 413, (method, content_type, code, status)
        assert (status["kind"], status["reason"]) == ("Status", "RequestEntityTooLarge"), status
        assert f"limit is {MAX_BODY_BYTES}" in status["message"]
    # A small patch that would grow the object past the limit by copying is a 413 too.
    grow = [{"op": "copy", "from": "/spec", "path": f"/spec/c{i}"} for i in range(25)]
    code, status = send(
        fleet_api, "PATCH", JOB_PATH, json.dumps(grow).encode(), "application/json-patch+json"
    )
    assert (code, status["reason"]) == (413, "RequestEntityTooLarge"), status
    assert keyspace(fleet_redis) == before


@pytest.fixture
def custom(fleet_api: FleetApiThread) -> Iterator[Any]:
    api_client = client.ApiClient(client.Configuration(host=fleet_api.url))
    yield client.CustomObjectsApi(api_client)
    api_client.close()  # type: ignore[no-untyped-call]


def test_concurrent_label_patches_without_a_resource_version_all_succeed(
    with_job: Kubectl, custom: Any
) -> None:
    kubectl = with_job
    where: dict[str, Any] = {
        "group": ASCENDJOB_GROUP,
        "version": ASCENDJOB_VERSION,
        "plural": ASCENDJOB_PLURAL,
        "namespace": "default",
        "name": JOB_NAME,
    }
    start = threading.Barrier(12)
    failures: list[BaseException] = []

    def merge(i: int) -> None:
        start.wait()
        custom.patch_namespaced_custom_object(**where, body={"metadata": {"labels": {f"merge-{i}": "v"}}})

    def json_patch(i: int) -> None:
        start.wait()
        custom.patch_namespaced_custom_object(
            **where,
            body=[{"op": "add", "path": f"/metadata/labels/json-{i}", "value": "v"}],
            _content_type="application/json-patch+json",
        )

    def guarded(work: Any, i: int) -> None:
        try:
            work(i)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=guarded, args=(merge, i)) for i in range(8)]
    threads += [threading.Thread(target=guarded, args=(json_patch, i)) for i in range(4)]
    for thread in threads:
        thread.start()
    # kubectl at the same time: label and annotate send merge patches without a resourceVersion.
    tools = [
        subprocess.Popen(
            [*kubectl.base, "label", "acjob", JOB_NAME, f"kubectl-{i}=v"], stderr=subprocess.PIPE
        )
        for i in range(3)
    ] + [
        subprocess.Popen(
            [*kubectl.base, "annotate", "acjob", JOB_NAME, f"note-{i}=v"], stderr=subprocess.PIPE
        )
        for i in range(2)
    ]
    for thread in threads:
        thread.join(timeout=30)
    outcomes = [(tool.wait(timeout=30), tool.stderr.read() if tool.stderr else b"") for tool in tools]
    for tool in tools:
        if tool.stderr:
            tool.stderr.close()
    assert failures == []
    assert all(code == 0 for code, _ in outcomes), outcomes
    job = custom.get_namespaced_custom_object(**where)
    labels, annotations = job["metadata"]["labels"], job["metadata"].get("annotations") or {}
    wanted = (
        {f"merge-{i}" for i in range(8)}
        | {f"json-{i}" for i in range(4)}
        | {f"kubectl-{i}" for i in range(3)}
    )
    assert wanted <= set(labels), labels
    assert {f"note-{i}" for i in range(2)} <= set(annotations), annotations
    assert labels["framework"] == "pytorch"


def test_a_stale_resource_version_still_gets_409(with_job: Kubectl, custom: Any) -> None:
    kubectl = with_job
    where: dict[str, Any] = {
        "group": ASCENDJOB_GROUP,
        "version": ASCENDJOB_VERSION,
        "plural": ASCENDJOB_PLURAL,
        "namespace": "default",
        "name": JOB_NAME,
    }
    stale = custom.get_namespaced_custom_object(**where)
    version = stale["metadata"]["resourceVersion"]
    custom.patch_namespaced_custom_object(**where, body={"metadata": {"labels": {"bump": "1"}}})
    with pytest.raises(client.ApiException) as pinned:
        custom.patch_namespaced_custom_object(
            **where, body={"metadata": {"resourceVersion": version, "labels": {"late": "1"}}}
        )
    assert pinned.value.status == 409 and json.loads(pinned.value.body or "{}")["reason"] == "Conflict"
    with pytest.raises(client.ApiException) as tested:
        custom.patch_namespaced_custom_object(
            **where,
            body=[
                {"op": "replace", "path": "/metadata/resourceVersion", "value": version},
                {"op": "add", "path": "/metadata/labels/late", "value": "1"},
            ],
            _content_type="application/json-patch+json",
        )
    assert tested.value.status == 409
    with pytest.raises(client.ApiException) as replaced:
        custom.replace_namespaced_custom_object(**where, body=stale)
    assert replaced.value.status == 409
    refused = kubectl("label", "acjob", JOB_NAME, "late=1", f"--resource-version={version}", ok=False)
    assert refused.returncode != 0 and "the object has been modified" in refused.stderr, refused.stderr
    labels = custom.get_namespaced_custom_object(**where)["metadata"]["labels"]
    assert "late" not in labels and labels["bump"] == "1"
