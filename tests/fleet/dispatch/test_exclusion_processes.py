"""Exclusion after a failure, with real processes (issue 23, requirement 5).

A job that fits one member only: ``member-1`` has the 910B module nodes its selector asks for,
``member-3`` does not. The dispatcher, a worker and the syncer run as processes against the
simulated members; the job fails in the member by its own exit code (the simulator's
``fail-job`` fault once, or its ``sim.fleet.io/exit-code`` annotation on every run).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from fleet.jobs import attempt_of, cluster_of, condition, current_state
from fleet.kinds import PROPAGATION_POLICY
from fleet.timestamps import epoch_of
from tests.fleet.dispatch.conftest import A800_POOL, MODULE_POOL, RunningFleet
from tests.fleet.placement.factory import job
from tests.support.job_events import events_with
from tests.support.kinds import FLEET_ASCENDJOB

pytestmark = pytest.mark.integration

MEMBERS = {"member-1": MODULE_POOL, "member-3": A800_POOL}
NS = "team-a"


def _policy(*, backoff_limit: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy.one.alibabacloud.com/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "exclusions", "namespace": NS},
        "spec": {
            "failover": {"backoffLimit": backoff_limit, "backoffSeconds": 1},
            "resourceSelectors": [{"apiVersion": "mindxdl.gitee.com/v1", "kind": "AscendJob"}],
        },
    }


def _only_on_member_1(name: str, *, seconds: float, exit_code: int = 0) -> dict[str, Any]:
    obj = job(name, workers=0, npus=8, exclusive=False, selector={"accelerator-type": "module-910b-8"})
    obj["metadata"]["namespace"] = NS
    obj["metadata"]["annotations"] = {"sim.fleet.io/duration-seconds": str(seconds)}
    if exit_code:
        obj["metadata"]["annotations"]["sim.fleet.io/exit-code"] = str(exit_code)
    obj["spec"].setdefault("runPolicy", {})["backoffLimit"] = 0  # the member does not restart it
    return obj


def _get(fleet: RunningFleet, name: str) -> dict[str, Any]:
    return fleet.objects.get(FLEET_ASCENDJOB, NS, name)


def test_a_job_that_failed_once_by_its_own_code_runs_again_at_once_where_it_alone_fits(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(members=MEMBERS, workers=1)
    fleet.objects.create(PROPAGATION_POLICY, _policy(backoff_limit=3))
    fleet.sim.fault("member-1", "fail-job", job=f"{NS}/once")  # its pod exits 1, once
    fleet.submit(_only_on_member_1("once", seconds=600))
    fleet.wait_for(
        "the job to fail once", lambda: int(_get(fleet, "once")["status"].get("failures") or 0) >= 1, 30
    )
    failed_at = time.monotonic()

    def running_again() -> bool:
        obj = _get(fleet, "once")
        return attempt_of(obj) == 2 and current_state(obj) == "Running"

    # Before, member-1 was kept off for 300 s and the job waited; now it waits its 1 s backoff.
    fleet.wait_for("the job to run again", running_again, 20)
    waited = time.monotonic() - failed_at
    assert waited < 10.0, f"ran again after {waited:.1f}s"
    obj = _get(fleet, "once")
    status = obj["status"]
    assert cluster_of(obj) == "member-1"
    assert status["failures"] == 1 and status["memberFailures"] == {"member-1": 1}
    assert status["excluded"] == {}
    # Its Events tell the story (one per reason, counted, with the latest message).
    (queued,) = events_with(fleet.objects, obj, "ApplicationFailover")
    assert "member-1 not avoided" in queued["message"]
    (bound,) = events_with(fleet.objects, obj, "ScheduleBindingSucceed")
    assert bound["count"] == 2, "bound once an attempt"
    assert "gave way" not in str((condition(obj, "Admitted") or {}).get("message")), "nothing excluded it"


def test_a_job_that_keeps_failing_where_it_alone_fits_backs_off_with_growing_delays(
    fleet_factory: Callable[..., RunningFleet],
) -> None:
    fleet = fleet_factory(members=MEMBERS, workers=1)
    fleet.objects.create(PROPAGATION_POLICY, _policy(backoff_limit=3))
    fleet.submit(_only_on_member_1("flaky", seconds=0.2, exit_code=2))
    # Watch it: when each failure is seen, when each next attempt is admitted.
    failed: dict[int, float] = {}
    admitted: dict[int, float] = {}
    avoided: dict[int, float] = {}
    messages: list[str] = []  # each attempt's Admitted message, as it was shown
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        obj = _get(fleet, "flaky")
        status = obj.get("status") or {}
        now = time.monotonic()
        failures = int(status.get("failures") or 0)
        if failures and failures not in failed:
            failed[failures] = now
            until = (status.get("excluded") or {}).get("member-1")
            avoided[failures] = (
                0.0 if until is None else (epoch_of(until) or 0) - (epoch_of(status.get("notBefore")) or 0)
            )
        if current_state(obj) in ("Admitted", "Dispatched", "Running") and attempt_of(obj) not in admitted:
            admitted[attempt_of(obj)] = now
            messages.append(str((condition(obj, "Admitted") or {}).get("message")))
        if current_state(obj) == "Failed":
            break
        time.sleep(0.05)
    obj = _get(fleet, "flaky")
    status = obj["status"]
    assert status["conditions"][-1]["reason"] == "BackoffLimitExceeded", status["conditions"][-1]
    assert status["failures"] == 4 and status["memberFailures"] == {"member-1": 4}
    # Retries back off 1 s, 2 s, 4 s: each wait longer than the last.
    waits = [admitted[n + 1] - failed[n] for n in (1, 2, 3)]
    for wait, backoff in zip(waits, (1.0, 2.0, 4.0), strict=True):
        assert backoff - 0.2 <= wait < backoff + 3.0, waits
    assert waits[0] < waits[1] < waits[2], waits
    # member-1 is excluded from the second failure on, for 10 s then 20 s after each backoff; as
    # it is the only member where the job fits, the exclusion gives way each time.
    assert [round(avoided[n]) for n in (1, 2, 3)] == [0, 10, 20]
    assert len(messages) == 4, messages
    assert ["gave way" in m for m in messages] == [False, False, True, True]
    assert {cluster_of(obj), status.get("lastCluster")} <= {None, "member-1"}
