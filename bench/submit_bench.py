"""Submission through the fleet API over HTTP: how many a second, and how long each waits.

    .venv/bin/python -m bench.submit_bench [--jobs 4000] [--clients 4] [--rate 300] [--seconds 10]

Issue 30, goal 3: at least 600 submissions accepted a second from 4 clients, and a p99 latency
under 100 ms at 300 a second, every acknowledged job durable. This runs what a user's kubectl
meets: a private ``redis-server`` with ``appendfsync always`` (as ``fleet up`` runs it; every
acknowledged write is on disk), the sample ElasticQuotaTree applied, and one ``fleet api``
process (HTTP on loopback, a token file, ``--durability`` as asked). No dispatcher runs: every
accepted job stays queued, so what is measured is the API's path alone (validation, the store's
create, the queueing, the ``Submitted`` Event) and the Redis behind it.

Two phases, each with ``--clients`` processes of their own, each one keep-alive HTTP connection,
POSTing the one-NPU AscendJob of :mod:`bench.dispatch_bench` (``kubectl create`` sends the same
request):

1. **Closed loop** (``--jobs`` in all): each client sends its next request when the last one is
   answered. The figure is accepted submissions a second (every answer must be 201), with the
   latency of each request.
2. **Open loop** at ``--rate`` a second for ``--seconds``: requests are due at fixed times, spread
   over the clients, and each one's latency counts from when it was due, not from when its client
   got round to it (so a server that falls behind shows its queueing, without coordinated
   omission).

The API's and Redis' CPU per submission come from ``/proc``. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.dispatch_bench import _cpu_seconds, _one_npu_job
from fleet.connections import redis_from_url
from queues import Ledger, load
from tests.support.net import free_port, wait_for_port
from tests.support.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "config" / "samples" / "elasticquotatree.yaml"
TOKEN = "bench-admin-token"
PATH = "/apis/mindxdl.gitee.com/v1/namespaces/default/ascendjobs"


_JOB = _one_npu_job(0)


def _body(prefix: str, i: int) -> bytes:
    obj = {**_JOB, "metadata": {**_JOB["metadata"], "name": f"{prefix}-{i}"}}
    return json.dumps(obj).encode()


def _post(conn: http.client.HTTPConnection, body: bytes) -> int:
    conn.request("POST", PATH, body, {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    response = conn.getresponse()
    response.read()
    return response.status


def _client(port: int, bodies: list[bytes], due: list[float] | None, go: Any, report: Any) -> None:
    """Send ``bodies`` one after the other (closed loop), or each at its ``due`` time on the
    shared monotonic clock, offset from when ``go`` was set (open loop); report each latency."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    _post(conn, _body("warm", os.getpid()))  # the connection open, the API's first request served
    go.wait()
    cpu = time.process_time()
    start = go_time = time.monotonic()
    latencies: list[float] = []
    failures: dict[int, int] = {}
    for k, body in enumerate(bodies):
        at = time.monotonic()
        if due is not None:
            at = go_time + due[k]
            wait = at - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        status = _post(conn, body)
        latencies.append(time.monotonic() - at)
        if status != 201:
            failures[status] = failures.get(status, 0) + 1
    report.put((time.monotonic() - start, latencies, failures, time.process_time() - cpu))
    conn.close()


