"""Quota engine benchmark: admit-or-refuse decisions per second against a no-op EVALSHA baseline.

Run: ``.venv/bin/python -m bench.quota_bench``. It starts its own ``redis-server`` (loopback, free
port, AOF on with ``appendfsync everysec``, the usual production setting), applies a 3-level tree
(root, 10 groups, 100 leaves, with min guarantees so the borrowing check runs), queues 100,000
jobs with mixed requests and priorities, and then times decisions: each takes a job from its
queue (or refuses it with its reason) in ``admit.lua``. ``--batch`` decisions (100) go to one
EVALSHA, which decides them one after the other exactly as separate scripts would (nothing else
runs in between, which is one of the orders separate scripts could have had anyway).
Between timed batches some admitted jobs are released (untimed) so the quota keeps churning and
the mix of admissions and refusals stays realistic.

The baseline is a no-op script (``return 0``) called the way each decision would be called if it
had a script run of its own: the same key and the same arguments as a one-job admission, sent as
raw EVALSHAs (no SCRIPT EXISTS round trip), ``--batch`` per pipelined round trip, on the same
server and connection. So both sides move ``--batch`` decisions per round trip, each the cheapest
way the client can. Baseline and decision batches alternate (which goes first alternates too), so
that both see the same machine: the others' load on a shared host moves both alike. For reference
it also times one decision per round trip (one job per EVALSHA) against one no-op per round trip,
alternating the same way.

It also counts the Redis calls the scripts make per decision (``INFO commandstats`` around the
timed batches, untimed). Prints the figures, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from queues import Ledger, QueuePolicy, load
from queues.quantity import MAX_JOBS
from tests.support.net import free_port, wait_for_port

GROUPS = 10
LEAVES_PER_GROUP = 10


def start_redis(directory: Path, appendonly: bool = True) -> tuple[subprocess.Popen[bytes], int]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed")
    port = free_port()
    args = [
        binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory), "--save", "",
        "--appendonly", "yes" if appendonly else "no", "--appendfsync", "everysec",
        "--logfile", str(directory / "redis.log"),
    ]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port)
    return proc, port


def command_calls(client: redis.Redis) -> dict[str, int]:
    """Calls so far per command (``INFO commandstats``; commands called by scripts included)."""
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(row["calls"]) for name, row in stats.items()}


def tree_document() -> dict[str, Any]:
    groups = []
    for g in range(GROUPS):
        leaves = [
            {
                "name": f"g{g}-l{i}",
                "min": {"cpu": 8, "huawei.com/Ascend910": 4},
                "max": {"cpu": 64, "huawei.com/Ascend910": 32, MAX_JOBS: 8},
                "namespaces": [f"team-{g}-{i}"],
            }
            for i in range(LEAVES_PER_GROUP)
        ]
        groups.append(
            {
                "name": f"g{g}",
                "min": {"cpu": 80, "huawei.com/Ascend910": 40},
                "max": {"cpu": 320, "huawei.com/Ascend910": 160},
                "children": leaves,
            }
        )
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1beta1",
        "kind": "ElasticQuotaTree",
        "metadata": {"name": "elasticquotatree", "namespace": "kube-system"},
        "spec": {
            "root": {
                "name": "root",
                "min": {"cpu": 1600, "huawei.com/Ascend910": 800},
                "max": {"cpu": 1600, "huawei.com/Ascend910": 800, MAX_JOBS: 600},
                "children": groups,
            }
        },
    }


def request(rng: random.Random) -> dict[str, int]:
    npu = rng.choice([0, 1, 2, 4, 8, 8, 16])
    return {
        "cpu": rng.choice([500, 1000, 4000, 8000, 16000]),
        "memory": rng.choice([4, 16, 64, 256]) * 2**30,
        **({"huawei.com/Ascend910": npu} if npu else {}),
    }


def run(jobs: int, decisions: int, batch: int, seed: int, appendonly: bool = True) -> dict[str, Any]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="quota-bench-") as tmp:
        proc, port = start_redis(Path(tmp), appendonly)
        try:
            client = redis.Redis(host="127.0.0.1", port=port)
            ledger = Ledger(client)
            tree, _ = load(tree_document())
            ledger.apply(tree)
            leaves = [node.name for _, _, node in tree.walk() if node.is_leaf]
            assert len(leaves) == GROUPS * LEAVES_PER_GROUP

            memory_before = int(client.info("memory")["used_memory"])
            started = time.perf_counter()
            pipe = client.pipeline(transaction=False)
            for i in range(jobs):
                job = f"team/job-{i:06d}/{rng.getrandbits(64):016x}"
                ledger.enqueue(job, rng.choice(leaves), request(rng), rng.randint(0, 9), pipeline=pipe)
                if len(pipe) >= 1000:
                    pipe.execute()
            pipe.execute()
            enqueue_rate = jobs / (time.perf_counter() - started)
            memory_per_job = (int(client.info("memory")["used_memory"]) - memory_before) / jobs

            # Candidates as a dispatcher would pick them: each leaf's queue from its head.
            per_leaf = {leaf: ledger.pending.peek(leaf, decisions // len(leaves) + batch) for leaf in leaves}
            candidates: list[str] = []
            for depth in range(max(len(q) for q in per_leaf.values())):
                candidates += [q[depth] for q in per_leaf.values() if depth < len(q)]
            candidates = candidates[:decisions]
            batches = [candidates[i : i + batch] for i in range(0, len(candidates), batch)]

            noop_sha = client.register_script("return 0").sha
            client.script_load("return 0")
            meta = ledger.keys.meta

            def noop_batch(jobs: list[str]) -> None:
                pipe = client.pipeline(transaction=False)
                for job in jobs:  # the arguments of a one-job admit_pending_many
                    pipe.evalsha(noop_sha, 1, meta, "", "", "pending", "0", job)
                pipe.execute()

            admitted = refused = 0
            reasons: dict[str, int] = {}
            timed = noop_timed = 0.0
            held: list[str] = []
            calls: dict[str, int] = {}
            for i, chunk in enumerate(batches):
                if i % 2:
                    started = time.perf_counter()
                    noop_batch(chunk)
                    noop_timed += time.perf_counter() - started
                before = command_calls(client)
                started = time.perf_counter()
                results = ledger.admit_pending_many(chunk, QueuePolicy.BEST_EFFORT, batch=batch)
                timed += time.perf_counter() - started
                for command, count in command_calls(client).items():
                    calls[command] = calls.get(command, 0) + count - before.get(command, 0)
                if not i % 2:
                    started = time.perf_counter()
                    noop_batch(chunk)
                    noop_timed += time.perf_counter() - started
                for decision in results:
                    if decision.admitted:
                        admitted += 1
                        held.append(decision.job)
                    else:
                        refused += 1
                        kind = decision.refusal.kind.value if decision.refusal else "error"
                        reasons[kind] = reasons.get(kind, 0) + 1
                if len(held) > 40:  # jobs finish: free some quota (untimed)
                    rng.shuffle(held)
                    pipe = client.pipeline(transaction=False)
                    for job in held[:30]:
                        ledger.release(job, pipeline=pipe)
                    pipe.execute()
                    held = held[30:]
            decision_rate = len(candidates) / timed
            noop_rate = len(candidates) / noop_timed
            # what the scripts called, per decision (EVALSHA itself and INFO are not theirs)
            inner = {c: n for c, n in calls.items() if c not in ("evalsha", "info", "script|exists")}
            calls_per_decision = sum(inner.values()) / len(candidates)

            # One decision per round trip, for reference (the dispatcher's simplest use).
            single = candidates[-2000:]
            single_timed = single_noop_timed = 0.0
            for job in single:
                started = time.perf_counter()
                ledger.admit_pending_many([job])
                single_timed += time.perf_counter() - started
                started = time.perf_counter()
                client.evalsha(noop_sha, 1, meta, "", "", "pending", "0", job)
                single_noop_timed += time.perf_counter() - started
            single_rate = len(single) / single_timed
            single_noop_rate = len(single) / single_noop_timed

            drift = ledger.rebuild()
            client.close()
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    return {
        "pending_jobs": jobs,
        "leaves": len(leaves),
        "decisions": len(candidates),
        "batch": batch,
        "admitted": admitted,
        "refused": refused,
        "refusals_by_kind": reasons,
        "decisions_per_s": round(decision_rate),
        "noop_evalsha_per_s": round(noop_rate),
        "ratio": round(decision_rate / noop_rate, 3),
        "single_decisions_per_s": round(single_rate),
        "single_noop_evalsha_per_s": round(single_noop_rate),
        "single_ratio": round(single_rate / single_noop_rate, 3),
        "enqueue_per_s": round(enqueue_rate),
        "redis_bytes_per_pending_job": round(memory_per_job),
        "drift_after_run": len(drift),
        "redis_calls_per_decision": round(calls_per_decision, 2),
        "redis_calls_per_decision_by_command": {
            c: round(n / len(candidates), 3) for c, n in sorted(inner.items())
        },
        "appendonly": appendonly,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--decisions", type=int, default=30_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-aof", action="store_true", help="run Redis without its append-only file")
    opts = parser.parse_args()
    f = run(opts.jobs, opts.decisions, opts.batch, opts.seed, appendonly=not opts.no_aof)
    print(f"tree: 3 levels, {f['leaves']} leaves; {f['pending_jobs']} pending jobs")
    print(
        f"enqueue: {f['enqueue_per_s']}/s; Redis memory per pending job: {f['redis_bytes_per_pending_job']} B"
    )
    print(
        f"decisions: {f['decisions']} ({f['admitted']} admitted, {f['refused']} refused "
        f"{f['refusals_by_kind']}), {f['batch']} per EVALSHA"
    )
    print(
        f"admit-or-refuse: {f['decisions_per_s']}/s; no-op EVALSHA ({f['batch']} per pipelined round trip): "
        f"{f['noop_evalsha_per_s']}/s; "
        f"ratio {f['ratio']}"
    )
    print(
        f"one per round trip: {f['single_decisions_per_s']}/s vs no-op {f['single_noop_evalsha_per_s']}/s; "
        f"ratio {f['single_ratio']}"
    )
    by_command = ", ".join(f"{c} {n}" for c, n in f["redis_calls_per_decision_by_command"].items())
    print(f"Redis calls inside the scripts per decision: {f['redis_calls_per_decision']} ({by_command})")
    print(f"counters drifting from the job records after the run: {f['drift_after_run']}")
    print(json.dumps(f, sort_keys=True))


if __name__ == "__main__":
    main()
