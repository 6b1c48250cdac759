"""Pinned member copies bind on the nodes Fleet reserved, even when the member changed meanwhile."""

from __future__ import annotations

from fleet.placement import MemberCapacity, fit_member
from fleet.sim.jobs import build_pods
from fleet.sim.scheduler import schedule
from fleet.workloads import ascendjob
from tests.fleet.placement.factory import job, node, pod


def test_a_pinned_copy_binds_on_the_planned_nodes_only() -> None:
    nodes = [node(f"n{i}", 8, None) for i in range(4)]
    busy = [pod("old", "n3", 6)]  # n3 has 2 free: the best fit for a 2-NPU pod
    obj = job("j", workers=1, npus=2, exclusive=True)
    placement = fit_member(MemberCapacity.from_lists("m", nodes, busy), ascendjob.demand(obj))
    assert placement is not None
    plan = placement.nodes_by_replica_type()
    # The plan is what the member scheduler itself picks: best fit first.
    assert plan == {"Master": ["n3"], "Worker": ["n0"]}
    as_is = schedule(nodes, busy, build_pods(ascendjob.member_copy(obj, "uid", 0)))
    assert sorted(as_is.bindings.values()) == ["n0", "n3"]
    # Before the pods bind, the old pod finishes and another job takes n0: the member changed.
    now = [pod("other", "n0", 8)]
    free = schedule(nodes, now, build_pods(ascendjob.member_copy(obj, "uid", 0)))
    assert free.fits and set(free.bindings.values()) != {"n3", "n0"}  # unpinned: bound elsewhere
    pinned = ascendjob.member_copy(obj, "uid", 0, pin=plan)
    result = schedule(nodes, now, build_pods(pinned))
    assert not result.fits  # pinned: it waits for its own nodes instead of taking others' holds
    result = schedule(nodes, [], build_pods(pinned))
    assert result.fits and sorted(result.bindings.values()) == ["n0", "n3"]


def test_pinning_keeps_the_users_own_node_affinity() -> None:
    obj = job("j", workers=1, npus=8)
    tpl = obj["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]
    term = {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}
    tpl["affinity"]["nodeAffinity"] = {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
    }
    body = ascendjob.member_copy(obj, "uid", 1, pin={"Worker": ["n1"], "Master": ["n0"]})
    worker = body["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["affinity"]["nodeAffinity"]
    assert worker["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {**term, "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    ]
    master = body["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["affinity"]["nodeAffinity"]
    assert master["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n0"]}]}
    ]
    assert "nodeAffinity" not in obj["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["affinity"]
