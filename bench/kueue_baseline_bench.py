"""Kueue's scheduler performance baseline, run through Fleet's real roles.

    .venv/bin/python -m bench.kueue_baseline_bench [--scale 1.0] [--submitters 6] [--plan]

Kueue keeps a scheduler performance test whose baseline workload is a contended burst of short
single-pod jobs under a cohort-shaped quota. This benchmark replays that workload against Fleet,
with the roles and the measuring done as in ``bench.contention_bench`` (whose helpers it reuses):
a private ``redis-server`` (AOF on), ``fleet sim``, ``fleet dispatcher``, two ``fleet worker`` and
one ``fleet syncer`` as processes (``tests/support``); jobs submitted through the API's code path
(``fleet.jobs.submit``) by client processes of their own, each at its due time; measured by
three more processes that share no GIL with the roles: one tails the fleet jobs' change stream,
one samples the quota ledger, one watches every member's pods.

**The source.** kubernetes-sigs/kueue, ``test/performance/scheduler/configs/baseline/``
(``generator.yaml``: the workload; ``rangespec.yaml``: the thresholds) and the runner that reads
them (``test/performance/scheduler/runner/``: ``generator/generator.go`` creates the objects,
``controller/controller.go`` finishes each workload ``runtimeMs`` after its admission,
``recorder/recorder.go`` measures), read at commit ff69552e (2026-08-22; the baseline files last
changed in fab9b7ce, 2026-05-13). What they say, checked against the files:

* one cohort class, ``count: 5`` cohorts; in each, one ClusterQueue class ``cq`` with
  ``count: 6`` queues, ``nominalQuota: 20`` and ``borrowingLimit: 100`` of one resource (cpu),
  ``reclaimWithinCohort: Any``, ``withinClusterQueue: LowerPriority``. Kueue's borrowingLimit is
  how much a ClusterQueue may use *beyond* its nominal quota from its cohort's unused quota, so
  a queue may hold up to 20 + 100 = 120, which is also its whole cohort's quota (6 x 20). The
  cohorts have no parent: they share nothing with each other;
* per queue three workload sets, each created by its own loop that waits ``creationIntervalMs``
  before every creation: ``small`` 350 workloads every 100 ms, request 1, ``runtimeMs`` 200,
  priority 50; ``medium`` 100 every 500 ms, request 5, 500 ms, priority 100; ``large`` 50 every
  1,200 ms, request 20, 1,000 ms, priority 200. So 500 workloads per queue, 15,000 in all, the
  last created 60 s after the start (small ends at 35 s, medium at 50 s);
* thresholds (``rangespec.yaml``, the averages of 5 runs in its comments): the runner's wall
  time at most 425,000 ms (average 351,116.4 ms), the ``cq`` class's usage at least 50% (average
  55.9%: admitted usage time-averaged over the run, over the nominal quota), average time to
  admission at most 23,000 ms for large (average 16,501), 90,000 for medium (76,768) and
  260,000 for small (215,468).

Per queue the workload is 350 x 1 x 0.2 + 100 x 5 x 0.5 + 50 x 20 x 1 = 1,320 unit-seconds, per
cohort 7,920 against a cohort quota of 120: **no schedule can finish before 66 s** after the
first creation, however fast the scheduler (the cohorts are identical, so the whole quota of 600
gives the same bound).

**The mapping to Fleet** (``--plan`` prints it and stops):

* A unit is one NPU (``huawei.com/Ascend910``); a workload is a single-pod AscendJob of 1, 5 or
  20 NPUs, its runtime the simulator's ``sim.fleet.io/duration-seconds`` annotation (a float:
  ``fleet.sim.jobs.duration_seconds``; 0.2, 0.5 and 1.0 s; the simulator's operator checks its
  timers every ``tickSeconds``, 0.05 s here, so a run lasts its duration rounded up to a tick),
  its priority the ``fleet.io/priority`` annotation (50, 100, 200, as Kueue's).
* The quota is an ElasticQuotaTree: ``root`` (min = max = 600), one group node per cohort
  (``cohort-0`` .. ``cohort-4``, min = max = 120: a cohort lends nothing outside itself), six
  leaves per group (``cq-0-0-cohort-0`` .. , Kueue's ClusterQueue names), each binding the
  namespace of its own name with min = nominal quota = 20 and max = nominal + borrowing limit =
  120. Fleet's reclaim (a leaf below its min preempts siblings' borrowers) and priority
  preemption within a leaf stand for Kueue's ``reclaimWithinCohort: Any`` and
  ``withinClusterQueue: LowerPriority``.
* Capacity: 3 simulated members of 10 nodes of 40 NPUs each, 1,200 NPUs = 2x the quota, so the
  quota binds, not capacity. The nodes carry no ``accelerator-type`` and the jobs select none, so
  no MindCluster per-pod size rule applies: real Atlas nodes take at most 8 or 16 NPUs per pod,
  and a 20-NPU single pod exists only as this abstraction of Kueue's unit (Kueue's test has no
  nodes at all, only quota). A node of 40 takes two large jobs; the spare half of the capacity is
  what keeps fragmentation by 1- and 5-NPU pods from mattering.
* Arrivals as Kueue's generator makes them: per queue, the k-th job of a set is due k x interval
  after the start, all 30 queues in step. Times here count from when the first jobs are due (the
  start + 100 ms), so the plain quota bound is 66.0 s. The queues are split between ``--submitters`` client
  processes (6: five queues each), which keep each queue's order.

**Figures** (the last output line is their JSON):

* *wall*: from the first due submission to the last job seen ``Succeeded`` on the fleet.
* *floor*: the largest of the *arrival bound* (a job's actual submission plus its runtime, for
  the job where that is latest: 59.9 + 1 s as scheduled) and the *quota bound*: for each quota
  node (root, cohort, leaf) and each time t, t plus the NPU-seconds of its jobs submitted at or
  after t over its NPU max. At t = 0 that is the plain total over the quota, 66.0 s; as
  scheduled the bound is 66.7 s, at t = 1.1 s (the first large job: until then a cohort has
  received too little work to fill its 120 NPUs); later t count when submissions run late, so
  the floor with the actual submissions is reported beside the one as scheduled. *wall / floor*
  (the actual one): the goal is 1.5.
* *quota held*: the root's admitted NPUs in the ledger (``used``) over the quota (600), sampled
  every ``--sample-every`` s, averaged over the busy period (first due submission to last
  Succeeded). Kueue's ``cq`` usage (55.9%) is this figure for Kueue.
* *quota running*: the NPUs of pods ``Running`` on the members (a watch on every member's pods:
  from the event that shows a pod Running to the one that shows it ended or deleted) over the
  quota, time-averaged over the same busy period. Every job runs its duration once (more when
  preempted), so this is about the NPU-seconds over the quota over the wall: 85% means a wall
  within 1.18x the plain quota bound. Held minus running is what a job holds quota without
  running: dispatch, the copy's creation, the member's start, the mirroring of the end, the
  release. The goal is 85%.
* *admitted to copy-created*: per job, from the first time the change-stream tail saw it
  ``Admitted`` to the first ``Dispatched`` (created in the member); mean, p95.
* *time to admission* per class: the end of the job's ``submit()`` to the first ``Admitted`` seen
  (``contention_bench.waits``): mean, p50, p95; beside Kueue's published averages.
* *submission*: per job, the client-side latency of ``submit()`` and how late its end was against
  its due time; the rate achieved (jobs over the time from the first due submission to the
  last submitted) against the rate due (jobs over the schedule's 59.9 s).
* *CPU* (``/proc``, user + system, from the start to the last Succeeded) of every process;
  *Fleet CPU per job*: dispatcher, workers, syncer, Redis and the clients' ``submit()`` (the
  API's code path, run in the clients; the pacing sleeps cost nothing) over the jobs.
* preemptions and requeues (the tail), the dispatcher's decisions, Events stored; *verified*:
  every job ``Succeeded``, none lost, ``Ledger.rebuild()`` finds no drift.

At ``--scale 0.1`` (1,500 jobs, the last due after 5.9 s, floor 7.3 s as scheduled) a run takes
a minute or two with set-up; the full workload takes the set-up plus its wall.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from bench.contention_bench import (
    ADMITTED,
    DURATION,
    FLEET_ASCENDJOB,
    NPU,
    PREEMPTED,
    PRIORITY,
    SUCCEEDED,
    Spec,
    Wait,
    _cpu_seconds,
    _drain,
    _events,
    _load,
    _metrics,
    _percentile,
    _sample,
    _settle,
    _tail,
    _wait_for,
    code_under_test,
    waits,
)
from fleet.connections import redis_from_url
from fleet.jobs import current_state, submit
from fleet.members import PODS, SYNC, WatchEvent, load_members
from fleet.state import Objects
from fleet.workloads import ascendjob
from queues import Ledger, load
from tests.fleet.placement.factory import job
from tests.support.fleet import FleetProcesses
from tests.support.net import free_port
from tests.support.redis_server import RedisServer
from tests.support.sim import running_sim

#: Where the workload comes from (see the module docstring).
SOURCE: Final = (
    "kubernetes-sigs/kueue test/performance/scheduler/configs/baseline/ (generator.yaml, rangespec.yaml) "
    "at ff69552e"
)
COHORTS: Final = 5
QUEUES_PER_COHORT: Final = 6
NOMINAL: Final = 20
BORROWING_LIMIT: Final = 100
#: A leaf's NPU max: its nominal quota plus what it may borrow from its cohort.
LEAF_MAX: Final = NOMINAL + BORROWING_LIMIT
COHORT_QUOTA: Final = NOMINAL * QUEUES_PER_COHORT
#: The quota of the floor and of the usage figures: the root's NPU max (and min).
QUOTA: Final = COHORT_QUOTA * COHORTS
#: Simulated capacity: members x nodes of NODE_NPUS, no accelerator-type (see the docstring).
MEMBERS: Final = 3
NODES_PER_MEMBER: Final = 10
NODE_NPUS: Final = 40
#: The simulator's operator loop (its timers fire on ticks).
TICK_SECONDS: Final = 0.05
DEFAULT_SUBMITTERS: Final = 6


@dataclass(frozen=True)
class KueueClass:
    """One workload set of Kueue's generator.yaml: ``count`` jobs, one every ``interval_ms``."""

    name: str
    count: int
    interval_ms: int
    runtime_ms: int
    priority: int
    npus: int


