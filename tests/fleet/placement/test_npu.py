"""Which hardware a job means, and which of a node's interconnect groups serve its pods."""

from __future__ import annotations

import pytest

from fleet.ascend import (
    A3_16,
    MESH_4P_8,
    MODULE_910,
    MODULE_910B_8,
    MODULE_910B_16,
    SCHEDULE_POLICIES,
    SOFT_SHARE,
)
from fleet.placement import MemberCapacity, fit_member
from fleet.placement.npu import NpuRuleError, job_hardware, pods_fit, rule_failure, take
from tests.fleet.placement.factory import demand, job, node

SHARE_LABELS = {
    "huawei.com/scheduler.softShareDev.aicoreQuota": "50",
    "huawei.com/scheduler.softShareDev.hbmQuota": "2048",
    "huawei.com/scheduler.softShareDev.policy": "fixed-share",
}


def test_every_schedule_policy_mindcluster_defines_is_known() -> None:
    # common/util/constants.go, "value of schedule_policy annotation", plus SchedulePolicyA3x16.
    assert set(SCHEDULE_POLICIES) == {
        "chip1-node2", "chip4-node4", "chip8-node8", "chip8-node16", "chip2-node16", "chip2-node16-sp",
        "chip2-node8", "chip2-node8-sp", "chip4-node8", "chip4-node16", "chip1-node8", "chip1-node16",
        "chip8-node8-sp", "chip8-node8-ra64-sp", "chip1-softShareDev", "multilevel", "module-a3-16",
    }  # fmt: skip


def test_the_policy_wins_then_the_selector_then_the_family_label() -> None:
    by_policy = job_hardware({"huawei.com/schedule_policy": "chip8-node16"}, {}, [{}], [8])
    # The policy picks the handler's rules, never node types (see test_a_policy_selects_rules_not_nodes).
    assert by_policy.hardware is MODULE_910B_16 and by_policy.types is None
    by_selector = job_hardware({}, {}, [{"accelerator-type": "module"}], [4, 4])
    assert by_selector.hardware is MODULE_910 and by_selector.warnings == ()
    by_family = job_hardware({}, {"ring-controller.atlas": "ascend-910b"}, [{}], [1])
    assert by_family.hardware is None and by_family.types is not None
    assert "module-910b-8" in by_family.types and "module" not in by_family.types
    none = job_hardware({}, {}, [{}], [1])
    assert none.types is None and "names no accelerator-type" in none.warnings[0]


def test_910_and_910b_jobs_do_not_land_on_each_other_s_nodes() -> None:
    cap = MemberCapacity.from_lists("m", [node("old", 8, "module"), node("new", 8, "module-910b-8")])
    for family, where in (("ascend-910", "old"), ("ascend-910b", "new")):
        placement = fit_member(cap, demand(job(workers=0, npus=2, family=family)))
        assert placement is not None and placement.nodes == (where,), family
    # A policy beside a selector of other hardware: the policy's rules on the selected nodes, as
    # the plugin applies them (it never compares the two).
    both = demand(job(workers=0, npus=1, policy="chip8-node8", selector={"accelerator-type": "module"}))
    assert both.hardware.warnings == ()
    placement = fit_member(cap, both)
    assert placement is not None and placement.nodes == ("old",)


def test_a_policy_selects_rules_not_nodes() -> None:
    """MindCluster's ascend-for-volcano plugin (factory.go get910CardHandlerName, base/frame.go
    CheckNodeNPUByTask, base/node.go GetUsableTopFromNode): a schedule policy picks a handler and
    no handler compares the node's accelerator-type; a node is refused only when it offers more
    NPUs than the handler's MaxNodeNPUNum."""
    # chip1-node2 is the card handler (card910x2): card-910b-2 nodes serve it.
    cards = MemberCapacity.from_lists("m", [node("c0", 2, "card-910b-2"), node("c1", 2, "card-910b-2")])
    placement = fit_member(cards, demand(job(workers=1, npus=2, policy="chip1-node2")))
    assert placement is not None and sorted(placement.nodes) == ["c0", "c1"]
    # chip4-node8 (chip4nodex, 4-NPU meshes, at most 8 a node) on a 910B x8 node: taken, by mesh.
    a2 = MemberCapacity.from_lists("m", [node("a2", 8, "module-910b-8")])
    assert fit_member(a2, demand(job(workers=0, npus=4, policy="chip4-node8"))) is not None
    # chip8-node8 (module910bx8: base handler, at most 8) on a 910 module node: taken, any NPUs.
    old = MemberCapacity.from_lists("m", [node("m0", 8, "module")])
    assert fit_member(old, demand(job(workers=0, npus=3, policy="chip8-node8"))) is not None
    # ... where the module's own rules refuse 3 NPUs.
    with pytest.raises(NpuRuleError, match=r"3 huawei\.com/Ascend910 per pod is not allowed"):
        job_hardware({}, {}, [{"accelerator-type": "module"}], [3])
    # A 16-NPU node is larger than either handler takes.
    x16 = MemberCapacity.from_lists("m", [node("x", 16, "module-910b-16")])
    for policy in ("chip4-node8", "chip8-node8", "chip1-node2"):
        read = demand(job(workers=0, npus=2, policy=policy)).hardware
        assert rule_failure(read, 2, 1, {"accelerator-type": "module-910b-16"}, 16) is not None, policy
        assert fit_member(x16, demand(job(workers=0, npus=2, policy=policy))) is None, policy


