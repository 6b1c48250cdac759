"""A member's taints: taking it out of service for maintenance, as Karmada's Cluster does.

Karmada marks a cluster unschedulable with a taint on its Cluster object's ``spec.taints``
(``karmadactl cordon``: key ``cluster.karmada.io/unschedulable``, effect ``NoSchedule``), and
with effect ``NoExecute`` evicts what runs there (its taint manager; karmada-io/karmada,
``pkg/apis/cluster/v1alpha1`` well-known taints and the cluster failover design). Fleet keeps
the same two effects per member in one hash (:attr:`~fleet.state.dispatch_keys.DispatchKeys.taints`,
member -> JSON list of ``{key, effect, timeAdded}``):

``NoSchedule`` (``fleet member cordon``)
    the dispatcher places no new job on the member; the jobs running there stay.
``NoExecute`` (``fleet member drain``)
    no new job either, and the member's jobs are sent back to their queues as a cluster failover
    sends them (``ClusterFailover``, the member avoided), to run elsewhere.

``fleet member uncordon`` removes both. The MemberCluster object shows them as ``spec.taints``
and ``status.scheduling`` (``Schedulable``, ``Cordoned``, ``Draining``), and ``fleet clusters``
in its SCHEDULING column.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

import redis

from fleet.state.dispatch_keys import DispatchKeys
from fleet.timestamps import rfc3339

__all__ = [
    "NO_EXECUTE",
    "NO_SCHEDULE",
    "UNSCHEDULABLE_TAINT",
    "parse_taints",
    "read_taints",
    "scheduling",
    "unschedulable",
    "write_taints",
]

#: Karmada's well-known taint key of a cluster taken out of scheduling.
UNSCHEDULABLE_TAINT: Final = "cluster.karmada.io/unschedulable"
NO_SCHEDULE: Final = "NoSchedule"
NO_EXECUTE: Final = "NoExecute"


def parse_taints(raw: Any) -> list[dict[str, str]]:
    """The taints of one hash value (bytes or str JSON; None: none); a bad value reads as none."""
    if raw is None:
        return []
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return []
    if not isinstance(value, list):
        return []
    return [
        {str(k): str(v) for k, v in t.items()}
        for t in value
        if isinstance(t, dict) and t.get("key") and t.get("effect") in (NO_SCHEDULE, NO_EXECUTE)
    ]


def read_taints(
    client: redis.Redis, keys: DispatchKeys, members: Iterable[str] | None = None
) -> dict[str, list[dict[str, str]]]:
    """Member -> its taints (members without any are absent)."""
    found: dict[str, Any]
    if members is None:
        found = {
            (k.decode() if isinstance(k, bytes) else str(k)): v
            for k, v in client.hgetall(keys.taints).items()
        }
    else:
        names = list(members)
        values: list[Any] = list(client.hmget(keys.taints, names)) if names else []
        found = dict(zip(names, values, strict=True))
    out = {name: parse_taints(raw) for name, raw in found.items()}
    return {name: taints for name, taints in out.items() if taints}


def write_taints(client: redis.Redis, keys: DispatchKeys, member: str, effects: Iterable[str]) -> None:
    """Set the member's :data:`UNSCHEDULABLE_TAINT` with ``effects`` (none: remove it)."""
    wanted = sorted(set(effects))
    if not wanted:
        client.hdel(keys.taints, member)
        return
    import time

    added = rfc3339(time.time())
    taints = [{"key": UNSCHEDULABLE_TAINT, "effect": effect, "timeAdded": added} for effect in wanted]
    client.hset(keys.taints, member, json.dumps(taints))


def unschedulable(taints: Mapping[str, list[dict[str, str]]]) -> frozenset[str]:
    """The members no new job may go to: those with a NoSchedule or NoExecute taint."""
    return frozenset(name for name, found in taints.items() if found)


def scheduling(taints: list[dict[str, str]]) -> str:
    """``Draining`` (NoExecute), ``Cordoned`` (NoSchedule) or ``Schedulable``."""
    effects = {t.get("effect") for t in taints}
    if NO_EXECUTE in effects:
        return "Draining"
    if NO_SCHEDULE in effects:
        return "Cordoned"
    return "Schedulable"
