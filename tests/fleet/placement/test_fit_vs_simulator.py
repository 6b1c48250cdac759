"""Property: Fleet's fit and the simulator's independent gang scheduler agree, both directions.

Whatever ``fit_member`` says fits really binds in ``fleet.sim.scheduler.schedule`` (the pure
function the simulated members run), and whatever it says does not fit stays pending there
(``PodGroupPending``), for random node sets (labels, taints, accelerator types, readiness, free
NPUs and cpu, pods already bound) and random AscendJobs.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fleet.placement import MemberCapacity, fit_member
from fleet.placement.fit import gang_fits, groups_of
from fleet.sim.jobs import build_pods
from fleet.sim.scheduler import schedule
from fleet.workloads import ascendjob
from tests.fleet.placement.factory import job, node, pod

# Weighted towards nodes and jobs that can meet, so that both answers come up often.
ACCELERATORS = [
    None,
    None,
    "module",
    "module",
    "half",
    "card-910b-2",
    "module-910b-8",
    "module-910b-16",
    "module-a3-16",
]
SIZES = {
    "module": 8,
    "half": 4,
    "card-910b-2": 2,
    "module-910b-8": 8,
    "module-910b-16": 16,
    "module-a3-16": 16,
}
TAINTS = [
    None,
    None,
    None,
    None,
    {"key": "dedicated", "value": "train", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "train", "effect": "PreferNoSchedule"},
    {"key": "maintenance", "value": "", "effect": "NoExecute"},
]


POLICIES = [None, None, None, None, None, "chip8-node8", "chip2-node16", "chip4-node8", "chip8-node16"]


@st.composite
def nodes_and_pods(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    count = draw(st.integers(1, 8))
    nodes, pods = [], []
    for i in range(count):
        accelerator = draw(st.sampled_from(ACCELERATORS))
        # A node's NPUs are what its hardware has (an unlabelled node: anything).
        npus = SIZES.get(accelerator or "") or draw(st.sampled_from([0, 2, 4, 8, 8, 16]))
        taint = draw(st.sampled_from(TAINTS))
        nodes.append(
            node(
                f"n{i}",
                npus,
                accelerator,
                cpu=str(draw(st.sampled_from([4, 8, 32]))),
                labels={"pool": draw(st.sampled_from(["a", "b"]))},
                taints=[taint] if taint else None,
                ready=draw(st.integers(0, 5)) > 0,
                cordoned=draw(st.integers(0, 9)) == 0,
            )
        )
        for j in range(draw(st.integers(0, 2))):
            used = draw(st.integers(0, npus)) if npus else 0
            cpu = str(draw(st.integers(0, 4)))
            pods.append(pod(f"busy-{i}-{j}", f"n{i}", used, cpu=cpu, namespace="other"))
    return nodes, pods


@st.composite
def jobs(draw: st.DrawFn) -> dict[str, Any]:
    workers = draw(st.integers(0, 3))
    total = 1 + workers
    tolerate = draw(st.booleans())
    obj = job(
        "j",
        workers=workers,
        npus=draw(st.sampled_from([0, 1, 2, 2, 4, 8, 3, 6])),
        master_npus=draw(st.sampled_from([None, None, 0, 1, 2, 8])),
        cpu=draw(st.sampled_from([None, "1", "3", "6"])),
        selector=draw(st.sampled_from([None, None, {"pool": "a"}, {"accelerator-type": "module"}])),
        exclusive=draw(st.booleans()),
        min_available=draw(st.sampled_from([None, *range(1, total + 1)])),
        tolerations=[{"key": "dedicated", "operator": "Exists"}] if tolerate else None,
        policy=draw(st.sampled_from(POLICIES)),
    )
    return obj


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=nodes_and_pods(), obj=jobs())
def test_fit_agrees_with_the_simulator_scheduler(
    cluster: tuple[list[dict[str, Any]], list[dict[str, Any]]], obj: dict[str, Any]
) -> None:
    nodes, pods = cluster
    # A count the job's schedule policy never takes is refused at submission (never placed).
    assume(ascendjob.validate(obj) == [])
    demand = ascendjob.demand(obj)
    cap = MemberCapacity.from_lists("m", nodes, pods)
    placement = fit_member(cap, demand)
    assert gang_fits(cap, demand) is (placement is not None)  # the decision loop's fast path
    minimum = obj["spec"]["runPolicy"]["schedulingPolicy"].get("minAvailable")
    result = schedule(nodes, pods, build_pods(obj), min_available=minimum)
    assert not result.gave_up
    if placement is None:
        assert not result.fits, f"Fleet says no, the simulator bound {dict(result.bindings)}"
    else:
        assert result.fits, f"Fleet placed {placement.rows}, the simulator: {result.message}"
        assert placement.pods == demand.gang
        assert len(result.bindings) >= demand.gang
        if demand.gang == demand.pods and len(groups_of(demand)) == 1:
            # One group of pods: Fleet plans the nodes the member scheduler picks itself.
            assert sorted(n for n, _, k in placement.rows for _ in range(k)) == sorted(
                result.bindings.values()
            )
