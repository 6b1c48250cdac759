"""The members a queued job keeps off, one rule for the dispatcher's cycle and for explain."""

from __future__ import annotations

from typing import Any

from fleet.jobs import avoidance_of
from fleet.policy import PropagationPolicy, default_policy
from fleet.timestamps import rfc3339_micro

NOW = 1_800_000_000.0


def _job(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "j", "namespace": "a"}, "status": status}


def _policy(*suspended: str) -> PropagationPolicy:
    policy = default_policy([("mindxdl.gitee.com/v1", "AscendJob")]).model_dump(by_alias=True)
    policy["spec"]["suspension"]["dispatchingOnClusters"] = {"clusterNames": list(suspended)}
    return PropagationPolicy.model_validate(policy)


def test_refusals_firm_exclusions_suspended_and_unusable_members_never_give_way() -> None:
    obj = _job(
        refused={"m1": "quota"},
        excludedFirmly={"m2": rfc3339_micro(NOW + 60), "m9": rfc3339_micro(NOW - 1)},
        excluded={"m3": rfc3339_micro(NOW + 30), "m8": rfc3339_micro(NOW - 5)},
    )
    kept = avoidance_of(obj, _policy("m4"), now=NOW, unusable={"m5"})
    assert kept.never == {"m1", "m2", "m4", "m5"}  # an exclusion over (m9) keeps nothing off
    assert kept.excluded == {"m3"}
    assert kept.all == {"m1", "m2", "m3", "m4", "m5"}


def test_an_exclusion_gives_way_only_when_nothing_else_fits() -> None:
    obj = _job(excluded={"m3": rfc3339_micro(NOW + 30)})
    kept = avoidance_of(obj, _policy(), now=NOW, unusable={"m5"})

    def fits_on(*members: str) -> Any:
        return lambda avoid: [m for m in members if m not in avoid]

    assert kept.place(fits_on("m1", "m3")) == (["m1"], frozenset({"m3", "m5"}))  # elsewhere first
    assert kept.place(fits_on("m3", "m5")) == (["m3"], frozenset({"m5"}))  # it gives way; m5 never does
    assert kept.place(fits_on("m5")) == ([], frozenset({"m3", "m5"}))  # nothing: both said


def test_exclusions_written_as_epoch_seconds_by_an_older_fleet_still_count() -> None:
    obj = _job(excluded={"m3": NOW + 30})
    assert avoidance_of(obj, _policy(), now=NOW).excluded == {"m3"}
