"""The simulated fleet's shape: members, their node pools, and the simulation knobs (YAML, camelCase).

A topology is data a person writes by hand (``config/topology.yaml``), so the models forbid
unknown fields and check every quantity with the one quantity parser: a typo is an error naming
the field, not a silently empty pool.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from fleet.apiserver import Obj
from fleet.ascend import HOSTNAME_LABEL
from fleet.timestamps import now_rfc3339
from queues import QuantityError, parse_quantity

__all__ = [
    "DEFAULT_TOPOLOGY",
    "Member",
    "NodePool",
    "Simulation",
    "Taint",
    "Topology",
    "TopologyError",
    "load_topology",
    "node_objects",
    "ready_condition",
]

#: The topology ``fleet sim`` and ``make up`` use when none is given.
DEFAULT_TOPOLOGY = Path(__file__).resolve().parents[2] / "config" / "topology.yaml"

_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class TopologyError(ValueError):
    """A topology file that cannot be read or does not validate; the message names the field."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True)


class Taint(_Model):
    key: str = Field(min_length=1)
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class NodePool(_Model):
    """``count`` identical nodes named ``<prefix>-<i>``."""

    prefix: str = Field(pattern=_NAME_PATTERN, max_length=50)
    count: int = Field(ge=0, le=10_000)
    labels: dict[str, str] = Field(default_factory=dict)
    allocatable: dict[str, str]
    #: Defaults to ``allocatable``.
    capacity: dict[str, str] | None = None
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False

    @field_validator("allocatable", "capacity")
    @classmethod
    def _quantities(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for resource, amount in (value or {}).items():
            try:
                if parse_quantity(resource, amount) < 0:
                    raise ValueError(f"{resource}: {amount!r} must not be negative")
            except QuantityError as exc:
                raise ValueError(f"{resource}: {exc}") from None
        return value


class Member(_Model):
    name: str = Field(pattern=_NAME_PATTERN, max_length=63)
    node_pools: tuple[NodePool, ...] = Field(min_length=1)
    #: The member's own labels (a Karmada Cluster's labels, and the ``provider``, ``region`` and
    #: ``zone`` a policy's fieldSelector reads, :data:`fleet.policy.MEMBER_FIELDS`): written into
    #: its kubeconfig context, where Fleet reads them (:func:`fleet.members.member_labels`).
    labels: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _unique_prefixes(self) -> Member:
        prefixes = [pool.prefix for pool in self.node_pools]
        for prefix in prefixes:
            if prefixes.count(prefix) > 1:
                raise ValueError(f"nodePools: prefix {prefix!r} is used twice")
        return self

    @property
    def node_count(self) -> int:
        return sum(pool.count for pool in self.node_pools)


class Simulation(_Model):
    """Knobs of the simulated operator."""

    #: How long a job runs before it succeeds (per job: the ``sim.fleet.io/duration-seconds`` annotation).
    job_duration_seconds: float = Field(default=30.0, ge=0)
    #: How often each member's operator reconciles and schedules.
    tick_seconds: float = Field(default=0.05, gt=0, le=10)
    #: How long an injected failure lets a job run before its pod fails.
    failure_delay_seconds: float = Field(default=0.2, ge=0)


class Topology(_Model):
    simulation: Simulation = Field(default_factory=Simulation)
    members: tuple[Member, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_members(self) -> Topology:
        names = [member.name for member in self.members]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"members: name {name!r} is used twice")
        return self

    def member(self, name: str) -> Member:
        for member in self.members:
            if member.name == name:
                return member
        raise KeyError(name)


def _location(error: Any) -> str:
    return ".".join(str(part) for part in error["loc"]) or "topology"


def load_topology(path: Path | str | None = None) -> Topology:
    """Read and validate a topology file (the default one when ``path`` is ``None``)."""
    source = Path(path) if path is not None else DEFAULT_TOPOLOGY
    try:
        data = yaml.safe_load(source.read_text())
    except OSError as exc:
        raise TopologyError(f"{source}: cannot read the topology: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise TopologyError(f"{source}: not valid YAML: {exc}") from None
    try:
        return Topology.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{_location(e)}: {e['msg']}" for e in exc.errors())
        raise TopologyError(f"{source}: {problems}") from None


def node_objects(member: Member, *, kubelet_version: str = "v1.32.0-sim") -> list[Obj]:
    """The Node objects of a member as a kubelet would register them (Ready, with addresses)."""
    nodes: list[Obj] = []
    serial = 0
    for pool in member.node_pools:
        for index in range(pool.count):
            serial += 1
            name = f"{pool.prefix}-{index}"
            address = f"10.{(serial >> 16) & 255}.{(serial >> 8) & 255}.{serial & 255}"
            labels = {
                "kubernetes.io/arch": "arm64" if pool.labels.get("host-arch") == "huawei-arm" else "amd64",
                "kubernetes.io/os": "linux",
                HOSTNAME_LABEL: name,
                **pool.labels,
            }
            spec: dict[str, Any] = {}
            if pool.taints:
                spec["taints"] = [taint.model_dump(exclude_defaults=False) for taint in pool.taints]
            if pool.unschedulable:
                spec["unschedulable"] = True
            nodes.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels},
                    "spec": spec,
                    "status": {
                        "allocatable": dict(pool.allocatable),
                        "capacity": dict(pool.capacity if pool.capacity is not None else pool.allocatable),
                        "conditions": [ready_condition(True)],
                        "addresses": [
                            {"type": "InternalIP", "address": address},
                            {"type": "Hostname", "address": name},
                        ],
                        "nodeInfo": {
                            "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, f"machine.{member.name}.{name}").hex,
                            "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"system.{member.name}.{name}")),
                            "bootID": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"boot.{member.name}.{name}")),
                            "kubeProxyVersion": kubelet_version,
                            "kubeletVersion": kubelet_version,
                            "osImage": "EulerOS 2.0 (SP10)",
                            "kernelVersion": "4.19.90-vhulk2211.3.0.h1543.eulerosv2r10",
                            "containerRuntimeVersion": "containerd://1.6.21",
                            "architecture": labels["kubernetes.io/arch"],
                            "operatingSystem": "linux",
                        },
                    },
                }
            )
    return nodes


def ready_condition(ready: bool, now: str | None = None) -> dict[str, str]:
    """The node ``Ready`` condition a kubelet reports (or the node controller, when it goes away)."""
    stamp = now or now_rfc3339()
    if ready:
        return {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
    return {
        "type": "Ready",
        "status": "Unknown",
        "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status.",
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": stamp,
    }