CLASSES: Final = (
    KueueClass("small", 350, 100, 200, 50, 1),
    KueueClass("medium", 100, 500, 500, 100, 5),
    KueueClass("large", 50, 1200, 1000, 200, 20),
)

#: Kueue's own figures (rangespec.yaml's comments: the averages of 5 runs), for the report.
KUEUE_WALL_S: Final = 351.1
KUEUE_CQ_USAGE_PCT: Final = 55.9
KUEUE_ADMISSION_S: Final = {"small": 215.5, "medium": 76.8, "large": 16.5}


def cohort_name(c: int) -> str:
    return f"cohort-{c}"


def queue_name(c: int, q: int) -> str:
    """Kueue's ClusterQueue name (``<class>-<queueSetIdx>-<idx>-<cohort>``): the leaf and its namespace."""
    return f"cq-0-{q}-{cohort_name(c)}"


def queues() -> list[tuple[str, str]]:
    """(cohort, queue) of every leaf, cohort by cohort."""
    return [(cohort_name(c), queue_name(c, q)) for c in range(COHORTS) for q in range(QUEUES_PER_COHORT)]


def tree_document() -> dict[str, Any]:
    """The ElasticQuotaTree: root, a group per cohort, a leaf per ClusterQueue."""

    def npus(n: int) -> dict[str, int]:
        return {NPU: n}

    groups = [
        {
            "name": cohort_name(c),
            "min": npus(COHORT_QUOTA),
            "max": npus(COHORT_QUOTA),
            "children": [
                {
                    "name": queue_name(c, q),
                    "min": npus(NOMINAL),
                    "max": npus(LEAF_MAX),
                    "namespaces": [queue_name(c, q)],
                }
                for q in range(QUEUES_PER_COHORT)
            ],
        }
        for c in range(COHORTS)
    ]
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1beta1",
        "kind": "ElasticQuotaTree",
        "metadata": {"name": "elasticquotatree", "namespace": "kube-system"},
        "spec": {"root": {"name": "root", "min": npus(QUOTA), "max": npus(QUOTA), "children": groups}},
    }


