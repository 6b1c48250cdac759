"""Gang placement benchmark: fit-and-choose decisions per second, and false dispatches.

A fleet of 100 members x 100 nodes (Atlas 800T A2 8-NPU modules, Atlas 300T A2 2-NPU cards,
Atlas 800 8-NPU modules, 16-NPU A2 PoD nodes; mixed per member, already partly busy so the free
capacity is fragmented) receives 100,000 queued AscendJobs of mixed sizes (single pods of 1-8
NPUs, 2-16 pod gangs with one pod per node). Each job is decided in queue order.

Every dispatch is then judged by the simulator's own pure gang scheduler
(``fleet.sim.scheduler.schedule_pods``) against the member's real state: a dispatch it cannot
bind is a *false dispatch*. Bound pods reach Fleet's capacity feed only every ``--lag`` decisions
(as a watch would deliver them later), so in-flight reservations are what keeps consecutive
decisions from taking the same NPUs. Jobs finish after a random number of decisions.

The same workload runs three times in one process: with Fleet's rule (node-level gang fit over
node classes, reservations); with Fleet's rule and member copies pinned to the planned nodes
(``member_copy(pin=...)``); and with the summed-free-capacity rule (a member fits when its summed
free NPUs and cpu cover the job's total, as volcano-global or the seed fleet without
reservations do). Member copies go through the real adapter and the simulator's operator
(``fleet.sim.jobs.build_pods``) before its scheduler judges them.

Only the decision is timed (fit over every member, choice, reservation); building demands (once
per job at submission), judging and feeding are not. Usage:

    .venv/bin/python -m bench.placement_bench [--members 100] [--nodes 100] [--jobs 100000]

Prints the figures, then one JSON line.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import platform
import random
import time
from dataclasses import dataclass, field, replace
from typing import Any

from fleet.ascend import NPU_RESOURCE
from fleet.labels import ATTEMPT_LABEL, JOB_UID_LABEL
from fleet.placement import Demand, MemberCapacity, Placer, job_pod_key
from fleet.sim.devices import annotation
from fleet.sim.jobs import build_pods
from fleet.sim.predicates import PodInfo, node_info, pod_info
from fleet.sim.scheduler import Cluster, schedule_pods
from fleet.workloads import ascendjob

#: Fleet's rule, Fleet's rule with member copies pinned to the planned nodes, the summed rule.
RULES = ("fleet", "pinned", "summed")

# (accelerator-type, NPUs per node, cpu, memory Gi)
POOLS = [
    ("module-910b-8", 8, 188, 1500),
    ("card-910b-2", 2, 60, 240),
    ("module", 8, 188, 720),
    ("module-910b-16", 16, 376, 3000),
]

# (weight, pods, NPUs per pod, accelerator-type selector or None, one pod per node)
JOB_KINDS = [
    (20, 1, 1, None, False),
    (12, 1, 2, None, False),
    (10, 1, 4, None, False),
    (10, 1, 8, "module-910b-8", False),
    (10, 2, 8, "module-910b-8", True),
    (8, 4, 8, "module", True),
    (6, 8, 8, "module-910b-8", True),
    (6, 2, 2, "card-910b-2", True),
    (6, 4, 2, "card-910b-2", True),
    (6, 2, 16, "module-910b-16", True),
    (4, 16, 8, None, True),
    (2, 4, 16, "module-910b-16", True),
]


def _node(name: str, pool: tuple[str, int, int, int]) -> dict[str, Any]:
    accel, npus, cpu, mem = pool
    alloc = {"cpu": str(cpu), "memory": f"{mem}Gi", "pods": "110", NPU_RESOURCE: str(npus)}
    return {
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "accelerator-type": accel, "host-arch": "huawei-arm"},
        },
        "spec": {},
        "status": {
            "allocatable": alloc,
            "capacity": alloc,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _pod(
    name: str, node: str, requests: dict[str, str], labels: dict[str, str], devices: tuple[int, ...] = ()
) -> dict[str, Any]:
    # The NPU ids the member's scheduler picked, on the pod as the volcano plugin writes them.
    annotations = {NPU_RESOURCE: annotation(devices)} if devices else {}
    return {
        "metadata": {"name": name, "namespace": "bench", "labels": labels, "annotations": annotations},
        "spec": {"nodeName": node, "containers": [{"name": "ascend", "resources": {"requests": requests}}]},
        "status": {"phase": "Running"},
    }


def _job(name: str, pods: int, npus: int, accel: str | None, exclusive: bool) -> dict[str, Any]:
    def template() -> dict[str, Any]:
        spec: dict[str, Any] = {
            "containers": [
                {
                    "name": "ascend",
                    "image": "train:latest",
                    "resources": {
                        "requests": {NPU_RESOURCE: str(npus), "cpu": "8", "memory": "32Gi"},
                        "limits": {NPU_RESOURCE: str(npus)},
                    },
                }
            ],
            "nodeSelector": {"host-arch": "huawei-arm", **({"accelerator-type": accel} if accel else {})},
        }
        if exclusive:
            spec["affinity"] = {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {
                                "matchExpressions": [{"key": "job-name", "operator": "In", "values": [name]}]
                            },
                            "topologyKey": "kubernetes.io/hostname",
                        }
                    ]
                }
            }
        return {"metadata": {"labels": {"job-name": name}}, "spec": spec}

    replicas: dict[str, Any] = {"Master": {"replicas": 1, "template": template()}}
    if pods > 1:
        replicas["Worker"] = {"replicas": pods - 1, "template": template()}
    return {
        "apiVersion": "mindxdl.gitee.com/v1",
        "kind": "AscendJob",
        "metadata": {"name": name, "namespace": "bench", "labels": {"framework": "pytorch"}},
        "spec": {"replicaSpecs": replicas},
    }


@dataclass
class Kind:
    spec: tuple[int, int, str | None, bool]  # pods, NPUs per pod, accelerator-type, one per node
    demand: Demand
    npus: int
    cpu: int

    def job(self, name: str) -> dict[str, Any]:
        return _job(name, *self.spec)


@dataclass
class Member:
    nodes: list[dict[str, Any]]
    busy: list[dict[str, Any]]


@dataclass
class Result:
    rule: str
    decisions: int = 0
    dispatched: int = 0
    false_dispatches: int = 0
    seconds: float = 0.0
    #: Dispatches the member scheduler bound on other nodes than Fleet's plan.
    diverged: int = 0
    samples: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.decisions / self.seconds if self.seconds else 0.0


def build(members: int, nodes: int, rng: random.Random) -> list[Member]:
    fleet = []
    for m in range(members):
        pools = rng.sample(POOLS, rng.randint(1, 3))
        member_nodes, busy = [], []
        for n in range(nodes):
            pool = pools[n % len(pools)]
            name = f"m{m}-n{n}"
            member_nodes.append(_node(name, pool))
            # Fragment the free capacity: most nodes carry some long-running work already.
            used = rng.choice([0, 0, 1, 2, pool[1] // 2, pool[1] - 1, pool[1]])
            if used:
                busy.append(_pod(f"busy-{name}", name, {NPU_RESOURCE: str(used), "cpu": "4"}, {}))
        fleet.append(Member(member_nodes, busy))
    return fleet


def kinds() -> list[Kind]:
    """The job kinds; one demand each (a demand holds no job name, so jobs of a kind share it)."""
    out = []
    for i, (_, pods, npus, accel, exclusive) in enumerate(JOB_KINDS):
        demand = ascendjob.demand(_job(f"kind-{i}", pods, npus, accel, exclusive))
        out.append(Kind((pods, npus, accel, exclusive), demand, demand.npus, demand.total("cpu")))
    return out


def member_pods(kind: Kind, job: str, pin: dict[str, list[str]] | None) -> list[PodInfo]:
    """The pods the member's operator creates for the job's member copy, as its scheduler reads them."""
    copy = ascendjob.member_copy(kind.job(job), job, 0, pin=pin)
    return [pod_info(p) for p in build_pods(copy)]


def run(
    rule: str, fleet: list[Member], jobs: list[int], catalog: list[Kind], *, lag: int, seed: int
) -> Result:
    """One pass over the queue with ``rule`` (``fleet`` or ``summed``), judged by the simulator."""
    rng = random.Random(seed)
    result = Result(rule)
    placer = Placer(ttl=1e9, clock=lambda: 0.0)
    caps: dict[str, MemberCapacity] = {}
    clusters: dict[str, Cluster] = {}
    for m, spec in enumerate(fleet):
        name = f"member-{m}"
        clusters[name] = Cluster.of([node_info(n) for n in spec.nodes], [pod_info(p) for p in spec.busy])
        # The busy pods as the member shows them: with the NPU ids its scheduler gave them.
        busy = [
            {**p, "metadata": {**p["metadata"], "annotations": {NPU_RESOURCE: annotation(ids)}}}
            if (ids := clusters[name].pod_devices.get(("bench", p["metadata"]["name"])))
            else p
            for p in spec.busy
        ]
        caps[name] = MemberCapacity.from_lists(name, spec.nodes, busy)
        placer.add_member(caps[name])
    held: dict[str, tuple[int, int]] = dict.fromkeys(caps, (0, 0))  # summed rule's in-flight totals
    in_flight: list[tuple[int, str, str, dict[str, list[str]]]] = []
    running: list[tuple[int, int, str, list[tuple[str, str]]]] = []

    def flush() -> None:
        for index, member, rid, plan in in_flight:
            kind = catalog[jobs[index]]
            job = f"job-{index}"
            pods = member_pods(kind, job, plan if rule == "pinned" else None)
            outcome = schedule_pods(clusters[member], pods, pods_in_job=len(pods))
            if rule != "summed" and not outcome.fits:
                placer.release(member, rid)  # the job would wait PodGroupPending there
            elif rule == "summed":
                npus, cpu = held[member]
                held[member] = (npus - kind.npus, cpu - kind.cpu)
            if not outcome.fits:
                result.false_dispatches += 1
                if len(result.samples) < 3:
                    result.samples.append(f"{job} ({len(pods)} pods) on {member}: {outcome.message}")
                continue
            planned = sorted(n for nodes in plan.values() for n in nodes)
            if rule != "summed" and sorted(outcome.bindings.values()) != planned:
                result.diverged += 1
            bound = []
            labels = {JOB_UID_LABEL: job, ATTEMPT_LABEL: "0"}
            for p in pods:
                node = outcome.bindings[p.name]
                # Other jobs' anti-affinity selects only their own pods: keep the judge fast.
                ids = clusters[member].bind(replace(p, anti_affinity=()), node, outcome.devices.get(p.name))
                requests = {
                    r: f"{a}m" if r == "cpu" else str(a) for r, a in p.requests.items() if r != "pods"
                }
                caps[member].upsert_pod(_pod(p.name, node, requests, labels, ids))
                bound.append((p.name, node))
            if rule != "summed":
                placer.confirm(member)
            heapq.heappush(running, (index + rng.randint(5_000, 40_000), index, member, bound))
        in_flight.clear()

    clock = time.perf_counter
    for index, kind_index in enumerate(jobs):
        while running and running[0][0] <= index:
            _, _, member, bound = heapq.heappop(running)
            for pod_name, node in bound:
                clusters[member].unbind(pod_name, "bench", node)
                caps[member].remove_pod(f"bench/{pod_name}")
        kind = catalog[kind_index]
        rid = job_pod_key(f"job-{index}", 0)
        started = clock()
        chosen: str | None = None
        plan: dict[str, list[str]] = {}
        if rule != "summed":
            decision = placer.place(kind.demand, reservation_id=rid, job=f"bench/job-{index}")
            if decision is not None:
                chosen = decision.member
                plan = decision.placement.nodes_by_replica_type()
        else:
            best = None
            for name, cap in caps.items():
                npus, cpu = held[name]
                left = cap.free_total(NPU_RESOURCE) - npus - kind.npus
                if left >= 0 and cap.free_total("cpu") - cpu >= kind.cpu and (best is None or left < best):
                    best, chosen = left, name
            if chosen is not None:
                npus, cpu = held[chosen]
                held[chosen] = (npus + kind.npus, cpu + kind.cpu)
        result.seconds += clock() - started
        result.decisions += 1
        if chosen is not None:
            result.dispatched += 1
            in_flight.append((index, chosen, rid, plan))
        if len(in_flight) >= lag or index % lag == 0:
            flush()
    flush()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--lag", type=int, default=20, help="decisions between capacity feed flushes")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    fleet = build(args.members, args.nodes, rng)
    catalog = kinds()
    weights = [k[0] for k in JOB_KINDS]
    jobs = rng.choices(range(len(catalog)), weights=weights, k=args.jobs)
    classes = [MemberCapacity.from_lists("x", m.nodes, m.busy).class_count for m in fleet[:10]]
    print(
        f"fleet: {args.members} members x {args.nodes} nodes, {args.jobs} queued jobs of "
        f"{len(catalog)} kinds, feed lag {args.lag} decisions; node classes per member "
        f"(first 10): {classes}"
    )
    results = {}
    for rule in RULES:
        r = run(rule, fleet, jobs, catalog, lag=args.lag, seed=args.seed)
        results[rule] = r
        print(
            f"{rule:>6}: {r.decisions} decisions in {r.seconds:.2f} s = {r.rate:,.0f}/s; "
            f"dispatched {r.dispatched}, false dispatches {r.false_dispatches}"
            + (f", bound elsewhere than planned {r.diverged}" if rule != "summed" else "")
        )
        for sample in r.samples:
            print(f"        e.g. {sample}")
    figures: dict[str, object] = {
        "benchmark": "placement",
        "members": args.members,
        "nodes_per_member": args.nodes,
        "jobs": args.jobs,
        "feed_lag": args.lag,
    }
    for rule, r in results.items():
        figures[f"{rule}_decisions_per_s"] = round(r.rate)
        figures[f"{rule}_dispatched"] = r.dispatched
        figures[f"{rule}_false_dispatches"] = r.false_dispatches
        if rule != "summed":
            figures[f"{rule}_bound_elsewhere"] = r.diverged
    figures.update(python=platform.python_version(), machine=platform.machine(), cpus=os.cpu_count())
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
