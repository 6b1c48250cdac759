"""Node-level gang fit on one member and the choice among members."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleet.ascend import NPU_RESOURCE
from fleet.placement import MemberCapacity, Placement, Placer, choose, fit_member
from fleet.policy import ClusterAffinity, LabelSelector
from tests.fleet.placement.factory import demand, job, node, pod


def _member(
    name: str, nodes: list[dict[str, Any]], pods: Sequence[dict[str, Any]] = (), **labels: str
) -> MemberCapacity:
    return MemberCapacity.from_lists(name, nodes, pods, labels)


def _member_of(placement: Placement | None) -> str | None:
    return None if placement is None else placement.member


def test_fragmented_member_fits_by_summed_capacity_but_not_per_node() -> None:
    # 16 nodes with one free NPU each: 16 free NPUs summed, but no node takes an 8-NPU pod.
    nodes = [node(f"n{i}", 8) for i in range(16)]
    pods = [pod(f"busy-{i}", f"n{i}", 7) for i in range(16)]
    cap = _member("m", nodes, pods)
    d = demand(job(workers=1, npus=8))
    assert cap.free_total(NPU_RESOURCE) == 16 >= d.npus == 16  # the summed rule says yes
    assert fit_member(cap, d) is None  # the node-level rule says no
    assert cap.class_count == 1  # sixteen nodes, one class: the fit costs one class


def test_one_pod_per_node_needs_as_many_nodes_as_pods() -> None:
    d = demand(job(workers=1, npus=2, exclusive=True))
    one_big = _member("m", [node("n0", 8, None)])
    assert fit_member(one_big, d) is None
    shared = demand(job(workers=1, npus=2, exclusive=False))
    placement = fit_member(one_big, shared)
    assert placement is not None and placement.takes == {"n0": {NPU_RESOURCE: 4, "pods": 2}}
    two = _member("m", [node("n0", 8, None), node("n1", 8, None)])
    placement = fit_member(two, d)
    assert placement is not None and sorted(placement.nodes) == ["n0", "n1"]


def test_npu_size_must_be_allowed_for_the_accelerator_type() -> None:
    # module (910 x8): since MindCluster 5.0.RC1 a distributed job's pods may take 1, 2, 4 or 8
    # NPUs a node (the affinity document), not only whole modules; 3 is never allowed.
    cap = _member("m", [node(f"n{i}", 8, "module") for i in range(4)])
    for npus in (1, 2, 4, 8):
        assert fit_member(cap, demand(job(workers=1, npus=npus))) is not None, npus
    assert fit_member(cap, demand(job(workers=1, npus=3))) is None
    assert fit_member(cap, demand(job(workers=0, npus=4))) is not None
    assert fit_member(cap, demand(job(workers=0, npus=3))) is None


def test_distributed_jobs_take_1_2_4_or_8_npus_a_node_on_910b_modules() -> None:
    # The misjudgement: 1/2/4/8 per node on module-910b-8, distributed.
    cap = _member("m", [node(f"n{i}", 8, "module-910b-8") for i in range(2)])
    for npus in (1, 2, 4, 8):
        d = demand(job(workers=1, npus=npus, selector={"accelerator-type": "module-910b-8"}))
        placement = fit_member(cap, d)
        assert placement is not None and sorted(placement.nodes) == ["n0", "n1"], npus


def test_one_npu_pods_fit_with_chip4_node8_and_chip8_node8() -> None:
    # C in chip<C>-node<N> is the hardware's interconnect group, not a request granularity.
    mesh = _member("m", [node("a", 8, "module"), node("b", 8, "module")])
    assert fit_member(mesh, demand(job(workers=1, npus=1, policy="chip4-node8"))) is not None
    a2 = _member("m", [node("a", 8, "module-910b-8"), node("b", 8, "module-910b-8")])
    assert fit_member(a2, demand(job(workers=1, npus=1, policy="chip8-node8"))) is not None


def test_schedule_policy_selects_its_hardware() -> None:
    cap = _member(
        "m",
        [
            node("a", 16, "module-910b-16"),
            node("b", 16, "module-910b-16"),
            node("c", 8, "module-910b-8"),
            node("d", 8, "module-910b-8"),
        ],
    )
    placement = fit_member(cap, demand(job(workers=1, npus=8, policy="chip8-node8")))
    assert placement is not None and sorted(placement.nodes) == ["c", "d"]
    placement = fit_member(cap, demand(job(workers=1, npus=4, policy="chip8-node8")))
    assert placement is not None and sorted(placement.nodes) == ["c", "d"]
    placement = fit_member(cap, demand(job(workers=1, npus=16, policy="chip8-node16")))
    assert placement is not None and sorted(placement.nodes) == ["a", "b"]
    # A value MindCluster does not know is ignored by its plugin, and so by Fleet (with a warning).
    unknown = demand(job(workers=1, npus=16, policy="chip16-node16"))
    assert "is not a schedule policy MindCluster knows" in unknown.hardware.warnings[0]
    placement = fit_member(cap, unknown)
    assert placement is not None and sorted(placement.nodes) == ["a", "b"]


def test_selector_taints_readiness_and_cordon_filter_nodes() -> None:
    taint = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}
    nodes = [
        node("tainted", 8, labels={"pool": "a"}, taints=[taint]),
        node("notready", 8, labels={"pool": "a"}, ready=False),
        node("cordoned", 8, labels={"pool": "a"}, cordoned=True),
        node("ok", 8, labels={"pool": "a"}),
        node("other", 8, labels={"pool": "b"}),
    ]
    cap = _member("m", nodes)
    assert fit_member(cap, demand(job(workers=1, npus=8, selector={"pool": "a"}))) is None
    tolerate = [{"key": "dedicated", "operator": "Exists"}]
    tolerant = demand(job(workers=1, npus=8, selector={"pool": "a"}, tolerations=tolerate))
    placement = fit_member(cap, tolerant)
    assert placement is not None and sorted(placement.nodes) == ["ok", "tainted"]
    # A PreferNoSchedule taint does not keep pods off.
    prefer = [{**taint, "effect": "PreferNoSchedule"}]
    soft = _member("m", [node(f"n{i}", 8, taints=prefer) for i in range(2)])
    assert fit_member(soft, demand(job(workers=1, npus=8))) is not None


def test_cpu_memory_and_pod_count_count_too() -> None:
    cap = _member("m", [node("n0", 8, cpu="4"), node("n1", 8, cpu="4")])
    assert fit_member(cap, demand(job(workers=1, npus=8, cpu="3"))) is not None
    assert fit_member(cap, demand(job(workers=1, npus=8, cpu="4500m"))) is None
    full = _member("m", [node("n0", 8, pods=1), node("n1", 8, pods=1)], [pod("x", "n0")])
    assert fit_member(full, demand(job(workers=1, npus=1, exclusive=False))) is None


def test_min_available_places_the_gang_not_every_pod() -> None:
    cap = _member("m", [node(f"n{i}", 8) for i in range(3)])
    assert fit_member(cap, demand(job(workers=4, npus=8))) is None
    placement = fit_member(cap, demand(job(workers=4, npus=8, min_available=3)))
    assert placement is not None and placement.pods == 3


def test_finished_and_unbound_pods_take_nothing() -> None:
    pods = [
        pod("done", "n0", 8, phase="Succeeded"),
        pod("failed", "n1", 8, phase="Failed"),
        pod("pending", None, 8, phase="Pending"),
    ]
    cap = _member("m", [node("n0", 8), node("n1", 8)], pods)
    assert fit_member(cap, demand(job(workers=1, npus=8))) is not None


def test_mixed_shapes_sharing_nodes_search_exactly() -> None:
    # Master takes 6 NPUs, the Worker 2; without anti-affinity they share one 8-NPU node.
    cap = _member("m", [node("n0", 8, None)])
    d = demand(job(workers=1, npus=2, master_npus=6, exclusive=False))
    placement = fit_member(cap, d)
    assert placement is not None and placement.takes == {"n0": {NPU_RESOURCE: 8, "pods": 2}}
    # Two 6-NPU Masters' worth does not: a 6 and a 4 on one 8-NPU node is over.
    assert fit_member(cap, demand(job(workers=1, npus=4, master_npus=6, exclusive=False))) is None


def test_hostname_selector_is_checked_per_node() -> None:
    cap = _member("m", [node(f"n{i}", 8) for i in range(4)])
    d = demand(job(workers=0, npus=8, selector={"kubernetes.io/hostname": "n2"}))
    placement = fit_member(cap, d)
    assert placement is not None and placement.nodes == ("n2",)


def test_pack_prefers_least_left_and_spread_the_most() -> None:
    small = _member("small", [node(f"s{i}", 8) for i in range(2)])
    big = _member("big", [node(f"b{i}", 8) for i in range(6)])
    tiny = _member("tiny", [node("t0", 8)])  # does not fit at all
    d = demand(job(workers=1, npus=8))
    placer = Placer()
    for cap in (small, big, tiny):
        placer.add_member(cap)
    assert sorted(placer.candidates(d)) == [("big", 32), ("small", 0)]
    pack, spread = placer.decide(d, strategy="pack"), placer.decide(d, strategy="spread")
    assert pack is not None and pack.member == "small" and pack.npus_left == 0
    assert spread is not None and spread.member == "big" and spread.npus_left == 32
    assert choose([("b", 4), ("a", 4), ("c", 9)], "pack") == "a"  # ties go by name
    assert choose([("b", 4), ("a", 4), ("c", 9)], "spread") == "c"


def test_cluster_affinity_and_exclusions_limit_members() -> None:
    placer = Placer()
    placer.add_member(_member("a", [node(f"a{i}", 8) for i in range(2)], region="east"))
    placer.add_member(_member("b", [node(f"b{i}", 8) for i in range(4)], region="west"))
    d = demand(job(workers=1, npus=8))
    assert _member_of(placer.decide(d)) == "a"
    assert _member_of(placer.decide(d, avoid={"a"})) == "b"
    west = ClusterAffinity(label_selector=LabelSelector(match_labels={"region": "west"}))
    assert _member_of(placer.decide(d, affinity=west)) == "b"
    assert placer.decide(d, affinity=ClusterAffinity(cluster_names=("a",)), avoid={"a"}) is None


def test_a_job_is_never_split_across_members() -> None:
    placer = Placer()
    placer.add_member(_member("a", [node("a0", 8)]))
    placer.add_member(_member("b", [node("b0", 8)]))
    assert placer.decide(demand(job(workers=1, npus=8))) is None
