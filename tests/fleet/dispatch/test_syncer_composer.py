"""The syncer's composer (issue 22): what it does across its concerns, in this process."""

from __future__ import annotations

import redis

from fleet.dispatch.context import Context
from fleet.dispatch.sync import MemberCopy
from fleet.dispatch.syncer import Syncer


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
