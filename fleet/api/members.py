"""The MemberCluster kind: one read-only object per member of the kubeconfig, with its health.

The members are the kubeconfig's contexts (every one but ``fleet``), read through
:class:`fleet.members.KubeconfigClients`, which is the only code that sees their credentials:
this module takes nothing from it but the context names, so no server address, token or
certificate can reach a response or a log line. The file is read again when it changes, so a
member added to it shows up without a restart.

Health comes from the syncer's hash (:attr:`fleet.dispatch.keys.DispatchKeys.health`): per member
a JSON object the syncer writes after each probe. This module reads it leniently, so that the
syncer may add fields: ``ready`` (bool), ``since`` (when readiness last changed), ``probed``
(``lastProbe``; the last probe), ``error`` (``lastError``; the last failure), ``freeNPUs``
(accelerator type -> free NPUs, when the syncer knows them) and ``labels``. Times may be epoch
seconds or RFC 3339. A member the syncer has not probed yet is ``Unknown``.

The object::

    apiVersion: fleet.io/v1alpha1
    kind: MemberCluster
    metadata: {name: member-2, labels: {...}}
    status:
      conditions: [{type: Ready, status: "True", reason: ProbeSucceeded, message: "",
                    lastTransitionTime: ..., lastProbeTime: ...}]
      freeNPUs: {card-910b-2: 8}
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis.asyncio

from fleet.api.computed import ComputedKind
from fleet.api.kinds import MEMBER_CLUSTER
from fleet.apiserver.resources import Obj
from fleet.dispatch.keys import DEFAULT_DISPATCH_KEYS, DispatchKeys
from fleet.members import KubeconfigClients, MemberConfigError
from fleet.members.errors import redact

__all__ = ["KubeconfigMembers", "MemberNames", "member_kind", "member_object", "members_from", "parse_health"]

log = logging.getLogger("fleet.api.members")

MemberNames = Callable[[], list[str]]


class KubeconfigMembers:
    """The member names of a kubeconfig, read again when the file changes.

    A file that turns unreadable keeps the last names known (and says so in the log once);
    the first read must succeed, so a wrong path fails at start.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._clients = KubeconfigClients(path)
        self._stamp: tuple[int, int] | None = None
        self._names: list[str] = []
        self._failing = False
        self._refresh(strict=True)

    def _refresh(self, *, strict: bool) -> None:
        try:
            stat = self._clients.path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
            if stamp == self._stamp:
                return
            self._names = self._clients.members()
            self._stamp = stamp
            self._failing = False
        except (OSError, MemberConfigError) as error:
            if strict:
                raise MemberConfigError(str(error)) from None
            if not self._failing:
                log.warning("event=kubeconfig_unreadable path=%s error=%s", self._clients.path, error)
                self._failing = True

    def __call__(self) -> list[str]:
        self._refresh(strict=False)
        return list(self._names)

    def __repr__(self) -> str:
        return f"KubeconfigMembers({str(self._clients.path)!r})"


def _timestamp(value: Any) -> str | None:
    """Epoch seconds or an RFC 3339 string as RFC 3339 (``None`` when neither)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(float(value), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str) and value:
        return value
    return None


def _first(health: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if name in health and health[name] is not None:
            return health[name]
    return None


def parse_health(raw: bytes | str | None) -> dict[str, Any]:
    """One member's health JSON as a dict (empty when absent or unreadable)."""
    if raw is None:
        return {}
    try:
        health = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return {}
    return health if isinstance(health, dict) else {}


def member_object(name: str, health: Mapping[str, Any]) -> Obj:
    ready = _first(health, "ready", "healthy")
    error = _first(health, "error", "lastError", "last_error")
    if ready is None:
        status, reason = "Unknown", "NotProbed"
    elif ready:
        status, reason = "True", "ProbeSucceeded"
    else:
        status, reason = "False", "ProbeFailed"
    condition: dict[str, Any] = {
        "type": "Ready",
        "status": status,
        "reason": reason,
        # The syncer writes it without addresses; redacted again for any writer that did not.
        "message": redact(str(error or "")) if status != "True" else "",
    }
    for field, names in (
        ("lastTransitionTime", ("since", "lastTransitionTime", "changed")),
        ("lastProbeTime", ("probed", "lastProbe", "last_probe", "lastProbeTime", "checked")),
    ):
        stamp = _timestamp(_first(health, *names))
        if stamp is not None:
            condition[field] = stamp
    obj: Obj = {
        "apiVersion": MEMBER_CLUSTER.api_version,
        "kind": MEMBER_CLUSTER.kind,
        "metadata": {"name": name},
        "status": {"conditions": [condition]},
    }
    labels = health.get("labels")
    if isinstance(labels, Mapping) and labels:
        obj["metadata"]["labels"] = {str(k): str(v) for k, v in labels.items()}
    free = _first(health, "freeNPUs", "freeNpus", "free_npus", "free")
    if isinstance(free, Mapping):
        obj["status"]["freeNPUs"] = {
            str(kind): int(count) for kind, count in free.items() if isinstance(count, int | float)
        }
    return obj


def _fingerprint(obj: Obj) -> Any:
    """What a watch compares: everything but the version and the probe's own timestamp."""
    conditions = [
        {k: v for k, v in c.items() if k != "lastProbeTime"}
        for c in obj.get("status", {}).get("conditions", [])
    ]
    labels = obj.get("metadata", {}).get("labels")
    return (labels, conditions, obj.get("status", {}).get("freeNPUs"))


def member_kind(
    names: MemberNames,
    client: redis.asyncio.Redis,
    version: Callable[[], Awaitable[str]],
    *,
    keys: DispatchKeys = DEFAULT_DISPATCH_KEYS,
    interval: float = 1.0,
) -> ComputedKind:
    """The MemberCluster kind: ``names()`` (read in a worker thread) and the health hash."""

    async def compute() -> list[Obj]:
        members = await asyncio.to_thread(names)
        raw = await client.hmget(keys.health, members) if members else []
        return [member_object(name, parse_health(value)) for name, value in zip(members, raw, strict=True)]

    return ComputedKind(MEMBER_CLUSTER, compute, version, fingerprint=_fingerprint, interval=interval)


def members_from(path: str | os.PathLike[str] | None) -> MemberNames:
    """The names of ``path``'s members, or none when no kubeconfig is given."""
    if path is None:
        return list
    return KubeconfigMembers(Path(path))
