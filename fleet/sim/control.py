"""The simulator's control endpoint: fault injection and ``/metrics``, on a port of its own.

``POST /members/{member}/faults`` with ``{"fault": "down"|"up"|"503"|"ok"|"slow"|"node-notready"|
"node-ready"|"fail-job"|"refuse-create"|"wipe", "ms": N, "node": NAME, "job": "NS/NAME", "always": bool,
"refusal": "invalid"|"forbidden"|"webhook"|"policy"|"no-crd", "probes": bool}`` applies one fault
(``slow`` with ``"probes": false`` leaves the health endpoints fast) (``refuse-create``
refuses the creates of ``job``, or of every job without one) and answers the member's fault state;
``GET /members`` lists the members and their state.
A bad request is answered 400 with a message naming the field, and changes nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fleet.apiserver import NotFound
from fleet.sim.faults import FAULTS, REFUSALS
from fleet.sim.member import SimMember
from fleet.sim.metrics import SimMetrics

__all__ = ["FaultRequestError", "apply_fault", "build_control_app"]

log = logging.getLogger("fleet.sim.control")


class FaultRequestError(ValueError):
    """A fault request that names an unknown fault or lacks its argument."""


def _state(member: SimMember) -> dict[str, Any]:
    return {"member": member.name, "url": member.url, **member.faults.describe()}


async def apply_fault(member: SimMember, body: Mapping[str, Any]) -> dict[str, Any]:
    """Apply one fault to ``member``; raises :class:`FaultRequestError` (nothing changed) when bad."""
    fault = body.get("fault")
    if fault not in FAULTS:
        raise FaultRequestError(f"fault: {fault!r} is not one of {', '.join(FAULTS)}")
    if fault == "slow":
        ms = body.get("ms")
        if not isinstance(ms, int) or isinstance(ms, bool) or not 0 <= ms <= 600_000:
            raise FaultRequestError(f"ms: {ms!r} must be an integer number of milliseconds from 0 to 600000")
        probes = body.get("probes", True)
        if not isinstance(probes, bool):
            raise FaultRequestError(f"probes: {probes!r} must be true or false")
        member.faults.latency_ms = ms
        member.faults.slow_probes = probes
    elif fault in ("node-notready", "node-ready"):
        node = body.get("node")
        if not isinstance(node, str) or not node:
            raise FaultRequestError("node: a node name is required")
        try:
            await member.set_node_ready(node, fault == "node-ready")
        except NotFound:
            raise FaultRequestError(f"node: member {member.name} has no node {node!r}") from None
    elif fault == "fail-job":
        job = body.get("job")
        namespace, _, name = str(job or "").partition("/")
        if not namespace or not name:
            raise FaultRequestError(f"job: {job!r} must be NAMESPACE/NAME")
        member.operator.fail_job(namespace, name, always=bool(body.get("always")))
        member.t9k.fail_job(namespace, name)
        member.jobsets.fail_job(namespace, name)
        member.volcano.fail_job(namespace, name)
        member.batch.fail_job(namespace, name)
    elif fault == "refuse-create":
        refusal = body.get("refusal")
        if refusal not in REFUSALS:
            raise FaultRequestError(f"refusal: {refusal!r} is not one of {', '.join(REFUSALS)}")
        job = body.get("job")
        if job is not None:
            namespace, _, name = str(job).partition("/")
            if not isinstance(job, str) or not namespace or not name:
                raise FaultRequestError(f"job: {job!r} must be NAMESPACE/NAME")
        member.faults.refusals[job or "*"] = str(refusal)
    elif fault == "down":
        await member.down()
    elif fault == "up":
        await member.up()
    elif fault == "wipe":
        await member.wipe()
    elif fault == "503":
        member.faults.unavailable = True
    else:  # ok
        member.faults.unavailable = False
        member.faults.latency_ms = 0
        member.faults.slow_probes = True
        member.faults.refusals.clear()
    member.metrics.faults.labels(member.name, str(fault)).inc()
    log.info(
        "event=fault member=%s fault=%s body=%s", member.name, fault, json.dumps(dict(body), sort_keys=True)
    )
    return _state(member)


def build_control_app(members: Mapping[str, SimMember], metrics: SimMetrics) -> Starlette:
    async def list_members(request: Request) -> Response:
        return JSONResponse({"members": [_state(m) for m in members.values()]})

    async def fault(request: Request) -> Response:
        name = request.path_params["member"]
        member = members.get(name)
        if member is None:
            return JSONResponse({"error": f"member: no member named {name!r}"}, status_code=404)
        try:
            body = await request.json()
        except ValueError:
            return JSONResponse({"error": "body: must be a JSON object"}, status_code=400)
        if not isinstance(body, dict):
            return JSONResponse({"error": "body: must be a JSON object"}, status_code=400)
        try:
            return JSONResponse(await apply_fault(member, body))
        except FaultRequestError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)

    async def metrics_endpoint(request: Request) -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def health(request: Request) -> Response:
        return Response("ok", media_type="text/plain")

    return Starlette(
        routes=[
            Route("/members", list_members, methods=["GET"]),
            Route("/members/{member}/faults", fault, methods=["POST"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
            Route("/healthz", health, methods=["GET"]),
        ]
    )
