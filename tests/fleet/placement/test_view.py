"""The capacity view of a member: per accelerator type, what placement sees as free."""

from __future__ import annotations

from fleet.placement.capacity import MemberCapacity
from fleet.placement.view import capacity_view
from tests.fleet.placement.factory import node, pod


def test_free_and_allocatable_per_accelerator_type_and_nodes_by_free_npus() -> None:
    cap = MemberCapacity.from_lists(
        "m",
        [
            node("a1", 8, cpu="188", memory="1500Gi"),
            node("a2", 8, cpu="188", memory="1500Gi"),
            node("a3", 8, cpu="188", memory="1500Gi", ready=False),
            node("c1", 2, "card-910b-2", cpu="60", memory="240Gi"),
            node("cpu1", 0, None, cpu="32", memory="64Gi"),
        ],
        [
            pod("p1", "a1", 8, cpu="20"),
            pod("p2", "a2", 3),
            pod("done", "a2", 5, phase="Succeeded"),  # finished: holds nothing
            pod("pending", None, 8),  # not bound: holds nothing
        ],
    )
    view = {a["type"]: a for a in capacity_view(cap)["accelerators"]}
    assert sorted(view) == ["card-910b-2", "module-910b-8", "none"]
    module = view["module-910b-8"]
    assert (module["nodes"], module["usableNodes"]) == (3, 2)
    assert module["allocatable"] == {"cpu": "564", "huawei.com/Ascend910": "24", "memory": "4500Gi"}
    # The NotReady node offers nothing; a1 is full, a2 has 5 NPUs left.
    assert module["free"] == {"cpu": "356", "huawei.com/Ascend910": "5", "memory": "3000Gi"}
    assert (module["allocatableNPUs"], module["freeNPUs"]) == (24, 5)
    assert module["nodesByFreeNPUs"] == {"5": 1, "0": 1}
    assert view["card-910b-2"]["nodesByFreeNPUs"] == {"2": 1}
    assert view["none"]["free"] == {"cpu": "32", "memory": "64Gi"}
    assert view["none"]["freeNPUs"] == 0


def test_held_capacity_is_not_free() -> None:
    cap = MemberCapacity.from_lists("m", [node("a1", 8), node("a2", 8)])
    cap.set_held({"a1": {"huawei.com/Ascend910": 8}})
    [module] = capacity_view(cap)["accelerators"]
    assert module["freeNPUs"] == 8
    assert module["nodesByFreeNPUs"] == {"8": 1, "0": 1}
