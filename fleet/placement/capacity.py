"""One member's schedulable capacity, summarised as classes of interchangeable nodes.

A gang fit must be decided per node, yet it must not cost the number of nodes: a member of a
thousand nodes usually has a handful of node kinds and a few occupancy levels. A
:class:`MemberCapacity` therefore keeps every usable node in exactly one :class:`NodeClass`, the
nodes that agree on everything a placement looks at (labels other than the per-node identity
labels, blocking taints, NPU capacity, free resource vector). The fit then works on classes with
counts.

The summary is pure and incremental: :meth:`MemberCapacity.upsert_node`, :meth:`remove_node`,
:meth:`upsert_pod` and :meth:`remove_pod` take plain Kubernetes JSON dicts as a watch delivers
them and move one node between classes. NotReady and cordoned nodes are kept (for explanations)
but belong to no class. Capacity held by in-flight reservations is laid over the live usage with
:meth:`set_held`; :attr:`version` changes whenever anything a fit reads changes, which is what
the fit cache keys on.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleet.ascend import (
    HOSTNAME_LABEL,
    NPU_RESOURCE,
    NPU_RESOURCES,
    SOFT_SHARE,
    Hardware,
    device_ids,
    node_hardware,
)
from fleet.labels import ATTEMPT_LABEL, JOB_UID_LABEL
from fleet.placement.demand import Vector, pod_requests
from fleet.placement.node_constraints import BLOCKING_EFFECTS, Taint, parse_taints
from fleet.placement.npu import take
from queues import QuantityError, parse_quantity

__all__ = [
    "GROUP_RESOURCE",
    "IDENTITY_LABELS",
    "MemberCapacity",
    "NodeClass",
    "NodeInfo",
    "job_pod_key",
    "node_info",
]

#: Labels that differ on every node; they are left out of the class key (a selector naming them
#: is checked node by node inside the class).
IDENTITY_LABELS = frozenset({HOSTNAME_LABEL, "kubernetes.io/hostname", "node.kubernetes.io/instance-id"})

#: Pod phases (``PodPhase`` of core/v1) after which a pod holds nothing on its node.
_FINISHED = frozenset({"Succeeded", "Failed"})

#: Free NPUs of interconnect group ``i`` of a node appear in its free vector (and in a
#: reservation's takes) as the pseudo resource ``GROUP_RESOURCE + str(i)``: the summary keeps
#: them beside real resources, so classes, holds and their checks cover groups unchanged.
GROUP_RESOURCE = "fleet.io/npu-group-"


def _group_index(resource: str) -> int:
    return int(resource[len(GROUP_RESOURCE) :])


#: Versions of every summary come from one process-wide counter, so a version seen on any
#: member is a watermark for all: "changed since" is ``cap.version > watermark``.
_COUNTER = itertools.count(1)


#: Interned static node kinds (see :attr:`NodeClass.static_id`); a fleet has few of them.
_STATIC_IDS: dict[tuple[frozenset[tuple[str, str]], tuple[Taint, ...], int], int] = {}


def job_pod_key(job_uid: str, attempt: str | int) -> str:
    """How a pod of a propagated job is counted: its fleet job uid and attempt."""
    return f"{job_uid}/{attempt}"


@dataclass(frozen=True)
class NodeClass:
    """Nodes that any placement treats alike. ``labels`` excludes :data:`IDENTITY_LABELS`."""

    labels: frozenset[tuple[str, str]]
    taints: tuple[Taint, ...]
    npu_capacity: int
    free: Vector
    label_map: Mapping[str, str] = field(compare=False, hash=False, repr=False, default_factory=dict)
    free_map: Mapping[str, int] = field(compare=False, hash=False, repr=False, default_factory=dict)
    #: Small integer naming (labels, taints, npu_capacity): what filters other than free
    #: resources read, so the fit can cache their verdict across occupancy changes.
    static_id: int = field(compare=False, hash=False, repr=False, default=0)
    #: Free NPUs per interconnect group, by group index (empty: the node has no groups).
    groups: tuple[int, ...] = field(compare=False, hash=False, repr=False, default=())

    @classmethod
    def make(
        cls, labels: Mapping[str, str], taints: tuple[Taint, ...], npu_capacity: int, free: Vector
    ) -> NodeClass:
        shared = {k: v for k, v in labels.items() if k not in IDENTITY_LABELS}
        frozen = frozenset(shared.items())
        static = _STATIC_IDS.setdefault((frozen, taints, npu_capacity), len(_STATIC_IDS))
        groups = sorted((_group_index(r), a) for r, a in free if r.startswith(GROUP_RESOURCE))
        return cls(
            frozen, taints, npu_capacity, free, shared, dict(free), static, tuple(a for _, a in groups)
        )

    def available(self, resource: str) -> int:
        return self.free_map.get(resource, 0)


@dataclass
class NodeInfo:
    """What the summary remembers of one node."""

    name: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    allocatable: dict[str, int]
    #: The node's NPUs as built (``status.capacity``): what a schedule policy's node size means.
    npu_capacity: int
    usable: bool
    why_unusable: str = ""
    cls: NodeClass | None = None
    #: The node's own Ascend hardware and how many interconnect groups it has (0: none kept).
    hardware: Hardware | None = None
    groups: int = 0


def _quantities(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, raw in (values or {}).items():
        try:
            out[str(name)] = parse_quantity(str(name), raw)
        except QuantityError:
            continue  # a node's malformed status entry is not ours to reject; it offers nothing
    return out


def node_info(
    name: str,
    labels: dict[str, str],
    *,
    taints: tuple[Taint, ...],
    allocatable: dict[str, int],
    npu_capacity: int,
    why_unusable: str,
) -> NodeInfo:
    """What the summary keeps of a node (its hardware and interconnect groups derived here)."""
    info = NodeInfo(
        name=name,
        labels=labels,
        taints=taints,
        allocatable=allocatable,
        npu_capacity=npu_capacity,
        usable=not why_unusable,
        why_unusable=why_unusable,
    )
    info.hardware = node_hardware(labels)
    hw = info.hardware
    if hw is not None and hw.group > 0 and hw.layout != "any":
        info.groups = npu_capacity // hw.group
    return info


def _unusable_reason(node: Mapping[str, Any]) -> str:
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return "cordoned"
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    if ready is None or ready.get("status") != "True":
        return "NotReady"
    return ""


class MemberCapacity:
    """The live capacity summary of one member cluster (see the module docstring)."""

    def __init__(self, name: str, labels: Mapping[str, str] | None = None, *, listed: bool = True) -> None:
        self.name = name
        self.labels: dict[str, str] = dict(labels or {})
        #: Whether the member's nodes and pods have both been listed: until then what the
        #: summary holds is not its capacity (nodes without their pods look free), and no job
        #: fits it. A feed starts a member unlisted (:meth:`mark_listed` once both lists came).
        self.listed = listed
        self.version = 0
        #: Changes only when what the member could ever hold changes (a node added, removed, or
        #: changed in what a fit reads of it but its usage; the member listed): what a job that
        #: can never fit waits for (:meth:`emptied`).
        self.shape = 0
        self._touch()
        self._nodes: dict[str, NodeInfo] = {}
        self._classes: dict[NodeClass, set[str]] = {}
        # The same classes bucketed by free NPUs: a pod of n NPUs looks only at buckets >= n.
        self._by_npus: dict[int, dict[NodeClass, set[str]]] = {}
        self._used: dict[str, dict[str, int]] = {}  # node -> summed requests of bound, live pods
        self._held: dict[str, dict[str, int]] = {}  # node -> capacity held by reservations
        self._pods: dict[str, tuple[str, dict[str, int], str | None]] = {}  # key -> node, req, job
        # node -> pod key -> (device ids from the pod's annotation, the pod's NPUs)
        self._devices: dict[str, dict[str, tuple[tuple[int, ...], int]]] = {}
        # node -> job key -> bound pods, of a summary restored from a record (no pods of its own).
        self._node_jobs: dict[str, dict[str, int]] = {}
        self._job_pods: dict[str, int] = {}
        # node -> free NPUs per interconnect group before holds, for a summary restored from a
        # record (:meth:`restore_node`), which has the groups' counts but not the pods' devices.
        self._restored_groups: dict[str, list[int]] = {}
        self._free_total: dict[str, int] = {}
        # The member as it could ever be (see :meth:`emptied`), kept until a node changes.
        self._emptied: MemberCapacity | None = None

    @classmethod
    def from_lists(
        cls,
        name: str,
        nodes: Iterable[Mapping[str, Any]],
        pods: Iterable[Mapping[str, Any]] = (),
        labels: Mapping[str, str] | None = None,
    ) -> MemberCapacity:
        cap = cls(name, labels)
        for pod in pods:
            cap.upsert_pod(pod)
        for node in nodes:
            cap.upsert_node(node)
        return cap

    # ---- reads -------------------------------------------------------------------------------

    def classes(self) -> Iterator[tuple[NodeClass, set[str]]]:
        """Every class with the names of its nodes (never empty)."""
        return iter(self._classes.items())

    def classes_with_npus(self, at_least: int) -> Iterator[tuple[NodeClass, set[str]]]:
        """The classes whose nodes have at least ``at_least`` free NPUs (all when 0 or less)."""
        if at_least <= 0:
            yield from self._classes.items()
            return
        for npus, bucket in self._by_npus.items():
            if npus >= at_least:
                yield from bucket.items()

    @property
    def class_count(self) -> int:
        return len(self._classes)

    def nodes(self) -> Iterator[NodeInfo]:
        return iter(self._nodes.values())

    def node(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

    def free_total(self, resource: str = NPU_RESOURCE) -> int:
        """Free ``resource`` summed over usable nodes, after reservations (what pack compares).

        A node counts at least zero: one overcommitted by a hold whose pods are already bound
        (the feed is ahead of the confirmation) must not hide another node's room."""
        return self._free_total.get(resource, 0)

    def unheld_free(self, node: str) -> dict[str, int]:
        """A node's free capacity ignoring reservations: the basis a reservation is checked on."""
        info = self._nodes.get(node)
        if info is None:
            return {}
        used = self._used.get(node, {})
        free = {r: a - used.get(r, 0) for r, a in info.allocatable.items()}
        free.update(self._group_free(info, {}))
        return free

    def emptied(self) -> MemberCapacity:
        """This member with every node Ready, schedulable and free of pods and holds: what it
        could take if everything on it finished, so a job that does not fit this is one that
        waiting will not help (until the member's nodes change)."""
        if self._emptied is None:
            cap = MemberCapacity(self.name, self.labels)
            for info in self._nodes.values():
                copy = NodeInfo(
                    name=info.name,
                    labels=info.labels,
                    taints=info.taints,
                    allocatable=info.allocatable,
                    npu_capacity=info.npu_capacity,
                    usable=True,
                    hardware=info.hardware,
                    groups=info.groups,
                )
                cap._nodes[info.name] = copy
                cap._reclass(copy)
            self._emptied = cap
        return self._emptied

    def held(self, node: str) -> Mapping[str, int]:
        return self._held.get(node, {})

    def used(self, node: str) -> Mapping[str, int]:
        """What the node's bound, unfinished pods request (holds not included)."""
        return self._used.get(node, {})

    def node_jobs(self) -> dict[str, dict[str, int]]:
        """Node -> job key (:func:`job_pod_key`) -> the job's live pods bound there."""
        out: dict[str, dict[str, int]] = {n: dict(j) for n, j in self._node_jobs.items()}
        for node, _requests, job in self._pods.values():
            if job:
                on_node = out.setdefault(node, {})
                on_node[job] = on_node.get(job, 0) + 1
        return out

    def bound_pods(self, key: str) -> int:
        """Live pods bound to a node that carry the job key (see :func:`job_pod_key`)."""
        return self._job_pods.get(key, 0)

    # ---- updates -----------------------------------------------------------------------------

    def mark_listed(self) -> None:
        """The member's nodes and pods have both been listed: its capacity counts from now."""
        if not self.listed:
            self.listed = True
            self._reshape()
            self._touch()

    def upsert_node(self, node: Mapping[str, Any]) -> None:
        meta = node.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not name:
            return
        status = node.get("status") or {}
        allocatable = _quantities(status.get("allocatable") or status.get("capacity"))
        npu_capacity = _quantities(status.get("capacity")).get(NPU_RESOURCE) or allocatable.get(
            NPU_RESOURCE, 0
        )
        info = node_info(
            name,
            {str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
            taints=tuple(
                t
                for t in parse_taints((node.get("spec") or {}).get("taints"))
                if t.effect in BLOCKING_EFFECTS
            ),
            allocatable=allocatable,
            npu_capacity=npu_capacity,
            why_unusable=_unusable_reason(node),
        )
        self._put_node(info)

    def _put_node(self, info: NodeInfo) -> None:
        old = self._nodes.get(info.name)
        if old is not None:
            self._unclass(old)
        self._nodes[info.name] = info
        if old is None or _static(old) != _static(info):
            self._reshape()
        self._reclass(info)

    def restore_node(
        self,
        info: NodeInfo,
        *,
        used: Mapping[str, int],
        groups: Sequence[int] = (),
        held: Mapping[str, int] | None = None,
        jobs: Mapping[str, int] | None = None,
    ) -> None:
        """Put back a node as a record of the summary has it (:mod:`fleet.placement.snapshot`):
        its requests in use, its groups' free NPUs before holds, its holds and its jobs' bound
        pods (job key -> pods), instead of the pods themselves."""
        if used:
            self._used[info.name] = dict(used)
        if groups:
            self._restored_groups[info.name] = list(groups)
        if held:
            self._held[info.name] = dict(held)
        for job, pods in (jobs or {}).items():
            self._job_pods[job] = self._job_pods.get(job, 0) + pods
            self._node_jobs.setdefault(info.name, {})[job] = pods
        self._put_node(info)

    def remove_node(self, name: str) -> None:
        info = self._nodes.pop(name, None)
        if info is not None:
            self._reshape()
            self._unclass(info)
            self._touch()

    def upsert_pod(self, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if not node or phase in _FINISHED:
            self.remove_pod(key)
            return
        labels = meta.get("labels") or {}
        uid = labels.get(JOB_UID_LABEL)
        job = job_pod_key(uid, labels.get(ATTEMPT_LABEL, "")) if uid else None
        try:
            requests = pod_requests(spec)
        except ValueError:
            requests = {"pods": 1}  # the API server accepted it; count what we can read
        old = self._pods.get(key)
        annotations = meta.get("annotations") or {}
        npus = sum(requests.get(r, 0) for r in NPU_RESOURCES)
        devices = (device_ids(annotations.get(NPU_RESOURCE)), npus) if npus else None
        if old == (node, requests, job) and self._devices.get(str(node), {}).get(key) == devices:
            return
        if old is not None:
            self.remove_pod(key)
        self._pods[key] = (str(node), requests, job)
        if devices is not None:
            self._devices.setdefault(str(node), {})[key] = devices
        if job:
            self._job_pods[job] = self._job_pods.get(job, 0) + 1
        self._add_used(str(node), requests, +1)

    def remove_pod(self, key: str) -> None:
        """Forget a pod by ``namespace/name`` (deleted, finished or unbound)."""
        old = self._pods.pop(key, None)
        if old is None:
            return
        node, requests, job = old
        on_node = self._devices.get(node)
        if on_node is not None:
            on_node.pop(key, None)
            if not on_node:
                del self._devices[node]
        if job:
            left = self._job_pods.get(job, 0) - 1
            if left > 0:
                self._job_pods[job] = left
            else:
                self._job_pods.pop(job, None)
        self._add_used(node, requests, -1)

    def set_held(self, held: Mapping[str, Mapping[str, int]]) -> None:
        """Replace the reservation overlay (node -> resource -> amount held)."""
        self.set_held_on({name: held.get(name, {}) for name in {*held, *self._held}})

    def set_held_on(self, held: Mapping[str, Mapping[str, int]]) -> None:
        """Replace the overlay of the nodes ``held`` names only; the others keep theirs (what
        one hold made or ended changes, without comparing every held node)."""
        touched: list[str] = []
        for name, amounts in held.items():
            kept = {r: a for r, a in amounts.items() if a}
            if kept == self._held.get(name, {}):
                continue
            if kept:
                self._held[name] = kept
            else:
                self._held.pop(name, None)
            touched.append(name)
        for name in touched:
            info = self._nodes.get(name)
            if info is not None:
                self._unclass(info)
                self._reclass(info)

    # ---- internals ---------------------------------------------------------------------------

    def _group_free(self, info: NodeInfo, held: Mapping[str, int]) -> dict[str, int]:
        """Free NPUs per group of a node: its pods' devices (their annotation, as the volcano
        plugin writes it) counted out; a pod bound without one is given NPUs by Fleet's own
        choice, in pod order; then what reservations hold."""
        if not info.groups or info.hardware is None:
            return {}
        hw = info.hardware
        size = hw.group
        left = list(self._restored_groups.get(info.name) or [size] * info.groups)
        guessed: list[int] = []
        for _pod, (ids, npus) in sorted(self._devices.get(info.name, {}).items()):
            if not ids:
                guessed.append(npus)
                continue
            if hw is SOFT_SHARE:  # one chip, a share of its units
                if ids[0] < info.groups:
                    left[ids[0]] -= npus
                continue
            for d in ids:
                if d // size < info.groups:
                    left[d // size] -= 1
        for npus in guessed:
            # A pod the rules allow: where the plugin would put it; any other: the lowest ids.
            got = take(hw, [max(a, 0) for a in left], npus) if npus in hw.single | hw.distributed else None
            if got is None:
                got, rest = [], npus
                for a in left:
                    got.append(min(max(a, 0), rest))
                    rest -= got[-1]
            left = [a - g for a, g in zip(left, got, strict=True)]
        return {f"{GROUP_RESOURCE}{i}": a - held.get(f"{GROUP_RESOURCE}{i}", 0) for i, a in enumerate(left)}

    def _touch(self) -> None:
        self.version = next(_COUNTER)

    def _reshape(self) -> None:
        self._emptied = None
        self.shape = next(_COUNTER)

    def _add_used(self, node: str, requests: Mapping[str, int], sign: int) -> None:
        info = self._nodes.get(node)
        if info is not None:
            self._unclass(info)
        used = self._used.setdefault(node, {})
        for r, a in requests.items():
            used[r] = used.get(r, 0) + sign * a
        if not any(used.values()):
            del self._used[node]
        if info is not None:
            self._reclass(info)

    def _unclass(self, info: NodeInfo) -> None:
        cls = info.cls
        if cls is None:
            return
        members = self._classes[cls]
        members.discard(info.name)
        if not members:
            del self._classes[cls]
            npus = cls.available(NPU_RESOURCE)
            bucket = self._by_npus[npus]
            del bucket[cls]
            if not bucket:
                del self._by_npus[npus]
        for r, a in cls.free:
            self._free_total[r] = self._free_total.get(r, 0) - max(a, 0)
        info.cls = None
        self._touch()

    def _reclass(self, info: NodeInfo) -> None:
        self._touch()
        if not info.usable:
            return
        used = self._used.get(info.name, {})
        held = self._held.get(info.name, {})
        free_map = {r: a - used.get(r, 0) - held.get(r, 0) for r, a in info.allocatable.items()}
        free_map.update(self._group_free(info, held))
        free = tuple(sorted(free_map.items()))
        cls = NodeClass.make(info.labels, info.taints, info.npu_capacity, free)
        members = self._classes.get(cls)
        if members is None:
            members = self._classes[cls] = set()
            self._by_npus.setdefault(cls.available(NPU_RESOURCE), {})[cls] = members
        members.add(info.name)
        info.cls = cls
        for r, a in free:
            self._free_total[r] = self._free_total.get(r, 0) + max(a, 0)


def _static(info: NodeInfo) -> tuple[object, ...]:
    """What a fit reads of a node, but its usage and its readiness: a node whose heartbeat or
    usage changed holds what it could ever hold."""
    return (info.labels, info.taints, info.allocatable, info.npu_capacity, info.hardware, info.groups)
