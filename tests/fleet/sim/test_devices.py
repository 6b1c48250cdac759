"""The simulated member's own NPU id choice (fleet/sim/devices.py), as the volcano plugin makes it."""

from __future__ import annotations

from fleet.sim.devices import handler_for, mask_of, node_devices, pick, policy_reason, size_reason, take

MODULE = handler_for(None, None, {"accelerator-type": "module"})
X16 = handler_for(None, "module-910b-16", {})
A3 = handler_for("chip2-node16", None, {})
SHARE = handler_for("chip1-softShareDev", None, {})


def _free(size: int, used: tuple[int, ...]) -> int:
    return node_devices(False, size) & ~mask_of(used)


def test_910_module_ids_stay_inside_one_hccs_ring() -> None:
    assert MODULE is not None
    # Ring 0 has 1 free (3 used), ring 1 all 4: one NPU goes to ring 0 (1 free first).
    assert pick(MODULE, _free(8, (0, 1, 2)), 1, 8) == (3,)
    # Two NPUs: a ring with 2 free, then 4, then 3.
    assert pick(MODULE, _free(8, (0, 1)), 2, 8) == (2, 3)
    assert pick(MODULE, _free(8, (0, 4)), 4, 8) is None
    assert pick(MODULE, _free(8, ()), 8, 8) == tuple(range(8))
    assert size_reason(MODULE, 3, 1) is not None and size_reason(MODULE, 4, 2) is None


def test_910b_16_rings_and_the_even_split() -> None:
    assert X16 is not None
    assert pick(X16, _free(16, ()), 12, 16) == (0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13)
    assert pick(X16, _free(16, (0, 1, 2)), 12, 16) is None
    assert pick(X16, _free(16, (0,)), 8, 16) == tuple(range(8, 16))


def test_a3_pairs_and_soft_share_units() -> None:
    assert A3 is not None and SHARE is not None
    assert pick(A3, _free(16, (0, 3)), 4, 16) == (4, 5, 6, 7)
    assert pick(A3, _free(16, (0,)), 1, 16) == (1,)  # the open die first: whole pairs stay whole
    state = node_devices(True, 200)  # two chips of 100 units
    chip = pick(SHARE, state, 60, 200, share=True)
    assert chip == (0,)
    state = take(state, chip, 60, +1, share=True)
    assert pick(SHARE, state, 60, 200, share=True) == (1,)
    assert pick(SHARE, state, 40, 200, share=True) == (0,)


def test_a_policy_serves_any_node_up_to_its_size_and_soft_share_nodes_serve_it_only() -> None:
    # The plugin's handlers never read the node's accelerator-type; MaxNodeNPUNum bounds the node.
    assert policy_reason("chip8-node8", {"accelerator-type": "module"}, 8) is None
    assert policy_reason("chip8-node8", {"accelerator-type": "module-910b-8"}, 8) is None
    assert policy_reason("chip8-node8", {"accelerator-type": "module-910b-16"}, 16) is not None
    assert policy_reason("chip1-node2", {"accelerator-type": "card-910b-2"}, 2) is None
    assert policy_reason("chip4-node8", {"accelerator-type": "module-910b-8"}, 8) is None
    shared = {"huawei.com/scheduler.chip1softsharedev.enable": "true"}
    assert policy_reason(None, shared, 800) == "node(s) offer soft-shared NPUs only"
    assert policy_reason("chip1-softShareDev", shared, 800) is None