def topology() -> dict[str, Any]:
    pool = {
        "prefix": "npu40",
        "count": NODES_PER_MEMBER,
        "labels": {"host-arch": "huawei-arm"},
        "allocatable": {NPU: str(NODE_NPUS), "cpu": "192", "memory": "1500Gi", "pods": "110"},
    }
    return {
        "simulation": {"jobDurationSeconds": 1, "tickSeconds": TICK_SECONDS, "failureDelaySeconds": 0.2},
        "members": [{"name": f"member-{i + 1}", "nodePools": [pool]} for i in range(MEMBERS)],
    }


def counts(scale: float) -> dict[str, int]:
    """Jobs per queue of each class at ``scale`` (at least one)."""
    return {k.name: max(1, round(k.count * scale)) for k in CLASSES}


def first_due_ms() -> int:
    """When the first jobs are due after the generator starts: one (shortest) interval."""
    return min(k.interval_ms for k in CLASSES)


def workload(scale: float = 1.0) -> list[Spec]:
    """Every job, in order of due time (seconds after the first jobs are due), then queue."""
    per_queue = counts(scale)
    first = first_due_ms()
    specs: list[Spec] = []
    for index, (_cohort, leaf) in enumerate(queues()):
        for k in CLASSES:
            for i in range(per_queue[k.name]):
                due = ((i + 1) * k.interval_ms - first) / 1000
                # Unique names (the figures key jobs by name): class, queue, index (large-17-49).
                name = f"{k.name}-{index}-{i}"
                specs.append(Spec(name, leaf, k.name, 1, k.npus, k.runtime_ms / 1000, k.priority, due))
    specs.sort(key=lambda s: (s.arrival, s.leaf, s.name))
    return specs


def job_object(spec: Spec) -> dict[str, Any]:
    """A single-pod AscendJob of ``spec.npus`` NPUs that selects no node type."""
    obj = job(spec.name, workers=0, npus=spec.npus, exclusive=False)
    obj["metadata"]["namespace"] = spec.leaf
    annotations = {DURATION: str(spec.duration), PRIORITY: str(spec.priority)}
    obj["metadata"]["annotations"] = {**(obj["metadata"].get("annotations") or {}), **annotations}
    return obj


# ---- the floor ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Floor:
    arrival: float
    quota: float
    quota_node: str
    plain: float  # every job's NPU-seconds over the quota

    @property
    def seconds(self) -> float:
        return max(self.arrival, self.quota)

    def describe(self) -> str:
        return (
            f"{self.seconds:.1f} s (quota bound {self.quota:.1f} s at {self.quota_node}, "
            f"all NPU-seconds over the quota {self.plain:.1f} s; last arrival + runtime {self.arrival:.1f} s)"
        )


def node_limits() -> dict[str, int]:
    """Every quota node's NPU max."""
    out = {"root": QUOTA}
    for cohort, leaf in queues():
        out[cohort] = COHORT_QUOTA
        out[leaf] = LEAF_MAX
    return out


