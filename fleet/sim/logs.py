"""Pod logs of a simulated member: ``GET /api/v1/namespaces/NS/pods/NAME/log``, as kube-apiserver
serves them (the ``log`` subresource of ``core/v1`` pods: plain text, query ``container``,
``follow``, ``tailLines``, ``timestamps``, ``previous``), so ``kubectl logs`` and ``fleet logs``
work on a simulated member as on a real one.

A simulated pod runs no program: its log is what a training container would write, derived from
the pod as the simulator keeps it: a line when it started on its node, a progress line every
:data:`STEP_SECONDS` while it runs, and its end (exit code and reason) once it terminated. So the
same pod gives the same lines to every reader, and ``follow`` streams new lines as the pod moves
on, ending when the pod terminates or goes away.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from fleet.apiserver import POD, MemoryStore
from fleet.timestamps import epoch_of, rfc3339

__all__ = ["STEP_SECONDS", "log_lines", "log_route"]

#: A running simulated container writes a progress line this often.
STEP_SECONDS: Final = 5.0
_FOLLOW_POLL: Final = 0.5


def _status(code: int, reason: str, message: str) -> Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return JSONResponse(body, status_code=code)


def _container_state(pod: dict[str, Any], container: str) -> dict[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == container:
            return dict(status.get("state") or {})
    return {}


def log_lines(pod: dict[str, Any], container: str, now: float) -> list[tuple[float, str]]:
    """(time, text) of every line ``container`` of ``pod`` has written by ``now``."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    state = _container_state(pod, container)
    started_at = (state.get("running") or state.get("terminated") or {}).get("startedAt") or status.get(
        "startTime"
    )
    started = epoch_of(started_at)
    if started is None:
        return []
    node = (pod.get("spec") or {}).get("nodeName") or "?"
    name = f"{meta.get('namespace')}/{meta.get('name')}"
    lines = [(started, f"fleet-sim: container {container} of pod {name} started on node {node}")]
    terminated = state.get("terminated") or {}
    end = epoch_of(terminated.get("finishedAt")) or now
    step, at = 1, started + STEP_SECONDS
    while at <= min(end, now):
        lines.append((at, f"training: step {step * 100}, {STEP_SECONDS * step:g}s elapsed"))
        step, at = step + 1, at + STEP_SECONDS
    if terminated:
        code = int(terminated.get("exitCode") or 0)
        reason = terminated.get("reason") or ("Completed" if code == 0 else "Error")
        lines.append((end, f"fleet-sim: container {container} exited with code {code} ({reason})"))
    return lines


def _render(lines: list[tuple[float, str]], timestamps: bool) -> bytes:
    return b"".join(((rfc3339(at) + " " if timestamps else "") + text + "\n").encode() for at, text in lines)


def log_route(store: MemoryStore) -> Route:
    """The route of the ``log`` subresource over ``store``'s pods."""

    async def read(namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return dict(await store.get(POD, namespace, name))
        except Exception:  # NotFound: the pod is gone
            return None

    async def endpoint(request: Request) -> Response:
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        pod = await read(namespace, name)
        if pod is None:
            return _status(404, "NotFound", f'pods "{name}" not found')
        containers = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
        container = request.query_params.get("container") or (containers[0] if len(containers) == 1 else "")
        if not container:
            return _status(
                400,
                "BadRequest",
                f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]",
            )
        if container not in containers:
            return _status(400, "BadRequest", f"container {container} is not valid for pod {name}")
        query = request.query_params
        timestamps = query.get("timestamps") == "true"
        tail = query.get("tailLines")
        lines = log_lines(pod, container, time.time())
        if tail is not None and tail.lstrip("-").isdigit() and int(tail) >= 0:
            lines = lines[len(lines) - int(tail) :] if int(tail) else []
        if query.get("follow") != "true":
            return Response(_render(lines, timestamps), media_type="text/plain")

        async def stream() -> AsyncIterator[bytes]:
            sent = len(log_lines(pod, container, time.time()))
            yield _render(lines, timestamps)
            while True:
                await asyncio.sleep(_FOLLOW_POLL)
                current = await read(namespace, name)
                if current is None:
                    return
                now_lines = log_lines(current, container, time.time())
                if len(now_lines) > sent:
                    yield _render(now_lines[sent:], timestamps)
                    sent = len(now_lines)
                if _container_state(current, container).get("terminated"):
                    return

        return StreamingResponse(stream(), media_type="text/plain")

    return Route("/api/v1/namespaces/{namespace}/pods/{name}/log", endpoint, methods=["GET"])
