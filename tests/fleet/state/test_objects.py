"""Objects: the fleet's objects in Redis with the API server's semantics, on fakeredis and Redis 7."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from fleet.apiserver import EVENT, NODE, AlreadyExists, Conflict, Gone, Invalid, NotFound
from fleet.state import DispatchKeys, Objects
from fleet.state.keys import INVOLVED_INDEX
from queues import Fence, Fenced
from tests.support.kinds import ASCENDJOB


@contextlib.contextmanager
def _counting(client: redis.Redis) -> Iterator[list[int]]:
    """The round trips ``client`` makes meanwhile: one entry per pipeline or command sent."""
    sent: list[int] = []
    pipeline: Any = client.pipeline
    execute: Any = client.execute_command

    def counted_pipeline(*args: Any, **kwargs: Any) -> Any:
        pipe = pipeline(*args, **kwargs)
        run = pipe.execute

        def execute_pipe(*a: Any, **k: Any) -> Any:
            sent.append(len(pipe.command_stack))
            return run(*a, **k)

        pipe.execute = execute_pipe
        return pipe

    def counted_command(*args: Any, **kwargs: Any) -> Any:
        sent.append(1)
        return execute(*args, **kwargs)

    client.pipeline = counted_pipeline  # type: ignore[method-assign]
    client.execute_command = counted_command  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        del client.pipeline, client.execute_command


def job(name: str, namespace: str = "team-a", **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"replicaSpecs": {"Master": {"replicas": 1}}},
    }


def test_create_sets_server_metadata_in_one_version_sequence(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    first = objects.create(ASCENDJOB, {**job("a"), "status": {"queue": "root"}})
    second = objects.create(NODE, {"metadata": {"name": "n1", "namespace": "ignored"}})
    assert first["apiVersion"] == "mindxdl.gitee.com/v1" and first["kind"] == "AscendJob"
    assert (first["metadata"]["resourceVersion"], second["metadata"]["resourceVersion"]) == ("1", "2")
    assert objects.resource_version() == "2"
    assert first["metadata"]["generation"] == 1 and first["metadata"]["creationTimestamp"].endswith("Z")
    assert first["metadata"]["uid"] != second["metadata"]["uid"]
    assert first["status"] == {"queue": "root"}  # trusted writers create with a status
    assert "namespace" not in second["metadata"]
    assert objects.get(ASCENDJOB, "team-a", "a") == first
    assert objects.get(NODE, None, "n1") == second
    assert objects.try_get(ASCENDJOB, "team-b", "a") is None
    with pytest.raises(NotFound, match=r'ascendjobs\.mindxdl\.gitee\.com "zz" not found'):
        objects.get(ASCENDJOB, "team-a", "zz")


def test_create_refuses_a_taken_name_and_generates_names(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    objects.create(ASCENDJOB, job("a"))
    with pytest.raises(AlreadyExists, match='"a" already exists'):
        objects.create(ASCENDJOB, job("a"))
    made = objects.create(ASCENDJOB, {"metadata": {"generateName": "train-", "namespace": "team-a"}})
    assert made["metadata"]["name"].startswith("train-") and len(made["metadata"]["name"]) == 11
    with pytest.raises(Invalid, match=r"metadata\.namespace is required"):
        objects.create(ASCENDJOB, {"metadata": {"name": "b"}})
    assert objects.resource_version() == "2"  # refused creates wrote nothing


def test_a_create_handed_its_object_stores_it_whole_and_leaves_the_callers_metadata_alone(
    redis_client: redis.Redis,
) -> None:
    """``copy=False`` (the API's submissions: the body is the request's own) stores what a copy
    would: the server's metadata on the stored object, none of it written into the caller's
    metadata, and the spec as sent."""
    objects = Objects(redis_client)
    body = {"metadata": {"name": "handed", "namespace": "default", "labels": {"a": "b"}}, "spec": {"x": [1]}}
    stored = objects.create(ASCENDJOB, body, copy=False)
    assert body["metadata"] == {"name": "handed", "namespace": "default", "labels": {"a": "b"}}
    assert stored["metadata"]["uid"] and stored["metadata"]["resourceVersion"]
    assert stored["spec"] == {"x": [1]}
    assert objects.get(ASCENDJOB, "default", "handed") == stored


def test_update_is_optimistic_and_keeps_server_fields(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    created = objects.create(ASCENDJOB, {**job("a"), "status": {"queue": "root"}})
    changed = {**created, "spec": {"replicaSpecs": {"Worker": {"replicas": 2}}}, "status": {"x": 1}}
    changed["metadata"] = {**created["metadata"], "uid": "forged"}
    updated = objects.update(ASCENDJOB, changed)
    assert updated["metadata"]["generation"] == 2
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    assert updated["status"] == {"queue": "root"}  # the main resource does not write status
    with pytest.raises(Conflict, match="the object has been modified"):
        objects.update(ASCENDJOB, {**created, "spec": {}})
    unconditional = {**updated, "metadata": {**updated["metadata"], "labels": {"tier": "gold"}}}
    del unconditional["metadata"]["resourceVersion"]
    relabelled = objects.update(ASCENDJOB, unconditional)
    assert relabelled["metadata"]["labels"] == {"tier": "gold"} and relabelled["metadata"]["generation"] == 2
    status = objects.update(ASCENDJOB, {**relabelled, "status": {"queue": "q"}}, subresource="status")
    assert status["status"] == {"queue": "q"} and status["metadata"]["labels"] == {"tier": "gold"}
    again = objects.update(ASCENDJOB, status, subresource="status")
    assert again["metadata"]["resourceVersion"] == status["metadata"]["resourceVersion"]  # no-op
    with pytest.raises(NotFound):
        objects.update(EVENT, {"metadata": {"name": "e", "namespace": "n"}}, subresource="status")
    with pytest.raises(NotFound):
        objects.update(ASCENDJOB, job("missing"))


def test_mutate_retries_on_conflict_and_reports_vanished_objects(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    objects.create(ASCENDJOB, {**job("a"), "status": {"n": 0}})
    calls = 0

    def bump(obj: dict[str, Any]) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if calls == 1:  # someone else writes between our read and our write
            objects.mutate(ASCENDJOB, "team-a", "a", lambda o: {**o, "status": {"n": 10}})
        obj["status"]["n"] += 1
        obj["spec"] = {"ignored": True}  # the status subresource writes status only
        return obj

    stored = objects.mutate(ASCENDJOB, "team-a", "a", bump)
    assert stored is not None and stored["status"] == {"n": 11} and calls == 2
    assert stored["spec"] == job("a")["spec"] and stored["metadata"]["generation"] == 1
    unchanged = objects.mutate(ASCENDJOB, "team-a", "a", lambda o: None)
    assert unchanged == stored
    assert objects.mutate(ASCENDJOB, "team-a", "gone", lambda o: o) is None
    labelled = objects.mutate(
        ASCENDJOB, "team-a", "a", lambda o: {**o, "metadata": {**o["metadata"], "labels": {"x": "y"}}},
        subresource=None,
    )  # fmt: skip
    assert labelled is not None and labelled["metadata"]["labels"] == {"x": "y"}


def test_mutate_from_a_stale_read_retries_on_the_current_object(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    read = objects.create(ASCENDJOB, {**job("a"), "status": {"n": 0}})
    objects.mutate(ASCENDJOB, "team-a", "a", lambda o: {**o, "status": {"n": 5}})  # another writer

    def bump(obj: dict[str, Any]) -> dict[str, Any]:
        obj["status"]["n"] += 1
        return obj

    stored = objects.mutate(ASCENDJOB, "team-a", "a", bump, current=read)
    assert stored is not None and stored["status"] == {"n": 6}  # not 1: the stale read lost


def test_many_objects_are_read_and_changed_in_a_batch(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    for name in ("a", "b", "c"):
        objects.create(ASCENDJOB, {**job(name), "status": {"n": 0}})
    got = objects.get_many(ASCENDJOB, [("team-a", "c"), ("team-a", "gone"), ("team-b", "a"), ("team-a", "a")])
    assert [g and g["metadata"]["name"] for g in got] == ["c", None, None, "a"]
    assert objects.get_many(ASCENDJOB, []) == []
    raced = False

    def bump(obj: dict[str, Any]) -> dict[str, Any]:
        nonlocal raced
        if obj["metadata"]["name"] == "b" and not raced:
            raced = True  # another writer between the batch's read and its write: b alone retries
            objects.mutate(ASCENDJOB, "team-a", "b", lambda o: {**o, "status": {"n": 10}})
        obj["status"]["n"] += 1
        return obj

    results = objects.mutate_many(
        ASCENDJOB,
        [
            ("team-a", "a", bump),
            ("team-a", "gone", bump),
            ("team-a", "b", bump),
            ("team-a", "c", lambda o: None),
        ],
    )
    a, gone, b, c = results
    assert gone is None
    assert a is not None and a["status"] == {"n": 1}
    assert b is not None and b["status"] == {"n": 11}  # the racing write kept, then ours
    assert c is not None and c["status"] == {"n": 0}
    for name, n in (("a", 1), ("b", 11), ("c", 0)):
        stored = objects.get(ASCENDJOB, "team-a", name)
        assert stored["status"] == {"n": n}
    assert a == objects.get(ASCENDJOB, "team-a", "a")  # what it returns is what is stored


def test_a_batch_written_from_objects_read_earlier_reads_again_only_those_changed_since(
    redis_client: redis.Redis,
) -> None:
    """The dispatcher admits from the jobs its cycle read (``currents``): no second read, and a
    job another writer changed meanwhile, or deleted, is not written over."""
    objects = Objects(redis_client)

    def bump(obj: dict[str, Any]) -> dict[str, Any]:
        obj["status"]["n"] += 1
        return obj

    spent: list[int] = []
    for given in (False, True, False):  # the first loads the write script
        read = [objects.create(ASCENDJOB, {**job(f"{x}{len(spent)}"), "status": {"n": 0}}) for x in "ab"]
        with _counting(redis_client) as sent:
            objects.mutate_many(
                ASCENDJOB,
                [("team-a", o["metadata"]["name"], bump) for o in read],
                currents=read if given else None,
            )
        spent.append(len(sent))
    assert spent[1] == spent[2] - 1  # the read the caller made is not made again
    read = [objects.create(ASCENDJOB, {**job(name), "status": {"n": 0}}) for name in ("a", "b", "c")]
    objects.mutate(ASCENDJOB, "team-a", "b", lambda o: {**o, "status": {"n": 10}})  # another writer
    objects.delete(ASCENDJOB, "team-a", "c")
    a, b, c = objects.mutate_many(ASCENDJOB, [("team-a", n, bump) for n in ("a", "b", "c")], currents=read)
    assert a is not None and a["status"] == {"n": 1}
    assert b is not None and b["status"] == {"n": 11}  # on what is stored now, not the old read
    assert c is None
    assert objects.get(ASCENDJOB, "team-a", "b")["status"] == {"n": 11}


def test_many_kinds_are_read_in_one_round_trip(redis_client: redis.Redis) -> None:
    """The dispatcher looks for a job's namesakes of every other kind at once."""
    objects = Objects(redis_client)
    objects.create(ASCENDJOB, job("a"))
    objects.create(EVENT, {"metadata": {"name": "e", "namespace": "team-a"}, "reason": "R"})
    reads: list[tuple[Any, list[tuple[str | None, str]]]] = [
        (ASCENDJOB, [("team-a", "gone"), ("team-a", "a")]),
        (EVENT, [("team-a", "e"), ("team-b", "e")]),
        (NODE, []),
    ]
    with _counting(redis_client) as sent:
        got = objects.get_many_kinds(reads)
    assert len(sent) == 1, f"one round trip for every kind, not {sent}"
    assert [[o and o["metadata"]["name"] for o in found] for found in got] == [[None, "a"], ["e", None], []]
    assert objects.get_many_kinds([]) == []


