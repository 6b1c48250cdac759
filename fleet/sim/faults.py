"""Faults a simulated member can be put in while it runs, and the ASGI middleware that applies them.

``down``/``up`` close and reopen the member's listener (see :class:`fleet.sim.member.SimMember`);
the answers a running listener gives are shaped here: every request delayed by ``latency_ms``,
and, while ``unavailable``, answered ``503`` with a Kubernetes ``Status`` (reason
``ServiceUnavailable``), as an API server behind a failing load balancer or etcd would.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["FAULTS", "FaultMiddleware", "FaultState"]

#: The faults ``fleet sim fault`` offers, with the argument each takes.
FAULTS: Final = {
    "down": None,
    "up": None,
    "503": None,
    "ok": None,
    "slow": "MS",
    "node-notready": "NODE",
    "node-ready": "NODE",
    "fail-job": "NS/NAME",
}

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass
class FaultState:
    """What is wrong with a member right now."""

    down: bool = False
    unavailable: bool = False
    latency_ms: int = 0

    def describe(self) -> dict[str, Any]:
        return {"down": self.down, "unavailable": self.unavailable, "latencyMs": self.latency_ms}


_UNAVAILABLE: Final = json.dumps(
    {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server is currently unable to handle the request (injected fault)",
        "reason": "ServiceUnavailable",
        "code": 503,
    }
).encode()


class FaultMiddleware:
    """Wraps a member's app; consults ``state`` on every HTTP request."""

    def __init__(
        self, app: ASGIApp, state: FaultState, on_injected: Callable[[], None] | None = None
    ) -> None:
        self.app = app
        self.state = state
        self.on_injected = on_injected

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.state.latency_ms > 0:
            await asyncio.sleep(self.state.latency_ms / 1000)
        if not self.state.unavailable:
            await self.app(scope, receive, send)
            return
        if self.on_injected is not None:
            self.on_injected()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(_UNAVAILABLE)).encode()),
            (b"retry-after", b"1"),
        ]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": _UNAVAILABLE})