def floor(specs: Sequence[Spec], arrivals: dict[str, float] | None = None) -> Floor:
    """No schedule finishes sooner (see the module docstring). ``arrivals``: job key -> actual
    submission (seconds after the first due time); the scheduled one for a job not in it."""
    at = arrivals or {}
    when = {s.key: at.get(s.key, s.arrival) for s in specs}
    arrival = max(when[s.key] + s.duration for s in specs)
    cohort_of = dict((leaf, cohort) for cohort, leaf in queues())
    by_node: dict[str, list[tuple[float, float]]] = {}
    for s in specs:
        for node in ("root", cohort_of[s.leaf], s.leaf):
            by_node.setdefault(node, []).append((when[s.key], s.total * s.duration))
    limits = node_limits()
    best, where = 0.0, "-"
    for node, items in by_node.items():
        later = 0.0
        for t, work in sorted(items, reverse=True):
            later += work
            bound = max(t, 0.0) + later / limits[node]
            if bound > best:
                best, where = bound, node
    plain = sum(s.total * s.duration for s in specs) / QUOTA
    return Floor(arrival, best, where, plain)


# ---- the measuring and submitting processes ----------------------------------------------------


def _pod_npus(pod: dict[str, Any]) -> int:
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        requests = (container.get("resources") or {}).get("requests") or {}
        total += int(str(requests.get(NPU, "0")))
    return total


def _watch_pods(kubeconfig: str, out: Any, ready: Any, stop: Any) -> None:
    """Watch every member's pods: one (start, end, NPUs) interval per pod seen Running, from the
    event that shows it Running to the one that shows it ended (or deleted); open ones end at
    the stop."""
    members = load_members(kubeconfig)
    lock = threading.Lock()
    running: dict[tuple[str, str], tuple[float, int]] = {}
    ended: set[tuple[str, str]] = set()
    intervals: list[tuple[float, float, int]] = []

    def end(key: tuple[str, str], now: float) -> None:
        ended.add(key)
        began = running.pop(key, None)
        if began is not None:
            intervals.append((began[0], now, began[1]))

    def see(member: str, pod: dict[str, Any], now: float, deleted: bool) -> None:
        key = (member, str((pod.get("metadata") or {}).get("uid")))
        phase = (pod.get("status") or {}).get("phase")
        if deleted or phase in ("Succeeded", "Failed"):
            end(key, now)
        elif phase == "Running" and key not in running and key not in ended:
            running[key] = (now, _pod_npus(pod))

    def on_event(event: WatchEvent) -> None:
        now = time.monotonic()
        with lock:
            if event.type == SYNC:
                for pod in event.objects:
                    see(event.member, pod, now, False)
                for pod in event.vanished:
                    see(event.member, pod, now, True)
            elif event.object is not None:
                see(event.member, event.object, now, event.type == "DELETED")

    watchers = [m.watch(PODS, on_event) for m in members.values()]
    try:
        if all(w.wait_synced(60) for w in watchers):
            ready.set()
        stop.wait()
    finally:
        for w in watchers:
            w.stop()
    now = time.monotonic()
    with lock:
        for key in list(running):
            end(key, now)
        out.put(intervals)


def _submit_paced(url: str, specs: list[Spec], *, start: Any, ready: Any, go: Any, report: Any) -> None:
    """One API client: submit ``specs`` (in due order) each at its due time (``start.value`` +
    arrival). Reports (key, due, call began, call ended) per job, errors and its CPU seconds."""
    client = redis_from_url(url)
    objects, ledger = Objects(client), Ledger(client)
    bodies = [job_object(s) for s in specs]
    ledger.tree()
    # What a running API server has done once and for all (its imports, the pod schema's field
    # tables), outside the clients' CPU figure: the validation of one job, stored nowhere.
    if bodies:
        ascendjob.validate(bodies[0])
    ready.set()
    go.wait()
    t0, cpu = start.value, time.process_time()
    done: list[tuple[str, float, float, float]] = []
    errors: list[str] = []
    for spec, body in zip(specs, bodies, strict=True):
        due = t0 + spec.arrival
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        began = time.monotonic()
        try:
            submit(objects, ledger, body)
        except Exception as error:
            errors.append(f"{spec.key}: {type(error).__name__}: {error}")
            continue
        done.append((spec.key, due, began, time.monotonic()))
    report.put((done, errors, time.process_time() - cpu))


# ---- figures -------------------------------------------------------------------------------------


def running_mean(intervals: Sequence[tuple[float, float, int]], begin: float, end: float) -> float:
    """The time-averaged NPUs of the intervals over [begin, end]."""
    if end <= begin:
        return 0.0
    area = sum(max(0.0, min(b, end) - max(a, begin)) * n for a, b, n in intervals)
    return area / (end - begin)


def admitted_to_copy(steps: Sequence[tuple[str, float]]) -> list[float]:
    """Each attempt's wait from its admission to its copy (``Dispatched``), from one job's
    states in time order. An attempt preempted before its copy was made has none, and the next
    admission starts the next one: measured from the first admission, a job preempted while
    Admitted counted its whole wait in the queue again (57 s at scale 1 on 2026-11-30)."""
    out: list[float] = []
    admitted: float | None = None
    for state, when in steps:
        if state == ADMITTED:
            admitted = when
        elif state == "Dispatched" and admitted is not None:
            out.append(max(0.0, when - admitted))
            admitted = None
    return out


