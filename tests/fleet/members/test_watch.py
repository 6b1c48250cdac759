"""Watchers over real HTTP: list then watch, resume after outages, 410 relists, prompt stop."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from fleet.apiserver import NODE, POD
from fleet.members import ADDED, DELETED, MODIFIED, NODES, PODS, SYNC, Member, Watcher, WatchEvent
from tests.fleet.members.conftest import MemberServer, member_for
from tests.fleet.members.objects import job, names, node, pod
from tests.fleet.members.recording import Recorder, event_name
from tests.support.kinds import ASCENDJOB, JOBS

pytestmark = pytest.mark.integration


def _wait(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


def _metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, {"member": "m1", **labels}) or 0.0


@pytest.fixture
def watchers() -> Iterator[list[Watcher]]:
    started: list[Watcher] = []
    yield started
    for watcher in started:
        watcher.stop()


def test_lists_then_delivers_changes(
    member: Member, member_server: MemberServer, watchers: list[Watcher]
) -> None:
    member.create_job(JOBS, "default", job("before", team="a"))
    counted = ("ADDED", "MODIFIED", "DELETED")
    before = {t: _metric("fleet_member_watch_events_total", resource="ascendjobs", type=t) for t in counted}
    recorder = Recorder()
    watchers.append(member.watch_jobs(JOBS, recorder, label_selector="team=a"))
    first = recorder.wait(lambda events: len(events) >= 1)[0]
    assert first.type == SYNC
    assert (first.member, first.resource) == ("m1", "ascendjobs")
    assert names(first.objects) == ["before"]
    assert first.vanished == ()

    member.create_job(JOBS, "default", job("new", team="a"))
    member.create_job(JOBS, "default", job("other", team="b"))  # outside the selector
    changed = member_server.call(member_server.store.get(ASCENDJOB, "default", "new"))
    changed["spec"]["runPolicy"] = {"backoffLimit": 3}
    member_server.update(ASCENDJOB, changed)
    member.delete_job(JOBS, "default", "before")
    recorder.wait(lambda events: len(events) >= 4)
    time.sleep(0.1)
    assert recorder.changes() == [(ADDED, "new"), (MODIFIED, "new"), (DELETED, "before")]
    # Each event received counted once, by type (the per-type counter is looked up once).
    after = {t: _metric("fleet_member_watch_events_total", resource="ascendjobs", type=t) for t in counted}
    assert {t: after[t] - before[t] for t in counted} == {"ADDED": 1, "MODIFIED": 1, "DELETED": 1}
    latest = recorder.events[-1].resource_version
    assert int(watchers[0].resource_version) >= int(latest)
    assert names(watchers[0].snapshot()) == ["new"]


def test_resumes_after_an_outage_without_losing_events(
    member: Member, member_server: MemberServer, watchers: list[Watcher]
) -> None:
    member.create_job(JOBS, "default", job("keep"))
    member.create_job(JOBS, "default", job("doomed"))
    recorder = Recorder()
    watcher = member.watch_jobs(JOBS, recorder)
    watchers.append(watcher)
    assert watcher.wait_synced(5.0)
    _wait(lambda: watcher.connected)
    restarts = _metric("fleet_member_watch_restarts_total", resource="ascendjobs", cause="unavailable")
    restarts += _metric("fleet_member_watch_restarts_total", resource="ascendjobs", cause="disconnected")

    member_server.stop_listener()
    _wait(lambda: not watcher.connected)
    # While the member is unreachable, its state moves on.
    member_server.create(
        ASCENDJOB, {**job("born-while-down"), "metadata": {"name": "born-while-down", "namespace": "default"}}
    )
    kept = member_server.call(member_server.store.get(ASCENDJOB, "default", "keep"))
    kept["metadata"]["labels"] = {"changed": "while-down"}
    member_server.update(ASCENDJOB, kept)
    member_server.delete(ASCENDJOB, "default", "doomed")
    time.sleep(0.3)  # the watcher keeps trying against a refusing port
    member_server.start_listener()

    recorder.wait(lambda events: len(events) >= 4)
    assert recorder.changes() == [(ADDED, "born-while-down"), (MODIFIED, "keep"), (DELETED, "doomed")]
    assert len(recorder.syncs()) == 1  # resumed from its resourceVersion: no second list
    after = _metric("fleet_member_watch_restarts_total", resource="ascendjobs", cause="unavailable")
    after += _metric("fleet_member_watch_restarts_total", resource="ascendjobs", cause="disconnected")
    assert after > restarts


def test_gone_relists_and_reports_what_vanished(tmp_path: Path, watchers: list[Watcher]) -> None:
    server = MemberServer(history=4)
    server.start()
    try:
        member = member_for(server, tmp_path)
        member.create_job(JOBS, "default", job("a"))
        member.create_job(JOBS, "default", job("b"))
        recorder = Recorder()
        watcher = member.watch_jobs(JOBS, recorder)
        watchers.append(watcher)
        assert watcher.wait_synced(5.0)
        _wait(lambda: watcher.connected)
        relists = _metric("fleet_member_watch_relists_total", resource="ascendjobs", cause="gone")

        server.stop_listener()
        _wait(lambda: not watcher.connected)
        server.delete(ASCENDJOB, "default", "a")
        for index in range(6):  # more changes than the member's history keeps
            server.create(
                ASCENDJOB, {**job(f"c{index}"), "metadata": {"name": f"c{index}", "namespace": "default"}}
            )
        server.start_listener()

        syncs = [
            e
            for e in recorder.wait(lambda events: len([e for e in events if e.type == SYNC]) >= 2)
            if e.type == SYNC
        ]
        resync = syncs[1]
        assert resync.cause == "gone"
        assert names(resync.vanished) == ["a"]
        assert sorted(names(resync.objects)) == ["b", "c0", "c1", "c2", "c3", "c4", "c5"]
        assert _metric("fleet_member_watch_relists_total", resource="ascendjobs", cause="gone") == relists + 1

        member.create_job(JOBS, "default", job("after"))  # and it keeps following
        recorder.wait(lambda events: events[-1].type == ADDED and event_name(events[-1]) == "after")
        member.close()
    finally:
        for watcher in watchers:
            watcher.stop()
        server.close()


def test_rides_out_503s_while_reconnecting(
    member: Member, member_server: MemberServer, watchers: list[Watcher]
) -> None:
    recorder = Recorder()
    watcher = member.watch_jobs(JOBS, recorder)
    watchers.append(watcher)
    assert watcher.wait_synced(5.0)
    _wait(lambda: watcher.connected)
    member_server.faults.fail(503, times=3, path="/ascendjobs", method="GET")
    member_server.stop_listener()  # cut the stream; the reconnects then meet three 503s
    member_server.start_listener()
    member.create_job(JOBS, "default", job("after-503"))
    recorder.wait(lambda events: (ADDED, "after-503") in [(e.type, event_name(e)) for e in events])
    assert member_server.faults.injected == 3
    assert len(recorder.syncs()) == 1


@pytest.mark.parametrize("failing", [ADDED, DELETED])
def test_failing_callback_gets_the_whole_state_again(
    member: Member, member_server: MemberServer, watchers: list[Watcher], failing: str
) -> None:
    member.create_job(JOBS, "default", job("old"))
    failed: list[bool] = []

    def fail_once(event: WatchEvent) -> bool:
        if event.type == failing and not failed:
            failed.append(True)
            return True
        return False

    recorder = Recorder(fail=fail_once)
    watchers.append(member.watch_jobs(JOBS, recorder))
    recorder.wait(lambda events: len(events) == 1)
    if failing == ADDED:
        member.create_job(JOBS, "default", job("new"))
    else:
        member.delete_job(JOBS, "default", "old")
    # The event the consumer choked on is not lost: a fresh list replaces its whole state.
    resync = recorder.wait(lambda events: any(e.cause == "callback-error" for e in events))[-1]
    assert resync.type == SYNC
    if failing == ADDED:
        assert sorted(names(resync.objects)) == ["new", "old"]
        assert resync.vanished == ()
    else:
        assert resync.objects == ()
        assert names(resync.vanished) == ["old"]


def test_nodes_and_pods_are_watched_with_selectors(
    member: Member, member_server: MemberServer, watchers: list[Watcher]
) -> None:
    member_server.create(NODE, node("n1"))
    nodes, pods = Recorder(), Recorder()
    watchers.append(member.watch(NODES, nodes))
    watchers.append(member.watch(PODS, pods, field_selector="spec.nodeName=n1"))
    assert names(nodes.wait(lambda events: len(events) >= 1)[0].objects) == ["n1"]
    pods.wait(lambda events: len(events) >= 1)

    cordoned = member_server.call(member_server.store.get(NODE, None, "n1"))
    cordoned["spec"] = {"unschedulable": True}
    member_server.update(NODE, cordoned)
    member_server.create(POD, pod("on-n2", "n2"))
    member_server.create(POD, pod("on-n1", "n1"))
    changed = nodes.wait(lambda events: len(events) >= 2)[1]
    assert changed.type == MODIFIED and changed.object is not None
    assert changed.object["spec"]["unschedulable"] is True
    pods.wait(lambda events: len(events) >= 2)
    time.sleep(0.1)
    assert pods.changes() == [(ADDED, "on-n1")]


def test_stop_is_prompt_while_a_read_blocks(tmp_path: Path) -> None:
    server = MemberServer(bookmark_interval=60.0)  # nothing to read for a long time
    server.start()
    try:
        member = member_for(server, tmp_path)
        watcher = member.watch(NODES, Recorder())
        assert watcher.wait_synced(5.0)
        _wait(lambda: watcher.connected)
        time.sleep(0.2)
        start = time.monotonic()
        assert watcher.stop(timeout=2.0)
        assert time.monotonic() - start < 1.0
        member.close()
    finally:
        server.close()


def test_stop_is_prompt_while_the_member_is_down(member: Member, member_server: MemberServer) -> None:
    member_server.stop_listener()
    watcher = member.watch(NODES, Recorder())
    time.sleep(0.3)
    assert not watcher.wait_synced(0.0)
    assert watcher.last_error is not None and "unavailable" in watcher.last_error
    start = time.monotonic()
    assert watcher.stop(timeout=2.0)
    assert time.monotonic() - start < 1.0


def test_member_close_stops_its_watchers(member_server: MemberServer, tmp_path: Path) -> None:
    member = member_for(member_server, tmp_path)
    jobs, nodes = member.watch_jobs(JOBS, Recorder()), member.watch(NODES, Recorder())
    assert jobs.wait_synced(5.0) and nodes.wait_synced(5.0)
    start = time.monotonic()
    member.close()
    assert time.monotonic() - start < 1.0
    assert jobs.stopped and nodes.stopped
    _wait(lambda: not jobs.connected and not nodes.connected)


def test_a_callback_may_stop_its_own_watcher(member: Member, watchers: list[Watcher]) -> None:
    holder: list[Watcher] = []
    seen: list[str] = []

    def stop_on_first(event: WatchEvent) -> None:
        seen.append(event.type)
        holder[0].stop()

    watcher = member.watch(NODES, stop_on_first, start=False)
    holder.append(watcher)
    watchers.append(watcher)
    watcher.start()
    _wait(lambda: seen == [SYNC] and not watcher.connected)
    time.sleep(0.1)
    assert seen == [SYNC]


def test_changes_arriving_together_are_delivered_together_in_order(
    member: Member, watchers: list[Watcher]
) -> None:
    """on_batch gets the changes of one read as one list; SYNC still goes to the callback."""
    syncs = Recorder()
    batches: list[list[WatchEvent]] = []
    first_batch_seen = threading.Event()
    release = threading.Event()

    def on_batch(events: list[WatchEvent]) -> None:
        batches.append(events)
        first_batch_seen.set()
        release.wait(5)  # meanwhile the next changes pile up on the socket

    watchers.append(member.watch_jobs(JOBS, syncs, on_batch=on_batch))
    syncs.wait(lambda events: len(events) == 1)
    member.create_job(JOBS, "default", job("j-00"))
    assert first_batch_seen.wait(5)
    for i in range(1, 20):
        member.create_job(JOBS, "default", job(f"j-{i:02d}"))
    member.delete_job(JOBS, "default", "j-00")
    release.set()
    _wait(lambda: sum(len(b) for b in batches) >= 21)
    delivered = [(e.type, e.object["metadata"]["name"]) for b in batches for e in b if e.object]
    assert delivered == [(ADDED, f"j-{i:02d}") for i in range(20)] + [(DELETED, "j-00")]
    assert max(len(b) for b in batches) > 1  # what piled up came in one call
    assert [e.type for e in syncs.events] == [SYNC]
    _wait(lambda: names(watchers[0].snapshot()) == [f"j-{i:02d}" for i in range(1, 20)])


def test_a_failing_batch_gets_the_whole_state_again(member: Member, watchers: list[Watcher]) -> None:
    member.create_job(JOBS, "default", job("old"))
    syncs = Recorder()
    failed: list[bool] = []

    def on_batch(events: list[WatchEvent]) -> None:
        if not failed:
            failed.append(True)
            raise RuntimeError("consumer failed")

    watchers.append(member.watch_jobs(JOBS, syncs, on_batch=on_batch))
    syncs.wait(lambda events: len(events) == 1)
    member.create_job(JOBS, "default", job("new"))
    resync = syncs.wait(lambda events: any(e.cause == "callback-error" for e in events))[-1]
    assert resync.type == SYNC and sorted(names(resync.objects)) == ["new", "old"]


def test_a_member_rebuilt_behind_the_watch_is_listed_again_from_what_it_now_holds(
    tmp_path: Path, watchers: list[Watcher]
) -> None:
    """A member restored from an older backup (or rebuilt) has not reached the resourceVersion the
    watch resumes from: it answers "Too large resource version" (kube-apiserver's 504 with the
    cause ResourceVersionTooLarge), and the watcher lists again, as client-go's reflector does,
    instead of retrying that version for ever."""
    server = MemberServer()
    server.start()
    rebuilt: MemberServer | None = None
    try:
        member = member_for(server, tmp_path)
        for name in ("a", "b", "c", "d"):
            member.create_job(JOBS, "default", job(name))
        recorder = Recorder()
        watchers.append(watcher := member.watch_jobs(JOBS, recorder))
        assert watcher.wait_synced(5.0)
        _wait(lambda: watcher.connected)
        server.close()
        _wait(lambda: not watcher.connected)
        rebuilt = MemberServer()  # empty but one job, its versions behind the watch's, same port
        rebuilt.port = server.port
        rebuilt.start()
        rebuilt.create(ASCENDJOB, {**job("e"), "metadata": {"name": "e", "namespace": "default"}})

        def resynced(events: list[WatchEvent]) -> bool:
            return len([e for e in events if e.type == SYNC]) >= 2

        resync = [e for e in recorder.wait(resynced, timeout=15.0) if e.type == SYNC][1]
        assert names(resync.objects) == ["e"]
        assert sorted(names(resync.vanished)) == ["a", "b", "c", "d"]
        member.close()
    finally:
        for watcher in watchers:
            watcher.stop()
        if rebuilt is not None:
            rebuilt.close()
