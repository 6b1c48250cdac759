"""The MemberCluster kind: one read-only object per member of the kubeconfig, with its health.

The members are the kubeconfig's contexts (every one but ``fleet``), followed through
:class:`fleet.members.KubeconfigChanges` as the roles follow them: this module takes nothing
from it but the context names, so no server address, token or certificate can reach a response
or a log line. The file is read again when it changes, so a member added to it shows up
without a restart.

Health comes from the syncer's hash (:attr:`fleet.state.dispatch_keys.DispatchKeys.health`), one
:class:`fleet.state.member_health.MemberHealth` record per member, read through that module: its
``ready`` is the Ready condition's status, ``since`` its ``lastTransitionTime``, ``probed`` its
``lastProbeTime`` and ``error`` its message. A member the syncer has not probed yet is
``Unknown``.

The object::

    apiVersion: fleet.io/v1alpha1
    kind: MemberCluster
    metadata: {name: member-2, labels: {...}}
    status:
      conditions: [{type: Ready, status: "True", reason: ProbeSucceeded, message: "",
                    lastTransitionTime: ..., lastProbeTime: ...}]
      freeNPUs: {module-910b-8: 16}           # per accelerator type
      allocatableNPUs: {module-910b-8: 32}
      accelerators:                           # fleet.placement.view: what each number means
      - {type: module-910b-8, nodes: 4, usableNodes: 4, nodesByFreeNPUs: {"8": 2, "0": 2},
         allocatable: {cpu: "752", huawei.com/Ascend910: "32", memory: 6000Gi}, free: {...}}
      capacityObservedTime: ...               # when the dispatcher's capacity feed saw it

Capacity comes from the capacity hash (:mod:`fleet.state.member_capacity`), which the dispatcher
writes from its node and pod watches of every member; without a record (no dispatcher running,
the member not listed yet) the capacity fields are absent and the tables say ``<unknown>``.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import redis.asyncio

from fleet.apiserver import FRESH_WAIT_SECONDS, Cause, MethodNotAllowed, Obj, ResourceType
from fleet.apiserver import invalid as invalid_value
from fleet.endpoint.computed import ComputedKind
from fleet.endpoint.errors import invalid
from fleet.kinds import MEMBER_CLUSTER
from fleet.members import KubeconfigChanges, redact
from fleet.state import (
    CAPACITY_OBSERVED,
    DEFAULT_DISPATCH_KEYS,
    NO_EXECUTE,
    NO_SCHEDULE,
    DispatchKeys,
    MemberHealth,
    parse_capacity,
    parse_health,
    parse_taints,
    scheduling,
)
from fleet.timestamps import rfc3339

__all__ = ["KubeconfigMembers", "MemberNames", "member_kind", "member_object", "members_from"]

#: What the status shows of each accelerator type of a capacity record.
_ACCELERATOR_FIELDS = ("type", "nodes", "usableNodes", "allocatable", "free", "nodesByFreeNPUs")

MemberNames = Callable[[], list[str]]


class KubeconfigMembers:
    """The member names of a kubeconfig, followed as the roles follow it
    (:class:`fleet.members.KubeconfigChanges`: a ``stat`` per call, the file read only when that
    changed; a file that cannot be used keeps the last names known, logged once). The first
    read must succeed, so a wrong path fails at start.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._changes = KubeconfigChanges(path)
        self._lock = threading.Lock()  # called from worker threads (asyncio.to_thread)
        self._follow(strict=True)

    def _follow(self, *, strict: bool) -> None:
        with self._lock:
            if self._changes.poll(strict=strict) is not None:
                self._changes.accept()

    def __call__(self) -> list[str]:
        self._follow(strict=False)
        return self._changes.members

    def __repr__(self) -> str:
        return f"KubeconfigMembers({str(self._changes.path)!r})"


def _timestamp(epoch: float) -> str | None:
    """Epoch seconds as RFC 3339 (``None`` for 0: never)."""
    if epoch <= 0:
        return None
    try:
        return rfc3339(epoch)
    except (OverflowError, OSError, ValueError):
        return None


def capacity_status(record: Mapping[str, Any] | None) -> dict[str, Any]:
    """The status fields of a capacity record (:mod:`fleet.state.member_capacity`); none without one
    (the capacity of a member the feed has not listed is unknown, not zero)."""
    if record is None:
        return {}
    accelerators = [a for a in record.get("accelerators", []) if isinstance(a, Mapping)]
    out: dict[str, Any] = {
        "freeNPUs": {str(a.get("type")): int(a.get("freeNPUs") or 0) for a in accelerators},
        "allocatableNPUs": {str(a.get("type")): int(a.get("allocatableNPUs") or 0) for a in accelerators},
        "accelerators": [{k: a[k] for k in _ACCELERATOR_FIELDS if k in a} for a in accelerators],
    }
    observed = record.get(CAPACITY_OBSERVED)
    stamp = _timestamp(float(observed)) if isinstance(observed, int | float) else None
    if stamp is not None:
        out["capacityObservedTime"] = stamp
    return out


