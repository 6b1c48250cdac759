"""The member capacity summary: classes of interchangeable nodes, kept current event by event."""

from __future__ import annotations

from fleet.ascend import NPU_RESOURCE
from fleet.placement import MemberCapacity, explain_member, fit_member
from fleet.placement.capacity import GROUP_RESOURCE
from fleet.sim.jobs import build_pods
from fleet.sim.scheduler import schedule
from fleet.workloads import ascendjob
from tests.fleet.placement.factory import demand, job, node, pod


def _free(cap: MemberCapacity) -> list[tuple[int, int]]:
    """(free NPUs, nodes) per class, sorted."""
    return sorted((cls.available(NPU_RESOURCE), len(names)) for cls, names in cap.classes())


def test_identical_nodes_form_one_class_whatever_their_names() -> None:
    cap = MemberCapacity.from_lists("m", [node(f"n{i}", 8) for i in range(100)])
    assert cap.class_count == 1 and _free(cap) == [(8, 100)]
    assert cap.free_total(NPU_RESOURCE) == 800


def test_labels_taints_and_accelerator_type_split_classes() -> None:
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    cap = MemberCapacity.from_lists(
        "m",
        [
            node("a", 8),
            node("b", 8, labels={"pool": "x"}),
            node("c", 8, taints=[taint]),
            node("d", 8, "module"),
            node("e", 8),
        ],
    )
    assert cap.class_count == 4


def test_pod_events_move_one_node_between_classes() -> None:
    cap = MemberCapacity.from_lists("m", [node(f"n{i}", 8) for i in range(4)])
    version = cap.version
    cap.upsert_pod(pod("p", "n0", 6))
    assert cap.version != version
    assert _free(cap) == [(2, 1), (8, 3)]
    cap.upsert_pod(pod("p", "n0", 6, phase="Succeeded"))  # finished pods give their NPUs back
    assert _free(cap) == [(8, 4)]
    cap.upsert_pod(pod("q", "n1", 8))
    cap.remove_pod("default/q")  # deleted
    assert _free(cap) == [(8, 4)]
    cap.upsert_pod(pod("r", None, 8, phase="Pending"))  # not bound: takes nothing
    assert _free(cap) == [(8, 4)]


def test_pods_seen_before_their_node_still_count() -> None:
    cap = MemberCapacity("m")
    cap.upsert_pod(pod("p", "n0", 8))
    cap.upsert_node(node("n0", 8))
    assert _free(cap) == [(0, 1)]


def test_notready_cordoned_and_removed_nodes_do_not_count() -> None:
    cap = MemberCapacity.from_lists(
        "m", [node("a", 8), node("b", 8, ready=False), node("c", 8, cordoned=True)]
    )
    assert _free(cap) == [(8, 1)]
    cap.upsert_node(node("b", 8))  # Ready again
    assert _free(cap) == [(8, 2)]
    cap.remove_node("a")
    assert _free(cap) == [(8, 1)] and cap.free_total(NPU_RESOURCE) == 8


def test_holds_are_laid_over_live_usage() -> None:
    cap = MemberCapacity.from_lists("m", [node("a", 8), node("b", 8)], [pod("p", "a", 2)])
    cap.set_held({"a": {NPU_RESOURCE: 4}, "b": {NPU_RESOURCE: 8}})
    assert _free(cap) == [(0, 1), (2, 1)]
    assert cap.unheld_free("a")[NPU_RESOURCE] == 6  # the basis a reservation is checked against
    cap.set_held({})
    assert _free(cap) == [(6, 1), (8, 1)]


def test_holds_laid_on_some_nodes_leave_the_others_as_they_were() -> None:
    cap = MemberCapacity.from_lists("m", [node("a", 8), node("b", 8), node("c", 8)])
    cap.set_held({"a": {NPU_RESOURCE: 4}, "b": {NPU_RESOURCE: 8}})
    before = cap.version
    cap.set_held_on({"b": {NPU_RESOURCE: 0}, "c": {NPU_RESOURCE: 2}})  # b's hold ended, c got one
    assert _free(cap) == [(4, 1), (6, 1), (8, 1)]
    assert cap.held("a") == {NPU_RESOURCE: 4} and cap.held("b") == {}
    assert cap.version > before  # a fit decided before this is decided again
    unchanged = cap.version
    cap.set_held_on({"a": {NPU_RESOURCE: 4}})
    assert cap.version == unchanged


def _annotated(name: str, node_name: str, ids: list[int]) -> dict[str, object]:
    """A bound pod with the NPU ids the volcano plugin wrote on it."""
    obj = pod(name, node_name, len(ids))
    obj["metadata"]["annotations"] = {NPU_RESOURCE: ",".join(f"Ascend910-{i}" for i in ids)}
    return obj


def test_free_npus_per_hccs_ring_come_from_the_pods_device_annotations() -> None:
    # A 910 module: rings 0-3 and 4-7. One NPU taken in each ring leaves 3 + 3: six NPUs free,
    # yet no ring can serve a 4-NPU pod, and two 2-NPU pods fit (one per ring).
    cap = MemberCapacity.from_lists("m", [node("a", 8, "module")], [_annotated("p", "a", [0, 4])])
    [(cls, _)] = list(cap.classes())
    assert cls.available(NPU_RESOURCE) == 6 and cls.groups == (3, 3)
    assert fit_member(cap, demand(job(workers=0, npus=4, exclusive=False))) is None
    assert explain_member(cap, demand(job(workers=0, npus=4, exclusive=False))) == (
        f"no node has 4 free {NPU_RESOURCE} within the HCCS rings or HiAM pairs a Master pod needs "
        "(most free on one node: 6, split across them)"
    )
    assert fit_member(cap, demand(job(workers=1, npus=2, exclusive=False))) is not None
    # The same six free NPUs in one ring and two in the other: the 4-NPU pod fits.
    packed = MemberCapacity.from_lists("m", [node("a", 8, "module")], [_annotated("p", "a", [0, 1])])
    assert next(iter(packed.classes()))[0].groups == (2, 4)
    assert fit_member(packed, demand(job(workers=0, npus=4, exclusive=False))) is not None


def test_the_simulator_judges_the_same_ring_state_on_its_own() -> None:
    nodes = [node("a", 8, "module")]
    split = [_annotated("p", "a", [0, 4])]
    four = build_pods(ascendjob.member_copy(job(workers=0, npus=4, exclusive=False), "u", 1))
    result = schedule(nodes, split, four)
    assert not result.fits and "HCCS ring" in result.message
    two = build_pods(ascendjob.member_copy(job(workers=1, npus=2, exclusive=False), "u", 1))
    bound = schedule(nodes, split, two)
    assert bound.fits and sorted(bound.devices.values()) == [(1, 2), (5, 6)]


def test_a_hold_takes_npus_of_the_ring_the_member_will_use() -> None:
    cap = MemberCapacity.from_lists("m", [node("a", 8, "module")], [_annotated("p", "a", [0, 1, 2])])
    placement = fit_member(cap, demand(job(workers=0, npus=1, exclusive=False)))
    # MindCluster's order for one NPU: a ring with 1 free first (ring 0 here), then 3, 2, 4.
    assert placement is not None and placement.takes["a"][f"{GROUP_RESOURCE}0"] == 1
