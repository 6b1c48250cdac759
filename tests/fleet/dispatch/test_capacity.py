"""Each member's capacity in view at the fleet: ``kubectl get memberclusters`` and ``fleet
clusters`` show what the simulator's own nodes and pods leave free, while jobs run and after.

The fleet here is real (redis-server, the simulator over HTTP, dispatcher, worker and syncer as
processes, an API replica); the expected numbers are computed from the member's nodes and pods
as its API serves them, not from anything of Fleet's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from click.testing import CliRunner
from kubernetes import client as k8s

from fleet.cli import main
from fleet.endpoint.members import members_from
from queues.quantity import format_quantity, parse
from tests.fleet.dispatch.conftest import MODULE_POOL, RunningFleet
from tests.fleet.placement.factory import job
from tests.support.fleet_api import FleetApiThread
from tests.support.kubectl import Kubectl, require_kubectl, table

pytestmark = pytest.mark.integration

NPU = "huawei.com/Ascend910"


def member_truth(fleet: RunningFleet, member: str) -> dict[str, Any]:
    """Free NPUs per node as the member's own API has them: allocatable minus the requests of
    the bound pods that have not finished."""
    with fleet.sim.api_client(member) as api:
        core = k8s.CoreV1Api(api)
        # Raw JSON (the client's models are typed as optional everywhere).
        nodes = json.loads(cast(Any, core.list_node(_preload_content=False)).data)["items"]
        pods = json.loads(cast(Any, core.list_pod_for_all_namespaces(_preload_content=False)).data)["items"]
    free = {n["metadata"]["name"]: parse(NPU, n["status"]["allocatable"].get(NPU, "0")) for n in nodes}
    cpu = sum(parse("cpu", n["status"]["allocatable"].get("cpu", "0")) for n in nodes)
    for p in pods:
        node = p["spec"].get("nodeName")
        if not node or p.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for c in p["spec"]["containers"]:
            requests = c.get("resources", {}).get("requests") or {}
            free[node] -= parse(NPU, requests.get(NPU, "0"))
            cpu -= parse("cpu", requests.get("cpu", "0"))
    by_free: dict[str, int] = {}
    for count in free.values():
        by_free[str(count)] = by_free.get(str(count), 0) + 1
    return {
        "free": sum(free.values()),
        "byFree": by_free,
        "pods": len(pods),
        "cpu": format_quantity("cpu", cpu),
    }


def fleet_view(kubectl: Kubectl, member: str) -> dict[str, Any]:
    obj = json.loads(kubectl("get", "memberclusters", member, "-o", "json").stdout)
    status = obj["status"]
    [accelerator] = status.get("accelerators") or [{}]
    return {
        "free": status.get("freeNPUs", {}).get("module-910b-8"),
        "allocatable": status.get("allocatableNPUs", {}).get("module-910b-8"),
        "byFree": accelerator.get("nodesByFreeNPUs"),
    }


def wait_agree(fleet: RunningFleet, kubectl: Kubectl, expected_free: int) -> dict[str, Any]:
    """Wait until the fleet's view equals the member's own numbers, with ``expected_free``."""
    deadline = time.monotonic() + 20
    while True:
        truth = member_truth(fleet, "member-1")
        view = fleet_view(kubectl, "member-1")
        if (
            truth["free"] == expected_free
            and view["free"] == truth["free"]
            and view["byFree"] == truth["byFree"]
        ):
            return view
        if time.monotonic() > deadline:
            pytest.fail(f"fleet view {view} never agreed with the member's {truth}\n{fleet.procs.logs()}")
        time.sleep(0.3)


def test_free_capacity_follows_the_members_nodes_and_pods(
    fleet_factory: Callable[..., RunningFleet], tmp_path: Path
) -> None:
    kubectl_binary = require_kubectl()
    fleet = fleet_factory(members={"member-1": MODULE_POOL}, workers=1)
    with FleetApiThread(fleet.client, members=members_from(fleet.sim.kubeconfig)) as api:
        config = api.kubeconfig(tmp_path / "kubeconfig")
        kubectl = Kubectl(kubectl_binary, config, tmp_path / "cache")
        idle = wait_agree(fleet, kubectl, 32)
        assert idle == {"free": 32, "allocatable": 32, "byFree": {"8": 4}}

        gang = job("gang", workers=1, npus=8)  # two pods of 8 NPUs, one a node
        small = job("small", workers=0, npus=3, cpu="10", exclusive=False)
        for obj in (gang, small):
            obj["metadata"]["namespace"] = "team-a"
            obj["metadata"]["annotations"] = {"sim.fleet.io/duration-seconds": "8"}
            fleet.submit(obj)
        fleet.wait_for(
            "both jobs to run",
            lambda: (
                set(fleet.states().values()) == {"Running"} and member_truth(fleet, "member-1")["pods"] == 3
            ),
            timeout=30,
        )
        running = wait_agree(fleet, kubectl, 32 - 16 - 3)
        assert running == {"free": 13, "allocatable": 32, "byFree": {"8": 1, "5": 1, "0": 2}}
        wide = table(kubectl("get", "mc", "-o", "wide").stdout)
        assert wide[0][:8] == [
            "NAME",
            "READY",
            "SINCE",
            "LAST-PROBE",
            "FREE-NPUS",
            "SCHEDULING",
            "ALLOCATABLE-NPUS",
            "NODES-BY-FREE-NPUS",
        ]
        assert wide[1][4:8] == [
            "module-910b-8=13",
            "Schedulable",
            "module-910b-8=32",
            "module-910b-8=1x8+1x5+2x0",
        ]
        assert wide[1][8] == member_truth(fleet, "member-1")["cpu"]
        assert wide[1][9] == "6000Gi"  # no pod asks for memory
        cli = CliRunner().invoke(main, ["clusters", "--kubeconfig", str(config)])
        assert cli.exit_code == 0, cli.output
        assert cli.stdout.split("\n")[1].split()[4:8] == wide[1][4:8]

        fleet.wait_for(
            "both jobs to finish", lambda: set(fleet.states().values()) == {"Succeeded"}, timeout=30
        )
        assert wait_agree(fleet, kubectl, 32) == idle
