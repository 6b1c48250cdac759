"""The scheduling rule alone, on a virtual clock: the contention benchmark's workload, planned by
:class:`queues.Planner` and admitted by the real ledger, with nothing else in the way.

    .venv/bin/python -m bench.policy_sim [--scale 1.0 | --jobs N] [--cycle 0.05] [--overhead 0.3]

``bench.contention_bench`` runs the whole system: what it measures is the rule *and* the time
every role takes on a shared machine (a cycle under load takes 0.2-1 s, and quota released
between two cycles idles meanwhile). This drives the same workload (``--seed``, ``--burst``,
``--window``, ``--priority-mix`` as there) through the quota side of the dispatcher's cycle
only, as the dispatcher drives it (snapshot, class heads, :meth:`Planner.plan`, admission of the
picks through the ledger's script, preemption for refused leaf heads through
:meth:`Planner.victims`, nominations) on a real ``redis-server``, with time standing still while
a cycle runs:

* a cycle every ``--cycle`` virtual seconds; every pick fits a member (the benchmark's capacity
  is 1.25x the quota and no pick there ever failed placement);
* an admitted job holds its quota for its runtime plus ``--overhead`` (start-up in the member
  and the status sync that releases it);
* a preempted job holds its quota ``--evict`` more seconds (its copy deleted in the member),
  then goes back to its queue;
* submissions are stamped with the virtual clock (the ledger's sequence is a clock reading).

It prints the contention benchmark's figures (the same functions compute them: floor,
entitlements, shares, attainable usage) and ends with one JSON line. So a rule can be judged
apart from the machine it runs on, in a minute for the full 10,000 jobs, and two rules compared
side by side in one run (``--compare "--grace 5" "--grace 10"``: each quoted argument list is a
run of its own, the figures printed in columns).
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import shlex
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from bench.contention_bench import (
    CLASSES,
    MAX_JOBS,
    NPU,
    QUOTA,
    TREE_SHAPES,
    Spec,
    Wait,
    _percentile,
    fairness,
    floor,
    node_names,
    tree_document,
    use_tree,
    workload,
)
from fleet.connections import redis_from_url
from queues import Ledger, load
from queues.heads import HeadCache, RunningJob, class_request
from queues.planner import Planner, PlannerSettings, PreemptionKind
from queues.tree import preemption_policy
from tests.support.redis_server import RedisServer

#: Virtual time starts this far ahead of the wall clock, so that the ledger's sequence (the later
#: of the last one plus one and the server's clock) follows the virtual clock.
AHEAD: Final = 10**6


@dataclass
class Sim:
    ledger: Ledger
    planner: Planner
    args: argparse.Namespace
    base: float
    specs: dict[str, Spec]
    t: float = 0.0
    #: (end, job, attempt) of every admission; a later admission of the job outdates it.
    ends: list[tuple[float, str, int]] = field(default_factory=list)
    attempt: Counter[str] = field(default_factory=Counter)
    #: (done, job): preempted jobs, holding their quota until their copy is gone.
    evictions: list[tuple[float, str]] = field(default_factory=list)
    evicted: set[str] = field(default_factory=set)
    nominees: dict[str, list[str]] = field(default_factory=dict)
    victims_at: list[float] = field(default_factory=list)
    waits: list[Wait] = field(default_factory=list)
    waiting_since: dict[str, float] = field(default_factory=dict)
    succeeded: int = 0
    last_end: float = 0.0
    preempted: Counter[str] = field(default_factory=Counter)
    cycles: int = 0
    heads: HeadCache = field(default_factory=HeadCache)
    plan_seconds: float = 0.0

    @property
    def now(self) -> float:
        return self.base + self.t

    def submit(self, spec: Spec) -> None:
        stamp = int(self.now * 1e6)
        if int(self.ledger.client.get(self.ledger.keys.seq) or 0) < stamp:
            self.ledger.client.set(self.ledger.keys.seq, stamp)
        self.ledger.enqueue(spec.key, spec.leaf, {NPU: spec.total}, spec.priority)
        self.waiting_since[spec.key] = self.t

    def admitted(self, job: str) -> None:
        spec = self.specs[job]
        start = self.waiting_since.pop(job)
        self.waits.append(Wait(spec.name, spec.leaf, spec.total, start, self.t, spec.priority))
        self.attempt[job] += 1
        heapq.heappush(self.ends, (self.t + spec.duration + self.args.overhead, job, self.attempt[job]))

    def step(self) -> None:
        """Everything due by ``t``: ends (quota released; a victim that ends before its eviction
        simply ends), evictions done (back to the queue)."""
        while self.ends and self.ends[0][0] <= self.t:
            end, job, attempt = heapq.heappop(self.ends)
            if attempt != self.attempt[job] or job in self.waiting_since:
                continue
            self.evicted.discard(job)
            self.ledger.release(job)
            self.succeeded += 1
            self.last_end = end
        while self.evictions and self.evictions[0][0] <= self.t:
            _, job = heapq.heappop(self.evictions)
            if job not in self.evicted:
                continue  # it ended first
            self.evicted.discard(job)
            self.ledger.requeue(job)
            self.waiting_since[job] = self.t

    def cycle(self) -> None:
        began = time.perf_counter()
        self.cycles += 1
        ledger, planner, now = self.ledger, self.planner, self.now
        for job, victims in list(self.nominees.items()):
            if planner.nominated(job) is None:
                del self.nominees[job]
            elif all(v not in ledger.records() for v in victims):
                planner.victims_gone(job)
                del self.nominees[job]
        snap = ledger.snapshot()
        active = snap.queues()
        if not active:
            return
        heads = self.heads.heads(active, snap.queue_versions, lambda stale: ledger.class_heads(stale, 8))
        plan = planner.plan(snap.copy(), heads, now)
        for _ in range(3):  # as the dispatcher does: once more at once when only the holds moved
            if plan.picks or not plan.changed:
                break
            plan = planner.plan(snap.copy(), heads, now)
        if self.args.trace:
            self.trace(snap, heads, plan)
        decisions = ledger.admit_pending_many([p.job for p in plan.picks])
        done = [d.job for d in decisions if d.admitted]
        assert len(done) == len(plan.picks), decisions
        planner.admitted(done)
        for job in done:
            self.admitted(job)
        self.preempt([r for r in plan.refused if r.leaf_head and r.never is None], snap)
        self.plan_seconds += time.perf_counter() - began

    def trace(self, snap: Any, heads: Any, plan: Any) -> None:
        """One line per cycle for each traced leaf with waiting jobs: what its class heads got."""
        blocked = {b.job: b.holder for b in plan.blocked}
        refused = {r.job: r.refusal for r in plan.refused}
        picked = Counter(p.leaf for p in plan.picks)
        for leaf in self.args.trace:
            if leaf not in heads:
                continue
            node = snap.nodes[leaf]
            parent = snap.nodes[node.parent]
            marks = []
            for c in heads[leaf]:
                if not c.heads:
                    continue
                job, size = c.heads[0].job, class_request(c.cls).get(NPU, 0)
                if job in blocked:
                    h = blocked[job]
                    marks.append(f"{size}:held<{h.leaf}@{h.node}:{h.why}")
                elif job in refused:
                    marks.append(f"{size}:refused {refused[job]}")
                elif (parked := self.planner.parked(leaf, c.cls)) is not None:
                    marks.append(f"{size}:parked {parked}")
                else:
                    marks.append(f"{size}:open")
            print(
                f"t={self.t:7.2f} {leaf} used={node.used} pending={node.pending} picked={picked[leaf]} "
                f"{node.parent}={parent.used} root={snap.root.used.get(NPU, 0)} | " + " | ".join(marks)
            )

    def preempt(self, refused: list[Any], snap: Any) -> None:
        self.victims_at = [t for t in self.victims_at if t > self.t - 60]
        candidates = [r for r in refused if self.planner.nominated(r.job) is None]
        if not candidates or len(self.victims_at) >= self.args.preemptions_per_minute:
            return
        running = self.ledger.running_jobs(snap.leaves())
        tree = self.ledger.tree()
        fresh = snap.copy()
        taken: set[str] = set(self.evicted)
        for r in candidates:
            jobs = running.get(r.leaf, [])
            lowest = min((j.priority for j in jobs), default=None)
            request = class_request(r.cls)
            policy = preemption_policy(tree, r.leaf)
            kinds = [
                k
                for k in self.planner.may_preempt(fresh, r.leaf, request, r.head.priority, lowest)
                if (policy.within if k is PreemptionKind.PRIORITY else policy.reclaim) != "Never"
            ]
            if not kinds:
                continue
            pool: dict[str, list[RunningJob]] = {
                leaf: [j for j in js if j.job not in taken] for leaf, js in running.items()
            }
            if policy.reclaim == "LowerPriority":
                pool = {
                    leaf: [j for j in js if leaf == r.leaf or j.priority < r.head.priority]
                    for leaf, js in pool.items()
                }
            found = self.planner.victims(fresh, r.leaf, request, r.head.priority, pool, kinds=kinds)
            if found is None:
                continue
            kind, victims = found
            if len(self.victims_at) + len(victims) > self.args.preemptions_per_minute:
                continue
            for v in victims:
                taken.add(v.job)
                self.evicted.add(v.job)
                self.preempted[kind.value] += 1
                self.victims_at.append(self.t)
                heapq.heappush(self.evictions, (self.t + self.args.evict, v.job))
                fresh.release(v.leaf, v.request, to_queue=True)
            fresh.admit(r.leaf, request)
            self.planner.nominate(
                r.job, r.leaf, fresh, r.refusal, request, until=self.now + self.args.nomination_seconds
            )
            self.nominees[r.job] = [v.job for v in victims]


def run(args: argparse.Namespace) -> dict[str, Any]:
    use_tree(args.tree)
    jobs = args.jobs if args.jobs is not None else round(10_000 * args.scale)
    specs, _ = workload(
        jobs, seed=args.seed, burst=args.burst, window=args.window, priority_mix=args.priority_mix
    )
    nodes = node_names()
    with tempfile.TemporaryDirectory(prefix="policy-sim-") as tmp:
        server = RedisServer(Path(tmp))
        server.start()
        try:
            client = redis_from_url(server.url)
            ledger = Ledger(client)
            ledger.apply(load(tree_document())[0])
            planner = Planner(
                PlannerSettings(
                    starvation_seconds=args.starvation_seconds,
                    grace_seconds=args.grace,
                    wait_ratio=args.wait_ratio,
                    nomination_seconds=args.nomination_seconds,
                )
            )
            sim = Sim(ledger, planner, args, time.time() + AHEAD, {s.key: s for s in specs})
            arrivals = sorted(specs, key=lambda s: s.arrival)
            at = 0
            samples: list[tuple[float, list[int], list[int], list[int]]] = []
            next_sample = 0.0
            while sim.succeeded < len(specs):
                while at < len(arrivals) and arrivals[at].arrival <= sim.t:
                    sim.submit(arrivals[at])
                    at += 1
                sim.step()
                sim.cycle()
                if sim.t >= next_sample:
                    usages = ledger.usages(nodes)
                    pending = ledger.pending_counts()
                    samples.append(
                        (
                            sim.t,
                            [usages[n].get(NPU, 0) for n in nodes],
                            [usages[n].get(MAX_JOBS, 0) for n in nodes],
                            [pending.get(n, 0) for n in nodes],
                        )
                    )
                    next_sample += args.sample_every
                sim.t = round(sim.t + args.cycle, 6)
                if sim.t > args.timeout:
                    break
        finally:
            server.stop()
    return report(args, specs, sim, samples, nodes)


def report(
    args: argparse.Namespace,
    specs: list[Spec],
    sim: Sim,
    samples: list[tuple[float, list[int], list[int], list[int]]],
    nodes: list[str],
) -> dict[str, Any]:
    bound = floor(specs, {s.name: s.arrival for s in specs})
    wall = sim.last_end
    root = nodes.index("root")
    waiting = [s for s in samples if s[3][root] > 0]
    use_waiting = [s[1][root] / QUOTA for s in waiting]
    waits = list(sim.waits) + [
        Wait(sim.specs[k].name, sim.specs[k].leaf, sim.specs[k].total, t, math.inf, sim.specs[k].priority)
        for k, t in sim.waiting_since.items()
    ]
    fair = fairness(samples, nodes, waits)
    if args.dump is not None:
        args.dump.write_text(
            json.dumps(
                {
                    "nodes": nodes,
                    "samples": samples,
                    "waits": [
                        [w.name, w.leaf, w.npus, w.start, None if w.end == math.inf else w.end] for w in waits
                    ],
                }
            )
        )
    share = {name: statistics.fmean(v) for name, v in fair.shares.items() if v}
    earlier = {
        n: statistics.fmean(v)
        for n, v in fairness(samples, nodes, waits, head_grace=math.inf).shares.items()
        if v
    }
    best = max(share.items(), key=lambda kv: kv[1])
    worst = min(share.items(), key=lambda kv: kv[1])
    of_attainable = [
        min(1.0, s[1][root] / (a * QUOTA)) if a > 0 else 1.0
        for s, a in zip(waiting, fair.attainable, strict=False)
    ]
    first: dict[str, Wait] = {}
    for w in sim.waits:
        first.setdefault(w.name, w)
    by_class: dict[str, list[float]] = {}
    klass = {s.name: s.klass for s in specs}
    for name, w in first.items():
        by_class.setdefault(klass[name], []).append(w.end - w.start)
    order = [c.name for c in CLASSES]
    classes = sorted(
        by_class, key=lambda k: (int(k.partition("@")[2] or 0), order.index(k.partition("@")[0]))
    )
    per_class = {
        k: {
            "jobs": len(v),
            "mean_s": round(statistics.fmean(v), 2),
            "p50_s": round(_percentile(v, 0.5), 2),
            "p95_s": round(_percentile(v, 0.95), 2),
        }
        for k, v in ((k, by_class[k]) for k in classes)
    }
    ratios: dict[str, float] = {}
    for priority in sorted({int(k.partition("@")[2] or 0) for k in classes}):
        means = [per_class[k]["mean_s"] for k in classes if int(k.partition("@")[2] or 0) == priority]
        ratios[str(priority)] = round(max(means) / min(means), 2)
    tenths: list[float] = []
    span = (samples[-1][0] - samples[0][0]) or 1.0
    for tenth in range(10):
        part = [s[1][root] / QUOTA for s in samples if int(s[0] / span * 10 * 0.9999) == tenth]
        tenths.append(round(statistics.fmean(part) * 100, 1) if part else 0.0)
    figures = {
        "benchmark": "policy_sim",
        "jobs": len(specs),
        "finished": sim.succeeded == len(specs),
        "tree": args.tree,
        "cycle_s": args.cycle,
        "overhead_s": args.overhead,
        "settings": {
            "grace": args.grace,
            "wait_ratio": args.wait_ratio,
            "starvation": args.starvation_seconds,
        },
        "wall_s": round(wall, 1),
        "floor_s": round(bound.seconds, 1),
        "wall_over_floor": round(wall / bound.seconds, 3),
        "quota_use_while_waiting": round(statistics.fmean(use_waiting), 4) if use_waiting else None,
        "attainable_while_waiting": round(statistics.fmean(fair.attainable), 4) if fair.attainable else None,
        "use_of_attainable_while_waiting": round(statistics.fmean(of_attainable), 4)
        if of_attainable
        else None,
        "quota_use_by_tenth_pct": tenths,
        "admission_wait": per_class,
        "class_wait_ratio_by_priority": ratios,
        "leaf_share_best": {"leaf": best[0], "pct": round(best[1] * 100, 1)},
        "leaf_share_worst": {"leaf": worst[0], "pct": round(worst[1] * 100, 1)},
        "leaf_spread_points": round((best[1] - worst[1]) * 100, 1),
        "leaf_spread_points_smallest_job_only": round(
            (max(earlier.values()) - min(earlier.values())) * 100, 1
        ),
        "leaf_share_pct": {k: round(v * 100, 1) for k, v in sorted(share.items(), key=lambda kv: kv[1])},
        "preemptions": dict(sim.preempted),
        "cycles": sim.cycles,
        "planner_ms_per_cycle": round(sim.plan_seconds / max(sim.cycles, 1) * 1000, 2),
    }
    return figures


def print_figures(f: dict[str, Any]) -> None:
    print(
        f"wall {f['wall_s']} s / floor {f['floor_s']} s = {f['wall_over_floor']}x; quota in use while jobs "
        f"waited {f['quota_use_while_waiting']:.1%} (the tree allowed {f['attainable_while_waiting']:.1%}; "
        f"{f['use_of_attainable_while_waiting']:.1%} of it)"
    )
    print("quota in use by tenth (%): " + " ".join(f"{x:.0f}" for x in f["quota_use_by_tenth_pct"]))
    for k, v in f["admission_wait"].items():
        print(
            f"  {k:>8}: mean {v['mean_s']:7.2f}  p50 {v['p50_s']:7.2f}  p95 {v['p95_s']:7.2f}"
            f"  ({v['jobs']} jobs)"
        )
    print(f"class ratio by priority: {f['class_wait_ratio_by_priority']}")
    print(
        f"leaf share: best {f['leaf_share_best']}, worst {f['leaf_share_worst']}, "
        f"spread {f['leaf_spread_points']} points "
        f"({f['leaf_spread_points_smallest_job_only']} before the head rule); lowest "
        + ", ".join(f"{k} {v}" for k, v in list(f["leaf_share_pct"].items())[:6])
    )
    print(f"preemptions {f['preemptions']}; {f['cycles']} cycles, {f['planner_ms_per_cycle']} ms each")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--jobs", type=int, default=None)
    p.add_argument("--seed", type=int, default=16)
    p.add_argument("--tree", choices=TREE_SHAPES, default="elastic", help="The quota tree's shape.")
    p.add_argument("--burst", type=float, default=0.5)
    p.add_argument("--window", type=float, default=0.7)
    p.add_argument("--priority-mix", action="store_true")
    p.add_argument("--cycle", type=float, default=0.05, help="Virtual seconds between two cycles.")
    p.add_argument("--overhead", type=float, default=0.3, help="Quota held beyond a job's runtime.")
    p.add_argument("--evict", type=float, default=1.0, help="Seconds a preempted job takes to go.")
    p.add_argument("--sample-every", type=float, default=0.5)
    p.add_argument("--grace", type=float, default=PlannerSettings.grace_seconds)
    p.add_argument("--wait-ratio", type=float, default=PlannerSettings.wait_ratio)
    p.add_argument("--starvation-seconds", type=float, default=PlannerSettings.starvation_seconds)
    p.add_argument("--nomination-seconds", type=float, default=PlannerSettings.nomination_seconds)
    p.add_argument("--preemptions-per-minute", type=int, default=60)
    p.add_argument("--timeout", type=float, default=7200.0, help="Virtual seconds at most.")
    p.add_argument("--trace", action="append", default=[], help="Print each cycle's view of this leaf.")
    p.add_argument("--dump", type=Path, default=None, help="Samples and waits to this JSON file.")
    p.add_argument("--compare", nargs="+", default=None, help="Runs side by side: quoted argument lists.")
    return p


def main() -> None:
    args = parser().parse_args()
    if args.compare:
        base = [a for a in sys.argv[1:] if a != "--compare" and a not in args.compare]
        results = []
        for extra in args.compare:
            run_args = parser().parse_args([*base, *shlex.split(extra)])
            figures = run(run_args)
            print(f"== {extra or '(defaults)'}")
            print_figures(figures)
            results.append({"run": extra, **figures})
        print(json.dumps({"benchmark": "policy_sim", "compare": results}))
        return
    figures = run(args)
    print_figures(figures)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
