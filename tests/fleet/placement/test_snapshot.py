"""A member's capacity record, dumped by the feed and loaded by the API, answers every fit and
explanation exactly as the live summary it was taken from."""

from __future__ import annotations

import json

import pytest

from fleet.ascend import NPU_RESOURCE
from fleet.labels import ATTEMPT_LABEL, JOB_UID_LABEL
from fleet.placement import MemberCapacity, explain_members, fit_member
from fleet.placement.snapshot import dump_nodes, load_nodes
from tests.fleet.placement.factory import demand, job, node, pod


def _member() -> MemberCapacity:
    nodes = [
        node("a", 8),
        node("b", 8),
        node("c", 8, cordoned=True),
        node("d", 8, ready=False),
        node("e", 8, taints=[{"key": "maintenance", "value": "x", "effect": "NoSchedule"}]),
        node("f", 16, "module-a3-16"),  # HiAM pairs: free NPUs per group matter
        node("g", 2, "card-910b-2"),
    ]
    job_labels = {JOB_UID_LABEL: "uid-1", ATTEMPT_LABEL: "2"}
    pods = [
        pod("p1", "a", 4, labels=job_labels),
        pod("p2", "b", 8, labels=job_labels),
        pod("p3", "f", 3),
        pod("p4", "g", 1, cpu="2"),
    ]
    cap = MemberCapacity.from_lists("member-1", nodes, pods)
    cap.set_held({"a": {NPU_RESOURCE: 2}})
    return cap


def _round_trip(cap: MemberCapacity) -> MemberCapacity:
    return load_nodes(cap.name, json.loads(json.dumps(dump_nodes(cap))))


DEMANDS = [
    job(workers=1, npus=8),
    job(workers=0, npus=2),
    job(workers=0, npus=4),
    job(workers=3, npus=2, exclusive=False),
    job(workers=1, npus=1, selector={"accelerator-type": "card-910b-2"}),
    job(workers=0, npus=8, tolerations=[{"key": "maintenance", "operator": "Exists"}]),
    job(workers=0, npus=16),
    job(workers=0, npus=12),
]


@pytest.mark.parametrize("obj", DEMANDS, ids=[f"demand-{i}" for i in range(len(DEMANDS))])
def test_a_loaded_record_fits_and_explains_as_the_live_summary(obj: dict[str, object]) -> None:
    live = _member()
    loaded = _round_trip(live)
    wanted = demand(obj)
    assert (fit_member(loaded, wanted) is None) == (fit_member(live, wanted) is None)
    fitted_live, fitted_loaded = fit_member(live, wanted), fit_member(loaded, wanted)
    if fitted_live is not None and fitted_loaded is not None:
        assert fitted_loaded.rows == fitted_live.rows
    assert explain_members([loaded], wanted) == explain_members([live], wanted)


def test_the_record_keeps_free_npus_holds_groups_and_which_jobs_run_where() -> None:
    live = _member()
    loaded = _round_trip(live)
    assert loaded.free_total(NPU_RESOURCE) == live.free_total(NPU_RESOURCE)
    assert {n.name: n.why_unusable for n in loaded.nodes()} == {n.name: n.why_unusable for n in live.nodes()}
    assert loaded.held("a") == {NPU_RESOURCE: 2}
    assert loaded.unheld_free("f") == live.unheld_free("f")
    assert loaded.bound_pods("uid-1/2") == 2
    assert loaded.node_jobs() == {"a": {"uid-1/2": 1}, "b": {"uid-1/2": 1}}


def test_nodes_of_one_kind_share_one_entry() -> None:
    cap = MemberCapacity.from_lists("m", [node(f"n{i}", 8) for i in range(50)])
    record = dump_nodes(cap)
    assert len(record["kinds"]) == 1
    assert len(record["nodes"]) == 50
    assert record["nodes"][0] == {"name": "n0", "kind": 0, "identity": {"kubernetes.io/hostname": "n0"}}


def test_a_record_that_is_not_one_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="capacity record of m"):
        load_nodes("m", {"kinds": [], "nodes": [{"name": "x", "kind": 3}]})
