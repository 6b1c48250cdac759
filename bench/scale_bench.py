"""Scale benchmark: many members over several simulator processes, a deep queue, sharded syncers.

    .venv/bin/python -m bench.scale_bench [--members 10,25,50] [--nodes 100] [--sims 2]
        [--queued 20000] [--syncers 3] [--window 15]

For each member count it runs the real system: a private ``redis-server`` (``appendfsync
everysec``), ``--sims`` ``fleet sim`` processes sharing the members (``--nodes`` Atlas 800T A2
nodes of 8 NPUs each per member), ``--syncers`` ``fleet syncer --sharded`` processes and then
``fleet dispatcher`` and two ``fleet worker``. Then:

1. ``--queued`` one-pod, 1-NPU jobs are queued (stored and queued as the API does, by two
   client processes) before any dispatcher runs.
2. **Syncers, idle.** Once the syncers share every member: their RSS and CPU over ``--window``
   seconds, per member (watches, probes and leases, no job traffic).
3. **Dispatcher.** The dispatcher and workers start; the seconds from the dispatcher's start
   to its ``dispatcher_started`` (members listed), to its first placement and to its
   ``--placements``-th; over
   ``--window`` seconds from the first placement: placements per second
   (``fleet_dispatch_decisions_total{outcome="placed"}``), and
   the syncers' CPU and RSS per member under that traffic (every placed job becomes a member copy
   whose Created and Running the syncers mirror), and the p99 of ``fleet_sync_seconds`` (one
   member change read to its fleet object written, per copy; bucket upper bound).
4. **Takeover.** The syncer owning most members is killed with -9; the time until every one of
   its members is owned by a live syncer (``--ownership-seconds`` is the lease).
5. **Reconcile.** The dispatcher's first reconcile, walked a slice per round between its cycles
   from its start: how long it took in all (waited for, at most ``--first-timeout``).

Prints a line per member count and ends with one JSON line of all figures.
"""

from __future__ import annotations

import argparse
import copy
import json
import multiprocessing
import os
import platform
import re
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from bench.dispatch_bench import _cpu_seconds, _one_npu_job, _wait
from fleet.connections import redis_from_url
from fleet.jobs import submit
from fleet.state import Objects
from fleet.state.dispatch_keys import DEFAULT_DISPATCH_KEYS
from queues import Ledger
from tests.support.fleet import FleetProcesses
from tests.support.net import free_port
from tests.support.redis_server import RedisServer
from tests.support.sim import running_sim

POOL = {
    "prefix": "a2",
    "labels": {
        "accelerator": "huawei-Ascend910",
        "accelerator-type": "module-910b-8",
        "host-arch": "huawei-arm",
    },
    "allocatable": {"huawei.com/Ascend910": "8", "cpu": "188", "memory": "1500Gi", "pods": "110"},
}


def _queue(url: str, numbers: range, ready: Any, go: Any) -> None:
    """One client's submissions, as the API stores and queues them (one parsed template copied:
    parsing the sample per job would cost more than submitting it)."""
    client = redis_from_url(url)
    objects, ledger = Objects(client), Ledger(client)
    template = _one_npu_job(0)
    ready.set()
    go.wait()
    for i in numbers:
        obj = copy.deepcopy(template)
        obj["metadata"]["name"] = f"b{i}"
        submit(objects, ledger, obj)


def _topology(names: list[str], nodes: int) -> dict[str, Any]:
    return {
        "simulation": {"jobDurationSeconds": 3600, "tickSeconds": 0.1},
        "members": [{"name": name, "nodePools": [{**POOL, "count": nodes}]} for name in names],
    }


def _merge_kubeconfigs(paths: list[Path], out: Path) -> None:
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config"}
    merged |= {"clusters": [], "users": [], "contexts": []}
    for path in paths:
        config = yaml.safe_load(path.read_text())
        for part in ("clusters", "users", "contexts"):
            merged[part] += [e for e in config.get(part) or [] if e["name"] != "fleet"]
    merged["current-context"] = merged["contexts"][0]["name"]
    out.write_text(yaml.safe_dump(merged))


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _scrape(port: int, *names: str) -> dict[str, list[Any]]:
    """The metrics a process serves; only the samples ``names`` when given (prometheus_client's
    ``name[]`` filter): a whole exposition of the dispatcher's 100-member series costs it about
    20 ms of its GIL, and the placements are sampled five times a second."""
    query = "?" + "&".join(f"name[]={name}" for name in names) if names else ""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics{query}", timeout=5).read().decode()
    return {family.name: list(family.samples) for family in text_string_to_metric_families(text)}


def _placed(port: int) -> float:
    samples = _scrape(port, "fleet_dispatch_decisions_total").get("fleet_dispatch_decisions", [])
    return float(
        sum(s.value for s in samples if s.name.endswith("_total") and s.labels.get("outcome") == "placed")
    )


def _sync_buckets(ports: list[int]) -> dict[float, float]:
    buckets: dict[float, float] = {}
    for port in ports:
        for sample in _scrape(port).get("fleet_sync_seconds", []):
            if sample.name.endswith("_bucket"):
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
    return buckets


