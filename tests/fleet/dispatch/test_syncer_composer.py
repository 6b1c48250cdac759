"""The syncer's composer (issue 22): what it does across its concerns, in this process."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import redis

from fleet.dispatch.context import Context
from fleet.dispatch.ownership import Shards
from fleet.dispatch.sync import MemberCopy
from fleet.dispatch.syncer import Syncer
from fleet.members import SYNC, EventCallback, WatchEvent


def test_a_member_let_go_is_forgotten_by_every_concern_and_acted_on_afresh_when_taken_back(
    fake_redis: redis.Redis,
) -> None:
    """A sharded syncer that lets a member go forgets what it sent and knew for it, so that when
    the member comes back to it, a purge is sent at once (not held for ``purge_again_after``)
    and its health continues from the record in Redis, not from this syncer's old copy."""
    ctx = Context(fake_redis)
    syncer = Syncer(ctx)
    kept, dropped = MemberCopy("m1", "default", "a", "u1", 1), MemberCopy("m2", "default", "b", "u2", 1)
    for ident in (kept, dropped):
        syncer.stale.purge(ident, "orphan")
        syncer.stale.purge(ident, "orphan")  # seen again at once: not sent twice
        syncer.probes.record(ident.member, healthy=False, error="refused", latency=0.1)
    assert [job.args[0] for job in ctx.purge_queue.jobs] == ["m1", "m2"]

    syncer._let_go("m2")
    assert set(syncer.shared.health) == {"m1"} and syncer.shared.probed == {"m1"}
    for ident in (kept, dropped):
        syncer.stale.purge(ident, "orphan")
    assert [job.args[0] for job in ctx.purge_queue.jobs] == ["m1", "m2", "m2"]


class _ListsAtOnce:
    """A member whose watches deliver their list before ``watch_jobs`` even returns: the
    soonest a real watch's own thread can."""

    def __init__(self, name: str, copies: list[dict[str, Any]]) -> None:
        self.name, self.copies = name, copies

    def watch_jobs(self, kind: Any, callback: EventCallback, *_: Any, **__: Any) -> Any:
        callback(WatchEvent(SYNC, self.name, str(kind), objects=tuple(self.copies)))
        return self


def test_a_member_taken_over_is_acted_on_from_its_first_list(
    fake_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sharded syncer that takes a member over acts on the list its watches deliver first,
    however soon it comes: a copy that finished before the takeover sends nothing later, so a
    list dropped as a late event would leave its job unmirrored for ever."""
    ctx = Context(fake_redis)
    copy = {"kind": "AscendJob", "metadata": {"namespace": "team-a", "name": "j1"}}
    ctx._members = {"m1": _ListsAtOnce("m1", [copy])}  # type: ignore[dict-item]
    syncer = Syncer(ctx, shards=Shards(fake_redis, ctx.keys))
    observed: list[tuple[str, list[Mapping[str, Any]]]] = []

    def observe(member: str, copies: Sequence[Mapping[str, Any]]) -> None:
        observed.append((member, list(copies)))

    monkeypatch.setattr(syncer.observer, "observe", observe)
    monkeypatch.setattr(syncer, "_spawn", lambda *args: None)  # no probe thread
    syncer._rebalance(frozenset({"m1"}))
    assert observed and all(event == ("m1", [copy]) for event in observed)
