"""Member simulator benchmark: job creates per second across simulated members, and memory per node.

One ``fleet sim`` process runs ``--members`` members of ``--nodes`` Atlas 800T A2 nodes each.
Client processes create one-pod AscendJobs, spread over the members, with plain keep-alive HTTP
requests (``--client http``, the default: the load generator should not take the CPU the
simulator is measured on) or through the official ``kubernetes`` client (``--client
kubernetes``), while one watch per member (another process) counts the jobs' events: every
ADDED must arrive, and the jobs must reach Running. Memory per simulated node is the RSS of a
simulator with ``--nodes`` nodes per member minus one with a single node per member, divided by
the difference in nodes.

    .venv/bin/python -m bench.sim_bench [--members 10] [--nodes 100] [--jobs 4000]

Prints its figures, then one JSON line.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import platform
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import yaml
from kubernetes import client, config, watch

from fleet.ascend import ASCENDJOB_GROUP, ASCENDJOB_PLURAL, ASCENDJOB_VERSION
from tests.support.sim import RunningSim, running_sim

POOL = {
    "prefix": "a800t",
    "labels": {
        "accelerator": "huawei-Ascend910",
        "accelerator-type": "module-910b-8",
        "host-arch": "huawei-arm",
    },
    "allocatable": {"huawei.com/Ascend910": "8", "cpu": "188", "memory": "1500Gi", "pods": "110"},
}


def topology(members: int, nodes: int) -> dict[str, Any]:
    return {
        "simulation": {"jobDurationSeconds": 3600, "tickSeconds": 0.05},
        "members": [{"name": f"m{i:02}", "nodePools": [{**POOL, "count": nodes}]} for i in range(members)],
    }


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settled_rss(sim: RunningSim) -> int:
    time.sleep(1.0)
    return rss_bytes(sim.process.pid)


def job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{ASCENDJOB_GROUP}/{ASCENDJOB_VERSION}",
        "kind": "AscendJob",
        "metadata": {"name": name, "labels": {"framework": "pytorch", "bench": "sim"}},
        "spec": {
            "replicaSpecs": {
                "Worker": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "ascend",
                                    "image": "pytorch-test:latest",
                                    "resources": {
                                        "requests": {"huawei.com/Ascend910": "1"},
                                        "limits": {"huawei.com/Ascend910": "1"},
                                    },
                                }
                            ]
                        }
                    },
                }
            }
        },
    }


def create_jobs(
    kubeconfig: str, work: Sequence[tuple[str, str]], threads: int, gate: Any, out: Any, *, lean: bool
) -> None:
    """A client process: build clients, wait at the gate, create the jobs; report (start, end).

    ``lean``: POST the JSON over one keep-alive ``http.client`` connection per thread and member
    (the request the official client sends, without its per-call model and serialization cost),
    so that the client processes leave the simulator the CPU the measurement is about.
    """
    one: Callable[[tuple[str, str]], None]
    if lean:
        servers = {m: urlsplit(kube_server(kubeconfig, m)) for m in sorted({m for m, _ in work})}
        path = f"/apis/{ASCENDJOB_GROUP}/{ASCENDJOB_VERSION}/namespaces/default/{ASCENDJOB_PLURAL}"
        local = threading.local()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}

        def one(item: tuple[str, str]) -> None:
            member, name = item
            connections = local.__dict__.setdefault("connections", {})
            conn = connections.get(member)
            if conn is None:
                url = servers[member]
                conn = connections[member] = http.client.HTTPConnection(
                    str(url.hostname), url.port, timeout=60
                )
            conn.request("POST", path, json.dumps(job(name)), headers)
            response = conn.getresponse()
            body = response.read()
            if response.status != 201:
                raise RuntimeError(f"create {member}/{name}: {response.status} {body[:200]!r}")

    else:
        apis: dict[str, client.CustomObjectsApi] = {}
        for member in sorted({m for m, _ in work}):
            api_client = config.new_client_from_config(config_file=kubeconfig, context=member)  # type: ignore[no-untyped-call]
            api_client.rest_client.pool_manager.connection_pool_kw["maxsize"] = threads
            apis[member] = client.CustomObjectsApi(api_client)

        def one(item: tuple[str, str]) -> None:
            member, name = item
            apis[member].create_namespaced_custom_object(
                ASCENDJOB_GROUP, ASCENDJOB_VERSION, "default", ASCENDJOB_PLURAL, job(name)
            )

    out.put("ready")
    gate.wait()
    started = time.time()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, work))
    out.put((started, time.time()))


def kube_server(kubeconfig: str, context: str) -> str:
    """The API server URL of ``context`` in the kubeconfig."""
    data = yaml.safe_load(Path(kubeconfig).read_text())
    cluster = next(c["context"]["cluster"] for c in data["contexts"] if c["name"] == context)
    return str(next(c["cluster"]["server"] for c in data["clusters"] if c["name"] == cluster))


class Watcher(threading.Thread):
    """Counts ADDED jobs and jobs seen Running on one member."""

    def __init__(self, kubeconfig: str, member: str, expected: int, since: str) -> None:
        super().__init__(daemon=True)
        api_client = config.new_client_from_config(config_file=kubeconfig, context=member)  # type: ignore[no-untyped-call]
        self.api = client.CustomObjectsApi(api_client)
        self.expected = expected
        self.since = since
        self.added: set[str] = set()
        self.running: set[str] = set()
        self.events = 0
        self.all_added_at: float | None = None
        self.all_running_at: float | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
            self.api.list_namespaced_custom_object,
            ASCENDJOB_GROUP,
            ASCENDJOB_VERSION,
            "default",
            ASCENDJOB_PLURAL,
            resource_version=self.since,
            timeout_seconds=300,
        )
        for event in stream:
            self.events += 1
            name = event["object"]["metadata"]["name"]
            if event["type"] == "ADDED":
                self.added.add(name)
                if len(self.added) == self.expected:
                    self.all_added_at = time.perf_counter()
            conditions = (event["object"].get("status") or {}).get("conditions") or []
            if conditions and conditions[-1]["type"] == "Running":
                self.running.add(name)
                if len(self.running) == self.expected:
                    self.all_running_at = time.perf_counter()
                    return
            if self.stop.is_set():
                return


def throughput(sim: RunningSim, jobs: int, processes: int, threads: int, lean: bool) -> dict[str, Any]:
    members = sim.members
    kubeconfig = str(sim.kubeconfig)
    names = [(members[i % len(members)], f"bench-{i:06}") for i in range(jobs)]
    versions: dict[str, str] = {}
    for member in members:
        api = client.CustomObjectsApi(sim.api_client(member))
        listed = api.list_namespaced_custom_object(
            ASCENDJOB_GROUP, ASCENDJOB_VERSION, "default", ASCENDJOB_PLURAL
        )
        versions[member] = cast(dict[str, Any], listed)["metadata"]["resourceVersion"]
    per_member = {m: sum(1 for n, _ in names if n == m) for m in members}
    watchers = [Watcher(kubeconfig, m, per_member[m], versions[m]) for m in members]
    for watcher in watchers:
        watcher.start()
    context = multiprocessing.get_context("spawn")
    gate, out = context.Event(), context.Queue()
    workers = [
        context.Process(
            target=create_jobs,
            args=(kubeconfig, names[i::processes], threads, gate, out),
            kwargs={"lean": lean},
        )
        for i in range(processes)
    ]
    for worker in workers:
        worker.start()
    for _ in workers:  # every client imported and connected: only the creates are timed
        out.get(timeout=300)
    wall_start = time.time()
    started = time.perf_counter()
    cpu_before = cpu_seconds(sim.process.pid)
    gate.set()
    spans = [out.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join()
    created_in = max(end for _, end in spans) - min(start for start, _ in spans)
    started += min(start for start, _ in spans) - wall_start
    deadline = time.monotonic() + 120
    while any(w.is_alive() for w in watchers) and time.monotonic() < deadline:
        time.sleep(0.1)
    for watcher in watchers:
        watcher.stop.set()
    sim_cpu = cpu_seconds(sim.process.pid) - cpu_before
    added = sum(len(w.added) for w in watchers)
    running = sum(len(w.running) for w in watchers)
    last_added = max((w.all_added_at or float("nan")) for w in watchers)
    last_running = max((w.all_running_at or float("nan")) for w in watchers)
    return {
        "jobs": jobs,
        "client": "http.client" if lean else "kubernetes",
        "create_seconds": round(created_in, 3),
        "creates_per_second": round(jobs / created_in, 1),
        "watch_added_delivered": added,
        "watch_events": sum(w.events for w in watchers),
        "all_added_seconds": round(last_added - started, 3),
        "jobs_running": running,
        "all_running_seconds": round(last_running - started, 3),
        "running_per_second": round(running / (last_running - started), 1),
        "sim_cpu_seconds": round(sim_cpu, 2),
        "sim_cpu_ms_per_job": round(1000 * sim_cpu / jobs, 2),
        "sim_jobs_per_cpu_second": round(jobs / sim_cpu, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--processes", type=int, default=3, help="client processes")
    parser.add_argument("--threads", type=int, default=8, help="threads per client process")
    parser.add_argument(
        "--client",
        choices=("http", "kubernetes"),
        default="http",
        help="create through keep-alive http.client connections (default) or the official kubernetes client",
    )
    args = parser.parse_args()

    with running_sim(topology(args.members, 1)) as small:
        base_rss = settled_rss(small)
    with running_sim(topology(args.members, args.nodes), extra_args=("--log-level", "warning")) as sim:
        full_rss = settled_rss(sim)
        figures = throughput(sim, args.jobs, args.processes, args.threads, args.client == "http")
        after_rss = rss_bytes(sim.process.pid)
    nodes = args.members * args.nodes
    per_node = (full_rss - base_rss) / (args.members * (args.nodes - 1))
    result = {
        "benchmark": "sim",
        "members": args.members,
        "nodes": nodes,
        **figures,
        "goal_creates_per_second": 500,
        "rss_mib_idle": round(full_rss / 2**20, 1),
        "rss_mib_after_jobs": round(after_rss / 2**20, 1),
        "rss_kib_per_node": round(per_node / 1024, 1),
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d"),
    }
    print(f"simulator: {args.members} members x {args.nodes} nodes = {nodes} nodes in one process")
    rate = figures["creates_per_second"]
    print(f"client: {figures['client']}, {args.processes} processes x {args.threads} threads")
    print(f"creates: {figures['jobs']} jobs in {figures['create_seconds']} s = {rate}/s (goal 500/s)")
    delivered = figures["watch_added_delivered"]
    print(f"watch: {delivered}/{figures['jobs']} ADDED delivered, {figures['watch_events']} events in all")
    print(f"running: {figures['jobs_running']} jobs Running after {figures['all_running_seconds']} s")
    print(
        f"simulator CPU: {figures['sim_cpu_ms_per_job']} ms per job (create, pods, binding, status, events,"
        f" watches) = {figures['sim_jobs_per_cpu_second']} jobs per CPU second"
    )
    print(
        f"memory: {result['rss_kib_per_node']} KiB per simulated node (idle RSS {result['rss_mib_idle']} MiB)"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