def _p99(before: dict[float, float], after: dict[float, float]) -> tuple[float, int]:
    delta = {b: after.get(b, 0.0) - before.get(b, 0.0) for b in after}
    total = delta.get(float("inf"), 0.0)
    if total <= 0:
        return float("nan"), 0
    for bound in sorted(delta):
        if delta[bound] >= 0.99 * total:
            return bound, int(total)
    return float("inf"), int(total)


class _Placements(threading.Thread):
    """The dispatcher's placements counted every 0.2 s from its start: when it reached each count."""

    def __init__(self, port: int, began: float) -> None:
        super().__init__(daemon=True)
        self.port, self.began = port, began
        self.samples: list[tuple[float, float]] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(0.2):
            try:
                self.samples.append((time.monotonic() - self.began, _placed(self.port)))
            except OSError:
                continue  # not serving metrics yet

    def stop(self) -> None:
        self._stop_event.set()
        self.join()

    def wait(self, count: int, timeout: float) -> float:
        """Seconds from the dispatcher's start to its ``count``-th placement (first sample seen)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            reached = [t for t, placed in list(self.samples) if placed >= count]
            if reached:
                return reached[0]
            time.sleep(0.1)
        raise TimeoutError(f"{count} placements not reached {timeout:.0f} s after the dispatcher started")


_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")


def _dispatcher_log(path: Path, began_wall: float) -> dict[str, float]:
    """From the dispatcher's log: seconds from its start to ``dispatcher_started`` (members
    listed, the ledger's layout checked) and how long its first reconcile took (a slice per
    round, between cycles), when it ended within the run."""
    out: dict[str, float] = {}
    for line in path.read_text(errors="replace").splitlines():
        stamp = _STAMP.match(line)
        if "event=dispatcher_started" in line and stamp and "ready" not in out:
            at = time.mktime(time.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S")) + int(stamp.group(2)) / 1000
            out["ready"] = round(at - began_wall, 2)
        elif "event=reconciled" in line and "reconcile" not in out:
            found = re.search(r"seconds=([0-9.]+)", line)
            if found:
                out["reconcile"] = round(float(found.group(1)), 1)
    return out


def _owners(client: Any) -> dict[str, str]:
    now_ms = time.time() * 1000
    owners = {}
    for member, value in client.hgetall(DEFAULT_DISPATCH_KEYS.owners).items():
        holder, expiry = value.decode().rsplit("|", 1)
        if float(expiry) > now_ms:
            owners[member.decode()] = holder
    return owners


def run(members: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    server = RedisServer(tmp, appendfsync="everysec")
    server.start()
    client = redis_from_url(server.url)
    names = [f"m{i:03}" for i in range(members)]
    shares = [names[k :: args.sims] for k in range(args.sims)]
    sims = [running_sim(_topology(share, args.nodes)) for share in shares if share]
    try:
        running = [cm.__enter__() for cm in sims]
        kubeconfig = tmp / "members.kubeconfig"
        _merge_kubeconfigs([s.kubeconfig for s in running], kubeconfig)
        procs = FleetProcesses(server.url, kubeconfig, tmp)
        try:
            return _measure(members, args, server, client, procs)
        finally:
            procs.stop()
    finally:
        for cm in reversed(sims):
            cm.__exit__(None, None, None)
        client.close()
        server.stop()


def _measure(
    members: int, args: argparse.Namespace, server: RedisServer, client: Any, procs: FleetProcesses
) -> dict[str, Any]:
    # 1. The queue, before any dispatcher runs.
    spawn = multiprocessing.get_context("spawn")
    go = spawn.Event()
    readies = [spawn.Event() for _ in range(2)]
    submitters = [
        spawn.Process(target=_queue, args=(server.url, range(k, args.queued, 2), ready, go))
        for k, ready in enumerate(readies)
    ]
    for submitter in submitters:
        submitter.start()
    for ready in readies:
        ready.wait(120)
    queued_at = time.monotonic()
    go.set()
    for submitter in submitters:
        submitter.join()
    queue_seconds = time.monotonic() - queued_at

    # 2. Sharded syncers, idle.
    syncer_ports = {f"syncer-{n}": free_port() for n in range(1, args.syncers + 1)}
    for name, port in syncer_ports.items():
        procs.start(
            name, "syncer", "--sharded", "--ownership-seconds", str(args.ownership_seconds),
            "--metrics-port", str(port), "--log-level", "warning",
        )  # fmt: skip
    _wait("the syncers to own every member", lambda: len(_owners(client)) == members, 120)
    time.sleep(args.ownership_seconds)  # let the late joiners take their share
    pids = {name: role.process.pid for name, role in procs.roles.items() if role.process}
    cpu0 = {name: _cpu_seconds(pid) for name, pid in pids.items()}
    time.sleep(args.window)
    idle_cpu = sum(_cpu_seconds(pid) - cpu0[name] for name, pid in pids.items())
    idle_rss = sum(_rss(pid) for pid in pids.values())

    # 3. The dispatcher and workers over the queue.
    dispatcher_port = free_port()
    began, began_wall = time.monotonic(), time.time()
    procs.start("dispatcher", "dispatcher", "--metrics-port", str(dispatcher_port), "--log-level", "info")
    for n in (1, 2):
        procs.start(f"worker-{n}", "worker", "--log-level", "warning")
    placements = _Placements(dispatcher_port, began)
    placements.start()
    try:
        first = placements.wait(1, args.first_timeout)
        placed0, buckets0 = _placed(dispatcher_port), _sync_buckets(list(syncer_ports.values()))
        cpu0 = {name: _cpu_seconds(pid) for name, pid in pids.items()}
        started = time.monotonic()
        time.sleep(args.window)
        elapsed = time.monotonic() - started
        placed = _placed(dispatcher_port) - placed0
        busy_cpu = sum(_cpu_seconds(pid) - cpu0[name] for name, pid in pids.items())
        busy_rss = sum(_rss(pid) for pid in pids.values())
        p99, synced = _p99(buckets0, _sync_buckets(list(syncer_ports.values())))
        to_n = placements.wait(args.placements, args.first_timeout)
    finally:
        placements.stop()
    # 4. Takeover after a kill -9.
    owners = _owners(client)
    by_holder: dict[str, list[str]] = {}
    for member, holder in owners.items():
        by_holder.setdefault(holder, []).append(member)
    victim_id = max(by_holder, key=lambda h: len(by_holder[h]))
    victim = next(name for name, pid in pids.items() if victim_id.endswith(f"-{pid}"))
    lost = by_holder[victim_id]
    procs.kill9(victim)
    killed = time.monotonic()
    _wait(
        "the killed syncer's members taken over",
        lambda: all(_owners(client).get(m) not in (None, victim_id) for m in lost),
        60,
    )
    takeover = time.monotonic() - killed

    # 5. The dispatcher's first reconcile, walked between its cycles: how long it took in all.
    deadline = time.monotonic() + args.first_timeout
    log = _dispatcher_log(procs.roles["dispatcher"].log_path, began_wall)
    while "reconcile" not in log and time.monotonic() < deadline:
        time.sleep(1.0)
        log = _dispatcher_log(procs.roles["dispatcher"].log_path, began_wall)
    figures = {
        "members": members,
        "nodes": members * args.nodes,
        "queued": args.queued,
        "queue_seconds": round(queue_seconds, 1),
        "syncers": args.syncers,
        "idle_rss_mib_per_member": round(idle_rss / members / 2**20, 2),
        "idle_cpu_ms_per_member_s": round(idle_cpu / members / args.window * 1000, 2),
        "busy_rss_mib_per_member": round(busy_rss / members / 2**20, 2),
        "busy_cpu_ms_per_member_s": round(busy_cpu / members / elapsed * 1000, 2),
        "syncer_rss_mib_total": round(busy_rss / 2**20, 1),
        "placements_per_s": round(placed / elapsed, 1),
        "dispatcher_ready_s": log.get("ready"),
        "first_placement_s": round(first, 2),
        "placements_n": args.placements,
        "to_n_placements_s": round(to_n, 2),
        "reconcile_s": log.get("reconcile"),
        "sync_p99_s_le": p99,
        "synced_changes": synced,
        "takeover_s": round(takeover, 2),
        "taken_over_members": len(lost),
    }
    print(
        f"{members} members x {args.nodes} nodes, {args.queued} queued: syncers idle "
        f"{figures['idle_rss_mib_per_member']} MiB and {figures['idle_cpu_ms_per_member_s']} ms CPU/s per "
        f"member; busy {figures['busy_rss_mib_per_member']} MiB, {figures['busy_cpu_ms_per_member_s']} ms "
        f"CPU/s per member; dispatcher ready {figures['dispatcher_ready_s']} s after its start, "
        f"first placement at {figures['first_placement_s']} s, {args.placements} at "
        f"{figures['to_n_placements_s']} s, reconcile {figures['reconcile_s']} s, "
        f"{figures['placements_per_s']} placements/s; sync p99 <= {p99} s "
        f"({synced} changes); takeover of {len(lost)} members {takeover:.2f} s",
        flush=True,
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", default="10,25,50", help="comma-separated member counts, one run each")
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--sims", type=int, default=2, help="simulator processes sharing the members")
    parser.add_argument("--queued", type=int, default=20000)
    parser.add_argument("--syncers", type=int, default=3)
    parser.add_argument("--window", type=float, default=15.0)
    parser.add_argument("--ownership-seconds", type=float, default=5.0)
    parser.add_argument(
        "--placements", type=int, default=1000, help="time from the dispatcher's start to this many"
    )
    parser.add_argument(
        "--first-timeout", type=float, default=600.0, help="seconds to wait for the first (and N-th) one"
    )
    args = parser.parse_args()
    results = []
    for count in (int(m) for m in args.members.split(",")):
        with tempfile.TemporaryDirectory(prefix="fleet-scale-") as tmp:
            results.append(run(count, args, Path(tmp)))
    print(
        json.dumps(
            {"benchmark": "scale", "machine": platform.machine(), "cpus": os.cpu_count(), "runs": results}
        )
    )


if __name__ == "__main__":
    main()