def test_soft_share_needs_its_labels_and_warns_when_the_request_differs() -> None:
    policy = {"huawei.com/schedule_policy": "chip1-softShareDev"}
    with pytest.raises(NpuRuleError, match="aicoreQuota: is required"):
        job_hardware(policy, {}, [{}], [50])
    bad = {**SHARE_LABELS, "huawei.com/scheduler.softShareDev.policy": "greedy"}
    with pytest.raises(NpuRuleError, match="must be one of best-effort, elastic, fixed-share"):
        job_hardware(policy, bad, [{}], [50])
    read = job_hardware(policy, SHARE_LABELS, [{}], [30])
    assert read.hardware is SOFT_SHARE and "MindCluster says they must agree" in read.warnings[0]
    shared = {"accelerator-type": "module-910b-8", "huawei.com/scheduler.chip1softsharedev.enable": "true"}
    assert rule_failure(read, 30, 1, shared, 800) is None
    plain = job_hardware({}, {}, [{}], [1])
    assert "serve schedule policy chip1-softShareDev only" in (rule_failure(plain, 1, 1, shared, 800) or "")


def test_vnpu_and_310p_requests_are_not_npu_counts() -> None:
    cap = MemberCapacity.from_lists("m", [node("a", 0, None, labels={"pool": "infer"})])
    obj = job(workers=0, npus=0)
    container = obj["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    container["resources"] = {
        "requests": {"huawei.com/npu-core": "8"},
        "limits": {"huawei.com/npu-core": "8"},
    }
    d = demand(obj)
    assert d.npu_pods == 0 and d.hardware.warnings == ()
    assert fit_member(cap, d) is None  # the node offers no npu-core: a plain resource shortfall


def test_910_rings_follow_mindcluster_s_order() -> None:
    # One NPU: a ring with 1 free, then 3, then 2, then 4 (the affinity document's table).
    assert take(MODULE_910, [4, 3], 1) == [0, 1]
    assert take(MODULE_910, [2, 4], 1) == [1, 0]
    assert take(MODULE_910, [2, 4], 2) == [2, 0]
    assert take(MODULE_910, [3, 3], 4) is None
    assert take(MODULE_910, [4, 4], 8) == [4, 4]
    assert pods_fit(MODULE_910, (3, 3), 2, 10) == 2


def test_910b_16_splits_10_12_14_evenly_and_a3_takes_whole_pairs() -> None:
    assert take(MODULE_910B_16, [8, 8], 12) == [6, 6]
    assert take(MODULE_910B_16, [8, 5], 12) is None
    assert take(MODULE_910B_16, [7, 8], 8) == [0, 8]
    assert take(A3_16, [1, 2, 2, 0, 0, 0, 0, 0], 4) == [0, 2, 2, 0, 0, 0, 0, 0]
    assert take(A3_16, [1, 2, 1, 0, 0, 0, 0, 0], 4) is None
    assert take(A3_16, [2, 1, 2, 0, 0, 0, 0, 0], 1) == [0, 1, 0, 0, 0, 0, 0, 0]
    assert take(MESH_4P_8, [4, 1], 1) == [0, 1]
    assert take(MODULE_910B_8, [], 8) == []


def test_multilevel_has_no_node_rule_of_its_own() -> None:
    read = job_hardware(
        {"huawei.com/schedule_policy": "multilevel"}, {}, [{"accelerator-type": "module"}], [2]
    )
    assert read.hardware is MODULE_910 and read.types == frozenset({"module"})
    assert read.types_from == "the pods' nodeSelector"