def _stats(values: Sequence[float], digits: int = 3) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "p50": None, "p95": None, "max": None}
    return {
        "mean": round(statistics.fmean(values), digits),
        "p50": round(_percentile(values, 0.5), digits),
        "p95": round(_percentile(values, 0.95), digits),
        "max": round(max(values), digits),
    }


def describe_workload(specs: Sequence[Spec], scale: float) -> list[str]:
    per_queue = counts(scale)
    unit = sum(s.total * s.duration for s in specs)
    last = max(s.arrival for s in specs)
    capacity = MEMBERS * NODES_PER_MEMBER * NODE_NPUS
    lines = [
        f"source: {SOURCE}",
        f"quota tree: root min=max {QUOTA} NPUs; {COHORTS} groups (cohorts) of min=max {COHORT_QUOTA}; "
        f"{QUEUES_PER_COHORT} leaves (ClusterQueues) each, min {NOMINAL} (nominal) max {LEAF_MAX} "
        f"(nominal + borrowingLimit {BORROWING_LIMIT}), each binding its own namespace",
        f"capacity: {MEMBERS} members x {NODES_PER_MEMBER} nodes x {NODE_NPUS} NPUs = {capacity} NPUs "
        f"({capacity / QUOTA:.1f}x the quota), no accelerator-type",
        "classes (per queue: jobs, every, NPUs, runtime, priority; in all): "
        + "; ".join(
            f"{k.name} {per_queue[k.name]} every {k.interval_ms} ms, {k.npus} NPU, "
            f"{k.runtime_ms / 1000:g} s, "
            f"priority {k.priority}; {per_queue[k.name] * COHORTS * QUEUES_PER_COHORT}"
            for k in CLASSES
        ),
        f"jobs: {len(specs)} ({len(specs) // (COHORTS * QUEUES_PER_COHORT)} per queue, "
        f"{len(specs) // COHORTS} per cohort), {unit:,.0f} NPU-seconds "
        f"({unit / COHORTS:,.0f} per cohort against its {COHORT_QUOTA} NPUs)",
        f"arrivals: the first due {first_due_ms()} ms after the start (time 0 here), "
        f"the last at {last:.1f} s; "
        f"due rate {len(specs) / max(last, 1e-9):.0f} jobs/s on average, "
        + ", ".join(
            f"{sum(1 for s in specs if s.arrival < t) / max(t, 1e-9):.0f}/s to {t:g} s"
            for t in sorted(
                {round(per_queue[k.name] * k.interval_ms / 1000 - first_due_ms() / 1000, 1) for k in CLASSES}
            )
        ),
        f"Kueue's own run (rangespec.yaml, mean of 5): wall {KUEUE_WALL_S} s, "
        f"cq usage {KUEUE_CQ_USAGE_PCT}%, "
        "time to admission " + ", ".join(f"{k} {v} s" for k, v in KUEUE_ADMISSION_S.items()),
    ]
    return lines


# ---- the run -------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="Fraction of each queue's jobs (and so of the 60 s of arrivals).",
    )
    parser.add_argument(
        "--submitters",
        type=int,
        default=DEFAULT_SUBMITTERS,
        help="Client processes (each takes whole queues).",
    )
    parser.add_argument("--sample-every", type=float, default=0.25, help="Seconds between ledger samples.")
    parser.add_argument(
        "--stall", type=float, default=120.0, help="Give up after this long without a success."
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="Give up after this long in all.")
    parser.add_argument("--plan", action="store_true", help="Print the workload and its floor, run nothing.")
    parser.add_argument(
        "--keep", action="store_true", help="Keep the logs and Redis data of a run that finished."
    )
    parser.add_argument(
        "--dispatcher-arg",
        action="append",
        default=[],
        help="An extra argument for `fleet dispatcher` (repeat it).",
    )
    args = parser.parse_args()
    specs = workload(args.scale)
    for line in describe_workload(specs, args.scale):
        print(line)
    print(f"floor as scheduled: {floor(specs).describe()}")
    print(f"code under test: {code_under_test()} (python {sys.executable}, cwd {os.getcwd()})")
    if args.plan:
        return
    tmp = Path(tempfile.mkdtemp(prefix="kueue-baseline-bench-"))
    try:
        figures = _run(args, specs, tmp)
    except BaseException:
        print(f"the roles' and Redis' logs are kept in {tmp}")
        raise
    if figures.get("finished") and not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"the roles' and Redis' logs are kept in {tmp}")
    print(json.dumps(figures))


def _clients(specs: list[Spec], n: int) -> list[list[Spec]]:
    """The jobs of each client: whole queues, round robin, each list in due order."""
    leaves = [leaf for _, leaf in queues()]
    which = {leaf: i % n for i, leaf in enumerate(leaves)}
    out: list[list[Spec]] = [[] for _ in range(n)]
    for s in specs:
        out[which[s.leaf]].append(s)
    return [part for part in out if part]


