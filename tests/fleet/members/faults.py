"""A fault-injecting ASGI middleware in front of the serving core, for the member-access tests.

The member under test stays a real HTTP server; this only lets a test script its answers: the
next N requests whose path contains some text are answered with a chosen code (503, 429 with a
``Retry-After``, 403, 422...) as a Kubernetes ``Status``, and every request is counted, so a test
can prove how many attempts the client made.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_REASONS = {
    403: "Forbidden",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    502: "BadGateway",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass
class _Rule:
    code: int
    remaining: int  # -1: for ever
    path: str
    method: str | None
    retry_after: float | None


class FaultPlan:
    """What to inject: ``fail`` schedules canned error answers, ``hits`` counts requests."""

    def __init__(self) -> None:
        self._rules: list[_Rule] = []
        self._lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []
        self.injected = 0
        self._delays: list[tuple[str, float]] = []

    def fail(
        self,
        code: int,
        *,
        times: int = 1,
        path: str = "",
        method: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        """Answer the next ``times`` matching requests (``-1``: all of them) with ``code``."""
        with self._lock:
            self._rules.append(_Rule(code, times, path, method, retry_after))

    def delay(self, seconds: float, *, path: str = "") -> None:
        """Answer every request whose path contains ``path`` only after ``seconds``."""
        with self._lock:
            self._delays.append((path, seconds))

    def delay_for(self, path: str) -> float:
        with self._lock:
            return max((s for p, s in self._delays if p in path), default=0.0)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
            self._delays.clear()

    def hits(self, path: str = "", method: str | None = None) -> int:
        """How many requests (faulted or not) matched ``path`` and ``method``."""
        with self._lock:
            return sum(1 for m, p in self.requests if path in p and method in (None, m))

    def take(self, method: str, path: str) -> _Rule | None:
        """Count the request; the rule to answer it with, if one applies."""
        with self._lock:
            self.requests.append((method, path))
            for rule in self._rules:
                if rule.path in path and rule.method in (None, method) and rule.remaining != 0:
                    if rule.remaining > 0:
                        rule.remaining -= 1
                    self.injected += 1
                    return rule
        return None


class FaultMiddleware:
    """ASGI middleware answering from a :class:`FaultPlan` before the app sees the request."""

    def __init__(self, app: ASGIApp, plan: FaultPlan) -> None:
        self.app = app
        self.plan = plan

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rule = self.plan.take(scope["method"], scope["path"])
        delay = self.plan.delay_for(scope["path"])
        if delay > 0:
            await asyncio.sleep(delay)
        if rule is None:
            await self.app(scope, receive, send)
            return
        reason = _REASONS.get(rule.code, "InternalError")
        body = json.dumps(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"injected {rule.code}",
                "reason": reason,
                "code": rule.code,
            }
        ).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if rule.retry_after is not None:
            headers.append((b"retry-after", str(rule.retry_after).encode()))
        await send({"type": "http.response.start", "status": rule.code, "headers": headers})
        await send({"type": "http.response.body", "body": body})