def _phase(ports: list[int], clients: int, bodies: list[bytes], rate: float | None) -> dict[str, Any]:
    """Run one phase across ``clients`` processes, client ``k`` on replica ``k mod len(ports)``
    (a Service spreads connections so); its wall time, latencies and failures."""
    spawn = multiprocessing.get_context("spawn")
    go, report = spawn.Event(), spawn.Queue()
    procs = []
    for k in range(clients):
        mine = bodies[k::clients]
        due = None if rate is None else [(k + i * clients) / rate for i in range(len(mine))]
        procs.append(
            spawn.Process(target=_client, args=(ports[k % len(ports)], mine, due, go, report), daemon=True)
        )
    for proc in procs:
        proc.start()
    time.sleep(2.0)  # each client connected and warmed
    go.set()
    reports = [report.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(10)
    latencies = sorted(x for _, xs, _, _ in reports for x in xs)
    failures: dict[int, int] = {}
    for _, _, failed, _ in reports:
        for status, n in failed.items():
            failures[status] = failures.get(status, 0) + n
    return {
        "wall_s": max(seconds for seconds, _, _, _ in reports),
        "clients_cpu_s": sum(cpu for _, _, _, cpu in reports),
        "requests": len(latencies),
        "failures": failures,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "max_ms": 1000 * latencies[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=4000, help="Submissions of the closed-loop phase.")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rate", type=float, default=300.0, help="Open-loop submissions a second.")
    parser.add_argument("--seconds", type=float, default=10.0, help="How long the open-loop phase lasts.")
    parser.add_argument("--durability", choices=("none", "aof"), default="none")
    parser.add_argument(
        "--replicas", type=int, default=1, help="API processes (replicas), each its own port."
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleet-submit-bench-") as tmp:
        figures = _run(args, Path(tmp))
    print(json.dumps(figures))


def _run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    server = RedisServer(tmp, appendfsync="always")
    server.start()
    apis: list[subprocess.Popen[bytes]] = []
    try:
        Ledger(redis_from_url(server.url)).apply(load(TREE.read_text())[0])
        tokens = tmp / "tokens.csv"
        tokens.write_text(f'{TOKEN},bench,1,"fleet:admins"\n')
        ports = [free_port() for _ in range(args.replicas)]
        for k, port in enumerate(ports):
            log = (tmp / f"api-{k}.log").open("wb")
            command = [sys.executable, "-c", "from fleet.cli import main; main(prog_name='fleet')", "api"]
            command += ["--redis", server.url, "--port", str(port), "--token-file", str(tokens)]
            command += ["--durability", args.durability, "--log-level", "warning"]
            apis.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT))
        for port in ports:
            wait_for_port(port, timeout=60)
        assert server.proc is not None
        pids = {f"api-{k}": api.pid for k, api in enumerate(apis)} | {"redis": server.proc.pid}

        before = {name: _cpu_seconds(pid) for name, pid in pids.items()}
        closed = _phase(ports, args.clients, [_body("c", i) for i in range(args.jobs)], None)
        cpu = {name: _cpu_seconds(pid) - before[name] for name, pid in pids.items()}
        cpu = {
            "api": sum(v for k, v in cpu.items() if k.startswith("api-")),
            "redis": cpu["redis"],
            "clients": closed["clients_cpu_s"],
        }
        accepted = closed["requests"] / closed["wall_s"]
        print(
            f"closed loop, {args.clients} clients: {accepted:.0f} submissions accepted a second "
            f"({closed['requests']} in {closed['wall_s']:.1f} s; latency p50 {closed['p50_ms']:.1f} ms, "
            f"p99 {closed['p99_ms']:.1f} ms; failures {closed['failures'] or 'none'})"
        )
        per_job = {name: 1000 * seconds / closed["requests"] for name, seconds in cpu.items()}
        print(
            f"CPU ms per submission: api {per_job['api']:.2f}, redis {per_job['redis']:.2f}, "
            f"clients {per_job['clients']:.2f}"
        )

        count = int(args.rate * args.seconds)
        opened = _phase(ports, args.clients, [_body("o", i) for i in range(count)], args.rate)
        print(
            f"open loop at {args.rate:.0f} a second for {args.seconds:.0f} s: latency p50 "
            f"{opened['p50_ms']:.1f} ms, p99 {opened['p99_ms']:.1f} ms, max {opened['max_ms']:.1f} ms "
            f"(from when each was due; failures {opened['failures'] or 'none'})"
        )
        return {
            "benchmark": "submit",
            "durability": args.durability,
            "appendfsync": "always",
            "clients": args.clients,
            "replicas": args.replicas,
            "accepted_per_s": round(accepted, 1),
            "closed_p50_ms": round(closed["p50_ms"], 2),
            "closed_p99_ms": round(closed["p99_ms"], 2),
            "closed_failures": closed["failures"],
            "cpu_ms_per_submission": {k: round(v, 3) for k, v in per_job.items()},
            "open_rate_per_s": args.rate,
            "open_p50_ms": round(opened["p50_ms"], 2),
            "open_p99_ms": round(opened["p99_ms"], 2),
            "open_max_ms": round(opened["max_ms"], 2),
            "open_failures": opened["failures"],
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        }
    finally:
        for api in apis:
            api.terminate()
        for api in apis:
            try:
                api.wait(15)
            except subprocess.TimeoutExpired:
                api.kill()
        server.stop()


if __name__ == "__main__":
    main()
