"""One simulated member cluster: its store, API listener, fault state and operator, on the shared loop."""

from __future__ import annotations

import logging

from fleet.apiserver import NODE, MemoryStore, Server, build_app
from fleet.sim.faults import FaultMiddleware, FaultState
from fleet.sim.kinds import member_registry
from fleet.sim.metrics import SimMetrics
from fleet.sim.operator import Operator
from fleet.sim.t9k_controller import T9kController
from fleet.sim.topology import Member, Simulation, node_objects, ready_condition
from fleet.timestamps import now_rfc3339

__all__ = ["SimMember"]

log = logging.getLogger("fleet.sim.member")


class SimMember:
    """A member's whole life: :meth:`start`, faults (:meth:`down`, :meth:`up`, ...), :meth:`stop`."""

    def __init__(
        self, member: Member, simulation: Simulation, *, host: str, port: int, metrics: SimMetrics
    ) -> None:
        self.name = member.name
        self.member = member
        self.metrics = metrics
        self.store = MemoryStore.with_default_namespaces()
        self.faults = FaultState()
        app = build_app(member_registry(), self.store, title=f"fleet-sim {member.name}")
        app.add_middleware(
            FaultMiddleware, state=self.faults, on_injected=metrics.injected.labels(member.name).inc
        )
        self.server = Server(app, host, port)
        self.operator = Operator(self.store, simulation, member=member.name, metrics=metrics)
        self.t9k = T9kController(self.store, simulation, member=member.name)

    @property
    def url(self) -> str:
        return self.server.url

    async def start(self) -> None:
        for node in node_objects(self.member):
            node["metadata"]["creationTimestamp"] = now_rfc3339()
            await self.store.create(NODE, node)
        self.metrics.nodes.labels(self.name).set(self.member.node_count)
        await self.operator.start()
        await self.t9k.start()
        await self.server.start()
        self.metrics.up.labels(self.name).set(1)
        log.info(
            "event=member_started member=%s url=%s nodes=%d", self.name, self.url, self.member.node_count
        )

    async def stop(self) -> None:
        await self.server.stop()
        await self.operator.stop()
        await self.t9k.stop()
        self.metrics.up.labels(self.name).set(0)

    async def down(self) -> None:
        """Close the API listener: clients get connection refused; the state stays."""
        await self.server.stop()
        self.faults.down = True
        self.metrics.up.labels(self.name).set(0)

    async def up(self) -> None:
        """Listen again on the same port, over the same state."""
        await self.server.start()
        self.faults.down = False
        self.metrics.up.labels(self.name).set(1)

    async def set_node_ready(self, node: str, ready: bool) -> None:
        """Flip a node's Ready condition as its kubelet (or the node controller) would."""
        obj = await self.store.get(NODE, None, node)
        conditions = [c for c in obj.get("status", {}).get("conditions") or [] if c.get("type") != "Ready"]
        obj.setdefault("status", {})["conditions"] = [*conditions, ready_condition(ready)]
        obj["metadata"].pop("resourceVersion", None)
        await self.store.update(NODE, obj, subresource="status")
