"""Exclusion after a failure is proportionate (issue 23, requirement 5).

The rule (:mod:`fleet.dispatch.handback`): a failure of the job's own does not keep the job off
the member the first time; repeated failures on one member exclude it for exponentially longer,
up to a cap; a failure that says the member could not run the job excludes it from the first
time. These test the rule itself and what :func:`give_back` writes; the dispatcher's give-way
and the whole path with real processes are in ``test_exclusion_processes.py``.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from fleet.dispatch.context import DEFAULT_POLICY, Context
from fleet.dispatch.handback import excluded_now, exclusion_ends, give_back
from fleet.jobs import (
    Attempt,
    Blame,
    Ending,
    attempt_of,
    current_state,
    exclusion_seconds,
    exclusions_of,
    last_condition,
    not_before_of,
    submit,
)
from fleet.jobs.phases import FleetReason, Phase
from fleet.kinds import PROPAGATION_POLICY
from fleet.policy import Failover
from fleet.timestamps import parse_rfc3339, rfc3339_micro
from queues import JobState
from tests.fleet.placement.factory import job
from tests.support.job_states import admit
from tests.support.kinds import FLEET_ASCENDJOB

DEFAULTS = DEFAULT_POLICY.spec.failover


def _failover(**fields: Any) -> Failover:
    return Failover.model_validate(fields)


# ---- the rule ---------------------------------------------------------------------------------


def test_the_first_failure_of_the_jobs_own_on_a_member_excludes_nothing() -> None:
    assert exclusion_seconds(Blame.JOB, 1, DEFAULTS) == 0.0


def test_repeated_failures_of_the_jobs_own_back_off_from_ten_seconds_doubling_to_the_cap() -> None:
    assert [exclusion_seconds(Blame.JOB, n, DEFAULTS) for n in range(1, 10)] == [
        0.0,
        10.0,
        20.0,
        40.0,
        80.0,
        160.0,
        300.0,
        300.0,
        300.0,
    ]


def test_a_failure_that_blames_the_member_excludes_it_from_the_first_time() -> None:
    assert [exclusion_seconds(Blame.MEMBER, n, DEFAULTS) for n in range(1, 7)] == [
        10.0,
        20.0,
        40.0,
        80.0,
        160.0,
        300.0,
    ]


def test_the_policy_sets_the_base_and_the_cap_and_a_huge_count_stays_at_the_cap() -> None:
    policy = _failover(exclusionSeconds=2, exclusionLimitSeconds=5)
    assert [exclusion_seconds(Blame.JOB, n, policy) for n in range(1, 5)] == [0.0, 2.0, 4.0, 5.0]
    assert exclusion_seconds(Blame.MEMBER, 10_000, policy) == 5.0
    assert exclusion_seconds(Blame.MEMBER, 3, _failover(exclusionSeconds=0)) == 0.0


def test_the_defaults_are_the_documented_ones_and_bad_values_are_refused() -> None:
    assert (DEFAULTS.exclusion_seconds, DEFAULTS.exclusion_limit_seconds) == (10.0, 300.0)
    with pytest.raises(ValueError):
        _failover(exclusionSeconds=-1)
    with pytest.raises(ValueError):
        _failover(exclusionsSeconds=10)  # misspelt: refused, not silently the default


def test_excluded_now_keeps_only_the_exclusions_not_yet_over() -> None:
    obj = {"status": {"excluded": {"member-1": 100.0, "member-2": 200.0}}}
    assert excluded_now(obj, 150.0) == {"member-2"}
    assert excluded_now(obj, 250.0) == frozenset()
    assert excluded_now({}, 0.0) == frozenset()


# ---- what give_back writes ----------------------------------------------------------------------


def _policy(**failover: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy.one.alibabacloud.com/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "exclusions", "namespace": "default"},
        "spec": {
            "failover": {"backoffLimit": 10, "backoffSeconds": 1, **failover},
            "resourceSelectors": [{"apiVersion": "mindxdl.gitee.com/v1", "kind": "AscendJob"}],
        },
    }


@pytest.fixture
def ctx(redis_client: redis.Redis) -> Context:
    context = Context(redis_client)
    context.objects.create(PROPAGATION_POLICY, _policy(exclusionLimitSeconds=30))
    one = job("flaky", workers=0, npus=1, exclusive=False)
    one["metadata"]["namespace"] = "default"
    submit(context.objects, context.ledger, one)
    return context


def _place(ctx: Context, member: str) -> tuple[str, int]:
    """Admit the job again and mark its next attempt Admitted to ``member``, as the dispatcher does."""
    [decision] = ctx.ledger.admit_pending_many(["default/flaky"])
    assert decision.admitted

    def change(obj: dict[str, Any]) -> dict[str, Any]:
        return admit(obj, member)

    stored = ctx.objects.mutate(FLEET_ASCENDJOB, "default", "flaky", change)
    assert stored is not None
    return str(stored["metadata"]["uid"]), attempt_of(stored)


def _fail_on(ctx: Context, member: str, blame: Blame) -> dict[str, Any]:
    uid, attempt = _place(ctx, member)
    outcome = give_back(
        ctx,
        "default/flaky",
        Attempt(uid, attempt, member),
        reason=FleetReason.APPLICATION_FAILOVER,
        message=f"failed in {member}",
        ending=Ending(count_failure=True, blame=blame),
    )
    assert outcome.changed and outcome.requeued
    obj = ctx.objects.get(FLEET_ASCENDJOB, "default", "flaky")
    assert current_state(obj) == Phase.QUEUED
    assert ctx.ledger.state("default/flaky") is JobState.PENDING
    return obj


def _avoided_for(obj: dict[str, Any], member: str) -> float:
    """How long after the job may go again (its notBefore) ``member`` stays excluded (0: not)."""
    until = exclusions_of(obj).get(member)
    return 0.0 if until is None else round(until - not_before_of(obj), 1)


def test_one_failure_of_the_jobs_own_leaves_the_member_open(ctx: Context) -> None:
    obj = _fail_on(ctx, "member-1", Blame.JOB)
    status = obj["status"]
    assert status["excluded"] == {}
    assert status["memberFailures"] == {"member-1": 1}
    assert not_before_of(obj) > time.time()  # the retry backoff still applies
    assert parse_rfc3339(status["notBefore"]) is not None, "an RFC 3339 time, as every time in status"
    message = (last_condition(obj) or {})["message"]
    assert "next attempt in 1s" in message and "member-1 not avoided" in message


def test_repeated_failures_on_one_member_exclude_it_for_growing_times_up_to_the_cap(ctx: Context) -> None:
    avoided = [_avoided_for(_fail_on(ctx, "member-1", Blame.JOB), "member-1") for _ in range(5)]
    assert avoided == [0.0, 10.0, 20.0, 30.0, 30.0]
    obj = ctx.objects.get(FLEET_ASCENDJOB, "default", "flaky")
    assert obj["status"]["memberFailures"] == {"member-1": 5}
    assert "member-1 avoided for 30s more" in (last_condition(obj) or {})["message"]


def test_failures_are_counted_per_member(ctx: Context) -> None:
    _fail_on(ctx, "member-1", Blame.JOB)
    obj = _fail_on(ctx, "member-2", Blame.JOB)
    assert obj["status"]["excluded"] == {}, "a first failure on each member excludes neither"
    obj = _fail_on(ctx, "member-1", Blame.JOB)
    assert obj["status"]["memberFailures"] == {"member-1": 2, "member-2": 1}
    assert set(obj["status"]["excluded"]) == {"member-1"}
    assert _avoided_for(obj, "member-1") == 10.0


def test_a_member_that_could_not_run_the_job_is_excluded_at_the_first_failure(ctx: Context) -> None:
    obj = _fail_on(ctx, "member-2", Blame.MEMBER)
    assert _avoided_for(obj, "member-2") == 10.0
    assert excluded_now(obj, not_before_of(obj)) == {"member-2"}


def test_an_exclusion_not_sized_by_blame_keeps_its_fixed_length_from_now(ctx: Context) -> None:
    uid, attempt = _place(ctx, "member-3")
    before = time.time()
    give_back(
        ctx,
        "default/flaky",
        Attempt(uid, attempt, "member-3"),
        reason=FleetReason.CLUSTER_FAILOVER,
        message="member-3 has been NotReady",
        ending=Ending(exclude_for=120.0),
    )
    stored = ctx.objects.get(FLEET_ASCENDJOB, "default", "flaky")
    status = stored["status"]
    assert before + 119.99 <= exclusions_of(stored)["member-3"] <= time.time() + 120.01
    assert "memberFailures" not in status and status["failures"] == 0


def test_an_exclusion_that_must_not_give_way_is_kept_apart(ctx: Context) -> None:
    # A member that could not be reached (or refused the job for now): the attempt never ran
    # and counts no failure, so no backoff paces a retry; this exclusion does not give way.
    uid, attempt = _place(ctx, "member-2")
    give_back(
        ctx,
        "default/flaky",
        Attempt(uid, attempt, "member-2"),
        reason=FleetReason.MEMBER_UNAVAILABLE,
        message="member-2 could not be reached",
        ending=Ending(exclude_for=60.0, gives_way=False),
    )
    stored = ctx.objects.get(FLEET_ASCENDJOB, "default", "flaky")
    status = stored["status"]
    assert status["excluded"] == {}
    now = time.time()
    assert excluded_now(stored, now, firm=True) == {"member-2"}
    assert exclusion_ends(stored, now) == [exclusions_of(stored, firm=True)["member-2"]]
    # Once it is over, the next hand-back drops it.
    obj = ctx.objects.get(FLEET_ASCENDJOB, "default", "flaky")
    obj["status"]["excludedFirmly"] = {"member-2": rfc3339_micro(now - 1)}
    ctx.objects.mutate(FLEET_ASCENDJOB, "default", "flaky", lambda o: {**o, "status": obj["status"]})
    after = _fail_on(ctx, "member-1", Blame.JOB)
    assert "excludedFirmly" not in after["status"]
