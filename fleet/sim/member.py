"""One simulated member cluster: its store, API listener, fault state and operator, on the shared loop."""

from __future__ import annotations

import logging

from fleet.apiserver import NODE, MemoryStore, Server, build_app
from fleet.sim.batch_controller import JobController
from fleet.sim.faults import FaultMiddleware, FaultState
from fleet.sim.jobset_controller import JobSetController
from fleet.sim.kinds import member_registry
from fleet.sim.logs import log_route
from fleet.sim.metrics import SimMetrics
from fleet.sim.operator import Operator
from fleet.sim.t9k_controller import T9kController
from fleet.sim.topology import Member, Simulation, node_objects, ready_condition
from fleet.sim.trainer_controller import TrainerController
from fleet.sim.volcano_controller import VolcanoController
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
        self.simulation = simulation
        self.faults = FaultState()
        self._build(host, port)

    def _build(self, host: str, port: int) -> None:
        """A new, empty store, with its API app, listener and controllers (not started)."""
        self.store = MemoryStore.with_default_namespaces()
        app = build_app(member_registry(), self.store, title=f"fleet-sim {self.name}")
        app.router.routes.insert(0, log_route(self.store))  # before the generic /api routes
        app.add_middleware(
            FaultMiddleware, state=self.faults, on_injected=self.metrics.injected.labels(self.name).inc
        )
        self.server = Server(app, host, port)
        self.operator = Operator(self.store, self.simulation, member=self.name, metrics=self.metrics)
        self.t9k = T9kController(self.store, self.simulation, member=self.name)
        self.jobsets = JobSetController(self.store, self.simulation, member=self.name)
        self.trainer = TrainerController(self.store, self.simulation, member=self.name)
        self.volcano = VolcanoController(self.store, self.simulation, member=self.name)
        self.batch = JobController(self.store, self.simulation, member=self.name)

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
        await self.jobsets.start()
        await self.trainer.start()
        await self.volcano.start()
        await self.batch.start()
        await self.server.start()
        self.metrics.up.labels(self.name).set(1)
        log.info(
            "event=member_started member=%s url=%s nodes=%d", self.name, self.url, self.member.node_count
        )

    async def stop(self) -> None:
        await self.server.stop()
        await self.operator.stop()
        await self.t9k.stop()
        await self.jobsets.stop()
        await self.trainer.stop()
        await self.volcano.stop()
        await self.batch.stop()
        self.metrics.up.labels(self.name).set(0)

    async def down(self) -> None:
        """Close the API listener: clients get connection refused; the state stays."""
        await self.server.stop()
        self.faults.down = True
        self.metrics.up.labels(self.name).set(0)

    async def wipe(self) -> None:
        """Rebuilt empty, as a member restored from nothing or reinstalled: the same nodes
        register again, but every job, pod and other object is gone and the resourceVersions
        start over (what a client watched from is in its future). Open connections are cut;
        it listens again on the same port at once (or stays down if it was down)."""
        down = self.faults.down
        host, port = self.server.host, self.server.port
        await self.stop()
        self._build(host, port)
        await self.start()
        if down:
            await self.down()
        log.warning("event=member_wiped member=%s", self.name)

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