def test_batched_creates_report_taken_names_and_store_the_rest(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    objects.create(ASCENDJOB, job("taken"))
    made = objects.create_many(ASCENDJOB, [job("x"), job("taken"), job("y")])
    assert isinstance(made[1], AlreadyExists)
    assert [m["metadata"]["name"] for m in (made[0], made[2]) if isinstance(m, dict)] == ["x", "y"]
    assert objects.get(ASCENDJOB, "team-a", "x") == made[0]
    assert objects.get(ASCENDJOB, "team-a", "taken")["metadata"]["resourceVersion"] == "1"


def test_batched_writes_survive_a_script_cache_flush(redis_client: redis.Redis) -> None:
    """Redis restarted without its scripts: a batch loads the write script again and writes all."""
    objects = Objects(redis_client)
    objects.create(ASCENDJOB, {**job("a"), "status": {"n": 0}})
    redis_client.script_flush()
    made = objects.create_many(ASCENDJOB, [job("b"), job("c")])
    assert all(isinstance(m, dict) for m in made)
    redis_client.script_flush()
    results = objects.mutate_many(
        ASCENDJOB, [("team-a", n, lambda o: {**o, "status": {"n": 7}}) for n in ("a", "b", "c")]
    )
    assert [r and r["status"] for r in results] == [{"n": 7}] * 3


def test_concurrent_mutations_are_all_applied(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    objects.create(ASCENDJOB, {**job("a"), "status": {"n": 0}})

    def increment(obj: dict[str, Any]) -> dict[str, Any]:
        obj["status"]["n"] += 1
        return obj

    def worker() -> None:
        for _ in range(25):
            objects.mutate(ASCENDJOB, "team-a", "a", increment, attempts=1000)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert objects.get(ASCENDJOB, "team-a", "a")["status"] == {"n": 100}


def test_finalizers_hold_deletion_until_the_last_is_removed(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    held = job("a")
    held["metadata"]["finalizers"] = ["f/x"]
    created = objects.create(ASCENDJOB, held)
    since = created["metadata"]["resourceVersion"]
    marked = objects.delete(ASCENDJOB, "team-a", "a")
    assert marked is not None and marked["metadata"]["deletionTimestamp"]
    assert objects.delete(ASCENDJOB, "team-a", "a") == marked  # already marked: nothing written
    still = objects.get(ASCENDJOB, "team-a", "a")
    assert still["metadata"]["uid"] == created["metadata"]["uid"]

    def release(obj: dict[str, Any]) -> dict[str, Any]:
        obj["metadata"]["finalizers"] = []
        return obj

    last = objects.mutate(ASCENDJOB, "team-a", "a", release, subresource=None)
    assert last is not None and last["metadata"]["deletionTimestamp"]
    assert objects.try_get(ASCENDJOB, "team-a", "a") is None
    events, _ = objects.changes(ASCENDJOB, since, block_ms=0)
    assert [e.type for e in events] == ["MODIFIED", "DELETED"]
    assert objects.delete(ASCENDJOB, "team-a", "a") is None
    objects.create(ASCENDJOB, job("b"))
    gone = objects.delete(ASCENDJOB, "team-a", "b")
    assert gone is not None and gone["metadata"]["resourceVersion"] == objects.resource_version()


def test_list_filters_orders_and_reports_its_version(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    objects.create(ASCENDJOB, job("b", "team-b", tier="gold"))
    objects.create(ASCENDJOB, job("z", "team-a", tier="gold"))
    objects.create(ASCENDJOB, job("a", "team-a"))
    objects.create(ASCENDJOB, job("c", "team-a-x"))  # a namespace that shares a prefix
    items, rv = objects.list(ASCENDJOB)
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in items] == [
        ("team-a", "a"),
        ("team-a", "z"),
        ("team-a-x", "c"),
        ("team-b", "b"),
    ]
    assert rv == objects.resource_version() == "4"
    items, _ = objects.list(ASCENDJOB, "team-a")
    assert [o["metadata"]["name"] for o in items] == ["a", "z"]
    items, _ = objects.list(ASCENDJOB, label_selector="tier=gold")
    assert [o["metadata"]["name"] for o in items] == ["z", "b"]
    assert objects.list(NODE) == ([], "4")


def test_changes_follow_writes_and_resume(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    objects.create(ASCENDJOB, job("old"))
    _, rv = objects.list(ASCENDJOB)
    assert objects.changes(ASCENDJOB, rv, block_ms=0) == ([], rv)
    a = objects.create(ASCENDJOB, job("a"))
    objects.create(NODE, {"metadata": {"name": "n"}})  # another kind: not in this stream
    objects.mutate(ASCENDJOB, "team-a", "a", lambda o: {**o, "status": {"s": 1}})
    objects.delete(ASCENDJOB, "team-a", "a")
    events, resume = objects.changes(ASCENDJOB, rv, count=2)
    seen = [(e.type, e.object["metadata"]["resourceVersion"]) for e in events]
    assert seen == [("ADDED", "2"), ("MODIFIED", "4")]
    assert events[0].object == a and events[1].object["status"] == {"s": 1}
    assert resume == "4"
    events, resume = objects.changes(ASCENDJOB, resume)
    assert [e.type for e in events] == ["DELETED"] and resume == "5"
    assert objects.changes(NODE, "0", block_ms=0)[0][0].object["metadata"]["name"] == "n"


def test_changes_can_be_only_those_of_objects_being_deleted(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    _, rv = objects.list(ASCENDJOB)
    held = {**job("held"), "metadata": {**job("held")["metadata"], "finalizers": ["x/y"]}}
    objects.create(ASCENDJOB, held)
    objects.create(ASCENDJOB, job("plain"))
    objects.mutate(ASCENDJOB, "team-a", "plain", lambda o: {**o, "status": {"s": 1}})
    marked = objects.delete(ASCENDJOB, "team-a", "held")  # a finalizer: marked, not gone
    objects.mutate(ASCENDJOB, "team-a", "plain", lambda o: {**o, "status": {"s": 2}})

    def release(obj: dict[str, Any]) -> dict[str, Any]:
        obj["metadata"]["finalizers"] = []
        return obj

    objects.mutate(ASCENDJOB, "team-a", "held", release, subresource=None)  # now it goes
    events, resume = objects.changes(ASCENDJOB, rv, deleting_only=True)
    seen = [(e.type, e.object["metadata"]["name"]) for e in events]
    assert seen == [("MODIFIED", "held"), ("DELETED", "held")]
    assert events[0].object == marked
    assert resume == objects.resource_version()  # resumes after the skipped changes too
    assert objects.changes(ASCENDJOB, resume, block_ms=0, deleting_only=True) == ([], resume)


def test_changes_wait_for_a_write(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    since = objects.resource_version()
    writer = threading.Timer(0.2, lambda: objects.create(ASCENDJOB, job("late")))
    started = time.monotonic()
    writer.start()
    try:
        events, resume = objects.changes(ASCENDJOB, since, block_ms=5000)
    finally:
        writer.join()
    assert [e.object["metadata"]["name"] for e in events] == ["late"] and resume == "1"
    assert time.monotonic() - started < 3


def test_changes_beyond_the_retained_history_are_gone(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client, history=10)
    first = objects.create(NODE, {"metadata": {"name": "n0"}})
    for i in range(1, 300):
        node = objects.get(NODE, None, "n0")
        node["metadata"]["labels"] = {"i": str(i)}
        objects.update(NODE, node)
    with pytest.raises(Gone, match="too old resource version"):
        objects.changes(NODE, first["metadata"]["resourceVersion"], block_ms=0)
    retained = redis_client.xlen(objects.keys.changes("core/nodes"))
    assert 10 <= retained < 300  # trimmed to about the history (Redis trims whole stream nodes)
    recent = str(300 - 5)
    events, resume = objects.changes(NODE, recent, block_ms=0)
    assert [e.object["metadata"]["labels"]["i"] for e in events] == ["295", "296", "297", "298", "299"]
    assert resume == "300"


def test_fenced_writes_need_the_current_token(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    lease = DispatchKeys.within(objects.keys).lease
    redis_client.set(lease, "7")
    current, stale = Fence(lease, "7"), Fence(lease, "6")
    created = objects.create(ASCENDJOB, job("a"), fence=current)
    before = objects.resource_version()
    with pytest.raises(Fenced):
        objects.create(ASCENDJOB, job("b"), fence=stale)
    with pytest.raises(Fenced):
        objects.mutate(ASCENDJOB, "team-a", "a", lambda o: {**o, "status": {"x": 1}}, fence=stale)
    with pytest.raises(Fenced):
        objects.update(ASCENDJOB, {**created, "spec": {}}, fence=stale)
    with pytest.raises(Fenced):
        objects.delete(ASCENDJOB, "team-a", "a", fence=stale)
    with pytest.raises(Fenced):
        objects.create(ASCENDJOB, job("c"), fence=Fence(objects.keys.base + "lease:nobody", "1"))
    assert objects.resource_version() == before
    assert objects.get(ASCENDJOB, "team-a", "a") == created
    assert objects.changes(ASCENDJOB, before, block_ms=0)[0] == []
    assert objects.mutate(ASCENDJOB, "team-a", "a", lambda o: {**o, "status": {"x": 1}}, fence=current)


def test_the_version_placeholder_only_replaces_the_resource_version(redis_client: redis.Redis) -> None:
    objects = Objects(redis_client)
    tricky = job("a")
    tricky["metadata"]["annotations"] = {"note": '@rv-0@ "resourceVersion": "x" \\u00e9 é'}
    created = objects.create(ASCENDJOB, tricky)
    assert created["metadata"]["annotations"] == tricky["metadata"]["annotations"]
    assert objects.get(ASCENDJOB, "team-a", "a") == created


def test_every_key_lives_in_the_quota_ledgers_slot(redis_client: redis.Redis) -> None:
    from redis.crc import key_slot

    from queues import DEFAULT_KEYS

    objects = Objects(redis_client, history=1)
    for i in range(150):
        objects.create(EVENT, {"metadata": {"name": f"e{i}", "namespace": "n"}, "reason": "R"})
    objects.create(NODE, {"metadata": {"name": "n", "finalizers": ["fleet.io/test"]}})
    objects.delete(NODE, None, "n")  # marked: the Nodes' deleting index holds it
    objects.list_page(EVENT, "n", limit=10)
    assert objects.reindex(EVENT, INVOLVED_INDEX)  # takes and drops its lock
    keys = [k.decode() if isinstance(k, bytes) else k for k in redis_client.keys("*")]
    # version, floors, deleting-kept; objects/versions/changes/index for two kinds; involved
    # for Events; deleting for Nodes
    assert len(keys) == 13
    assert {key_slot(k.encode()) for k in keys} == {key_slot(DEFAULT_KEYS.meta.encode())}
    assert all(k.startswith("fleet:{quota}:state:") for k in keys)