def _run(args: argparse.Namespace, specs: list[Spec], tmp: Path) -> dict[str, Any]:
    load_start = _load()
    server = RedisServer(tmp)
    server.start()
    spawn = multiprocessing.get_context("spawn")
    nodes = ["root", *sorted({c for c, _ in queues()}), *(leaf for _, leaf in queues())]
    helpers: list[Any] = []
    try:
        with running_sim(topology()) as sim:
            client = redis_from_url(server.url)
            ledger = Ledger(client)
            ledger.apply(load(tree_document())[0])
            procs = FleetProcesses(server.url, sim.kubeconfig, tmp)
            try:
                metrics_port = free_port()
                dispatcher_args = ["--log-level", "warning", "--metrics-port", str(metrics_port)]
                procs.start("dispatcher", "dispatcher", *dispatcher_args, *args.dispatcher_arg)
                procs.start("worker-1", "worker", "--log-level", "warning")
                procs.start("worker-2", "worker", "--log-level", "warning")
                procs.start("syncer", "syncer", "--log-level", "warning")
                stop = spawn.Event()
                tail_out: Any = spawn.Queue()
                sample_out: Any = spawn.Queue()
                pods_out: Any = spawn.Queue()
                tail_ready, sample_ready, pods_ready = spawn.Event(), spawn.Event(), spawn.Event()
                tail = spawn.Process(target=_tail, args=(server.url, tail_out, tail_ready, stop), daemon=True)
                sampler = spawn.Process(
                    target=_sample,
                    args=(server.url, nodes, args.sample_every),
                    kwargs={"out": sample_out, "ready": sample_ready, "stop": stop},
                    daemon=True,
                )
                watcher = spawn.Process(
                    target=_watch_pods, args=(str(sim.kubeconfig), pods_out, pods_ready, stop), daemon=True
                )
                start = spawn.Value("d", 0.0)
                go, report = spawn.Event(), spawn.Queue()
                parts = _clients(specs, args.submitters)
                readies = [spawn.Event() for _ in parts]
                submitters = [
                    spawn.Process(
                        target=_submit_paced,
                        args=(server.url, part),
                        kwargs={"start": start, "ready": ready, "go": go, "report": report},
                        daemon=True,
                    )
                    for part, ready in zip(parts, readies, strict=True)
                ]
                helpers = [tail, sampler, watcher, *submitters]
                for process in helpers:
                    process.start()
                if not all(e.wait(120) for e in [*readies, tail_ready, sample_ready, pods_ready]):
                    raise TimeoutError("the submitters or the measuring processes did not start")
                time.sleep(3)  # the roles list the members before the clock starts
                assert server.proc is not None
                pids: dict[str, int | None] = {"redis": server.proc.pid, "sim": sim.process.pid}
                pids |= {name: role.process.pid for name, role in procs.roles.items() if role.process}
                pids |= {
                    "bench (tail)": tail.pid,
                    "bench (sampler)": sampler.pid,
                    "bench (pod watch)": watcher.pid,
                }
                cpu_before = {name: _cpu_seconds(pid) for name, pid in pids.items() if pid is not None}
                # The clock: the first jobs are due at `started`.
                started = time.monotonic() + 0.5
                start.value = started
                go.set()
                outcome, succeeded, last_succeeded = _wait_for(
                    len(specs), started, tail_out, procs, stall=args.stall, timeout=args.timeout
                )
                cpu_after = {name: _cpu_seconds(pid) for name, pid in pids.items() if pid is not None}
                stop.set()
                samples = sample_out.get(timeout=120)
                intervals = pods_out.get(timeout=120)
                final = _drain(tail_out)
                done: list[tuple[str, float, float, float]] = []
                errors: list[str] = []
                submit_cpu = 0.0
                for _ in submitters:
                    got, failed, cpu = report.get(timeout=600)
                    done += got
                    errors += failed
                    submit_cpu += cpu
                for process in helpers:
                    process.join(10)
                metrics = _metrics(metrics_port)
                _settle(ledger)
                items, _ = Objects(client).list(FLEET_ASCENDJOB)
                drift = [str(d) for d in ledger.rebuild()]
                events_stored, events = _events(client)
                logs = procs.logs(10) if outcome != "finished" else ""
            finally:
                procs.stop()
                for process in helpers:
                    if process.is_alive():
                        process.terminate()
                        process.join(5)
    finally:
        server.stop()
    load_end = _load()
    cpu = {name: round(cpu_after[name] - cpu_before[name], 1) for name in cpu_before}
    cpu["submitters"] = round(submit_cpu, 1)
    return _report(
        args=args,
        specs=specs,
        started=started,
        outcome=outcome,
        last_succeeded=last_succeeded if succeeded else None,
        samples=samples,
        intervals=intervals,
        tail=final,
        done=done,
        errors=errors,
        cpu=cpu,
        metrics=metrics,
        items=items,
        drift=drift,
        events_stored=events_stored,
        events=events,
        loads=(load_start, load_end),
        logs=logs,
    )


#: The roles whose CPU is Fleet's (the simulator and the measuring processes are not).
FLEET_ROLES: Final = ("dispatcher", "worker-1", "worker-2", "syncer", "redis", "submitters")


