"""Scheduling under contention: a platform team's busy day, run through the real roles.

    .venv/bin/python -m bench.contention_bench [--scale 1.0 | --jobs N] [--priority-mix] [--plan]

It runs the real system as ``bench.dispatch_bench`` does: a private ``redis-server`` (AOF on),
``fleet sim``, ``fleet dispatcher``, two ``fleet worker`` and one ``fleet syncer`` as processes
(started by ``tests/support``), jobs submitted through the API's code path (``fleet.jobs.submit``)
by client processes of their own. Measuring runs in two more processes, so it shares no GIL with
the roles: one tails the fleet jobs' change stream, one samples the quota ledger every
``--sample-every`` seconds.

**Workload** (``--plan`` prints it and stops):

* A quota tree of 5 groups and 34 leaves, uneven (4, 6, 7, 8 and 9 leaves): NPU
  (``huawei.com/Ascend910``) ``min`` and ``max`` on every node, the leaves' ``min`` summing to
  their group's, the groups' to the root's. Leaves may borrow (``max`` = the larger of twice
  ``min`` and ``min`` + 32, within the group's ``max``); groups too (``max`` about 1.6x ``min``).
  ``kube-queue/max-jobs``: 48 on the speech group, 12 on each research sandbox leaf.
* **The quota** is the root's NPU ``max``, 1024 (= its ``min``).
* Capacity: 8 simulated members of 16 to 24 Atlas 800T A2 nodes (8 NPUs each), 160 nodes,
  1280 NPUs = 1.25x the quota, so the quota binds, not capacity; single pods of 1, 2 and 4 NPUs
  fragment nodes, and the extra 25% is what lets 8-NPU pods and gangs find whole nodes.
* Six job classes: single pods of 1, 2, 4 and 8 NPUs (``1x1`` .. ``1x8``) and gangs of 2 and 4
  pods of 8 NPUs, one pod per node (``2x8``, ``4x8``). Each group has its own mix (the LLM group
  mostly 8-NPU pods and gangs, the research sandboxes mostly 1-2 NPUs). Each job runs for 2 to 8
  s (uniform, per job, the simulator's ``sim.fleet.io/duration-seconds`` annotation).
* Load: each leaf's share of the NPU-seconds is its ``min`` times a load factor from 0.2 to 1.8,
  so some leaves want far more than their guarantee and some far less. Equal priority by default;
  ``--priority-mix`` gives 60/30/10% of the jobs priority 0/10/100 (the ``fleet.io/priority``
  annotation; PriorityClass resolution is being added to ``fleet.jobs.submit.prepare``).
* Arrivals: half the jobs at once at the start (as fast as the clients submit), the rest at
  random times over 0.7x the quota bound (below), so the offered load is about 1.4x what the
  quota can serve and jobs wait nearly all the run.

**Figures**:

* *wall*: from the first submission to the last job seen ``Succeeded`` on the fleet.
* *floor*: no schedule can finish sooner than the largest of (a) the *quota bound*: the NPU-seconds
  of all jobs (NPUs x duration) over the quota; (b) the *arrival bound*: a job's submission time
  plus its runtime, for the job where that is latest; (c) the *tree bounds*: a leaf's or group's
  NPU-seconds over its NPU ``max``, and its job-seconds over its ``max-jobs``. (b) and (c) only
  bind on small runs. Admission, dispatch and status sync take time too, so ``wall`` > ``floor``.
* *quota in use*: at each sample, the root's admitted NPUs (the ledger's ``used``) over the quota;
  the mean over the run, the share of samples in which some job waited (pending at the root in
  the ledger), the mean over those samples, and a timeline (mean of each tenth of the run).
  Beside it the *attainable* usage in those samples: the sum of the leaves' entitlements (next
  item), what the tree's ``max`` and ``max-jobs`` let the jobs then waiting use (late in a run
  only the most loaded leaves still wait, and their ``max`` may add up to less than the quota).
* *time to admission* per job class: from the end of the job's ``submit()`` (stored and queued)
  to the first time the change-stream tail saw it ``Admitted`` (clocks: the system's monotonic
  one in every process; the tail reads at most every 10 ms); mean, p50, p95; and per priority, the
  largest class mean over the smallest.
* *spread across leaves*: the jobs waiting at each sample are known from the tail (from
  submission, or from a requeue, to admission). A leaf's *room* is what it holds plus its waiting
  jobs, smallest first, as far as its NPU ``max`` and ``max-jobs`` allow (a gang that cannot fit
  under its leaf's ``max`` is not held back by anyone). The fair *entitlement* of every leaf is
  the quota water-filled down the tree with weights ``min`` and caps ``room`` (groups capped by
  their ``max``; a group at its ``max-jobs`` gets what it holds): every leaf its guarantee as far
  as it needs it, then what others leave unused, shared by lowest ``used/min``. A leaf's *share*
  in a sample is ``min(1, used / entitlement)``, counted in the samples in which one of its jobs
  had waited at least 1 s (a job just arrived and being admitted is not a leaf held back); jobs
  are whole, so a leaf owed less than its smallest waiting job counts as served (a 32-NPU gang
  in a leaf entitled to 16 more waits as a borrower, and no schedule could do better without
  giving it more than its share). Per leaf, the mean of those. Reported: the best and worst leaf
  and their difference in points (0 = every leaf got its fair share whenever it waited; the goal
  is 10).
* *dispatcher CPU per admission*: the dispatcher process's user+system CPU (``/proc``) from the
  first submission to the last Succeeded, over the admissions (the sum of the jobs' attempts).
* *preemptions*: the times the tail saw an admitted job go back to a waiting state with reason
  ``Preempted`` (and how many jobs that was; *requeues* counts such returns for any reason), and
  the Events of that reason; *refusals*: the dispatcher's ``fleet_dispatch_decisions_total`` by
  outcome (Prometheus, when it serves it), Event objects stored at the end by reason (``HLEN`` of
  the Events hash), and writes per job to the fleet objects (changes in their stream).
* *verified*: every job ``Succeeded``, none lost, ``Ledger.rebuild()`` finds no drift.

Ends with one JSON line of the figures. The floor of the default 10,000 jobs is about 300 s: a
run takes that times the wall/floor ratio plus about 20 s of set-up and checks (14 minutes for
the code before the scheduling rewrite, 2.75x). ``--scale 0.1`` (1,000 jobs) takes a minute or
two; ``--plan`` prints the workload and its floor without running anything.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import multiprocessing
import os
import platform
import queue
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from fleet.apiserver import EVENT
from fleet.apiserver.errors import Gone
from fleet.connections import redis_from_url
from fleet.jobs import current_state, submit
from fleet.kinds import fleet_kind
from fleet.state import Objects
from fleet.state.keys import DEFAULT_STATE_KEYS, kind_name
from fleet.state.wire import decode
from fleet.workloads import ascendjob
from queues import Ledger, load
from tests.fleet.placement.factory import job
from tests.support.fleet import FleetProcesses
from tests.support.net import free_port
from tests.support.redis_server import RedisServer
from tests.support.sim import running_sim

NPU: Final = "huawei.com/Ascend910"
#: The fleet's AscendJobs, which this benchmark submits.
FLEET_ASCENDJOB: Final = fleet_kind(ascendjob)
MAX_JOBS: Final = "kube-queue/max-jobs"
DURATION: Final = "sim.fleet.io/duration-seconds"
PRIORITY: Final = "fleet.io/priority"
PREEMPTED: Final = "Preempted"
SUCCEEDED: Final = "Succeeded"
ADMITTED: Final = "Admitted"
#: The quota of the floor: the root's NPU max (and min).
QUOTA: Final = 1024
#: Nodes per simulated member (Atlas 800T A2, 8 NPUs each): 160 nodes, 1280 NPUs.
MEMBER_NODES: Final = (24, 24, 20, 20, 20, 20, 16, 16)
NODE_NPUS: Final = 8
DEFAULT_JOBS: Final = 10_000
#: The tail's shortest interval between two reads of the change stream.
TAIL_EVERY: Final = 0.01


@dataclass(frozen=True)
class JobClass:
    name: str
    pods: int
    npus: int  # per pod

    @property
    def total(self) -> int:
        return self.pods * self.npus


CLASSES: Final = (
    JobClass("1x1", 1, 1),
    JobClass("1x2", 1, 2),
    JobClass("1x4", 1, 4),
    JobClass("1x8", 1, 8),
    JobClass("2x8", 2, 8),
    JobClass("4x8", 4, 8),
)


@dataclass(frozen=True)
class Leaf:
    name: str
    min: int
    load: float  # demand relative to min: this leaf's NPU-seconds share is min x load


@dataclass(frozen=True)
class Group:
    name: str
    min: int
    max: int
    mix: tuple[int, ...]  # weights of CLASSES, by job count
    leaves: tuple[Leaf, ...]
    max_jobs: int | None = None
    leaf_max_jobs: int | None = None
    #: The elastic shape: a leaf may borrow up to its group's max (see :data:`TREE_SHAPES`).
    elastic: bool = False

    def leaf_max(self, leaf: Leaf) -> int:
        if self.elastic:
            return self.max
        return min(self.max, max(2 * leaf.min, leaf.min + 32))


#: The groups of the ``tight`` tree (the shape of the runs before 2026-11-27): a leaf may borrow
#: up to the larger of twice its min and its min + 32, a group about 1.6x its min.
TIGHT_GROUPS: Final = (
    Group(
        "llm",
        320,
        512,
        (10, 10, 15, 25, 25, 15),
        (
            Leaf("llm-pretrain", 128, 1.5),
            Leaf("llm-sft", 96, 1.3),
            Leaf("llm-rlhf", 64, 0.8),
            Leaf("llm-eval", 32, 0.5),
        ),
    ),
    Group(
        "vision",
        192,
        320,
        (20, 20, 25, 20, 10, 5),
        (
            Leaf("cv-detect", 48, 1.7),
            Leaf("cv-segment", 40, 1.0),
            Leaf("cv-video", 32, 1.2),
            Leaf("cv-ocr", 32, 0.6),
            Leaf("cv-generate", 24, 0.4),
            Leaf("cv-edge", 16, 0.8),
        ),
    ),
    Group(
        "speech",
        160,
        288,
        (25, 25, 25, 15, 7, 3),
        (
            Leaf("asr-zh", 32, 1.4),
            Leaf("asr-en", 32, 0.9),
            Leaf("tts", 24, 0.5),
            Leaf("kws", 24, 0.3),
            Leaf("speaker-id", 16, 1.0),
            Leaf("dialect", 16, 0.6),
            Leaf("speech-translate", 16, 1.6),
        ),
        max_jobs=48,
    ),
    Group(
        "recsys",
        200,
        320,
        (30, 25, 20, 15, 7, 3),
        (
            Leaf("rec-rank", 40, 1.6),
            Leaf("rec-recall", 32, 1.2),
            Leaf("rec-ads", 32, 0.9),
            Leaf("rec-search", 24, 0.7),
            Leaf("rec-feed", 24, 1.1),
            Leaf("rec-video", 16, 0.4),
            Leaf("rec-ctr", 16, 0.5),
            Leaf("rec-explore", 16, 1.8),
        ),
    ),
    Group(
        "research",
        152,
        256,
        (40, 30, 15, 10, 4, 1),
        (
            Leaf("lab-nlp", 24, 1.2),
            Leaf("lab-vision", 24, 0.8),
            Leaf("lab-rl", 16, 1.5),
            Leaf("lab-graph", 16, 0.3),
            Leaf("lab-audio", 16, 0.6),
            Leaf("lab-systems", 16, 1.0),
            Leaf("lab-theory", 16, 0.2),
            Leaf("lab-interns", 16, 1.7),
            Leaf("lab-visitors", 8, 0.5),
        ),
        leaf_max_jobs=12,
    ),
)


#: ``elastic`` (the default): the same mins, max-jobs and load, but every group's and leaf's NPU
#: max is the quota, as the seed's own tree lets its leaf borrow the whole root (Kube Queue's
#: elastic quota: a team borrows whatever others leave). ``tight``: :data:`TIGHT_GROUPS`. With
#: the tight tree, late in the run only the most loaded leaves still wait and their max adds up
#: to less than the quota, so no schedule can keep 90% of it in use while jobs wait (the tree
#: allowed 89.8-91.5% in the runs of 2026-11-25); the elastic tree lets a waiting leaf use
#: what the others leave, so the figure judges the scheduler, not the caps.
TREE_SHAPES: Final = ("elastic", "tight")


def shaped(shape: str) -> tuple[Group, ...]:
    """The groups of a tree shape (:data:`TREE_SHAPES`)."""
    if shape == "tight":
        return TIGHT_GROUPS
    if shape == "elastic":
        return tuple(replace(g, max=QUOTA, elastic=True) for g in TIGHT_GROUPS)
    raise ValueError(f"tree shape {shape!r}: one of {', '.join(TREE_SHAPES)}")


#: The groups every function of this module reads: the shape :func:`use_tree` chose.
GROUPS: Final[list[Group]] = list(shaped("elastic"))


def use_tree(shape: str) -> None:
    """Choose the tree shape for this process (the benchmark runs one shape at a time)."""
    GROUPS[:] = shaped(shape)


def leaves() -> list[tuple[Group, Leaf]]:
    return [(g, leaf) for g in GROUPS for leaf in g.leaves]


def node_names() -> list[str]:
    """Every quota node: root, the groups, the leaves."""
    return ["root", *(g.name for g in GROUPS), *(leaf.name for _, leaf in leaves())]


def tree_document() -> dict[str, Any]:
    """The ElasticQuotaTree (each leaf binds the namespace of its own name)."""

    def limits(npus: int, max_jobs: int | None = None) -> dict[str, int]:
        return {NPU: npus} | ({MAX_JOBS: max_jobs} if max_jobs is not None else {})

    groups = [
        {
            "name": g.name,
            "min": limits(g.min),
            "max": limits(g.max, g.max_jobs),
            "children": [
                {
                    "name": leaf.name,
                    "min": limits(leaf.min),
                    "max": limits(g.leaf_max(leaf), g.leaf_max_jobs),
                    "namespaces": [leaf.name],
                }
                for leaf in g.leaves
            ],
        }
        for g in GROUPS
    ]
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1beta1",
        "kind": "ElasticQuotaTree",
        "metadata": {"name": "elasticquotatree", "namespace": "kube-system"},
        "spec": {"root": {"name": "root", "min": limits(QUOTA), "max": limits(QUOTA), "children": groups}},
    }


def topology() -> dict[str, Any]:
    def pool(count: int) -> dict[str, Any]:
        return {
            "prefix": "a2",
            "count": count,
            "labels": {
                "accelerator": "huawei-Ascend910",
                "accelerator-type": "module-910b-8",
                "host-arch": "huawei-arm",
            },
            "allocatable": {NPU: str(NODE_NPUS), "cpu": "188", "memory": "1500Gi", "pods": "110"},
        }

    return {
        "simulation": {"jobDurationSeconds": 5, "tickSeconds": 0.05, "failureDelaySeconds": 0.2},
        "members": [{"name": f"member-{i + 1}", "nodePools": [pool(n)]} for i, n in enumerate(MEMBER_NODES)],
    }


# ---- the workload ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """One job of the workload."""

    name: str
    leaf: str
    cls: str
    pods: int
    npus: int  # per pod
    duration: float
    priority: int
    arrival: float  # seconds after the start, as scheduled

    @property
    def total(self) -> int:
        return self.pods * self.npus

    @property
    def key(self) -> str:
        return f"{self.leaf}/{self.name}"

    @property
    def klass(self) -> str:
        """The job class figures are grouped by (with a priority mix: the class and priority)."""
        return self.cls if self.priority == 0 else f"{self.cls}@{self.priority}"


def workload(
    jobs: int, *, seed: int, burst: float, window: float, priority_mix: bool
) -> tuple[list[Spec], float]:
    """The jobs in arrival order, and the arrival window (seconds) the non-burst ones spread over."""
    rng = random.Random(seed)
    pairs = leaves()
    # Jobs per leaf proportional to its NPU-second share over its group's mean job size.
    mean_npus = {
        g.name: sum(w * c.total for w, c in zip(g.mix, CLASSES, strict=True)) / sum(g.mix) for g in GROUPS
    }
    weights = [leaf.min * leaf.load / mean_npus[g.name] for g, leaf in pairs]
    drawn = rng.choices(range(len(pairs)), weights=weights, k=jobs)
    specs: list[Spec] = []
    for i, where in enumerate(drawn):
        g, leaf = pairs[where]
        cls = rng.choices(CLASSES, weights=g.mix)[0]
        priority = rng.choices((0, 10, 100), weights=(60, 30, 10))[0] if priority_mix else 0
        duration = round(rng.uniform(2.0, 8.0), 1)
        # A job name is a DNS-1035 label: it starts with a letter (j1p8-00042).
        name = f"j{cls.name.replace('x', 'p')}-{i:05d}"
        specs.append(Spec(name, leaf.name, cls.name, cls.pods, cls.npus, duration, priority, 0.0))
    seconds = window * sum(s.total * s.duration for s in specs) / QUOTA
    at_once = round(jobs * burst)
    later = sorted(rng.uniform(0.0, seconds) for _ in range(jobs - at_once))
    rng.shuffle(specs)
    timed = [_at(s, 0.0) for s in specs[:at_once]]
    timed += [_at(s, round(t, 3)) for s, t in zip(specs[at_once:], later, strict=True)]
    return timed, seconds


def _at(spec: Spec, arrival: float) -> Spec:
    return Spec(spec.name, spec.leaf, spec.cls, spec.pods, spec.npus, spec.duration, spec.priority, arrival)


def job_object(spec: Spec) -> dict[str, Any]:
    """The AscendJob: single pods without anti-affinity, gangs of 8-NPU pods one per node."""
    obj = job(
        spec.name,
        workers=spec.pods - 1,
        npus=spec.npus,
        selector={"accelerator-type": "module-910b-8"},
        exclusive=spec.pods > 1,
    )
    obj["metadata"]["namespace"] = spec.leaf
    annotations = {DURATION: str(spec.duration)}
    if spec.priority:
        annotations[PRIORITY] = str(spec.priority)
    obj["metadata"]["annotations"] = {**(obj["metadata"].get("annotations") or {}), **annotations}
    return obj


@dataclass(frozen=True)
class Floor:
    quota: float
    arrival: float
    tree: float
    tree_node: str

    @property
    def seconds(self) -> float:
        return max(self.quota, self.arrival, self.tree)

    def describe(self) -> str:
        return (
            f"{self.seconds:.1f} s (quota bound {self.quota:.1f} s; "
            f"last arrival + runtime {self.arrival:.1f} s; "
            f"tightest tree bound {self.tree:.1f} s at {self.tree_node})"
        )


def floor(specs: Sequence[Spec], arrivals: dict[str, float]) -> Floor:
    """The workload's floor: see the module docstring. ``arrivals``: job name -> submission
    time (seconds after the start); the scheduled one for a job not in it."""
    quota = sum(s.total * s.duration for s in specs) / QUOTA
    arrival = max(arrivals.get(s.name, s.arrival) + s.duration for s in specs)
    group_of = {leaf.name: g for g, leaf in leaves()}
    unit: dict[str, float] = {}
    job_seconds: dict[str, float] = {}
    for s in specs:
        for node in (s.leaf, group_of[s.leaf].name):
            unit[node] = unit.get(node, 0.0) + s.total * s.duration
            job_seconds[node] = job_seconds.get(node, 0.0) + s.duration
    bounds: list[tuple[float, str]] = [(0.0, "-")]
    for g in GROUPS:
        bounds.append((unit.get(g.name, 0.0) / g.max, f"{g.name} (NPU max)"))
        if g.max_jobs:
            bounds.append((job_seconds.get(g.name, 0.0) / g.max_jobs, f"{g.name} (max-jobs)"))
        for leaf in g.leaves:
            bounds.append((unit.get(leaf.name, 0.0) / g.leaf_max(leaf), f"{leaf.name} (NPU max)"))
            if g.leaf_max_jobs:
                bounds.append((job_seconds.get(leaf.name, 0.0) / g.leaf_max_jobs, f"{leaf.name} (max-jobs)"))
    tree, node = max(bounds)
    return Floor(quota, arrival, tree, node)


# ---- fair entitlement ------------------------------------------------------------------------


def water_fill(total: float, weights: Sequence[float], caps: Sequence[float]) -> list[float]:
    """Split ``total`` (at most the caps' sum) so that each gets ``min(cap, level x weight)``."""
    give = min(total, sum(caps))
    out = [0.0] * len(caps)
    remaining, weight = give, sum(weights)
    order = sorted(range(len(caps)), key=lambda i: caps[i] / weights[i])
    at = 0
    while at < len(order) and weight > 0:
        i = order[at]
        if caps[i] > remaining / weight * weights[i]:
            break
        out[i] = caps[i]
        remaining -= caps[i]
        weight -= weights[i]
        at += 1
    for i in order[at:]:
        out[i] = remaining / weight * weights[i] if weight > 0 else 0.0
    return out


def _room(used: int, jobs: int, limit: int, job_limit: int | None, sizes: Sequence[int]) -> int:
    """What a node holding ``used`` NPUs in ``jobs`` jobs could hold with its waiting jobs of
    ``sizes`` admitted, smallest first, within its NPU ``limit`` and ``job_limit``."""
    total, count = used, jobs
    for size in sorted(sizes):
        if total + size > limit or (job_limit is not None and count + 1 > job_limit):
            break
        total += size
        count += 1
    return max(total, used)


def entitlements(
    used: dict[str, int], jobs: dict[str, int], waiting: dict[str, list[int]]
) -> dict[str, float]:
    """Each leaf's fair NPUs in one sample (see the module docstring): ``waiting`` holds the
    NPUs of each leaf's jobs waiting then."""
    out: dict[str, float] = {}
    group_caps: list[float] = []
    leaf_caps: list[list[float]] = []
    for g in GROUPS:
        group_full = g.max_jobs is not None and jobs.get(g.name, 0) >= g.max_jobs
        caps = []
        for leaf in g.leaves:
            held = used.get(leaf.name, 0)
            sizes = [] if group_full else waiting.get(leaf.name, [])
            room = _room(held, jobs.get(leaf.name, 0), g.leaf_max(leaf), g.leaf_max_jobs, sizes)
            caps.append(float(room))
        leaf_caps.append(caps)
        group_caps.append(min(float(max(g.max, used.get(g.name, 0))), sum(caps)))
    shares = water_fill(QUOTA, [float(g.min) for g in GROUPS], group_caps)
    for g, share, caps in zip(GROUPS, shares, leaf_caps, strict=True):
        for leaf, got in zip(
            g.leaves, water_fill(share, [float(x.min) for x in g.leaves], caps), strict=True
        ):
            out[leaf.name] = got
    return out


@dataclass(frozen=True)
class Wait:
    """A job waiting in its leaf from ``start`` until admitted at ``end`` (monotonic clock)."""

    name: str
    leaf: str
    npus: int
    start: float
    end: float
    priority: int = 0


#: States that mean a job was admitted (a later one stands in when the tail missed Admitted).
_ADMITTED_OR_LATER: Final = frozenset({ADMITTED, "Dispatched", "Created", "Running", "Restarting", SUCCEEDED})
#: A job back in its queue after a preemption or a failover (``Rescheduling`` comes first, while
#: its member copy goes and its quota is still charged).
_WAITING_AGAIN: Final = frozenset({"Queued"})


def waits(
    specs: Sequence[Spec], submitted: dict[str, float], transitions: dict[str, list[tuple[str, float]]]
) -> list[Wait]:
    """Every wait of every job: from its submission to its first admission, and from each
    requeue (preemption, failover) to the admission after it."""
    out: list[Wait] = []
    for spec in specs:
        if spec.name not in submitted:
            continue
        start: float | None = submitted[spec.name]
        for state, when in transitions.get(spec.key, []):
            if start is not None and state in _ADMITTED_OR_LATER:
                out.append(Wait(spec.name, spec.leaf, spec.total, start, max(when, start), spec.priority))
                start = None
            elif start is None and state in _WAITING_AGAIN:
                start = when
        if start is not None:
            out.append(Wait(spec.name, spec.leaf, spec.total, start, math.inf, spec.priority))
    return out


@dataclass
class Fairness:
    attainable: list[float]  # per sample with jobs waiting: sum of entitlements over the quota
    shares: dict[str, list[float]]  # per leaf: its share in each sample where it waited >= GRACE
    attainable_at: list[float] = field(default_factory=list)  # the time of each of those samples


#: A leaf counts as waiting in a sample (for its share) when a job of it has waited this long:
#: a job that just arrived and is being admitted is not a leaf held back.
GRACE: Final = 1.0
#: A leaf's head that has waited this long goes before the jobs behind it (the dispatcher's
#: ``--grace-seconds``: past it, first come first served under the node that refuses the head).
HEAD_GRACE: Final = 5.0


def fairness(
    samples: Sequence[tuple[float, list[int], list[int], list[int]]],
    nodes: list[str],
    all_waits: list[Wait],
    *,
    head_grace: float = HEAD_GRACE,
) -> Fairness:
    """Entitlements and shares over the samples in which jobs waited at the root (ledger).

    Jobs are whole, so a leaf below its entitlement counts as served when no schedule could
    give it more without going past its fair share or out of its own queue's order: what it is
    owed is less than its smallest waiting job, or less than its head (its first job: highest
    priority, then first submitted) once the head has waited ``head_grace`` and so goes before
    the jobs behind it (issue 16, requirement 4: the head of a leaf is not passed for ever). A
    leaf whose head is a gang as large as its share then empties before the gang starts, in any
    schedule that keeps the guarantees (the ledger admits the gang only within the leaf's
    ``min`` while siblings below theirs wait); that drain is the leaf's own order, not a
    neighbour taking its share."""
    index = {n: i for i, n in enumerate(nodes)}
    root = index["root"]
    by_start = sorted(all_waits, key=lambda w: w.start)
    ends: list[tuple[float, int]] = []
    active: dict[int, Wait] = {}
    at = 0
    result = Fairness([], {leaf.name: [] for _, leaf in leaves()})
    for t, used_list, jobs_list, pending_list in sorted(samples):
        while at < len(by_start) and by_start[at].start <= t:
            heapq.heappush(ends, (by_start[at].end, at))
            active[at] = by_start[at]
            at += 1
        while ends and ends[0][0] <= t:
            active.pop(heapq.heappop(ends)[1], None)
        if pending_list[root] <= 0:
            continue
        waiting: dict[str, list[int]] = {}
        heads: dict[str, Wait] = {}
        held_back: set[str] = set()
        for w in active.values():
            waiting.setdefault(w.leaf, []).append(w.npus)
            first = heads.get(w.leaf)
            if first is None or (-w.priority, w.start) < (-first.priority, first.start):
                heads[w.leaf] = w
            if w.start <= t - GRACE:
                held_back.add(w.leaf)
        used = {n: used_list[i] for n, i in index.items()}
        jobs = {n: jobs_list[i] for n, i in index.items()}
        fair = entitlements(used, jobs, waiting)
        result.attainable.append(sum(fair.values()) / QUOTA)
        result.attainable_at.append(t)
        for name in held_back:
            if fair[name] > 0:
                owed = fair[name] - used[name]
                head = heads[name]
                if 0 < owed < min(waiting[name]) or (t - head.start >= head_grace and 0 < owed < head.npus):
                    result.shares[name].append(1.0)
                else:
                    result.shares[name].append(min(1.0, used[name] / fair[name]))
    return result


# ---- the measuring processes -----------------------------------------------------------------


def _sample(url: str, nodes: list[str], every: float, *, out: Any, ready: Any, stop: Any) -> None:
    """Sample the ledger every ``every`` seconds: (time, used NPUs, admitted jobs, pending) per node."""
    ledger = Ledger(redis_from_url(url))
    samples: list[tuple[float, list[int], list[int], list[int]]] = []
    ready.set()
    while not stop.is_set():
        began = time.monotonic()
        usages = ledger.usages(nodes)
        pending = ledger.pending_counts()
        samples.append(
            (
                began,
                [usages[n].get(NPU, 0) for n in nodes],
                [usages[n].get(MAX_JOBS, 0) for n in nodes],
                [pending.get(n, 0) for n in nodes],
            )
        )
        stop.wait(max(0.0, began + every - time.monotonic()))
    out.put(samples)


def _tail(url: str, out: Any, ready: Any, stop: Any) -> None:
    """Tail the fleet jobs' change stream: each job's state changes with the time they were
    seen, conditions of reason ``Preempted``, and how many changes there were. Sends
    ("progress", succeeded, last succeeded time) twice a second, and everything once stopped."""
    objects = Objects(redis_from_url(url))
    rv = objects.resource_version()
    transitions: dict[str, list[tuple[str, float]]] = {}
    preempted: list[tuple[str, float]] = []  # (job, when), one per preemption
    requeues = 0  # an admitted job back to a waiting state, for any reason
    changes = gones = succeeded = 0
    last_succeeded = 0.0
    reported = 0.0
    ready.set()
    while not stop.is_set():
        began = time.monotonic()
        try:
            events, rv = objects.changes(FLEET_ASCENDJOB, rv, block_ms=200)
            objs = [e.object for e in events]
        except Gone:  # fell behind the stream's history: read every job as it is now
            gones += 1
            objs, rv = objects.list(FLEET_ASCENDJOB)
        now = time.monotonic()
        for obj in objs:
            meta = obj["metadata"]
            key = f"{meta.get('namespace')}/{meta.get('name')}"
            changes += 1
            state = current_state(obj)
            seen = transitions.setdefault(key, [])
            if state and (not seen or seen[-1][0] != state):
                if seen and seen[-1][0] in _ADMITTED_OR_LATER and state not in _ADMITTED_OR_LATER:
                    requeues += 1
                    conditions = (obj.get("status") or {}).get("conditions") or [{}]
                    if conditions[-1].get("reason") == PREEMPTED:
                        preempted.append((key, now))
                seen.append((state, now))
                if state == SUCCEEDED:
                    succeeded += 1
                    last_succeeded = now
        if now - reported > 0.5:
            out.put(("progress", succeeded, last_succeeded))
            reported = now
        if objs:
            time.sleep(max(0.0, began + TAIL_EVERY - time.monotonic()))
    out.put(("done", transitions, preempted, requeues, changes, gones))


def _submit_all(url: str, specs: list[Spec], *, start: Any, ready: Any, go: Any, report: Any) -> None:
    """One API client: submit ``specs`` (in arrival order) each at its arrival time; reports
    (job name, monotonic time its submit() returned) pairs and the CPU it used."""
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
    done: list[tuple[str, float]] = []
    errors: list[str] = []
    for spec, body in zip(specs, bodies, strict=True):
        wait = t0 + spec.arrival - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        try:
            submit(objects, ledger, body)
        except Exception as error:
            errors.append(f"{spec.key}: {type(error).__name__}: {error}")
            continue
        done.append((spec.name, time.monotonic()))
    report.put((done, errors, time.process_time() - cpu))


# ---- helpers -----------------------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds a process has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


def _metrics(port: int) -> dict[str, float]:
    """``fleet_dispatch_decisions_total`` by outcome, if the dispatcher serves it."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            body = response.read().decode()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for line in body.splitlines():
        if line.startswith("fleet_dispatch_decisions_total{"):
            labels, _, value = line.rpartition(" ")
            outcome = labels.split('outcome="', 1)[1].split('"', 1)[0] if 'outcome="' in labels else labels
            out[outcome] = float(value)
    return out


def _events(client: Any) -> tuple[int, dict[str, tuple[int, int]]]:
    """Event objects stored, and per reason: (objects, occurrences summed over their count)."""
    key = DEFAULT_STATE_KEYS.objects(kind_name(EVENT.key))
    stored = int(client.hlen(key))
    reasons: dict[str, list[int]] = {}
    for _, raw in client.hscan_iter(key, count=2000):
        event = decode(raw)
        seen = reasons.setdefault(str(event.get("reason")), [0, 0])
        seen[0] += 1
        seen[1] += int(event.get("count") or 1)
    return stored, {r: (v[0], v[1]) for r, v in sorted(reasons.items(), key=lambda kv: -kv[1][0])}


def code_under_test() -> str:
    """Where the ``fleet`` package the roles import lives, and its git commit (``+`` when the
    checkout has changes): the roles run ``sys.executable`` from the same directory."""
    import fleet

    where = Path(fleet.__file__).resolve().parents[1]
    try:
        head = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return str(where)
    return f"{where} at {head}{'+' if dirty else ''}"


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def describe_workload(specs: Sequence[Spec], window: float) -> list[str]:
    by_class = Counter(s.cls for s in specs)
    unit = Counter[str]()
    for s in specs:
        unit[s.cls] += round(s.total * s.duration)
    per_leaf = Counter(s.leaf for s in specs)
    total_unit = sum(s.total * s.duration for s in specs)
    leaf_unit: dict[str, float] = {}
    for s in specs:
        leaf_unit[s.leaf] = leaf_unit.get(s.leaf, 0.0) + s.total * s.duration
    nodes = sum(MEMBER_NODES)
    at_once = sum(1 for s in specs if s.arrival == 0.0)
    lines = [
        f"quota (the root's NPU max): {QUOTA} NPUs; capacity {nodes * NODE_NPUS} NPUs on {nodes} "
        f"Atlas 800T A2 nodes in {len(MEMBER_NODES)} members ({nodes * NODE_NPUS / QUOTA:.2f}x the quota)",
        f"tree: {len(GROUPS)} groups, {len(leaves())} leaves; "
        + "; ".join(
            f"{g.name} min {g.min} max {g.max}"
            + (f" max-jobs {g.max_jobs}" if g.max_jobs else "")
            + f", {len(g.leaves)} leaves"
            + (f" (max-jobs {g.leaf_max_jobs} each)" if g.leaf_max_jobs else "")
            for g in GROUPS
        )
        + (
            "; every max is the quota (elastic)"
            if GROUPS[0].elastic
            else "; a leaf's max is the larger of 2x its min and its min + 32 (tight)"
        ),
        f"jobs: {len(specs)}, "
        + ", ".join(
            f"{c.name} {by_class[c.name]} ({unit[c.name] / max(total_unit, 1):.0%} of NPU-s)" for c in CLASSES
        )
        + f"; {total_unit:,.0f} NPU-seconds, runtimes 2-8 s",
        f"arrivals: {at_once} at once, {len(specs) - at_once} over {window:.0f} s "
        f"(offered {total_unit / max(window, 1e-9) / QUOTA:.2f}x the quota over that window)",
        "load per leaf (jobs, share of its min's fair NPU-seconds): "
        + ", ".join(
            f"{leaf.name} {per_leaf[leaf.name]} {relative:.1f}x"
            for leaf, relative in (
                (leaf, leaf_unit.get(leaf.name, 0.0) / total_unit * QUOTA / leaf.min) for _, leaf in leaves()
            )
        ),
    ]
    if any(s.priority for s in specs):
        mix = Counter(s.priority for s in specs)
        lines.append("priorities: " + ", ".join(f"{p}: {n}" for p, n in sorted(mix.items())))
    return lines


# ---- the run ---------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="Fraction of the default 10,000 jobs.")
    parser.add_argument("--jobs", type=int, default=None, help="Number of jobs (overrides --scale).")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument(
        "--tree", choices=TREE_SHAPES, default="elastic", help="The quota tree's shape (see TREE_SHAPES)."
    )
    parser.add_argument("--burst", type=float, default=0.5, help="Fraction of the jobs submitted at once.")
    parser.add_argument(
        "--window",
        type=float,
        default=0.7,
        help="The other jobs arrive over this fraction of the quota bound.",
    )
    parser.add_argument(
        "--priority-mix", action="store_true", help="Priorities 0/10/100 for 60/30/10%% of jobs."
    )
    parser.add_argument("--submitters", type=int, default=4, help="Client processes submitting.")
    parser.add_argument("--sample-every", type=float, default=0.5, help="Seconds between ledger samples.")
    parser.add_argument(
        "--stall", type=float, default=180.0, help="Give up after this long without a success."
    )
    parser.add_argument("--timeout", type=float, default=3600.0, help="Give up after this long in all.")
    parser.add_argument("--plan", action="store_true", help="Print the workload and its floor, run nothing.")
    parser.add_argument(
        "--keep", action="store_true", help="Keep the logs, Redis data and jobs.json of a run that finished."
    )
    parser.add_argument(
        "--dump",
        type=Path,
        default=None,
        help="Write the samples, every wait and every job's spec to this JSON file (for a trace).",
    )
    parser.add_argument(
        "--dispatcher-arg",
        action="append",
        default=[],
        help="An extra argument for `fleet dispatcher` (repeat it): --dispatcher-arg=--starvation-seconds=5.",
    )
    args = parser.parse_args()
    use_tree(args.tree)
    jobs = args.jobs if args.jobs is not None else round(DEFAULT_JOBS * args.scale)
    specs, window = workload(
        jobs, seed=args.seed, burst=args.burst, window=args.window, priority_mix=args.priority_mix
    )
    for line in describe_workload(specs, window):
        print(line)
    print(f"floor as scheduled: {floor(specs, {}).describe()}")
    print(f"code under test: {code_under_test()} (python {sys.executable}, cwd {os.getcwd()})")
    if args.plan:
        return
    tmp = Path(tempfile.mkdtemp(prefix="contention-bench-"))
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


def _run(args: argparse.Namespace, specs: list[Spec], tmp: Path) -> dict[str, Any]:
    load_start = _load()
    server = RedisServer(tmp)
    server.start()
    spawn = multiprocessing.get_context("spawn")
    nodes = node_names()
    try:
        with running_sim(topology()) as sim:
            client = redis_from_url(server.url)
            ledger = Ledger(client)
            ledger.apply(load(tree_document())[0])
            procs = FleetProcesses(server.url, sim.kubeconfig, tmp)
            metrics_port = free_port()
            procs.start(
                "dispatcher",
                "dispatcher",
                "--log-level",
                "warning",
                "--metrics-port",
                str(metrics_port),
                *args.dispatcher_arg,
            )
            procs.start("worker-1", "worker", "--log-level", "warning")
            procs.start("worker-2", "worker", "--log-level", "warning")
            procs.start("syncer", "syncer", "--log-level", "warning")
            stop = spawn.Event()
            tail_out: Any = spawn.Queue()
            sample_out: Any = spawn.Queue()
            tail_ready, sample_ready = spawn.Event(), spawn.Event()
            tail = spawn.Process(target=_tail, args=(server.url, tail_out, tail_ready, stop), daemon=True)
            sampler = spawn.Process(
                target=_sample,
                args=(server.url, nodes, args.sample_every),
                kwargs={"out": sample_out, "ready": sample_ready, "stop": stop},
                daemon=True,
            )
            tail.start()
            sampler.start()
            start = spawn.Value("d", 0.0)
            go, report = spawn.Event(), spawn.Queue()
            readies = [spawn.Event() for _ in range(args.submitters)]
            submitters = [
                spawn.Process(
                    target=_submit_all,
                    args=(server.url, specs[k :: args.submitters]),
                    kwargs={"start": start, "ready": ready, "go": go, "report": report},
                    daemon=True,
                )
                for k, ready in enumerate(readies)
            ]
            for submitter in submitters:
                submitter.start()
            if not all(e.wait(120) for e in [*readies, tail_ready, sample_ready]):
                raise TimeoutError("the submitters or the measuring processes did not start")
            time.sleep(3)  # the roles list the members before the clock starts
            assert server.proc is not None and tail.pid is not None and sampler.pid is not None
            pids = {"redis": server.proc.pid, "sim": sim.process.pid}
            pids |= {name: role.process.pid for name, role in procs.roles.items() if role.process}
            pids |= {"bench (tail)": tail.pid, "bench (sampler)": sampler.pid}
            cpu_before = {name: _cpu_seconds(pid) for name, pid in pids.items()}
            started = time.monotonic()
            start.value = started
            go.set()
            outcome, succeeded, last_succeeded = _wait_for(
                len(specs), started, tail_out, procs, stall=args.stall, timeout=args.timeout
            )
            cpu_after = {name: _cpu_seconds(pid) for name, pid in pids.items()}
            stop.set()
            samples = sample_out.get(timeout=120)
            final = _drain(tail_out)
            sampler.join(10)
            tail.join(10)
            done: list[tuple[str, float]] = []
            errors: list[str] = []
            submit_cpu = 0.0
            for _ in submitters:
                got, failed, cpu = report.get(timeout=60)
                done += got
                errors += failed
                submit_cpu += cpu
            for submitter in submitters:
                submitter.join(10)
            metrics = _metrics(metrics_port)
            _settle(ledger)
            items, _ = Objects(client).list(FLEET_ASCENDJOB)
            if args.keep:
                (tmp / "jobs.json").write_text(json.dumps(items))
            drift = [str(d) for d in ledger.rebuild()]
            events_stored, events = _events(client)
            logs = procs.logs(10) if outcome != "finished" else ""
            procs.stop()
    finally:
        server.stop()
    load_end = _load()
    cpu = {name: round(cpu_after[name] - cpu_before[name], 1) for name in pids}
    cpu["submitters"] = round(submit_cpu, 1)
    return _report(
        args=args,
        specs=specs,
        started=started,
        outcome=outcome,
        last_succeeded=last_succeeded if succeeded else None,
        samples=samples,
        tail=final,
        submitted=dict(done),
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


def _wait_for(
    jobs: int, started: float, out: Any, procs: FleetProcesses, *, stall: float, timeout: float
) -> tuple[str, int, float]:
    """Until every job Succeeded (or no success for ``stall`` s, or ``timeout``, or a role died)."""
    succeeded, last, moved = 0, 0.0, time.monotonic()
    next_line = time.monotonic() + 30
    while succeeded < jobs:
        try:
            message = out.get(timeout=1)
        except queue.Empty:
            message = None
        now = time.monotonic()
        if message is not None and message[0] == "progress":
            if message[1] > succeeded:
                moved = now
            succeeded, last = message[1], message[2]
        if now >= next_line:
            print(
                f"  ... {now - started:.0f} s: {succeeded} of {jobs} jobs Succeeded (load {_load()})",
                flush=True,
            )
            next_line = now + 30
        dead = [name for name, role in procs.roles.items() if not role.alive]
        if dead:
            return f"role(s) exited: {', '.join(dead)}", succeeded, last
        if now - moved > stall:
            return f"stalled: no job Succeeded for {stall:.0f} s", succeeded, last
        if now - started > timeout:
            return f"timed out after {timeout:.0f} s", succeeded, last
    return "finished", succeeded, last


def _drain(out: Any) -> tuple[Any, ...]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        message = out.get(timeout=max(0.1, deadline - time.monotonic()))
        if message[0] == "done":
            return tuple(message)
    raise TimeoutError("the change-stream tail did not report")


def _settle(ledger: Ledger) -> None:
    """Give the last releases a moment to land before checking the ledger."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not ledger.usages(["root"])["root"].get(NPU) and not ledger.pending_counts().get("root"):
            return
        time.sleep(0.2)


def _report(
    *,
    args: argparse.Namespace,
    specs: list[Spec],
    started: float,
    outcome: str,
    last_succeeded: float | None,
    samples: list[tuple[float, list[int], list[int], list[int]]],
    tail: tuple[Any, ...],
    submitted: dict[str, float],
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
    by_name = {s.name: s for s in specs}
    nodes = node_names()
    finished = outcome == "finished"
    wall = (last_succeeded - started) if last_succeeded is not None else None
    arrivals = {name: t - started for name, t in submitted.items()}
    bound = floor(specs, arrivals)

    # Quota in use, waiting, attainable, per-leaf shares.
    end = last_succeeded if last_succeeded is not None else (samples[-1][0] if samples else started)
    run = [s for s in samples if started <= s[0] <= end]
    root = nodes.index("root")
    use = [s[1][root] / QUOTA for s in run]
    waiting = [s for s in run if s[3][root] > 0]
    use_waiting = [s[1][root] / QUOTA for s in waiting]
    all_waits = waits(specs, submitted, transitions)
    fair = fairness(run, nodes, all_waits)
    if args.dump is not None:
        args.dump.write_text(
            json.dumps(
                {
                    "started": started,
                    "nodes": nodes,
                    "samples": run,
                    "waits": [
                        [w.name, w.leaf, w.npus, w.start, None if w.end == math.inf else w.end]
                        for w in all_waits
                    ],
                    "specs": {s.name: [s.leaf, s.klass, arrivals.get(s.name)] for s in specs},
                    "transitions": {k: v for k, v in transitions.items()},
                }
            )
        )
    share = {name: statistics.fmean(v) for name, v in fair.shares.items() if v}
    best = max(share.items(), key=lambda kv: kv[1]) if share else ("-", 0.0)
    worst = min(share.items(), key=lambda kv: kv[1]) if share else ("-", 0.0)
    # Per sample with jobs waiting: the quota in use over what the tree let them use then.
    used_at = {s[0]: s[1][root] for s in waiting}
    of_attainable = [
        min(1.0, used_at[t] / (a * QUOTA)) if a > 0 else 1.0
        for t, a in zip(fair.attainable_at, fair.attainable, strict=True)
    ]
    # The measure of the earlier rows (before a leaf's own head counted, see fairness()).
    earlier = {
        n: statistics.fmean(v)
        for n, v in fairness(run, nodes, all_waits, head_grace=math.inf).shares.items()
        if v
    }
    earlier_spread = (max(earlier.values()) - min(earlier.values())) * 100 if earlier else 0.0
    timeline: list[float] = []
    attainable_timeline: list[float] = []
    if run:
        span = (run[-1][0] - run[0][0]) or 1.0

        def tenth_of(t: float) -> int:
            return int((t - run[0][0]) / span * 10 * 0.9999)

        for tenth in range(10):
            part = [u for s, u in zip(run, use, strict=True) if tenth_of(s[0]) == tenth]
            timeline.append(round(statistics.fmean(part) * 100, 1) if part else 0.0)
            pairs = zip(fair.attainable_at, fair.attainable, strict=True)
            can = [a for t, a in pairs if tenth_of(t) == tenth]
            attainable_timeline.append(round(statistics.fmean(can) * 100, 1) if can else 0.0)

    # Time to admission per class: each job's first wait.
    first_wait: dict[str, Wait] = {}
    for w in all_waits:
        first_wait.setdefault(w.name, w)
    wait_by_class: dict[str, list[float]] = {}
    for name, w in first_wait.items():
        if w.end != math.inf:
            wait_by_class.setdefault(by_name[name].klass, []).append(w.end - w.start)
    never = sum(1 for w in first_wait.values() if w.end == math.inf)
    missed = 0
    to_running: list[float] = []
    for spec in specs:
        seen = dict(reversed(transitions.get(spec.key, [])))  # the first time of each state
        if spec.name in submitted and ADMITTED not in seen and any(s in seen for s in _ADMITTED_OR_LATER):
            missed += 1
        if "Running" in seen and ADMITTED in seen:
            to_running.append(seen["Running"] - seen[ADMITTED])
    order = [c.name for c in CLASSES]
    classes = sorted(
        wait_by_class, key=lambda k: (int(k.partition("@")[2] or 0), order.index(k.partition("@")[0]))
    )
    per_class = {
        k: {
            "jobs": len(v),
            "mean_s": round(statistics.fmean(v), 2),
            "p50_s": round(_percentile(v, 0.5), 2),
            "p95_s": round(_percentile(v, 0.95), 2),
        }
        for k, v in ((k, wait_by_class[k]) for k in classes)
    }
    ratios: dict[str, float] = {}
    for priority in sorted({int(k.partition("@")[2] or 0) for k in classes}):
        means = [per_class[k]["mean_s"] for k in classes if int(k.partition("@")[2] or 0) == priority]
        if means and min(means) > 0:
            ratios[str(priority)] = round(max(means) / min(means), 2)

    # Final state of every job.
    states = Counter(current_state(obj) or "-" for obj in items)
    stored = {f"{obj['metadata']['namespace']}/{obj['metadata']['name']}" for obj in items}
    lost = sorted(by_name[n].key for n in submitted if by_name[n].key not in stored)
    admissions = sum(int((obj.get("status") or {}).get("attempt") or 0) for obj in items)
    stuck = Counter(
        (str((obj.get("status") or {}).get("conditions", [{}])[-1].get("message", ""))[:90])
        for obj in items
        if current_state(obj) not in (SUCCEEDED,)
    )
    preempted_jobs = len({p[0] for p in preempted})
    preempted_events = events.get(PREEMPTED, (0, 0))
    dispatcher_cpu = cpu.get("dispatcher", 0.0)

    figures: dict[str, Any] = {
        "benchmark": "contention",
        "finished": finished,
        "outcome": outcome,
        "jobs": len(specs),
        "submitted": len(submitted),
        "submit_errors": len(errors),
        "groups": len(GROUPS),
        "leaves": len(leaves()),
        "quota_npus": QUOTA,
        "capacity_npus": sum(MEMBER_NODES) * NODE_NPUS,
        "priority_mix": bool(args.priority_mix),
        "seed": args.seed,
        "tree": args.tree,
        "wall_s": round(wall, 1) if wall is not None else None,
        "floor_s": round(bound.seconds, 1),
        "floor_quota_s": round(bound.quota, 1),
        "floor_arrival_s": round(bound.arrival, 1),
        "floor_tree_s": round(bound.tree, 1),
        "wall_over_floor": round(wall / bound.seconds, 2) if wall is not None else None,
        "last_arrival_s": round(max(arrivals.values()), 1) if arrivals else None,
        "quota_use_mean": round(statistics.fmean(use), 3) if use else None,
        "waiting_fraction": round(len(waiting) / len(run), 3) if run else None,
        "quota_use_while_waiting": round(statistics.fmean(use_waiting), 3) if use_waiting else None,
        "attainable_while_waiting": round(statistics.fmean(fair.attainable), 3) if fair.attainable else None,
        "use_of_attainable_while_waiting": round(statistics.fmean(of_attainable), 3)
        if of_attainable
        else None,
        "quota_use_by_tenth_pct": timeline,
        "attainable_by_tenth_pct": attainable_timeline,
        "admission_wait": per_class,
        "class_wait_ratio_by_priority": ratios,
        "admission_seen_late": missed,
        "never_admitted": never,
        "admitted_to_running_p50_s": round(_percentile(to_running, 0.5), 3) if to_running else None,
        "leaf_share_best": {"leaf": best[0], "pct": round(best[1] * 100, 1)},
        "leaf_share_worst": {"leaf": worst[0], "pct": round(worst[1] * 100, 1)},
        "leaf_spread_points": round((best[1] - worst[1]) * 100, 1),
        "leaf_spread_points_smallest_job_only": round(earlier_spread, 1),
        "leaf_share_pct": {k: round(v * 100, 1) for k, v in share.items()},
        "leaf_share_samples": {k: len(v) for k, v in fair.shares.items()},
        "admissions": admissions,
        "dispatcher_cpu_s": dispatcher_cpu,
        "dispatcher_cpu_ms_per_admission": round(dispatcher_cpu / admissions * 1000, 2)
        if admissions
        else None,
        "cpu_seconds": cpu,
        "preempted_jobs": preempted_jobs,
        "preemptions": len(preempted),
        "requeues": requeues,
        "preempted_events": preempted_events[1],
        "decisions": metrics,
        "events_stored": events_stored,
        "events_by_reason": {r: {"objects": n, "occurrences": c} for r, (n, c) in events.items()},
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
        ratio = wall / bound.seconds
        print(
            f"wall: {wall:.1f} s to the last Succeeded; floor {bound.describe()}: "
            f"{ratio:.2f}x the floor (goal <= 1.3)"
        )
    print(
        f"quota in use: mean {figures['quota_use_mean'] or 0:.1%} over the run; jobs waited in "
        f"{figures['waiting_fraction'] or 0:.0%} of the {len(run)} samples, "
        f"mean {figures['quota_use_while_waiting'] or 0:.1%} while they waited (goal >= 90%); "
        "the tree's max and max-jobs allowed "
        f"{figures['attainable_while_waiting'] or 0:.1%} then, and "
        f"{figures['use_of_attainable_while_waiting'] or 0:.1%} of that was in use"
    )
    print("quota in use by tenth of the run (%): " + " ".join(f"{x:.0f}" for x in timeline))
    attainable_timeline = figures["attainable_by_tenth_pct"]
    print("attainable by tenth (%), jobs waiting: " + " ".join(f"{x:.0f}" for x in attainable_timeline))
    print("time from submission to admission (s), per class: mean / p50 / p95")
    for k, v in per_class.items():
        print(f"  {k:>8}: {v['mean_s']:7.2f} / {v['p50_s']:7.2f} / {v['p95_s']:7.2f}   ({v['jobs']} jobs)")
    print(
        "  largest class mean over smallest, per priority (goal <= 2): "
        + ", ".join(f"priority {p}: {r}" for p, r in ratios.items())
        + (f"; {missed} jobs' admission seen only from a later state" if missed else "")
        + (f"; {never} jobs never admitted" if never else "")
        + (f"; Admitted -> Running p50 {figures['admitted_to_running_p50_s']} s" if to_running else "")
    )
    ranked = sorted(share.items(), key=lambda kv: kv[1])
    print(
        f"share of fair entitlement while waiting: best {best[1]:.1%} ({best[0]}), "
        f"worst {worst[1]:.1%} ({worst[0]}): spread {figures['leaf_spread_points']} points (goal <= 10); "
        "lowest: "
        + ", ".join(f"{n} {v:.0%}" for n, v in ranked[:5])
        + f"; {figures['leaf_spread_points_smallest_job_only']} points as measured before the head rule"
    )
    print(
        f"dispatcher: {dispatcher_cpu:.1f} CPU s for {admissions} admissions = "
        f"{figures['dispatcher_cpu_ms_per_admission']} ms per admission; CPU s of every process: "
        + ", ".join(f"{n} {s}" for n, s in cpu.items())
    )
    print(
        f"preemptions: {len(preempted)} (running jobs sent back with reason Preempted; "
        f"{preempted_jobs} jobs), {requeues} requeues of admitted jobs for any reason; "
        f"{preempted_events[1]} Events of reason Preempted"
    )
    print(
        "dispatcher decisions (fleet_dispatch_decisions_total): "
        + (", ".join(f"{k} {v:.0f}" for k, v in metrics.items()) if metrics else "not served")
    )
    print(
        f"Events stored at the end: {events_stored:,} ("
        + ", ".join(f"{r} {n:,} objects / {c:,} occurrences" for r, (n, c) in list(events.items())[:6])
        + f"); fleet-object changes per job {figures['fleet_object_changes_per_job']}"
        + (f"; the tail fell behind the stream {gones} times" if gones else "")
    )
    print(
        f"verified: {states.get(SUCCEEDED, 0)}/{len(specs)} Succeeded, {len(lost)} lost, "
        f"{len(errors)} refused at submission; states {dict(states)}; ledger drift: {drift or 'none'}"
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
