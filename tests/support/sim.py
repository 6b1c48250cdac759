"""``fleet sim`` as a subprocess for tests: a context manager and a pytest fixture to re-export.

    from tests.support.sim import RunningSim, running_sim, sim  # noqa: F401 (the fixture)

    def test_something(sim: RunningSim) -> None:
        client = sim.api_client("member-2")

``running_sim(topology)`` starts the simulator on free ports with the given topology (a
:class:`~fleet.sim.topology.Topology`, a dict in its YAML shape, a file, or ``None`` for
``config/topology.yaml``), waits until it has written its kubeconfig (every port listens by
then), and on exit sends SIGTERM (SIGKILL if it lingers) and removes its files. ``fault()``
drives the control endpoint as ``fleet sim fault`` does.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from fleet.sim.kubeconfig import control_endpoint
from fleet.sim.topology import DEFAULT_TOPOLOGY, Topology

__all__ = ["CARD_POOL", "RunningSim", "SimFailedToStart", "running_sim", "sim", "small_topology"]

_START_TIMEOUT = 30.0
_STOP_TIMEOUT = 15.0


class SimFailedToStart(RuntimeError):
    """The simulator exited or did not write its kubeconfig in time (the message holds its log)."""


@dataclass
class RunningSim:
    """A running ``fleet sim`` process."""

    process: subprocess.Popen[bytes]
    kubeconfig: Path
    members: list[str]
    log_path: Path
    servers: dict[str, str] = field(default_factory=dict)

    @property
    def control_url(self) -> str:
        return control_endpoint(self.kubeconfig, self.members[0])

    def api_client(self, member: str) -> client.ApiClient:
        """An official ``kubernetes`` ApiClient for the member's context."""
        return config.new_client_from_config(config_file=str(self.kubeconfig), context=member)  # type: ignore[no-untyped-call,no-any-return]

    def fault(self, member: str, fault: str, **fields: Any) -> dict[str, Any]:
        """Apply a fault through the control endpoint (``ms=``, ``node=``, ``job=``, ``always=``)."""
        request = urllib.request.Request(
            f"{self.control_url}/members/{member}/faults",
            data=json.dumps({"fault": fault, **fields}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer: dict[str, Any] = json.loads(response.read())
        return answer

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def terminate(self, timeout: float = _STOP_TIMEOUT) -> int:
        """SIGTERM, wait; SIGKILL when it does not stop in time. Returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return int(self.process.returncode)


def small_topology(members: Mapping[str, Mapping[str, Any]], **simulation: Any) -> dict[str, Any]:
    """A topology dict: member name -> its one node pool (YAML shape); fast simulation knobs."""
    knobs = {"jobDurationSeconds": 30, "tickSeconds": 0.02, "failureDelaySeconds": 0.1, **simulation}
    return {
        "simulation": knobs,
        "members": [{"name": name, "nodePools": [dict(pool)]} for name, pool in members.items()],
    }


#: A pool of four Atlas 300T A2 nodes (2 NPUs each): where the sample AscendJob runs.
CARD_POOL: dict[str, Any] = {
    "prefix": "card",
    "count": 4,
    "labels": {
        "accelerator": "huawei-Ascend910",
        "accelerator-type": "card-910b-2",
        "host-arch": "huawei-arm",
    },
    "allocatable": {"huawei.com/Ascend910": "2", "cpu": "60", "memory": "240Gi", "pods": "110"},
}


def _topology_file(topology: Topology | Mapping[str, Any] | Path | None, directory: Path) -> Path:
    if topology is None:  # the default fleet, its jobs 30 s long as the tests have always run them
        data = yaml.safe_load(DEFAULT_TOPOLOGY.read_text())
        data["simulation"]["jobDurationSeconds"] = 30
        path = directory / "topology.yaml"
        path.write_text(yaml.safe_dump(data))
        return path
    if isinstance(topology, Path):
        return topology
    data = (
        topology.model_dump(by_alias=True, mode="json") if isinstance(topology, Topology) else dict(topology)
    )
    path = directory / "topology.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@contextmanager
def running_sim(
    topology: Topology | Mapping[str, Any] | Path | None = None, *, extra_args: tuple[str, ...] = ()
) -> Iterator[RunningSim]:
    """Start ``fleet sim`` as a subprocess on free ports; terminate it and clean up on exit."""
    directory = Path(tempfile.mkdtemp(prefix="fleet-sim-"))
    kubeconfig = directory / "kubeconfig"
    log_path = directory / "sim.log"
    topology_path = _topology_file(topology, directory)
    command = [
        sys.executable,
        "-c",
        "from fleet.cli import main; main(prog_name='fleet')",
        "sim",
        "--topology",
        str(topology_path),
        "--kubeconfig",
        str(kubeconfig),
        *extra_args,
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
    running = RunningSim(process, kubeconfig, [], log_path)
    try:
        deadline = time.monotonic() + _START_TIMEOUT
        while not kubeconfig.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise SimFailedToStart(f"fleet sim did not start (exit {process.poll()}):\n{running.log()}")
            time.sleep(0.05)
        written = yaml.safe_load(kubeconfig.read_text())
        running.members = [c["name"] for c in written["contexts"]]
        running.servers = {c["name"]: c["cluster"]["server"] for c in written["clusters"]}
        yield running
    finally:
        running.terminate()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def sim() -> Iterator[RunningSim]:
    """The default topology (``config/topology.yaml``) running for one test."""
    with running_sim() as running:
        yield running
