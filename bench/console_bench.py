"""The fleet console at scale: 10,000 jobs and 100 members, each page timed through HTTP.

``.venv/bin/python -m bench.console_bench`` (options: ``--jobs``, ``--members``, ``--rounds``).
It starts its own ``redis-server`` (no persistence), applies a tree of 20 leaves, stores the jobs
directly through :class:`fleet.state.Objects` (states spread over Queued, Running on a member,
Succeeded; about a tenth queued in the ledger), writes each member's capacity (16 nodes of two
kinds) and health as the dispatch roles do, and serves one API replica with the console. Then,
signed in as an admin and as a tenant of one namespace, it times: the first page (the job index
listing every kind, then the page), and afterwards the fleet page, the jobs list unfiltered and
filtered by state and member (server-side, paged), the quota tree, one leaf's queue and one job's
page (with where it would fit now on 100 members). Prints the figures, then one JSON line.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from fleet.dispatch.capacity_publisher import CapacityPublisher
from fleet.endpoint.auth import Identity
from fleet.jobs import prepare
from fleet.kinds import FLEET_JOB_KINDS
from fleet.placement import MemberCapacity, Placer
from fleet.state import DEFAULT_DISPATCH_KEYS, Objects
from fleet.state.member_health import MemberHealth, write_health
from queues import Ledger, load
from tests.fleet.placement.factory import node, pod
from tests.support.fleet_api import FleetApiThread
from tests.support.job_states import admit, run
from tests.support.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "config" / "samples" / "pytorch_multinodes_acjob_910b.yaml"
ADMIN, TENANT = "bench-admin", "bench-tenant"


def _tree(leaves: int) -> Any:
    children = "\n".join(
        f"    - name: team-{i}\n"
        f"      max: {{cpu: '100000', kube-queue/max-jobs: '50'}}\n"
        f"      namespaces: [team-{i}]"
        for i in range(leaves)
    )
    text = (
        "apiVersion: scheduling.sigs.k8s.io/v1beta1\nkind: ElasticQuotaTree\n"
        "metadata: {name: elasticquotatree, namespace: kube-system}\n"
        "spec:\n  root:\n    name: root\n    max: {cpu: '10000000'}\n    children:\n" + children + "\n"
    )
    return load(text)[0]


def _fill(objects: Objects, ledger: Ledger, jobs: int, members: int, leaves: int) -> None:
    sample: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    rt = FLEET_JOB_KINDS[0]
    for i in range(jobs):
        job = copy.deepcopy(sample)
        job["metadata"]["namespace"] = f"team-{i % leaves}"
        job["metadata"]["name"] = f"job-{i:05d}"
        prepared = prepare(job, ledger)
        if i % 10 == 0:
            objects.create(rt, prepared.obj)
            ledger.enqueue(prepared.key, prepared.leaf, prepared.request, prepared.priority)
            continue
        member = f"member-{i % members:03d}"
        run(admit(prepared.obj, member), member, "Running" if i % 3 else "Succeeded")
        objects.create(rt, prepared.obj)


def _publish(client: Any, members: int) -> list[str]:
    placer = Placer()
    names = [f"member-{i:03d}" for i in range(members)]
    for i, name in enumerate(names):
        nodes = [node(f"{name}-m{j}", 8) for j in range(8)] + [
            node(f"{name}-c{j}", 2, "card-910b-2") for j in range(8)
        ]
        pods = [pod(f"p{j}", f"{name}-m{j}", 8) for j in range(i % 8)]
        placer.add_member(MemberCapacity.from_lists(name, nodes, pods))
        write_health(
            client,
            DEFAULT_DISPATCH_KEYS,
            name,
            MemberHealth(ready=True, since=time.time(), probed=time.time()),
        )
    CapacityPublisher(placer, threading.RLock(), client, DEFAULT_DISPATCH_KEYS).publish()
    return names


def _session(http: httpx.Client, url: str, token: str) -> str:
    response = http.post(
        "/console/sign-in", data={"token": token, "next": "/console/"}, headers={"Origin": url}
    )
    found = re.match(r"__Host-fleet-console=([^;]+);", response.headers["set-cookie"])
    assert found is not None
    return found.group(1)


def _time(http: httpx.Client, session: str, path: str, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        response = http.get(path, headers={"Cookie": f"__Host-fleet-console={session}"})
        samples.append(time.perf_counter() - started)
        assert response.status_code == 200, (path, response.status_code, response.text[:300])
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument("--leaves", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    tokens = {
        ADMIN: Identity("admin", "u0", frozenset({"fleet:admins"})),
        TENANT: Identity("tenant", "u1", frozenset({"namespace:team-3"})),
    }
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(Path(directory), appendonly=False)
        server.start()
        try:
            import redis

            client = redis.Redis.from_url(server.url)
            ledger = Ledger(client)
            ledger.apply(_tree(args.leaves))
            started = time.perf_counter()
            _fill(Objects(client), ledger, args.jobs, args.members, args.leaves)
            names = _publish(client, args.members)
            print(
                f"stored {args.jobs} jobs and {args.members} members in {time.perf_counter() - started:.1f}s"
            )
            with (
                FleetApiThread(client, tokens=tokens, members=lambda: list(names)) as api,
                httpx.Client(base_url=api.url, timeout=120) as http,
            ):
                admin, tenant = _session(http, api.url, ADMIN), _session(http, api.url, TENANT)
                figures: dict[str, float] = {
                    "first page (index listed)": _time(http, admin, "/console/jobs", 1)
                }
                pages = {
                    "fleet (100 members, page 1)": "/console/",
                    "jobs, unfiltered": "/console/jobs",
                    "jobs, state=Queued": "/console/jobs?state=Queued",
                    "jobs, member=member-007": "/console/jobs?member=member-007",
                    "jobs, page 40": "/console/jobs?page=40",
                    "quota tree": "/console/quota",
                    "one leaf's queue": "/console/queues?queue=root-team-3",
                    "one job (fit on 100 members)": "/console/jobs/ascendjobs/team-0/job-00000",
                }
                for label, path in pages.items():
                    figures[f"admin: {label}"] = _time(http, admin, path, args.rounds)
                figures["tenant: jobs"] = _time(http, tenant, "/console/jobs", args.rounds)
                figures["tenant: quota tree"] = _time(http, tenant, "/console/quota", args.rounds)
            for label, seconds in figures.items():
                print(f"{label:40s} {seconds * 1000:8.1f} ms")
            print(
                json.dumps(
                    {
                        "jobs": args.jobs,
                        "members": args.members,
                        "ms": {k: round(v * 1000, 1) for k, v in figures.items()},
                    }
                )
            )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
