"""Faults a simulated member can be put in while it runs, and the ASGI middleware that applies them.

``down``/``up`` close and reopen the member's listener (see :class:`fleet.sim.member.SimMember`);
the answers a running listener gives are shaped here: every request delayed by ``latency_ms``
(with ``slow_probes`` off, all but the health endpoints ``/readyz``, ``/livez``, ``/healthz``:
an API server whose storage is slow still answers those from memory),
and, while ``unavailable``, answered ``503`` with a Kubernetes ``Status`` (reason
``ServiceUnavailable``), as an API server behind a failing load balancer or etcd would.

``wipe`` rebuilds the member empty (:meth:`fleet.sim.member.SimMember.wipe`): its nodes come back,
every other object is gone and its resourceVersions start over, as a member restored from nothing.

``refuse-create`` makes the member refuse creates of custom resources (``POST /apis/<group>/
<version>/namespaces/<ns>/<plural>``), of every job or of one (``NS/NAME``), with the ``Status``
a real API server sends for that kind of refusal (:data:`REFUSALS`): its own validation of the
object, its RBAC, an admission webhook, a ValidatingAdmissionPolicy, a CRD that is not
installed. The simulator knows nothing of what Fleet makes of them. ``ok`` ends every refusal.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["FAULTS", "REFUSALS", "FaultMiddleware", "FaultState", "refusal_status"]

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
    "refuse-create": "REFUSAL",
    "wipe": None,
}

#: The refusals ``refuse-create`` can answer with, each as the API server words it.
REFUSALS: Final = ("invalid", "forbidden", "webhook", "policy", "no-crd")

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
    #: Whether ``latency_ms`` delays the health endpoints too.
    slow_probes: bool = True
    #: ``NS/NAME`` (or ``*``: every create) -> the refusal its creates get (:data:`REFUSALS`).
    refusals: dict[str, str] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {
            "down": self.down,
            "unavailable": self.unavailable,
            "latencyMs": self.latency_ms,
            "slowProbes": self.slow_probes,
            "refusals": dict(self.refusals),
        }


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


#: The health endpoints (what a probe asks).
_HEALTH: Final = frozenset({"/readyz", "/livez", "/healthz"})

#: A create of a namespaced custom resource: group, version, namespace, plural.
_CREATE_PATH: Final = re.compile(r"^/apis/([^/]+)/([^/]+)/namespaces/([^/]+)/([^/]+)/?$")


def refusal_status(
    refusal: str, *, group: str, plural: str, kind: str, namespace: str, name: str
) -> dict[str, Any]:
    """The ``Status`` an API server answers a create with for ``refusal`` (one of :data:`REFUSALS`)."""
    resource = f"{plural}.{group}"
    if refusal == "invalid":  # apierrors.NewInvalid: the object failed the server's validation
        cause = {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "object": refused by the member\'s validation (injected fault)',
            "field": "spec",
        }
        return _status(
            422,
            "Invalid",
            f'{kind}.{group} "{name}" is invalid: spec: {cause["message"]}',
            {"name": name, "group": group, "kind": kind, "causes": [cause]},
        )
    if refusal == "forbidden":  # the authorizer: RBAC does not allow the create
        return _status(
            403,
            "Forbidden",
            f'{resource} is forbidden: User "system:serviceaccount:fleet-system:fleet" cannot create '
            f'resource "{plural}" in API group "{group}" in the namespace "{namespace}"',
            {"group": group, "kind": plural},
        )
    if refusal == "webhook":  # a validating webhook's denial (controller-runtime's admission.Denied)
        return _status(
            403,
            "Forbidden",
            'admission webhook "policy.sim.fleet.io" denied the request: [cluster-policy] '
            f'{plural} may not be created in namespace "{namespace}" on this cluster',
            {},
        )
    if refusal == "policy":  # a ValidatingAdmissionPolicy's denial (admission.NewForbidden, Invalid)
        denial = (
            "ValidatingAdmissionPolicy 'sim-policy' with binding 'sim-policy' denied request: "
            "this cluster takes no new training jobs"
        )
        return _status(
            422,
            "Invalid",
            f'{resource} "{name}" is forbidden: {denial}',
            {"name": name, "group": group, "kind": plural, "causes": [{"message": denial}]},
        )
    if refusal == "no-crd":  # the resource is not served: its CRD is not installed
        return _status(404, "NotFound", "the server could not find the requested resource", {})
    raise ValueError(f"refusal: {refusal!r} is not one of {', '.join(REFUSALS)}")


def _status(code: int, reason: str, message: str, details: dict[str, Any]) -> dict[str, Any]:
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        status["details"] = details
    return status


async def _answer(send: Send, code: int, body: bytes, extra: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": code, "headers": headers})
    await send({"type": "http.response.body", "body": body})


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
        if self.state.latency_ms > 0 and (self.state.slow_probes or scope.get("path") not in _HEALTH):
            await asyncio.sleep(self.state.latency_ms / 1000)
        if self.state.unavailable:
            if self.on_injected is not None:
                self.on_injected()
            await _answer(send, 503, _UNAVAILABLE, ((b"retry-after", b"1"),))
            return
        create = _CREATE_PATH.match(scope.get("path") or "") if scope.get("method") == "POST" else None
        if create is None or not self.state.refusals:
            await self.app(scope, receive, send)
            return
        await self._maybe_refuse(create, scope, receive, send)

    async def _maybe_refuse(self, create: re.Match[str], scope: Scope, receive: Receive, send: Send) -> None:
        """Read the body of a create; refuse it when a refusal names its job, else pass it on."""
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        group, _, namespace, plural = create.groups()
        try:
            obj = json.loads(body)
            meta = obj.get("metadata") or {}
            name, kind = str(meta.get("name") or meta.get("generateName") or ""), str(obj.get("kind") or "")
        except (ValueError, AttributeError):
            name, kind = "", ""
        refusal = self.state.refusals.get(f"{namespace}/{name}") or self.state.refusals.get("*")
        if refusal is not None and name:
            if self.on_injected is not None:
                self.on_injected()
            status = refusal_status(
                refusal, group=group, plural=plural, kind=kind, namespace=namespace, name=name
            )
            await _answer(send, int(status["code"]), json.dumps(status).encode())
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
