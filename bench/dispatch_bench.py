"""End-to-end dispatch benchmark: submission to Dispatched and Running, failover, sync latency, memory.

    .venv/bin/python -m bench.dispatch_bench [--members 10] [--nodes 20] [--jobs 1000]

It runs the real system: a private ``redis-server`` (AOF on), ``fleet sim`` with ``--members``
simulated members of ``--nodes`` Atlas 800T A2 nodes (8 NPUs each), and ``fleet dispatcher``,
two ``fleet worker`` and one ``fleet syncer`` as processes (the test harness of
``tests/support`` starts them, as the integration tests do). Then:

1. **Throughput.** ``--jobs`` one-pod jobs of 1 NPU (they all fit at once, so capacity is not
   what is measured) are submitted as the fleet API does (store + queue); the clock runs from
   the first submission to the last job seen ``Dispatched`` (resp. ``Running``) on the fleet.
   The submissions run in ``--submitters`` processes of their own (clients of the API, each
   waiting on its own round trips), on the same two cores as the system, so past a point they
   bound the figure; ``--backlog`` submits every job
   while the dispatcher is stopped (SIGSTOP) and runs the clock from its SIGCONT: how fast a
   full queue drains.
2. **Status-sync latency.** The benchmark watches every member's AscendJobs itself and tails the
   fleet's change stream (in a second process); per job, latency = when the fleet object first
   showed ``Running`` minus when the member's copy did (one clock, the system's monotonic one).
   **Admitted to copy** (issue 30, goal 4): from when the fleet first showed the job
   ``Admitted`` to when its copy was first seen in its member's watch, before any status (the
   member's operator writes its first a tick later), by the same two watches. The goal holds it
   at 200 admissions a second: ``--rate 200`` submits at that pace instead of as fast as the
   clients can (a burst admits hundreds in one round, and their copies queue behind each other).
   ``--member-latency MS`` delays every answer of every member (the simulator's ``slow`` fault):
   the simulated members answer in a millisecond, a real API server a region away in tens.
3. **Failover.** The member with the most jobs is taken down (connection refused); the clock
   runs until every one of its jobs is ``Running`` in another member; the figure reported is
   that time minus the policy's toleration (5 s here).
4. **Memory.** On a separate Redis database, ``--memory-jobs`` copies of the sample AscendJob
   (``config/samples``) are submitted and Redis ``used_memory`` is compared before and after.

Durability (issue 23): ``--appendfsync`` is the Redis server's (``always``, as ``fleet up`` runs
it, by default), ``--durability`` what each submission waits for before it counts as
acknowledged, as ``fleet api --durability`` does (:mod:`fleet.jobs.durability`; ``replicas``
starts one replica of the Redis). ``--compare-durability`` runs the benchmark once for each of
``everysec``, ``always``, and ``everysec`` with ``WAIT 1`` on a replica (and ``WAITAOF 1 0`` on a
Redis that has it), one after the other, and prints the figures side by side.

Ends with one JSON line of the figures.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import platform
import queue
import shutil
import signal
import statistics
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from fleet.connections import redis_from_url
from fleet.endpoint.keys import DEFAULT_API_KEYS
from fleet.jobs import Phase, current_state, submit
from fleet.jobs.durability import Durability
from fleet.kinds import PROPAGATION_POLICY, fleet_kind
from fleet.members import WatchEvent, load_members
from fleet.state import Objects
from fleet.workloads import ascendjob, member_resource
from queues import Ledger
from tests.support.fleet import FleetProcesses
from tests.support.redis_server import RedisServer
from tests.support.sim import running_sim

#: The fleet's AscendJobs, and their member resource, which this benchmark submits and watches.
FLEET_ASCENDJOB = fleet_kind(ascendjob)
JOBS = member_resource(ascendjob.resource)

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "config" / "samples" / "pytorch_multinodes_acjob_910b.yaml"
TOLERATION = 5
#: The fleet tail's shortest interval between two reads (see :func:`_tail_fleet`).
TAIL_EVERY = 0.01


def _topology(members: int, nodes: int) -> dict[str, Any]:
    pool = {
        "prefix": "a2",
        "count": nodes,
        "labels": {
            "accelerator": "huawei-Ascend910",
            "accelerator-type": "module-910b-8",
            "host-arch": "huawei-arm",
        },
        "allocatable": {"huawei.com/Ascend910": "8", "cpu": "188", "memory": "1500Gi", "pods": "110"},
    }
    return {
        "simulation": {"jobDurationSeconds": 3600, "tickSeconds": 0.05},
        "members": [{"name": f"member-{i + 1}", "nodePools": [pool]} for i in range(members)],
    }


def _one_npu_job(i: int) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    obj["metadata"] = {"name": f"b{i}", "namespace": "default", "labels": obj["metadata"]["labels"]}
    del obj["spec"]["replicaSpecs"]["Worker"]
    obj["spec"]["runPolicy"]["schedulingPolicy"].pop("minAvailable", None)
    tpl = obj["spec"]["replicaSpecs"]["Master"]["template"]["spec"]
    tpl.pop("affinity", None)
    tpl["nodeSelector"] = {"host-arch": "huawei-arm"}
    tpl["containers"][0]["resources"] = {
        "requests": {"huawei.com/Ascend910": "1"},
        "limits": {"huawei.com/Ascend910": "1"},
    }
    return obj


def _policy() -> dict[str, Any]:
    return {
        "apiVersion": "policy.one.alibabacloud.com/v1alpha1",
        "kind": "PropagationPolicy",
        "metadata": {"name": "bench", "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "mindxdl.gitee.com/v1", "kind": "AscendJob"}],
            "failover": {
                "application": {
                    "decisionConditions": {"tolerationSeconds": TOLERATION},
                    "purgeMode": "Immediately",
                }
            },
        },
    }


class Observer:
    """First time each job was seen in each state, at the fleet and at the members (one clock:
    ``time.monotonic`` is the system's, the same in every process).

    The fleet's change stream is tailed in a process of its own (:func:`_tail_fleet`): decoding
    every change of every job is the observer's largest cost, and sharing a GIL with the ten
    member watches would delay one side's timestamps against the other's. It sends back only
    (job, state, when) triples."""

    def __init__(self, url: str) -> None:
        self.fleet: dict[str, dict[str, float]] = {}
        self.member: dict[str, dict[str, tuple[float, str]]] = {}
        #: When each job's copy was first seen in its member, whatever its status (none yet: the
        #: member's operator writes the first one a tick later).
        self.copied: dict[str, float] = {}
        self.lock = threading.Lock()
        spawn = multiprocessing.get_context("spawn")
        self.stop = spawn.Event()
        self._ready = spawn.Event()
        self._seen: Any = spawn.Queue()
        self.process = spawn.Process(
            target=_tail_fleet, args=(url, self._seen, self._ready, self.stop), daemon=True
        )
        self.thread = threading.Thread(target=self._receive, daemon=True)

    def start(self) -> None:
        self.process.start()
        if not self._ready.wait(60):
            raise TimeoutError("the fleet observer did not start")
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.process.join(10)

    def _receive(self) -> None:
        while True:
            try:
                batch = self._seen.get(timeout=0.5)
            except queue.Empty:
                if self.stop.is_set():
                    return
                continue
            with self.lock:
                for name, state, when in batch:
                    seen = self.fleet.setdefault(name, {})
                    seen.setdefault(state, when)
                    seen["last:" + state] = when

    def on_member(self, event: WatchEvent) -> None:
        now = time.monotonic()
        objs = list(event.objects) if event.object is None else [event.object]
        with self.lock:
            for obj in objs:
                self.copied.setdefault(obj["metadata"]["name"], now)
                state = current_state(obj)
                if state:
                    self.member.setdefault(obj["metadata"]["name"], {}).setdefault(state, (now, event.member))

    def member_running(self) -> int:
        """How many jobs were seen Running in a member."""
        with self.lock:
            return sum(1 for seen in self.member.values() if "Running" in seen)

    def fleet_times(self, state: str) -> list[float]:
        with self.lock:
            return [s[state] for s in self.fleet.values() if state in s]


def _tail_fleet(url: str, out: Any, ready: Any, stop: Any) -> None:
    """Tail the fleet jobs' change stream; put (job, state, when) triples on ``out``.

    It reads at most every :data:`TAIL_EVERY` seconds: woken for every few changes, the observer
    cost as much CPU as the syncer, taken from the system it measures. A change is stamped with
    the time of the read that brought it, so a fleet-side time is late by at most that much
    (never early): throughput and sync latency err on the pessimistic side, by 10 ms at most.

    A job whose copy the syncer saw Running before the worker's Dispatched mark was written
    goes from Admitted to Running in one change, its Dispatched condition set with it: that
    change counts as its Dispatched too (counting states alone, the benchmark waited for a
    Dispatched it would never see, until its timeout).
    """
    objects = Objects(redis_from_url(url))
    rv = objects.resource_version()
    ready.set()
    while not stop.is_set():
        began = time.monotonic()
        events, rv = objects.changes(FLEET_ASCENDJOB, rv, block_ms=200)
        now = time.monotonic()
        batch = [
            (e.object["metadata"]["name"], state, now) for e in events if (state := current_state(e.object))
        ]
        batch += [
            (e.object["metadata"]["name"], Phase.DISPATCHED, now)
            for e in events
            if e.object is not None and current_state(e.object) != Phase.DISPATCHED and _dispatched(e.object)
        ]
        if batch:
            out.put(batch)
        if events:
            time.sleep(max(0.0, began + TAIL_EVERY - time.monotonic()))


def _dispatched(obj: Mapping[str, Any]) -> bool:
    """Whether the job's conditions say its copy was created (a Dispatched condition, True)."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == Phase.DISPATCHED and c.get("status") == "True" for c in conditions)


def _submit_all(
    url: str,
    numbers: range,
    ready: Any,
    go: Any,
    report: Any,
    *,
    durability: Durability | None = None,
    rate: float = 0.0,
) -> None:
    """One client's submissions (jobs ``numbers``), in a process of its own as an API replica
    is (not sharing a GIL with the observer's threads), each acknowledged after ``durability``
    confirmed it as the API does; puts how long they took and the CPU they used.

    With ``rate`` (this client's submissions a second) the n-th is due ``n / rate`` after the
    start, whenever the ones before it ended (an open loop, as users arrive): a client that
    falls behind catches up at once rather than shifting every later arrival."""
    durability = durability or Durability()
    marker = DEFAULT_API_KEYS.durability_marker
    client = redis_from_url(url)
    objects, ledger = Objects(client), Ledger(client)
    jobs = [_one_npu_job(i) for i in numbers]
    ledger.tree()
    # What a running API server has done once and for all (its imports, the pod schema's field
    # tables), outside the per-job figure: the validation of one job, stored nowhere.
    ascendjob.validate(jobs[0])
    ready.set()
    go.wait()
    started, cpu = time.monotonic(), time.process_time()
    for n, obj in enumerate(jobs):
        if rate:
            time.sleep(max(0.0, started + n / rate - time.monotonic()))
        submit(objects, ledger, obj)
        durability.confirm(client, marker)
    report.put((time.monotonic() - started, time.process_time() - cpu))


def _wait(what: str, done: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.1)


def _memory(server: RedisServer, count: int) -> dict[str, float]:
    """Bytes per queued job, by what holds them (``MEMORY USAGE`` of every key, exact).

    ``objects`` are the stored jobs (and their Events), ``ledger`` the quota ledger's queue
    entries and records, ``streams`` the change streams: a ring of at most ``history`` entries
    per kind, so their share per job falls as the queue grows past it.
    """
    client = redis_from_url(server.url.rsplit("/", 1)[0] + "/1")
    objects, ledger = Objects(client), Ledger(client)
    sample = yaml.safe_load(SAMPLE.read_text())
    before = int(client.info("memory")["used_memory"])
    for i in range(count):
        obj = dict(sample)
        obj["metadata"] = {**sample["metadata"], "name": f"mem-{i:06d}", "namespace": "default"}
        submit(objects, ledger, obj)
    after = int(client.info("memory")["used_memory"])
    parts = {"objects": 0, "streams": 0, "ledger": 0}
    for key in client.scan_iter(count=1000):
        name = key.decode()
        usage = int(client.memory_usage(key, samples=0) or 0)
        part = "streams" if client.type(key) == b"stream" else "objects" if ":state:" in name else "ledger"
        parts[part] += usage
    client.flushdb()
    return {"total": (after - before) / count, **{k: v / count for k, v in parts.items()}}


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds a process has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_by_process(pids: dict[str, int]) -> dict[str, float]:
    return {name: _cpu_seconds(pid) for name, pid in pids.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--memory-jobs", type=int, default=5000)
    parser.add_argument("--memory-only", action="store_true", help="Measure memory and stop.")
    parser.add_argument(
        "--submitters",
        type=int,
        default=4,
        help="Processes submitting at once (clients of the API); each waits on its own round trips.",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        metavar="JOBS_PER_S",
        help="Submit at this many jobs a second in all, spread over the submitters (an open loop: "
        "each is due at its time whatever the ones before met); 0, the default, as fast as they can.",
    )
    parser.add_argument(
        "--backlog",
        action="store_true",
        help="Submit every job while the dispatcher is stopped, then time how fast the queue drains.",
    )
    parser.add_argument("--appendfsync", choices=("always", "everysec"), default="always")
    parser.add_argument(
        "--durability",
        choices=("none", "aof", "replicas"),
        default="none",
        help="What a submission waits for (fleet api --durability); replicas starts one replica.",
    )
    parser.add_argument("--no-failover", action="store_true", help="Skip the failover figure.")
    parser.add_argument(
        "--member-latency",
        type=int,
        default=0,
        metavar="MS",
        help="Every member answers every API request this many milliseconds late (the simulator's "
        "slow fault, health probes apart): a member's API server in another region, or a busy one.",
    )
    parser.add_argument(
        "--compare-durability",
        action="store_true",
        help="Run once per durability setting (everysec, always, everysec + WAIT 1, and "
        "everysec + WAITAOF on Redis 7.2+) and print them side by side.",
    )
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dispatch-bench-"))
    try:
        figures = _compare(args, tmp) if args.compare_durability else _run(args, tmp)
    except BaseException:
        print(f"the roles' and Redis' logs are kept in {tmp}")
        raise
    shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(figures))


def _compare(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """The benchmark once per durability setting, in one run; the figures side by side."""
    settings = [("everysec", "none"), ("always", "none"), ("everysec", "replicas")]
    probe = RedisServer(tmp / "probe")
    probe.directory.mkdir()
    probe.start()
    try:
        client = probe.client()
        version = str(client.info("server")["redis_version"])
        client.close()
    finally:
        probe.stop()
    if tuple(int(p) for p in version.split(".")[:2]) >= (7, 2):
        settings.append(("everysec", "aof"))
    runs: dict[str, Any] = {}
    for appendfsync, durability in settings:
        name = f"{appendfsync}+{durability}"
        print(f"--- appendfsync {appendfsync}, durability {durability} ---")
        directory = tmp / name
        directory.mkdir()
        run = argparse.Namespace(**{**vars(args), "appendfsync": appendfsync, "durability": durability})
        runs[name] = _run(run, directory)
    print(f"redis-server {version}; {args.jobs} jobs, {args.submitters} submitters")
    print("| figure | " + " | ".join(runs) + " |")
    print("|---|" + "---|" * len(runs))
    for figure in ("submit_per_s", "to_dispatched_per_s", "to_running_per_s", "sync_latency_p99_ms"):
        print(f"| {figure} | " + " | ".join(str(r[figure]) for r in runs.values()) + " |")
    return {"benchmark": "dispatch-durability", "redis": version, "runs": runs}


def _run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Run the benchmark with its Redis data and the roles' logs under ``tmp``; print the
    figures as lines and return them."""
    server = RedisServer(tmp, appendfsync=args.appendfsync)
    server.start()
    follower: RedisServer | None = None
    durability = Durability()
    if args.durability == "replicas":
        follower = RedisServer(tmp / "replica", appendfsync=args.appendfsync, replicaof=server.port)
        follower.directory.mkdir()
        follower.start()
        _wait("the replica in sync", lambda: _synced(follower), 30)
        durability = Durability("replicas", 1, 1.0)
    elif args.durability == "aof":
        durability = Durability("aof", 0, 1.0)
    try:
        memory = _memory(server, args.memory_jobs)
        print(
            f"memory per queued sample-sized job ({args.memory_jobs} jobs): {memory['total']:.0f} B of "
            f"used_memory; objects {memory['objects']:.0f} B, quota ledger {memory['ledger']:.0f} B, "
            f"change streams {memory['streams']:.0f} B (a ring of the last changes, bounded)"
        )
        if args.memory_only:
            return {"benchmark": "dispatch-memory", "jobs": args.memory_jobs, **memory}
        with running_sim(_topology(args.members, args.nodes)) as sim:
            for i in range(args.members) if args.member_latency else ():
                sim.fault(f"member-{i + 1}", "slow", ms=args.member_latency, probes=False)
            client = redis_from_url(server.url)
            objects = Objects(client)
            objects.create(PROPAGATION_POLICY, _policy())
            procs = FleetProcesses(server.url, sim.kubeconfig, tmp)
            procs.start("dispatcher", "dispatcher", "--log-level", "warning")
            procs.start("worker-1", "worker", "--log-level", "warning")
            procs.start("worker-2", "worker", "--log-level", "warning")
            procs.start("syncer", "syncer", "--log-level", "warning")
            members = load_members(sim.kubeconfig)
            observer = Observer(server.url)
            observer.start()
            watchers = [m.watch(JOBS, observer.on_member) for m in members.values()]
            try:
                time.sleep(3)  # the roles list the members before the clock starts
                spawn = multiprocessing.get_context("spawn")
                go, report = spawn.Event(), spawn.Queue()
                readies = [spawn.Event() for _ in range(args.submitters)]
                submitters = [
                    spawn.Process(
                        target=_submit_all,
                        args=(
                            server.url,
                            range(k, args.jobs, args.submitters),
                            ready,
                            go,
                            report,
                        ),
                        kwargs={"durability": durability, "rate": args.rate / args.submitters},
                        daemon=True,
                    )
                    for k, ready in enumerate(readies)
                ]
                for submitter in submitters:
                    submitter.start()
                if not all(ready.wait(60) for ready in readies):
                    raise TimeoutError("the submitters did not start")
                assert server.proc is not None and observer.process.pid is not None
                pids = {
                    "bench (watches members)": os.getpid(),
                    "bench (tails the fleet)": observer.process.pid,
                    "redis": server.proc.pid,
                    "sim": sim.process.pid,
                }
                pids |= {name: role.process.pid for name, role in procs.roles.items() if role.process}
                dispatcher = procs.roles["dispatcher"].process
                assert dispatcher is not None
                if args.backlog:
                    dispatcher.send_signal(signal.SIGSTOP)  # the queue fills before anything moves
                cpu_before = _cpu_by_process(pids)
                commands_before = _commandstats(client)
                started = time.monotonic()
                go.set()
                reports = [report.get(timeout=600) for _ in submitters]
                submitted = max(seconds for seconds, _ in reports)
                submitter_cpu = sum(cpu for _, cpu in reports)
                for submitter in submitters:
                    submitter.join(10)
                if args.backlog:
                    cpu_before = _cpu_by_process(pids)
                    started = time.monotonic()
                    dispatcher.send_signal(signal.SIGCONT)
                _wait("all Dispatched", lambda: len(observer.fleet_times("Dispatched")) >= args.jobs, 600)
                to_dispatched = max(observer.fleet_times("Dispatched")) - started
                _wait("all Running", lambda: len(observer.fleet_times("Running")) >= args.jobs, 600)
                to_running = max(observer.fleet_times("Running")) - started
                cpu_after = _cpu_by_process(pids)
                commands = _commands_per_job(commands_before, _commandstats(client), args.jobs)
                cpu = {"submitters": round(submitter_cpu, 1)}
                cpu |= {name: round(cpu_after[name] - cpu_before[name], 1) for name in pids}
                # The member side too (its watches may trail the syncer's), so every job has both.
                _wait("all Running in the members", lambda: observer.member_running() >= args.jobs, 60)
                with observer.lock:
                    lat = sorted(
                        observer.fleet[n]["Running"] - observer.member[n]["Running"][0]
                        for n in observer.fleet
                        if "Running" in observer.fleet[n] and "Running" in observer.member.get(n, {})
                    )
                    # Goal 4 of issue 30: from the fleet's Admitted to the copy's first sight in its
                    # member's watch, before any status (the fleet side is stamped when the tail
                    # read it, up to TAIL_EVERY late, so this errs short by as much; the member's
                    # watch delivery, long by as much as it takes).
                    to_copy = sorted(
                        observer.copied[n] - observer.fleet[n]["Admitted"]
                        for n in observer.fleet
                        if "Admitted" in observer.fleet[n] and n in observer.copied
                    )
                    per_member: dict[str, list[str]] = {}
                    for name, seen in observer.member.items():
                        per_member.setdefault(seen["Running"][1], []).append(name)
                victim, victims = max(per_member.items(), key=lambda kv: len(kv[1]))
                failover = math.nan
                if not args.no_failover:
                    sim.fault(victim, "down")
                    down_at = time.monotonic()

                    def moved() -> bool:
                        with observer.lock:
                            return all(
                                observer.fleet.get(n, {}).get("last:Running", 0) > down_at for n in victims
                            )

                    _wait("failover", moved, 300)
                    failover = time.monotonic() - down_at
                    sim.fault(victim, "up")
            finally:
                observer.close()
                for w in watchers:
                    w.stop()
                for m in members.values():
                    m.close()
                procs.stop()
    finally:
        if follower is not None:
            follower.stop()
        server.stop()
    figures = {
        "benchmark": "dispatch",
        "appendfsync": args.appendfsync,
        "durability": durability.describe() if durability.waits else "none",
        "members": args.members,
        "nodes_per_member": args.nodes,
        "jobs": args.jobs,
        "member_latency_ms": args.member_latency,
        "mode": "backlog" if args.backlog else "live",
        "submitters": args.submitters,
        "submit_per_s": round(args.jobs / submitted),
        "to_dispatched_per_s": round(args.jobs / to_dispatched, 1),
        "to_running_per_s": round(args.jobs / to_running, 1),
        "sync_latency_p50_ms": round(statistics.median(lat) * 1000, 1) if lat else None,
        "sync_latency_p99_ms": round(lat[int(len(lat) * 0.99) - 1] * 1000, 1) if lat else None,
        "admitted_to_copy_p50_ms": round(statistics.median(to_copy) * 1000, 1) if to_copy else None,
        "admitted_to_copy_p99_ms": (
            round(to_copy[int(len(to_copy) * 0.99) - 1] * 1000, 1) if to_copy else None
        ),
        "failover_jobs": len(victims),
        "failover_total_s": round(failover, 2),
        "failover_beyond_toleration_s": round(failover - TOLERATION, 2),
        "redis_bytes_per_queued_job": round(memory["total"]),
        "redis_bytes_per_queued_job_objects_and_ledger": round(memory["objects"] + memory["ledger"]),
        "redis_bytes_per_queued_job_streams": round(memory["streams"]),
        "cpu_seconds_to_running": cpu,
        "redis_commands_per_job": commands,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    print(
        f"throughput: {figures['to_dispatched_per_s']} jobs/s to Dispatched, "
        f"{figures['to_running_per_s']} to Running "
        f"({args.jobs} jobs, submitted at {figures['submit_per_s']}/s"
        + (", all before the dispatcher started)" if args.backlog else ")")
    )
    print(
        f"CPU seconds from the start to the last Running ({to_running:.1f} s of wall time): "
        + ", ".join(f"{name} {seconds}" for name, seconds in cpu.items())
    )
    top = sorted(commands.items(), key=lambda kv: -kv[1])[1:9]
    print(
        f"Redis commands per job to Running: {commands['total']} ("
        + ", ".join(f"{name} {count}" for name, count in top)
        + "; the benchmark's own tail of the change stream included)"
    )
    print(f"sync latency: p50 {figures['sync_latency_p50_ms']} ms, p99 {figures['sync_latency_p99_ms']} ms")
    print(
        f"admitted to copy in its member: p50 {figures['admitted_to_copy_p50_ms']} ms, "
        f"p99 {figures['admitted_to_copy_p99_ms']} ms ({len(to_copy)} jobs)"
    )
    if not args.no_failover:
        print(
            f"failover: {len(victims)} jobs of {victim} running elsewhere {failover:.2f} s after it went down"
        )
    return figures


def _commandstats(client: Any) -> dict[str, int]:
    """Redis' own count of the commands it ran, by command (``INFO commandstats``)."""
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(row["calls"]) for name, row in stats.items()}


def _commands_per_job(before: dict[str, int], after: dict[str, int], jobs: int) -> dict[str, float]:
    """Commands per job between two counts: ``total`` and each command's, the round trips (a
    pipeline's commands count one by one) a job's life cost Redis, from every role."""
    delta = {name: after[name] - before.get(name, 0) for name in after}
    per_job = {name: round(count / jobs, 2) for name, count in delta.items() if count}
    return {"total": round(sum(delta.values()) / jobs, 1), **per_job}


def _synced(replica: RedisServer) -> bool:
    client = replica.client()
    try:
        return client.info("replication").get("master_link_status") == "up"
    finally:
        client.close()


if __name__ == "__main__":
    main()
