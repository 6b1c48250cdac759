"""The API's create of a job, in process: its CPU per submission, without HTTP or other processes.

    .venv/bin/python -m bench.api_create_bench [--jobs 3000] [--concurrency 4] [--tree PATH]

:mod:`bench.submit_bench` measures what a user meets (a ``fleet api`` process, HTTP, four client
processes), and on this 2-core machine its CPU per submission moves by a third from run to run
with what else the cores do. This measures the part a change to the API's create path moves: the
fleet endpoint's ASGI app (``build_fleet_api``, the same Starlette app ``fleet api`` serves,
authentication off) in this process, called by ``httpx`` through its ASGI transport with
``--concurrency`` requests at a time, over a private ``redis-server`` with ``appendfsync
always``. The job is :mod:`bench.dispatch_bench`'s one-NPU AscendJob, each with its own name;
200 are sent first, unmeasured. The figure is this process's CPU time (every thread: the event
loop, the worker threads, the Redis clients, and ``httpx``'s side, which is the same for every
commit) per accepted submission.

``--tree PATH`` measures another checkout's ``fleet`` and ``queues`` (an older commit's worktree:
``git worktree add --detach PATH COMMIT``) with this harness, for a commit that predates it.
Alternate the two sides several times in one sitting and compare each pair, as
``make bench-compare`` does. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PATH = "/apis/mindxdl.gitee.com/v1/namespaces/default/ascendjobs"
WARM = 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=3000, help="Measured submissions.")
    parser.add_argument("--concurrency", type=int, default=4, help="Requests in flight at once.")
    parser.add_argument("--tree", type=Path, default=None, help="Measure this checkout's code instead.")
    args = parser.parse_args()
    tree = (args.tree or ROOT).resolve()
    sys.path.insert(0, str(tree))  # before the first import of fleet or queues
    figures = _run(args, tree)
    print(
        f"{figures['cpu_us_per_submission']:.0f} us of CPU and {figures['wall_us_per_submission']:.0f} us "
        f"of wall time per submission ({args.jobs} submissions, {args.concurrency} at a time, {tree})"
    )
    print(json.dumps(figures))


def _run(args: argparse.Namespace, tree: Path) -> dict[str, Any]:
    import httpx
    import redis
    import redis.asyncio
    import uvloop

    from bench.dispatch_bench import _one_npu_job
    from fleet.endpoint.app import build_fleet_api
    from queues import Ledger, load
    from tests.support.redis_server import RedisServer

    job = _one_npu_job(0)
    bodies = [
        json.dumps({**job, "metadata": {**job["metadata"], "name": f"api-{i}"}}).encode()
        for i in range(WARM + args.jobs)
    ]
    measured: dict[str, float] = {}

    async def submit_all(server_port: int, client: redis.Redis) -> None:
        aclient = redis.asyncio.Redis(host="127.0.0.1", port=server_port)
        api = build_fleet_api(client, aclient)
        transport = httpx.ASGITransport(app=api.app)
        headers = {"content-type": "application/json"}
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://fleet") as http:

                async def one_after_another(items: list[bytes]) -> None:
                    for body in items:
                        response = await http.post(PATH, content=body, headers=headers)
                        if response.status_code != 201:
                            raise RuntimeError(f"{response.status_code}: {response.text}")

                async def phase(items: list[bytes]) -> None:
                    k = args.concurrency
                    await asyncio.gather(*(one_after_another(items[i::k]) for i in range(k)))

                await phase(bodies[:WARM])
                cpu, wall = time.process_time(), time.perf_counter()
                await phase(bodies[WARM:])
                measured["cpu"] = time.process_time() - cpu
                measured["wall"] = time.perf_counter() - wall
        finally:
            await api.close()
            await aclient.aclose()

    with tempfile.TemporaryDirectory(prefix="fleet-api-create-bench-") as tmp:
        server = RedisServer(Path(tmp), appendfsync="always")
        server.start()
        try:
            client = redis.Redis(host="127.0.0.1", port=server.port)
            tree_yaml = (tree / "config" / "samples" / "elasticquotatree.yaml").read_text()
            Ledger(client).apply(load(tree_yaml)[0])
            uvloop.run(submit_all(server.port, client))
            client.close()
        finally:
            server.stop()
    return {
        "benchmark": "api-create",
        "tree": str(tree),
        "jobs": args.jobs,
        "concurrency": args.concurrency,
        "cpu_us_per_submission": round(1e6 * measured["cpu"] / args.jobs, 1),
        "wall_us_per_submission": round(1e6 * measured["wall"] / args.jobs, 1),
        "python": platform.python_version(),
    }


if __name__ == "__main__":
    main()
