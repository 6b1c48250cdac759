"""One behaviour, three stores: MemoryStore, AsyncObjects on fakeredis, AsyncObjects on Redis 7.

What the serving core and its clients rely on from a ``Store``: server-set metadata, one version
sequence, optimistic concurrency, the status split, finalizers, selectors and paging, and watch
(replay from a version, the current state, selector transitions, 410 Gone, bookmarks). The Redis
lanes also prove that two replicas over one Redis see each other's writes in list and watch.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from fleet.apiserver import (
    EVENT,
    NODE,
    POD,
    AlreadyExists,
    BadRequest,
    Conflict,
    Gone,
    MemoryStore,
    NotFound,
    Store,
    Timeout,
    WatchEvent,
)
from fleet.state.async_objects import AsyncObjects
from tests.fleet.state.conftest import Lane, RedisLane
from tests.support.kinds import ASCENDJOB


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())  # type: ignore[arg-type]


def pod(name: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }


def job(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"replicaSpecs": {}}}


async def version(store: Store) -> int:
    if isinstance(store, MemoryStore):
        return store.resource_version
    assert isinstance(store, AsyncObjects)
    return int(await store.resource_version())


async def take(events: AsyncIterator[WatchEvent], count: int, timeout: float = 5.0) -> list[WatchEvent]:
    out: list[WatchEvent] = []
    async with asyncio.timeout(timeout):
        while len(out) < count:
            out.append(await anext(events))
    return out


def names(events: list[WatchEvent]) -> list[tuple[str, str]]:
    return [(e.type, e.object["metadata"]["name"]) for e in events]


def test_create_sets_server_metadata_and_one_version_sequence(lane: Lane) -> None:
    async def scenario() -> None:
        async with lane.replicas() as (store,):
            base = await version(store)
            first = await store.create(POD, pod("a", "any-namespace"))  # namespaces need not exist
            second = await store.create(NODE, {"metadata": {"name": "n1"}})
            assert first["apiVersion"] == "v1" and first["kind"] == "Pod"
            assert int(first["metadata"]["resourceVersion"]) == base + 1
            assert int(second["metadata"]["resourceVersion"]) == base + 2
            assert first["metadata"]["uid"] != second["metadata"]["uid"]
            assert first["metadata"]["generation"] == 1
            assert first["metadata"]["creationTimestamp"].endswith("Z")
            assert "namespace" not in second["metadata"]
            assert await store.get(POD, "any-namespace", "a") == first
            with pytest.raises(NotFound, match='pods "b" not found'):
                await store.get(POD, "any-namespace", "b")

    run(scenario)


def test_generate_name_and_already_exists(lane: Lane) -> None:
    async def scenario() -> None:
        async with lane.replicas() as (store,):
            made = await store.create(POD, {"metadata": {"generateName": "worker-", "namespace": "default"}})
            assert made["metadata"]["name"].startswith("worker-") and len(made["metadata"]["name"]) == 12
            await store.create(POD, pod("a"))
            with pytest.raises(AlreadyExists, match='pods "a" already exists'):
                await store.create(POD, pod("a"))
            with pytest.raises(AlreadyExists):
                await store.create(POD, pod("a"), dry_run=True)

    run(scenario)


def test_dry_run_changes_nothing(lane: Lane) -> None:
    async def scenario() -> None:
        async with lane.replicas() as (store,):
            before = await version(store)
            preview = await store.create(POD, pod("a"), dry_run=True)
            assert preview["metadata"]["name"] == "a"
            with pytest.raises(NotFound):
                await store.get(POD, "default", "a")
            created = await store.create(POD, pod("a"))
            changed = {**created, "spec": {"containers": [{"name": "c", "image": "other"}]}}
            await store.update(POD, changed, dry_run=True)
            await store.delete(POD, "default", "a", dry_run=True)
            assert (await store.get(POD, "default", "a"))["spec"]["containers"][0]["image"] == "i"
            assert await version(store) == before + 1

    run(scenario)


def test_update_conflicts_on_a_stale_resource_version(lane: Lane) -> None:
    async def scenario() -> None:
        async with lane.replicas(2) as (one, two):
            created = await one.create(ASCENDJOB, job("j"))
            fresh = {**created, "spec": {"replicaSpecs": {"Master": {"replicas": 1}}}}
            updated = await two.update(ASCENDJOB, fresh)
            assert updated["metadata"]["generation"] == 2
            stale = {**created, "spec": {"replicaSpecs": {"Worker": {"replicas": 1}}}}
            with pytest.raises(Conflict, match="the object has been modified"):
                await one.update(ASCENDJOB, stale)
            assert (await one.get(ASCENDJOB, "default", "j"))["spec"] == updated["spec"]
            unconditional = {**stale, "metadata": {"name": "j", "namespace": "default"}}
            assert (await one.update(ASCENDJOB, unconditional))["spec"] == stale["spec"]

    run(scenario)


def test_generation_tracks_spec_only_and_status_is_a_subresource(lane: Lane) -> None:
    async def scenario() -> None:
        async with lane.replicas() as (store,):
            created = await store.create(ASCENDJOB, job("j"))
            with_status = {**created, "status": {"conditions": [{"type": "Running"}]}}
            main_put = await store.update(ASCENDJOB, with_status)
            assert "status" not in main_put
            assert main_put["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]  # no-op
            status_put = await store.update(ASCENDJOB, with_status, subresource="status")
            assert status_put["status"] == {"conditions": [{"type": "Running"}]}
            assert status_put["metadata"]["generation"] == 1
            labelled = {**status_put, "metadata": {**status_put["metadata"], "labels": {"a": "b"}}}
            relabelled = await store.update(ASCENDJOB, labelled)
            assert relabelled["metadata"]["generation"] == 1
            assert relabelled["status"] == status_put["status"]
            with pytest.raises(NotFound):
                await store.update(POD, await store.create(POD, pod("p")), subresource="scale")

    run(scenario)


def test_finalizers_hold_deletion_until_removed(lane: Lane) -> None:
    async def scenario() -> None:
        async with lane.replicas() as (store,):
            created = await store.create(
                POD, {**pod("a"), "metadata": {**pod("a")["metadata"], "finalizers": ["x/y"]}}
            )
            marked = await store.delete(POD, "default", "a")
            assert marked["metadata"]["deletionTimestamp"]
            assert await store.delete(POD, "default", "a") == marked
            still = await store.get(POD, "default", "a")
            assert still["metadata"]["uid"] == created["metadata"]["uid"]
            released = {**still, "metadata": {**still["metadata"], "finalizers": []}}
            await store.update(POD, released)
            with pytest.raises(NotFound):
                await store.get(POD, "default", "a")
            with pytest.raises(NotFound):
                await store.delete(POD, "default", "a")

    run(scenario)


def test_list_selectors_and_paging_from_one_version(lane: Lane) -> None:
    async def scenario() -> None:
        async with lane.replicas(2) as (one, two):
            for i in range(5):
                await one.create(POD, pod(f"p{i}", app="a" if i % 2 else "b"))
            await one.create(POD, pod("p0", "other"))
            items, _, _ = await two.list(POD, "default", label_selector="app=a")
            assert [p["metadata"]["name"] for p in items] == ["p1", "p3"]
            items, _, _ = await two.list(POD, None, field_selector="metadata.name=p0")
            assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in items] == [
                ("default", "p0"),
                ("other", "p0"),
            ]
            items, _, _ = await two.list(POD, "other", field_selector="metadata.name=p0")
            assert len(items) == 1
            page, rv, token = await two.list(POD, "default", limit=2)
            assert [p["metadata"]["name"] for p in page] == ["p0", "p1"] and token
            assert int(rv) == await version(two)
            await one.create(POD, pod("p9"))
            rest: list[str] = []
            while token:
                page, page_rv, token = await two.list(POD, "default", limit=2, continue_token=token)
                assert page_rv == rv  # a paged list reports the version of its first page
                rest += [p["metadata"]["name"] for p in page]
            assert rest == ["p2", "p3", "p4", "p9"]
            with pytest.raises(BadRequest, match="field label not supported"):
                await two.list(POD, None, field_selector="spec.image=x")
            with pytest.raises(BadRequest, match="continue"):
                await two.list(POD, None, continue_token="not-a-token")

    run(scenario)


def test_events_list_by_involved_object_as_describe_asks(lane: Lane) -> None:
    async def scenario() -> None:
        async with lane.replicas() as (store,):
            for name, uid in (("a", "u1"), ("b", "u2")):
                involved = {"kind": "AscendJob", "name": name, "namespace": "team", "uid": uid}
                event = {"metadata": {"name": f"{name}.1", "namespace": "team"}, "involvedObject": involved}
                await store.create(EVENT, event)
            selector = "involvedObject.name=a,involvedObject.namespace=team,involvedObject.uid=u1"
            items, _, _ = await store.list(EVENT, "team", field_selector=selector)
            assert [e["metadata"]["name"] for e in items] == ["a.1"]

    run(scenario)


def test_watch_from_a_version_replays_then_follows(lane: Lane) -> None:
    async def scenario() -> None:
        async with lane.replicas(2) as (one, two):
            a = await one.create(POD, pod("a"))
            mark = a["metadata"]["resourceVersion"]
            await one.create(POD, pod("b"))
            await one.create(NODE, {"metadata": {"name": "n"}})
            await one.delete(POD, "default", "a")
            events = two.watch(POD, "default", resource_version=mark)
            replayed = await take(events, 2)
            assert names(replayed) == [("ADDED", "b"), ("DELETED", "a")]
            assert int(replayed[1].object["metadata"]["resourceVersion"]) == int(mark) + 3
            await one.create(POD, pod("c", "elsewhere"))
            await one.create(POD, pod("d"))
            (live,) = await take(events, 1)
            assert names([live]) == [("ADDED", "d")]
            await events.aclose()  # type: ignore[attr-defined]

    run(scenario)


def test_watch_without_version_starts_with_the_current_state(lane: Lane) -> None:
    async def scenario() -> None:
        async with lane.replicas(2) as (one, two):
            await one.create(NODE, {"metadata": {"name": "n2"}})
            await one.create(NODE, {"metadata": {"name": "n1"}})
            events = two.watch(NODE, None, resource_version="0")
            assert names(await take(events, 2)) == [("ADDED", "n1"), ("ADDED", "n2")]
            await one.create(NODE, {"metadata": {"name": "n3"}})
            assert names(await take(events, 1)) == [("ADDED", "n3")]
            await events.aclose()  # type: ignore[attr-defined]

    run(scenario)


def test_watch_turns_selector_transitions_into_added_and_deleted(lane: Lane) -> None:
    async def scenario() -> None:
        async with lane.replicas(2) as (one, two):
            created = await one.create(POD, pod("a", tier="web"))
            events = two.watch(
                POD, None, resource_version=created["metadata"]["resourceVersion"], label_selector="tier=db"
            )
            relabelled = {**created, "metadata": {**created["metadata"], "labels": {"tier": "db"}}}
            moved = await one.update(POD, relabelled)
            await one.update(POD, {**moved, "spec": {"containers": [{"name": "c", "image": "j"}]}})
            latest = await one.get(POD, "default", "a")
            await one.update(POD, {**latest, "metadata": {**latest["metadata"], "labels": {"tier": "web"}}})
            assert [e.type for e in await take(events, 3)] == ["ADDED", "MODIFIED", "DELETED"]
            await events.aclose()  # type: ignore[attr-defined]

    run(scenario)


def test_watch_beyond_the_history_window_is_gone(lane: Lane) -> None:
    async def scenario() -> None:
        async with lane.replicas(history=10) as (store,):
            first = await store.create(NODE, {"metadata": {"name": "n0"}})
            for i in range(1, 300):
                await store.create(NODE, {"metadata": {"name": f"n{i:03}"}})
            with pytest.raises(Gone, match="too old resource version"):
                await anext(store.watch(NODE, None, resource_version=first["metadata"]["resourceVersion"]))
            _, rv, token = await store.list(NODE, None, limit=1)
            assert token is not None
            recent = store.watch(NODE, None, resource_version=str(int(rv) - 2))
            assert [e.object["metadata"]["name"] for e in await take(recent, 2)] == ["n298", "n299"]
            await recent.aclose()  # type: ignore[attr-defined]
            stale = token
            for i in range(300):  # the history moves on past the continue token's version
                await store.create(NODE, {"metadata": {"name": f"m{i:03}"}})
            with pytest.raises(Gone, match="continue parameter is too old"):
                await store.list(NODE, None, limit=1, continue_token=stale)

    run(scenario)


def test_watch_from_a_version_not_reached_waits_then_is_too_large(lane: Lane) -> None:
    """Issue 34: as kube-apiserver's watch cache, a watch from a version the store has not
    reached waits for it (``fresh_wait``) and follows once it comes; if it does not, the watch
    ends with 504 ``Too large resource version`` and the cause client-go looks for."""

    async def scenario() -> None:
        async with lane.replicas() as (store,):
            assert isinstance(store, MemoryStore | AsyncObjects)
            store.fresh_wait = 0.3
            now = await version(store)
            with pytest.raises(Timeout) as raised:
                await anext(store.watch(NODE, None, resource_version=str(now + 100)))
            status = raised.value.to_status()
            assert (status["code"], status["reason"]) == (504, "Timeout")
            assert status["message"] == f"Timeout: Too large resource version: {now + 100}, current: {now}"
            assert status["details"]["causes"] == [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ]
            store.fresh_wait = 5.0
            ahead = store.watch(NODE, None, resource_version=str(now + 1))
            first = asyncio.ensure_future(anext(ahead))
            await asyncio.sleep(0.1)
            await store.create(NODE, {"metadata": {"name": "reaches-it"}})  # at now + 1
            await store.create(NODE, {"metadata": {"name": "after-it"}})
            assert (await first).object["metadata"]["name"] == "after-it"
            await ahead.aclose()  # type: ignore[attr-defined]

    run(scenario)


def test_bookmarks_carry_the_current_version(lane: Lane) -> None:
    async def scenario() -> None:
        async with lane.replicas(2) as (one, two):
            created = await one.create(POD, pod("a"))
            events = two.watch(
                POD,
                "kube-system",
                resource_version=created["metadata"]["resourceVersion"],
                bookmark_interval=0.05,
            )
            await one.create(POD, pod("b"))  # filtered out, but the bookmark moves past it
            await one.create(NODE, {"metadata": {"name": "n"}})  # another kind: so does it
            current = str(await version(one))
            async with asyncio.timeout(5):
                async for event in events:
                    assert event.type == "BOOKMARK"
                    if event.object["metadata"]["resourceVersion"] == current:
                        break
            await events.aclose()  # type: ignore[attr-defined]

    run(scenario)


def test_many_watchers_each_get_every_change(lane: Lane) -> None:
    async def scenario() -> None:
        async with lane.replicas(2) as (one, two):
            start = str(await version(one))
            watchers = [two.watch(NODE, None, resource_version=start) for _ in range(50)]
            firsts = [asyncio.ensure_future(anext(w)) for w in watchers]
            for i in range(20):
                await one.create(NODE, {"metadata": {"name": f"n{i:02}"}})
            got = await asyncio.gather(*firsts)
            rest = await asyncio.gather(*(take(w, 19) for w in watchers))
            expected = [f"n{i:02}" for i in range(20)]
            assert all([g.object["metadata"]["name"]] + [e.object["metadata"]["name"] for e in r] == expected
                       for g, r in zip(got, rest, strict=True))  # fmt: skip
            for w in watchers:
                await w.aclose()  # type: ignore[attr-defined]
            assert isinstance(two, (MemoryStore, AsyncObjects)) and two.watcher_count(NODE) == 0

    run(scenario)


def test_returned_objects_are_copies(lane: Lane) -> None:
    async def scenario() -> None:
        async with lane.replicas() as (store,):
            created = await store.create(POD, pod("a"))
            created["spec"]["containers"][0]["image"] = "mutated"
            fetched = await store.get(POD, "default", "a")
            fetched["metadata"]["labels"]["x"] = "y"
            again = await store.get(POD, "default", "a")
            assert again["spec"]["containers"][0]["image"] == "i"
            assert "x" not in again["metadata"]["labels"]

    run(scenario)


def test_sync_objects_and_replicas_share_one_state(redis_lane: RedisLane) -> None:
    from fleet.state import Objects

    objects = Objects(redis_lane.sync)

    async def scenario() -> None:
        async with redis_lane.replicas() as (store,):
            events = store.watch(ASCENDJOB, None, resource_version=objects.resource_version())
            written = objects.create(ASCENDJOB, job("from-dispatcher"))
            (seen,) = await take(events, 1)
            assert seen.object == written
            served = await store.create(ASCENDJOB, job("from-api"))
            assert objects.get(ASCENDJOB, "default", "from-api") == served
            changes, _ = objects.changes(ASCENDJOB, written["metadata"]["resourceVersion"], block_ms=0)
            assert [e.object for e in changes] == [served]
            await events.aclose()  # type: ignore[attr-defined]

    run(scenario)
