"""The simulated gang scheduler: exact, all-or-nothing, and it says why a gang waits."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.sim.predicates import PodInfo, pod_info
from fleet.sim.scheduler import Cluster, schedule, schedule_pods
from tests.fleet.sim.builders import bound, node, pods_of, sample_job, simple_job

CARD_NODES = [
    node(f"card-{i}", npus=2, accelerator_type="card-910b-2", cpu="60", memory="240Gi") for i in range(4)
]


def test_sample_job_binds_on_two_of_four_card_nodes_one_pod_per_node() -> None:
    others = [node(f"x86-{i}", labels={"host-arch": "huawei-x86"}) for i in range(2)]
    result = schedule([*others, *CARD_NODES], [], pods_of(sample_job()))
    assert result.fits
    assert set(result.bindings) == {"default-test-pytorch-master-0", "default-test-pytorch-worker-0"}
    used = list(result.bindings.values())
    assert len(set(used)) == 2
    assert set(used) <= {n["metadata"]["name"] for n in CARD_NODES}


def test_sample_job_never_shares_a_node_even_when_npus_would_allow_it() -> None:
    big_card = node("card-big", npus=4, accelerator_type="card-910b-2")
    result = schedule([big_card], [], pods_of(sample_job()))
    assert not result.fits
    assert result.bindings == {}
    assert "didn't match pod anti-affinity rules" in result.message


def test_sample_job_waits_when_only_one_card_node_is_free() -> None:
    blockers = [bound(p, f"card-{i}") for i, p in enumerate(pods_of(simple_job("busy", workers=3, npus=2)))]
    result = schedule(CARD_NODES, blockers, pods_of(sample_job()))
    assert not result.fits
    assert "at most 1 do" in result.message
    assert "4 Insufficient huawei.com/Ascend910 (card-0, card-1, card-2, ...)" in result.message


def test_three_npus_per_pod_on_a_module_pool_stays_pending_and_says_why() -> None:
    module = [node(f"m-{i}", accelerator_type="module") for i in range(4)]
    result = schedule(module, [], pods_of(simple_job("three", workers=2, npus=3)))
    assert not result.fits
    assert "0/4 nodes are available" in result.message
    assert (
        "handler module takes 1, 2, 4, 8 huawei.com/Ascend910 per pod of a 2-pod job, not 3" in result.message
    )
    single = schedule(module, [], pods_of(simple_job("one", workers=1, npus=3)))
    assert "takes 1, 2, 4, 8 huawei.com/Ascend910 per pod of a single-pod job, not 3" in single.message


def test_taints_exclude_nodes_unless_tolerated() -> None:
    taint = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}
    nodes = [node("t-0", taints=[taint]), node("t-1", taints=[taint])]
    pending = schedule(nodes, [], pods_of(simple_job("j", workers=2)))
    assert not pending.fits
    assert "2 node(s) had untolerated taint {dedicated: infer} (t-0, t-1)" in pending.message
    toleration = {"key": "dedicated", "operator": "Equal", "value": "infer", "effect": "NoSchedule"}
    assert schedule(nodes, [], pods_of(simple_job("j", workers=2, tolerations=[toleration]))).fits
    soft = [node("s-0", taints=[{"key": "k", "value": "v", "effect": "PreferNoSchedule"}])]
    assert schedule(soft, [], pods_of(simple_job("j"))).fits


def test_cordoned_and_not_ready_nodes_take_no_pods() -> None:
    nodes = [node("ok-0"), node("cordoned", unschedulable=True), node("down", ready=False)]
    result = schedule(nodes, [], pods_of(simple_job("j", workers=2)))
    assert not result.fits
    assert "1 node(s) were unschedulable (cordoned)" in result.message
    assert "1 node(s) were not ready (down)" in result.message
    assert schedule(nodes, [], pods_of(simple_job("k", workers=1))).bindings == {"k-worker-0": "ok-0"}


def test_node_selector_mismatch_is_explained() -> None:
    nodes = [node("arm-0"), node("x86-0", labels={"host-arch": "huawei-x86"})]
    job = simple_job("j", workers=2, node_selector={"host-arch": "huawei-x86"})
    result = schedule(nodes, [], pods_of(job))
    assert not result.fits
    assert "1 node(s) didn't match Pod's node affinity/selector (arm-0)" in result.message


def test_cpu_and_memory_shortfalls_are_per_node_not_summed() -> None:
    nodes = [node(f"n-{i}", cpu="8", memory="64Gi") for i in range(4)]
    cpu_job = simple_job("cpu", workers=1, npus=0, cpu="10", anti_affinity=False)
    result = schedule(nodes, [], pods_of(cpu_job))
    assert not result.fits  # 32 cpus in all, but no node has 10
    assert "4 Insufficient cpu" in result.message
    memory = schedule(nodes, [], pods_of(simple_job("mem", npus=0, memory="100Gi")))
    assert "4 Insufficient memory" in memory.message
    assert schedule(nodes, [], pods_of(simple_job("fits", workers=4, npus=0, cpu="8", memory="64Gi"))).fits


def test_gang_is_all_or_nothing() -> None:
    nodes = [node(f"n-{i}") for i in range(4)]
    running = [bound(p, f"n-{i}") for i, p in enumerate(pods_of(simple_job("old", workers=2)))]
    result = schedule(nodes, running, pods_of(simple_job("new", workers=3)))
    assert result.bindings == {}
    assert "gang of all 3 pods does not fit at once (at most 2 do)" in result.message
    assert schedule(nodes, running, pods_of(simple_job("two", workers=2))).fits


def test_finished_pods_free_their_node() -> None:
    nodes = [node("n-0")]
    done = [bound(p, "n-0", phase="Succeeded") for p in pods_of(simple_job("old"))]
    assert schedule(nodes, done, pods_of(simple_job("new"))).bindings == {"new-worker-0": "n-0"}
    still = [bound(p, "n-0") for p in pods_of(simple_job("old"))]
    assert not schedule(nodes, still, pods_of(simple_job("new"))).fits


def test_min_available_binds_the_part_of_the_gang_that_fits() -> None:
    nodes = [node(f"n-{i}") for i in range(2)]
    job = simple_job("j", workers=3)
    job["spec"]["runPolicy"] = {"schedulingPolicy": {"minAvailable": 2}}
    result = schedule(nodes, [], pods_of(job), min_available=2)
    assert sorted(result.bindings) == ["j-worker-0", "j-worker-1"]
    assert not schedule(nodes[:1], [], pods_of(job), min_available=2).fits


def test_search_is_exact_where_best_fit_decreasing_is_not() -> None:
    # Two 10-NPU nodes, pods of 5, 4, 3, 3, 3 and 2 NPUs: only {5, 3, 2} + {4, 3, 3} works.
    nodes = [node(f"n-{i}", npus=10, accelerator_type=None) for i in range(2)]
    pods = []
    for size, count in ((5, 1), (4, 1), (3, 3), (2, 1)):
        pods += pods_of(simple_job(f"p{size}", workers=count, npus=size, anti_affinity=False))
    result = schedule(nodes, [], pods)
    assert len(result.bindings) == 6
    for name in ("n-0", "n-1"):
        assert sum(int(p.split("-")[0][1:]) for p, n in result.bindings.items() if n == name) == 10


def test_schedule_policy_annotation_limits_the_node_size_not_its_label() -> None:
    job = sample_job()
    job["metadata"]["annotations"] = {"huawei.com/schedule_policy": "chip8-node8"}
    assert schedule(CARD_NODES, [], pods_of(job)).fits  # cards of 2 NPUs: at most 8, any label
    big = [
        node(f"n-{i}", npus=16, accelerator_type="card-910b-2", cpu="60", memory="240Gi") for i in range(4)
    ]
    result = schedule(big, [], pods_of(job))
    assert not result.fits
    assert "didn't match huawei.com/schedule_policy chip8-node8" in result.message


def test_bound_pods_of_the_same_job_count_for_anti_affinity() -> None:
    master, worker = pods_of(sample_job())
    result = schedule(CARD_NODES[:2], [bound(master, "card-0")], [worker])
    assert result.bindings == {"default-test-pytorch-worker-0": "card-1"}


def test_a_hundred_node_member_takes_one_pod_per_node_up_to_its_size() -> None:
    nodes = [node(f"n-{i:03}") for i in range(100)]
    result = schedule(nodes, [], pods_of(simple_job("wide", workers=64)))
    assert len(set(result.bindings.values())) == 64
    pending = schedule(nodes, [], pods_of(simple_job("too-wide", workers=101)))
    assert not pending.fits
    assert "at most 100 do" in pending.message


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["bind", "unbind"]),
            st.integers(0, 3),  # job shape
            st.booleans(),  # anti-affinity (one pod per node)
            st.integers(1, 3),  # workers
        ),
        min_size=1,
        max_size=25,
    )
)
def test_a_cluster_kept_across_binds_and_unbinds_decides_as_one_rebuilt(
    steps: list[tuple[str, int, bool, int]],
) -> None:
    """The operator keeps one Cluster between passes; it must never see stale capacity."""
    nodes = [node(f"n-{i}", npus=8 if i % 3 else 2, accelerator_type=None) for i in range(6)]
    kept = Cluster.from_objects(nodes, [])
    placed: dict[str, list[tuple[PodInfo, str]]] = {}
    for number, (action, shape, anti, workers) in enumerate(steps):
        if action == "unbind" and placed:
            name = sorted(placed)[number % len(placed)]
            for pod, node_name in placed.pop(name):
                kept.unbind(pod.name, pod.namespace, node_name)
            continue
        job = simple_job(f"j{number}", workers=workers, npus=(1, 2, 4, 8)[shape], anti_affinity=anti)
        pods = [pod_info(p) for p in pods_of(job)]
        fresh = Cluster.of(kept.nodes, [p for held in placed.values() for p, _ in held])
        decided = schedule_pods(kept, pods)
        assert decided == schedule_pods(fresh, pods)
        if decided.fits:
            placed[job["metadata"]["name"]] = []
            for pod in pods:
                node_name = decided.bindings[pod.name]
                bound_pod = replace(pod, node_name=node_name)
                kept.bind(bound_pod, node_name)
                placed[job["metadata"]["name"]].append((bound_pod, node_name))
