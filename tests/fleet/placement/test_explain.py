"""Per-member reasons when a job fits nowhere: the nearest miss, in words a user acts on."""

from __future__ import annotations

import copy

from fleet.ascend import NPU_RESOURCE
from fleet.placement import (
    NEVER,
    MemberCapacity,
    Placer,
    explain_member,
    explain_members,
    fit_member,
    never_fits,
)
from fleet.policy import ClusterAffinity
from tests.fleet.placement.factory import demand, job, node, pod, sample_job


def test_too_few_nodes_for_one_pod_per_node() -> None:
    cap = MemberCapacity.from_lists("member-2", [node("a", 8), node("b", 8)], [pod("p", "b", 8)])
    assert explain_member(cap, demand(job(workers=1, npus=8))) == (
        f"1 node has 8 free {NPU_RESOURCE} but the job needs 2 nodes (one pod per node)"
    )


def test_no_node_with_enough_free_names_the_best_there_is() -> None:
    nodes = [node(f"n{i}", 8) for i in range(16)]
    cap = MemberCapacity.from_lists("m", nodes, [pod(f"p{i}", f"n{i}", 7) for i in range(16)])
    assert explain_member(cap, demand(job(workers=1, npus=8))) == (
        f"no node has 8 free {NPU_RESOURCE} for a Master/Worker pod (most free on one node: 1)"
    )


def test_selector_names_the_label_no_node_has() -> None:
    cap = MemberCapacity.from_lists("member-3", [node("a", 8, "module")])
    assert explain_member(cap, demand(job(selector={"accelerator-type": "card-910b-2"}))) == (
        "no node matches accelerator-type=card-910b-2"
    )


def test_npu_size_not_allowed_on_the_accelerator_type() -> None:
    cap = MemberCapacity.from_lists("member-1", [node("a", 8, "module")])
    assert explain_member(cap, demand(job(workers=0, npus=3))) == (
        "3 NPUs per pod is not allowed on Atlas 800 training server (910, module) for a single-pod job "
        "(allowed: 1, 2, 4, 8)"
    )


def test_schedule_policy_names_its_rules_and_largest_node() -> None:
    # chip8-node8 is MindCluster's module910bx8 handler: its rules on any node of at most 8 NPUs
    # (the node's accelerator-type is never compared), so 2-NPU cards and a 4-NPU node serve it.
    cap = MemberCapacity.from_lists("m", [node("a", 2, "card-910b-2"), node("b", 2, "card-910b-2")])
    assert fit_member(cap, demand(job(workers=0, npus=2, policy="chip8-node8"))) is not None
    big = MemberCapacity.from_lists("m", [node("a", 16, "module-910b-16")])
    assert explain_member(big, demand(job(workers=0, npus=2, policy="chip8-node8"))) == (
        "schedule policy chip8-node8 (Atlas 800T A2 (910B x8)) takes nodes of at most 8 NPUs "
        "(MindCluster's MaxNodeNPUNum), these have 16"
    )


def test_untolerated_taint_and_unusable_nodes() -> None:
    taint = {"key": "dedicated", "value": "infer", "effect": "NoExecute"}
    tainted = MemberCapacity.from_lists("m", [node("a", 8, taints=[taint])])
    assert explain_member(tainted, demand(job(workers=0))) == (
        "1 node has the labels but the taint dedicated=infer:NoExecute that the Master pods do not tolerate"
    )
    down = MemberCapacity.from_lists("m", [node("a", 8, ready=False), node("b", 8, cordoned=True)])
    assert (
        explain_member(down, demand(job(workers=0))) == "no usable node (2 nodes, all NotReady or cordoned)"
    )


def test_holds_that_make_the_difference_are_named() -> None:
    placer = Placer()
    placer.add_member(MemberCapacity.from_lists("m", [node("a", 8), node("b", 8)]))
    d = demand(job(workers=1, npus=8))
    assert placer.place(d, reservation_id="u/1", job="default/first") is not None
    assert placer.explain(d) == [
        f"m: no node has 8 free {NPU_RESOURCE} for a Master/Worker pod (most free on one node: 0) "
        f"(16 {NPU_RESOURCE} held for jobs being dispatched)"
    ]


def test_seed_placeholder_selector_fits_nowhere_and_says_so() -> None:
    seed = sample_job()
    for spec in seed["spec"]["replicaSpecs"].values():
        spec["template"]["spec"]["nodeSelector"] = {"example-key": "example-value"}
    members = [
        MemberCapacity.from_lists("member-1", [node("a", 8, "module-910b-8")]),
        MemberCapacity.from_lists("member-2", [node(f"b{i}", 2, "card-910b-2") for i in range(4)]),
    ]
    assert explain_members(members, demand(seed)) == [
        f"member-1: {NEVER}: no node matches example-key=example-value",
        f"member-2: {NEVER}: no node matches example-key=example-value",
    ]
    # The sample itself fits member-2 only.
    lines = explain_members(members, demand(copy.deepcopy(sample_job())))
    assert lines == [f"member-1: {NEVER}: no node matches accelerator-type=card-910b-2", "member-2: fits"]


def test_excluded_and_avoided_members_say_why() -> None:
    members = [MemberCapacity.from_lists(n, [node(f"{n}-a", 8)]) for n in ("a", "b")]
    lines = explain_members(
        members, demand(job(workers=0)), affinity=ClusterAffinity(exclude=("a",)), avoid={"b"}
    )
    assert lines == ["a: excluded by the cluster affinity", "b: avoided (the job failed there recently)"]


def test_a_member_that_is_full_now_is_told_from_one_that_never_fits() -> None:
    full = MemberCapacity.from_lists(
        "member-1", [node("a", 8, "module-910b-8")], [pod("busy", "a", 8, namespace="other")]
    )
    cards = MemberCapacity.from_lists("member-2", [node(f"b{i}", 2, "card-910b-2") for i in range(4)])
    eight = demand(job(workers=0, npus=8))
    lines = explain_members([full, cards], eight)
    # member-1 would take it once its pod ends; member-2's 2-NPU nodes never.
    assert lines == [
        f"member-1: no node has 8 free {NPU_RESOURCE} for a Master pod (most free on one node: 0)",
        f"member-2: {NEVER}: no node has 8 free {NPU_RESOURCE} for a Master pod (most free on one node: 2)",
    ]
    assert not never_fits(lines)
    # Nine NPUs a pod: no node of either member has nine, however empty.
    nine = explain_members([full, cards], demand(job(workers=0, npus=9)))
    assert never_fits(nine) and all(NEVER in line for line in nine)
