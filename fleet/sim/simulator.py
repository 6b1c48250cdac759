"""All members of a topology in one process and event loop, plus the control endpoint."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path
from typing import Any

from fleet import gc_tuning
from fleet.apiserver import Server
from fleet.sim.control import build_control_app
from fleet.sim.kubeconfig import build_kubeconfig, write_atomically
from fleet.sim.member import SimMember
from fleet.sim.metrics import SimMetrics
from fleet.sim.topology import Topology

__all__ = ["Simulator", "run"]

log = logging.getLogger("fleet.sim")


class Simulator:
    """Members on ``base_port``, ``base_port + 1``, ... and control on the next port (0: any free ports)."""

    def __init__(
        self,
        topology: Topology,
        *,
        host: str = "127.0.0.1",
        base_port: int = 0,
        control_port: int | None = None,
    ) -> None:
        self.topology = topology
        self.metrics = SimMetrics()
        self.members = {
            member.name: SimMember(
                member,
                topology.simulation,
                host=host,
                port=base_port + i if base_port else 0,
                metrics=self.metrics,
            )
            for i, member in enumerate(topology.members)
        }
        if control_port is None:
            control_port = base_port + len(self.members) if base_port else 0
        self.control = Server(build_control_app(self.members, self.metrics), host, control_port)

    @property
    def control_url(self) -> str:
        return self.control.url

    async def start(self) -> None:
        try:
            for member in self.members.values():
                await member.start()
            await self.control.start()
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        # Concurrently: each listener takes a uvicorn tick (0.1 s) to notice it should exit.
        await asyncio.gather(self.control.stop(), *(member.stop() for member in self.members.values()))

    def kubeconfig(self) -> dict[str, Any]:
        return build_kubeconfig(
            {name: m.url for name, m in self.members.items()},
            self.control_url,
            labels={m.name: m.labels for m in self.topology.members},
        )


async def run(
    topology: Topology,
    kubeconfig: Path,
    *,
    host: str = "127.0.0.1",
    base_port: int = 0,
    control_port: int | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve until SIGTERM/SIGINT (or ``stop``), with the kubeconfig written once every port listens."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    simulator = Simulator(topology, host=host, base_port=base_port, control_port=control_port)
    await simulator.start()
    gc_tuning.tune()
    try:
        write_atomically(kubeconfig, simulator.kubeconfig())
        log.info(
            "event=ready members=%d nodes=%d kubeconfig=%s control=%s",
            len(simulator.members),
            sum(m.node_count for m in topology.members),
            kubeconfig,
            simulator.control_url,
        )
        await stop.wait()
        log.info("event=stopping")
    finally:
        await simulator.stop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    log.info("event=stopped")
