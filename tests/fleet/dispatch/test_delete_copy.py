"""The deletion rules in this process (issue 23, requirement 3): the ``delete_copy`` task against a
simulated member over HTTP, and the syncer's decision for a job whose member left the fleet."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import redis

from fleet.dispatch.context import Context, install
from fleet.dispatch.handback import inflight_entry
from fleet.dispatch.syncer import Syncer
from fleet.dispatch.tasks import delete_copy
from queues import JobState
from tests.fleet.dispatch.conftest import admitted_on
from tests.support.kinds import FLEET_ASCENDJOB
from tests.support.sim import RunningSim


def _deleted_while_admitted(ctx: Context, name: str, member: str) -> dict[str, Any]:
    """A job the dispatcher placed on ``member`` (attempt 1), then deleted by its user."""
    stored = admitted_on(ctx, name, member)
    marked = ctx.objects.delete(FLEET_ASCENDJOB, "default", name)
    assert marked is not None and marked["metadata"]["deletionTimestamp"]
    assert stored["metadata"]["uid"] == marked["metadata"]["uid"]
    return marked


def test_an_absent_copy_is_not_taken_for_gone_while_its_create_is_in_flight(
    member: RunningSim, fake_redis: redis.Redis
) -> None:
    ctx = Context(fake_redis, member.kubeconfig)
    install(ctx)
    try:
        obj = _deleted_while_admitted(ctx, "racing", "m1")
        uid = obj["metadata"]["uid"]
        ctx.client.zadd(ctx.keys.inflight, {inflight_entry("default/racing", uid, 1): 1e12})
        # A worker that read the job before it was deleted may be creating the copy right now.
        assert delete_copy("m1", "default", "racing", uid, 1) == "creating"
        assert ctx.objects.try_get(FLEET_ASCENDJOB, "default", "racing") is not None
        assert ctx.ledger.state("default/racing") is not JobState.ABSENT
        ctx.client.zrem(ctx.keys.inflight, inflight_entry("default/racing", uid, 1))
        assert delete_copy("m1", "default", "racing", uid, 1) == "deleted"
        assert ctx.objects.try_get(FLEET_ASCENDJOB, "default", "racing") is None
        assert ctx.ledger.state("default/racing") is JobState.ABSENT
        # Run again (a task sent twice): nothing left to do.
        assert delete_copy("m1", "default", "racing", uid, 1) == "done"
    finally:
        ctx.close()


def test_a_job_whose_member_left_the_fleet_goes_at_once(
    fake_redis: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    ctx = Context(fake_redis)  # no kubeconfig: no member is in the fleet any more
    obj = _deleted_while_admitted(ctx, "stranded", "m9")
    with caplog.at_level(logging.INFO, logger="fleet.dispatch.deletion"):
        Syncer(ctx).finalizers.maybe_delete(obj)
    assert ctx.objects.try_get(FLEET_ASCENDJOB, "default", "stranded") is None
    assert ctx.ledger.state("default/stranded") is JobState.ABSENT
    assert "why=member gone" in caplog.text
    # Not kept: should the member come back, its copy is an orphan like any other.
    assert ctx.client.scard(ctx.keys.left) == 0