def _report(
    *,
    args: argparse.Namespace,
    specs: list[Spec],
    started: float,
    outcome: str,
    last_succeeded: float | None,
    samples: list[tuple[float, list[int], list[int], list[int]]],
    intervals: list[tuple[float, float, int]],
    tail: tuple[Any, ...],
    done: list[tuple[str, float, float, float]],
    errors: list[str],
    cpu: dict[str, float],
    metrics: dict[str, float],
    items: list[dict[str, Any]],
    drift: list[str],
    events_stored: int,
    events: dict[str, tuple[int, int]],
    loads: tuple[str, str],
    logs: str,
) -> dict[str, Any]:
    _, transitions, preempted, requeues, changes, gones = tail
    finished = outcome == "finished"
    by_key = {s.key: s for s in specs}
    wall = (last_succeeded - started) if last_succeeded is not None else None
    end = last_succeeded if last_succeeded is not None else (samples[-1][0] if samples else started)

    # Submission: latency of submit(), lateness against the due time, rates.
    submitted_at = {key: ended for key, _, _, ended in done}
    latency = [ended - began for _, _, began, ended in done]
    late = [ended - due for _, due, _, ended in done]
    last_due = max(s.arrival for s in specs)
    last_submitted = max(submitted_at.values()) - started if submitted_at else None
    due_rate = len(specs) / last_due if last_due > 0 else None
    achieved_rate = len(done) / last_submitted if last_submitted else None
    on_time = sum(1 for x in late if x <= 0.1) / len(late) if late else 0.0

    # The floor, with the actual submissions.
    bound = floor(specs, {key: t - started for key, t in submitted_at.items()})
    scheduled = floor(specs)

    # Quota held (ledger) and running (pods on the members), over the busy period.
    root = 0  # "root" is the sampler's first node
    run = [s for s in samples if started <= s[0] <= end]
    held = statistics.fmean(s[1][root] for s in run) / QUOTA if run else None
    running = running_mean(intervals, started, end) / QUOTA if end > started else None
    timeline_held: list[float] = []
    timeline_running: list[float] = []
    if end > started:
        span = (end - started) / 10
        for tenth in range(10):
            a, b = started + tenth * span, started + (tenth + 1) * span
            part = [s[1][root] for s in run if a <= s[0] < b]
            timeline_held.append(round(statistics.fmean(part) / QUOTA * 100, 1) if part else 0.0)
            timeline_running.append(round(running_mean(intervals, a, b) / QUOTA * 100, 1))

    # Time to admission per class (the first wait of each job), admitted -> copy created.
    cls_of = {s.name: s.cls for s in specs}
    first: dict[str, Wait] = {}
    for w in waits(specs, {by_key[key].name: t for key, t in submitted_at.items()}, transitions):
        first.setdefault(w.name, w)
    admission: dict[str, list[float]] = {}
    for name, w in first.items():
        if w.end != math.inf:
            admission.setdefault(cls_of[name], []).append(w.end - w.start)
    never = sum(1 for w in first.values() if w.end == math.inf)
    to_copy = [d for s in specs for d in admitted_to_copy(transitions.get(s.key, []))]
    per_class: dict[str, dict[str, float | None]] = {}
    for k in CLASSES:
        values = admission.get(k.name, [])
        row: dict[str, float | None] = {"jobs": len(values)}
        row |= {f"{stat}_s": value for stat, value in _stats(values, 2).items()}
        per_class[k.name] = row | {"kueue_mean_s": KUEUE_ADMISSION_S[k.name]}

    # Verified: final states, lost jobs, drift.
    states = Counter(current_state(obj) or "-" for obj in items)
    stored = {f"{obj['metadata']['namespace']}/{obj['metadata']['name']}" for obj in items}
    lost = sorted(key for key in submitted_at if key not in stored)
    admissions = sum(int((obj.get("status") or {}).get("attempt") or 0) for obj in items)
    stuck = Counter(
        str((obj.get("status") or {}).get("conditions", [{}])[-1].get("message", ""))[:90]
        for obj in items
        if current_state(obj) != SUCCEEDED
    )
    fleet_cpu = sum(cpu.get(role, 0.0) for role in FLEET_ROLES)
    preempted_events = events.get(PREEMPTED, (0, 0))
    total_unit = sum(s.total * s.duration for s in specs)

    figures: dict[str, Any] = {
        "benchmark": "kueue-baseline",
        "source": SOURCE,
        "finished": finished,
        "outcome": outcome,
        "scale": args.scale,
        "jobs": len(specs),
        "submitted": len(done),
        "submit_errors": len(errors),
        "quota_npus": QUOTA,
        "capacity_npus": MEMBERS * NODES_PER_MEMBER * NODE_NPUS,
        "npu_seconds": round(total_unit, 1),
        "wall_s": round(wall, 1) if wall is not None else None,
        "floor_s": round(bound.seconds, 1),
        "floor_scheduled_s": round(scheduled.seconds, 1),
        "floor_plain_quota_s": round(scheduled.plain, 1),
        "floor_quota_s": round(bound.quota, 1),
        "floor_quota_node": bound.quota_node,
        "floor_arrival_s": round(bound.arrival, 1),
        "wall_over_floor": round(wall / bound.seconds, 2) if wall is not None else None,
        "wall_over_scheduled_floor": round(wall / scheduled.seconds, 2) if wall is not None else None,
        "kueue_wall_s": KUEUE_WALL_S,
        "quota_held_pct": round(held * 100, 1) if held is not None else None,
        "quota_running_pct": round(running * 100, 1) if running is not None else None,
        "quota_held_by_tenth_pct": timeline_held,
        "quota_running_by_tenth_pct": timeline_running,
        "kueue_cq_usage_pct": KUEUE_CQ_USAGE_PCT,
        "admitted_to_copy_created_s": _stats(to_copy),
        "admission_wait": per_class,
        "never_admitted": never,
        "submit_latency_s": _stats(latency, 4),
        "submit_late_s": _stats(late),
        "submitted_on_time_fraction": round(on_time, 3),
        "submission_rate_due_per_s": round(due_rate, 1) if due_rate else None,
        "submission_rate_achieved_per_s": round(achieved_rate, 1) if achieved_rate else None,
        "last_submitted_s": round(last_submitted, 1) if last_submitted is not None else None,
        "submitters": len(_clients(specs, args.submitters)),
        "cpu_seconds": cpu,
        "fleet_cpu_s": round(fleet_cpu, 1),
        "fleet_cpu_ms_per_job": round(fleet_cpu / len(specs) * 1000, 2) if specs else None,
        "admissions": admissions,
        "preempted_jobs": len({p[0] for p in preempted}),
        "preemptions": len(preempted),
        "requeues": requeues,
        "preempted_events": preempted_events[1],
        "decisions": metrics,
        "events_stored": events_stored,
        "fleet_object_changes_per_job": round(changes / max(len(specs), 1), 2),
        "tail_relists": gones,
        "states": dict(states),
        "lost": len(lost),
        "ledger_drift": drift,
        "load_avg_start": loads[0],
        "load_avg_end": loads[1],
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "code": code_under_test(),
    }

    print(f"load average (1, 5, 15 min): {loads[0]} at the start, {loads[1]} at the end")
    print(f"outcome: {outcome}")
    if wall is not None:
        print(
            f"wall: {wall:.1f} s from the first due submission to the last Succeeded; "
            f"floor {bound.describe()}: "
            f"{wall / bound.seconds:.2f}x the floor (goal <= 1.5); {wall / scheduled.seconds:.2f}x the "
            f"floor as scheduled, {scheduled.seconds:.1f} s (Kueue's own run: {KUEUE_WALL_S} s)"
        )
    print(
        f"quota held (ledger, root used / {QUOTA}): {figures['quota_held_pct']}%; running on the members "
        f"(pods Running): {figures['quota_running_pct']}% (goal >= 85%; "
        f"Kueue's cq usage {KUEUE_CQ_USAGE_PCT}%)"
    )
    print("  held by tenth of the run (%):    " + " ".join(f"{x:.0f}" for x in timeline_held))
    print("  running by tenth of the run (%): " + " ".join(f"{x:.0f}" for x in timeline_running))
    c = figures["admitted_to_copy_created_s"]
    print(f"admitted -> copy created in the member (s): mean {c['mean']}, p95 {c['p95']}, max {c['max']}")
    print("time from submission to admission (s), per class: mean / p50 / p95 (Kueue's mean)")
    for name, v in per_class.items():
        print(
            f"  {name:>6}: {v['mean_s']} / {v['p50_s']} / {v['p95_s']}   "
            f"({v['jobs']} jobs; Kueue {v['kueue_mean_s']})"
        )
    lat, lt = figures["submit_latency_s"], figures["submit_late_s"]
    print(
        f"submission ({figures['submitters']} clients): submit() {lat['mean']} s mean, {lat['p95']} s p95; "
        f"late against the due time {lt['mean']} s mean, {lt['p95']} s p95, {lt['max']} s max "
        f"({on_time:.0%} within 0.1 s); rate {figures['submission_rate_achieved_per_s']}/s achieved "
        f"against {figures['submission_rate_due_per_s']}/s due (the last submitted at "
        f"{figures['last_submitted_s']} s, due at {last_due:.1f} s)"
    )
    print(
        f"CPU s: {', '.join(f'{n} {s}' for n, s in cpu.items())}; Fleet's ({', '.join(FLEET_ROLES)}) "
        f"{figures['fleet_cpu_s']} s = {figures['fleet_cpu_ms_per_job']} ms per job"
    )
    print(
        f"preemptions: {len(preempted)} ({figures['preempted_jobs']} jobs), {requeues} requeues; "
        f"{admissions} admissions; dispatcher decisions: "
        + (", ".join(f"{k} {v:.0f}" for k, v in metrics.items()) if metrics else "not served")
    )
    print(
        f"Events stored: {events_stored:,}; "
        f"fleet-object changes per job {figures['fleet_object_changes_per_job']}"
        + (f"; the tail fell behind the stream {gones} times" if gones else "")
    )
    print(
        f"verified: {states.get(SUCCEEDED, 0)}/{len(specs)} Succeeded, {len(lost)} lost, "
        f"{len(errors)} refused at submission; ledger drift: {drift or 'none'}"
    )
    for message, count in stuck.most_common(5):
        print(f"  not Succeeded: {count} x {message!r}")
    for line in errors[:5]:
        print(f"  submission error: {line}")
    if logs:
        print(logs)
    return figures


if __name__ == "__main__":
    main()