def member_object(
    name: str,
    health: MemberHealth | None,
    capacity: Mapping[str, Any] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> Obj:
    """The MemberCluster of ``name`` from its health record (``None``: not probed yet), its
    capacity record (``None``: not seen yet) and its taints (``fleet member cordon``/``drain``:
    ``spec.taints`` as Karmada's Cluster has them, and ``status.scheduling``)."""
    ready = None if health is None else health.ready
    if ready is None:
        status, reason = "Unknown", "NotProbed"
    elif ready:
        status, reason = "True", "ProbeSucceeded"
    else:
        status, reason = "False", "ProbeFailed"
    error = None if health is None else health.error
    condition: dict[str, str] = {
        "type": "Ready",
        "status": status,
        "reason": reason,
        # The syncer writes it without addresses; redacted again for any writer that did not.
        "message": redact(str(error or "")) if status != "True" else "",
    }
    if health is not None:
        for field, epoch in (("lastTransitionTime", health.since), ("lastProbeTime", health.probed)):
            stamp = _timestamp(epoch)
            if stamp is not None:
                condition[field] = stamp
    obj: Obj = {
        "apiVersion": MEMBER_CLUSTER.api_version,
        "kind": MEMBER_CLUSTER.kind,
        "metadata": {"name": name},
        "status": {
            "conditions": [condition],
            "scheduling": scheduling(taints or []),
            **capacity_status(capacity),
        },
    }
    if taints:
        obj["spec"] = {"taints": taints}
    return obj


def _fingerprint(obj: Obj) -> Any:
    """What a watch compares: everything but the version and the probe's own timestamp."""
    conditions = [
        {k: v for k, v in c.items() if k != "lastProbeTime"}
        for c in obj.get("status", {}).get("conditions", [])
    ]
    labels = obj.get("metadata", {}).get("labels")
    status = obj.get("status", {})
    return (labels, conditions, status.get("accelerators"), status.get("scheduling"))


def member_kind(
    names: MemberNames,
    client: redis.asyncio.Redis,
    version: Callable[[], Awaitable[str]],
    *,
    keys: DispatchKeys = DEFAULT_DISPATCH_KEYS,
    interval: float = 1.0,
    fresh_wait: float = FRESH_WAIT_SECONDS,
) -> ComputedKind:
    """The MemberCluster kind: ``names()`` (read in a worker thread) and the health hash."""

    async def compute() -> list[Obj]:
        members = await asyncio.to_thread(names)
        if not members:
            return []
        async with client.pipeline(transaction=False) as pipe:
            pipe.hmget(keys.health, members)
            pipe.hmget(keys.capacity, members)
            pipe.hmget(keys.taints, members)
            health, capacity, taints = await pipe.execute()
        return [
            member_object(name, parse_health(h), parse_capacity(c), parse_taints(t))
            for name, h, c, t in zip(members, health, capacity, taints, strict=True)
        ]

    return MemberClusterKind(
        MEMBER_CLUSTER,
        compute,
        version,
        fingerprint=_fingerprint,
        interval=interval,
        fresh_wait=fresh_wait,
        client=client,
        keys=keys,
    )


class MemberClusterKind(ComputedKind):
    """The MemberCluster kind, whose one writable field is ``spec.taints``, as on Karmada's
    Cluster (``kubectl patch mc member-2 --type merge -p '{"spec":{"taints":[...]}}'``): taints
    of effect ``NoSchedule`` or ``NoExecute`` keep new jobs away from the member (what ``fleet
    member cordon`` and ``drain`` set, :mod:`fleet.state.member_taints`); everything else of the
    object is computed, and a change to it is refused naming the field."""

    def __init__(
        self,
        rt: ResourceType,
        compute: Callable[[], Awaitable[list[Obj]]],
        version: Callable[[], Awaitable[str]],
        *,
        client: redis.asyncio.Redis,
        keys: DispatchKeys,
        **kwargs: Any,
    ) -> None:
        super().__init__(rt, compute, version, **kwargs)
        self._client = client
        self._keys = keys

    async def update(
        self, rt: ResourceType, obj: Obj, *, subresource: str | None = None, dry_run: bool = False
    ) -> Obj:
        if subresource is not None:
            raise MethodNotAllowed(f"the status of {rt.qualified} is computed by Fleet")
        name = str((obj.get("metadata") or {}).get("name") or "")
        current = await self.get(rt, None, name)  # NotFound for a member the fleet does not have
        spec = obj.get("spec") or {}
        causes = [
            Cause(f"spec.{field}", "Forbidden: only spec.taints may be set", "FieldValueForbidden")
            for field in sorted(spec)
            if field != "taints"
        ]
        taints = spec.get("taints") or []
        if not isinstance(taints, list):
            causes.append(invalid_value("spec.taints", taints, "must be a list of taints"))
            taints = []
        kept: list[dict[str, str]] = []
        for i, taint in enumerate(taints):
            where = f"spec.taints[{i}]"
            if not isinstance(taint, dict) or not isinstance(taint.get("key"), str) or not taint.get("key"):
                causes.append(
                    invalid_value(
                        f"{where}.key",
                        (taint or {}).get("key") if isinstance(taint, dict) else taint,
                        "a taint needs a key",
                    )
                )
                continue
            if taint.get("effect") not in (NO_SCHEDULE, NO_EXECUTE):
                causes.append(
                    invalid_value(
                        f"{where}.effect",
                        taint.get("effect"),
                        f"supported values: {NO_SCHEDULE!r}, {NO_EXECUTE!r} (what keeps new jobs away)",
                    )
                )
                continue
            kept.append({k: str(v) for k, v in taint.items() if k in ("key", "value", "effect", "timeAdded")})
        if causes:
            raise invalid(rt, obj, causes)
        if not dry_run:
            if kept:
                now = rfc3339(time.time())
                for taint in kept:
                    taint.setdefault("timeAdded", now)
                await self._client.hset(self._keys.taints, name, json.dumps(kept))
            else:
                await self._client.hdel(self._keys.taints, name)
        return await self.get(rt, None, name) if not dry_run else {**current, "spec": {"taints": kept}}


def members_from(path: str | os.PathLike[str] | None) -> MemberNames:
    """The names of ``path``'s members, or none when no kubeconfig is given."""
    if path is None:
        return list
    return KubeconfigMembers(Path(path))
