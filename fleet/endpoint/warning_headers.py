"""API warnings: what a backend wants the client to see beside a successful answer.

Kubernetes returns warnings as ``Warning: 299 - "text"`` response headers, and kubectl prints each
as ``Warning: text`` on stderr (the ElasticQuotaTree sample's root ``max`` differing from its
``min`` is accepted with one). The serving core's ``Store`` protocol returns objects only, so a
backend deep in a write calls :func:`warn`, and :class:`WarningHeaders`, an ASGI middleware around
the app, adds what was collected during the request to its response. Collection uses a context
variable holding one list per request: the handler and any thread it hands work to
(``asyncio.to_thread`` copies the context) append to the same list.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from contextvars import ContextVar
from typing import Any, Final

from fleet.apiserver import warning_header

__all__ = ["WarningHeaders", "header_value", "warn"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_COLLECTED: Final[ContextVar[list[str] | None]] = ContextVar("fleet_api_warnings", default=None)


def warn(text: str) -> None:
    """Add a warning to the current request's answer (a no-op outside a request)."""
    collected = _COLLECTED.get()
    if collected is not None and text not in collected:
        collected.append(text)


def header_value(text: str) -> str:
    """``299 - "text"`` with quotes and backslashes escaped and the text kept to printable ASCII
    (:func:`fleet.apiserver.fields.warning_header`, which the serving core's own warnings use)."""
    return warning_header(text)


class WarningHeaders:
    """ASGI middleware: one ``Warning`` header per :func:`warn` call made while handling a request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        collected: list[str] = []
        token = _COLLECTED.set(collected)

        async def send_with_warnings(message: Message) -> None:
            if message["type"] == "http.response.start" and collected:
                headers = list(message.get("headers") or [])
                headers += [(b"warning", header_value(text).encode("ascii")) for text in collected]
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_warnings)
        finally:
            _COLLECTED.reset(token)
