"""The serving core with AsyncObjects, as two API replicas on one Redis, driven by the official client."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
from kubernetes import client, watch

from fleet.apiserver import Store
from fleet.ascend import ASCENDJOB_GROUP, ASCENDJOB_PLURAL, ASCENDJOB_VERSION
from fleet.state import Objects
from fleet.state.async_objects import AsyncObjects
from tests.fleet.state.conftest import RedisLane
from tests.support.apiserver import ApiServerThread
from tests.support.kinds import ASCENDJOB

pytestmark = pytest.mark.integration

G, V, P = ASCENDJOB_GROUP, ASCENDJOB_VERSION, ASCENDJOB_PLURAL


def job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{G}/{V}",
        "kind": "AscendJob",
        "metadata": {"name": name, "labels": {"framework": "pytorch"}},
        "spec": {"replicaSpecs": {"Master": {"replicas": 1}}},
    }


@pytest.fixture
def replicas(redis_lane: RedisLane) -> Iterator[tuple[Any, Any]]:
    """Custom-objects clients of two API servers over one Redis."""

    def factory() -> AbstractAsyncContextManager[Store]:
        @asynccontextmanager
        async def served() -> AsyncIterator[Store]:
            store = AsyncObjects(redis_lane.client(), block_ms=100)
            try:
                yield store
            finally:
                await store.close()
                await store.client.aclose()

        return served()

    servers = [ApiServerThread(store_factory=factory).start() for _ in range(2)]
    apis = [server.api_client() for server in servers]
    try:
        yield client.CustomObjectsApi(apis[0]), client.CustomObjectsApi(apis[1])
    finally:
        for api in apis:
            api.close()  # type: ignore[no-untyped-call]
        for server in servers:
            server.close()


def stream(custom: Any, count: int, **kwargs: Any) -> list[tuple[str, str, str]]:
    """The first ``count`` events of a watch of default/ascendjobs (type, name, resourceVersion)."""
    w: Any = watch.Watch()  # type: ignore[no-untyped-call]
    seen: list[tuple[str, str, str]] = []
    lister = custom.list_namespaced_custom_object
    for event in w.stream(lister, G, V, "default", P, timeout_seconds=5, **kwargs):
        meta = event["object"]["metadata"]
        seen.append((event["type"], meta["name"], meta["resourceVersion"]))
        if len(seen) == count:
            w.stop()
    return seen


def test_two_replicas_serve_one_state_to_the_official_client(replicas: tuple[Any, Any]) -> None:
    one, two = replicas
    one.create_namespaced_custom_object(G, V, "other", P, job("seed"))  # a version other than "0"
    listed = two.list_namespaced_custom_object(G, V, "default", P)
    start = listed["metadata"]["resourceVersion"]
    assert listed["items"] == [] and start == "1"
    created = one.create_namespaced_custom_object(G, V, "default", P, job("train"))
    assert created["metadata"]["uid"] and created["metadata"]["generation"] == 1
    fetched = two.get_namespaced_custom_object(G, V, "default", P, "train")
    assert fetched == created

    changed = {**fetched, "spec": {"replicaSpecs": {"Master": {"replicas": 2}}}}
    updated = two.replace_namespaced_custom_object(G, V, "default", P, "train", changed)
    assert updated["metadata"]["generation"] == 2
    with pytest.raises(client.ApiException) as stale:
        one.replace_namespaced_custom_object(G, V, "default", P, "train", {**fetched, "spec": {}})
    assert stale.value.status == 409
    assert json.loads(stale.value.body or "{}")["reason"] == "Conflict"
    with pytest.raises(client.ApiException) as taken:
        two.create_namespaced_custom_object(G, V, "default", P, job("train"))
    assert taken.value.status == 409

    one.create_namespaced_custom_object(G, V, "default", P, job("eval"))
    items = two.list_namespaced_custom_object(G, V, "default", P, label_selector="framework=pytorch")["items"]
    assert [i["metadata"]["name"] for i in items] == ["eval", "train"]

    replayed = stream(two, 3, resource_version=start)
    assert [(t, n) for t, n, _ in replayed] == [("ADDED", "train"), ("MODIFIED", "train"), ("ADDED", "eval")]

    deleted = two.delete_namespaced_custom_object(G, V, "default", P, "train")
    assert deleted["metadata"]["name"] == "train"
    with pytest.raises(client.ApiException) as missing:
        one.get_namespaced_custom_object(G, V, "default", P, "train")
    assert missing.value.status == 404

    resumed = stream(one, 1, resource_version=replayed[-1][2])  # resume where the last watch stopped
    assert [(t, n) for t, n, _ in resumed] == [("DELETED", "train")]


def test_a_live_watch_on_one_replica_sees_writes_on_the_other(replicas: tuple[Any, Any]) -> None:
    one, two = replicas
    one.create_namespaced_custom_object(G, V, "other", P, job("seed"))
    start = two.list_namespaced_custom_object(G, V, "default", P)["metadata"]["resourceVersion"]

    def writer() -> None:
        time.sleep(0.2)
        one.create_namespaced_custom_object(G, V, "default", P, job("live"))
        one.patch_namespaced_custom_object(G, V, "default", P, "live", {"metadata": {"labels": {"x": "y"}}})

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        seen = stream(two, 2, resource_version=start)
    finally:
        thread.join()
    assert [(t, n) for t, n, _ in seen] == [("ADDED", "live"), ("MODIFIED", "live")]


def test_a_watch_from_a_trimmed_version_is_410(redis_lane: RedisLane, replicas: tuple[Any, Any]) -> None:
    one, _ = replicas
    objects = Objects(redis_lane.sync, history=5)  # the dispatcher's side, keeping a short history
    first = objects.create(ASCENDJOB, {**job("old"), "metadata": {"name": "old", "namespace": "default"}})
    for i in range(250):
        objects.create(ASCENDJOB, {**job("j"), "metadata": {"name": f"j{i}", "namespace": "default"}})
    with pytest.raises(client.ApiException) as gone:
        stream(one, 1, resource_version=first["metadata"]["resourceVersion"])
    assert gone.value.status == 410
