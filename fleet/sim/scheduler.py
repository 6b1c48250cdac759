"""The simulated gang scheduler: a pure function from nodes, bound pods and a job's pods to a binding.

:func:`schedule` binds all of a job's pods (or at least ``minAvailable`` of them) at once, or
none, and then explains the nearest miss in kube-scheduler's words. It is exact, not greedy: a
depth-first search over placements that is kept small by two symmetries, so it stays fast on the
benchmark's 100-node members:

* nodes that are interchangeable right now (same static verdict for every pod shape of the job,
  same free resources, same job pods already on them) are tried once, by one representative;
* identical pods (a replica type's pods differ only by name) take nodes in non-decreasing node
  order, so the search never tries two orderings of the same set of nodes.

Interchangeability is only sound when every anti-affinity term in play is per node
(``kubernetes.io/hostname``); with other topology keys each node is its own class. A budget caps
the search; when it runs out the job stays pending with a message that says so.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fleet.apiserver import Obj
from fleet.ascend import HOSTNAME_LABEL, NPU_RESOURCE
from fleet.sim import devices
from fleet.sim.predicates import (
    ANTI_AFFINITY,
    NodeInfo,
    PodInfo,
    insufficient,
    node_info,
    pod_info,
    static_reason,
    used_by,
)

__all__ = ["DEFAULT_BUDGET", "Cluster", "Schedule", "schedule", "schedule_pods"]

#: Placements the search may try before it gives up on a job.
DEFAULT_BUDGET = 20_000
_NAMES_SHOWN = 3
#: The key a node's device state (see :mod:`fleet.sim.devices`) rides under in its free map.
DEVICES = "~devices"
TOPOLOGY = f"node(s) didn't have free {NPU_RESOURCE} in the HCCS ring, die or mesh the pod needs"


class Cluster:
    """Nodes and what runs on them; :meth:`bind` records a placement so the next job sees it.

    It caches what many jobs of one scheduling pass ask again: each node's free resources and
    the per-node verdict of the static rules for a pod's static shape.
    """

    def __init__(self, nodes: Sequence[NodeInfo]) -> None:
        self.nodes = sorted(nodes, key=lambda n: n.name)
        self.index = {node.name: i for i, node in enumerate(self.nodes)}
        self.pods_on: dict[str, list[PodInfo]] = {}
        self.used: dict[str, dict[str, int]] = {}
        #: Bound pods with required anti-affinity terms, with their node (they can refuse newcomers).
        self.anti_bound: list[tuple[PodInfo, NodeInfo]] = []
        #: Whether a bound pod has an anti-affinity term on a key other than the hostname.
        self.other_keys = False
        #: Device state per node (bit mask of free ids, or soft share units) and each bound pod's ids.
        self.devices: dict[str, int] = {}
        self.pod_devices: dict[tuple[str, str], tuple[int, ...]] = {}
        self._free: dict[int, dict[str, int]] = {}
        self._free_key: dict[int, tuple[tuple[str, int], ...]] = {}
        self._static: dict[tuple[object, ...], list[str | None]] = {}
        self._partitions: dict[tuple[object, ...], _Partition] = {}

    @classmethod
    def of(cls, nodes: Sequence[NodeInfo], pods: Sequence[PodInfo]) -> Cluster:
        cluster = cls(nodes)
        for pod in pods:
            if pod.node_name and not pod.terminal:
                cluster.bind(pod, pod.node_name)
        return cluster

    @classmethod
    def from_objects(cls, nodes: Sequence[Obj], pods: Sequence[Obj]) -> Cluster:
        return cls.of(
            [node_info(n) for n in nodes],
            [pod_info(p) for p in pods if (p.get("spec") or {}).get("nodeName")],
        )

    def free(self, i: int) -> dict[str, int]:
        """Node ``i``'s allocatable minus what its pods use (shared: copy before changing it)."""
        cached = self._free.get(i)
        if cached is None:
            node = self.nodes[i]
            used = self.used.get(node.name, {})
            cached = {
                r: node.allocatable.get(r, 0) - used.get(r, 0) for r in set(node.allocatable) | set(used)
            }
            if node.npu_capacity:
                cached[DEVICES] = self.device_state(node)
            self._free[i] = cached
        return cached

    def free_key(self, i: int) -> tuple[tuple[str, int], ...]:
        cached = self._free_key.get(i)
        if cached is None:
            cached = tuple(sorted(self.free(i).items()))
            self._free_key[i] = cached
        return cached

    def static(self, pod: PodInfo, pods_in_job: int) -> list[str | None]:
        """Per node, the static rule that rules it out for ``pod`` (``None``: none does)."""
        key = (pod.static_shape(), pods_in_job)
        cached = self._static.get(key)
        if cached is None:
            cached = [static_reason(pod, node, pods_in_job) for node in self.nodes]
            self._static[key] = cached
        return cached

    def partition(self, key: tuple[object, ...], statics: Sequence[list[str | None]]) -> _Partition:
        """The usable nodes in classes of interchangeable ones, for pods of these static verdicts.

        Only for jobs whose usable nodes depend on the static rules alone (no anti-affinity in
        play): then the classes change only where a pod binds or leaves, and :meth:`_touch` moves
        that one node, so a job's search starts from them instead of walking every node.
        ``key`` names ``statics`` (the static shapes and the job's size). Shared: copy to change.
        """
        found = self._partitions.get(key)
        if found is None:
            if len(self._partitions) >= _PARTITIONS_KEPT:
                self._partitions.clear()
            found = _Partition.of(self, statics)
            self._partitions[key] = found
        return found

    def _touch(self, node_name: str) -> None:
        i = self.index.get(node_name)
        if i is not None:
            self._free.pop(i, None)
            self._free_key.pop(i, None)
            for partition in self._partitions.values():
                partition.move(i, self.free_key(i))

    def device_state(self, node: NodeInfo) -> int:
        state = self.devices.get(node.name)
        if state is None:
            state = self.devices[node.name] = devices.node_devices(node.share, node.npu_capacity)
        return state

    def bind(self, pod: PodInfo, node_name: str, ids: tuple[int, ...] | None = None) -> tuple[int, ...]:
        """Record ``pod`` on ``node_name``; returns the NPU ids it holds there (``ids``, else the
        pod's annotation, else what the plugin would pick now)."""
        i = self.index.get(node_name)
        chosen: tuple[int, ...] = ()
        if pod.npus and i is not None and self.nodes[i].npu_capacity:
            node = self.nodes[i]
            state = self.device_state(node)
            chosen = ids or pod.devices
            handler = pod.handler(node)
            if not chosen and handler is not None:
                chosen = devices.pick(handler, state, pod.npus, node.npu_capacity, node.share) or ()
            if not chosen and not node.share:  # no rule applies, or none fits: the lowest free ids
                chosen = tuple(d for d in range(node.npu_capacity) if state >> d & 1)[: pod.npus]
            self.devices[node_name] = devices.take(state, chosen, pod.npus, +1, node.share)
            self.pod_devices[(pod.namespace, pod.name)] = chosen
        self.pods_on.setdefault(node_name, []).append(pod)
        used = self.used.setdefault(node_name, {})
        for resource, amount in pod.requests.items():
            used[resource] = used.get(resource, 0) + amount
        if pod.anti_affinity and i is not None:
            self.anti_bound.append((pod, self.nodes[i]))
            self.other_keys |= any(t.topology_key != HOSTNAME_LABEL for t in pod.anti_affinity)
        self._touch(node_name)
        return chosen

    def unbind(self, pod_name: str, namespace: str, node_name: str) -> None:
        on = self.pods_on.get(node_name, [])
        for i, pod in enumerate(on):
            if pod.name == pod_name and pod.namespace == namespace:
                del on[i]
                ids = self.pod_devices.pop((namespace, pod_name), ())
                node_i = self.index.get(node_name)
                if ids and node_i is not None:
                    node = self.nodes[node_i]
                    state = self.device_state(node)
                    self.devices[node_name] = devices.take(state, ids, pod.npus, -1, node.share)
                self.used[node_name] = used_by(on)
                self.anti_bound = [(p, n) for p, n in self.anti_bound if p is not pod]
                self._touch(node_name)
                return


_PARTITIONS_KEPT = 32


@dataclass
class _Partition:
    """Usable nodes by class: key (signature, free resources, job pods placed) -> sorted nodes."""

    signature: list[int]
    key_of: dict[int, object]
    classes: dict[object, list[int]]

    @classmethod
    def of(cls, cluster: Cluster, statics: Sequence[list[str | None]]) -> _Partition:
        # A node's signature: which pod shapes of the job it could take at all. Nodes that take
        # none are left out of the classes: they are never candidates.
        signatures: dict[tuple[bool, ...], int] = {}
        signature = [0] * len(cluster.nodes)
        key_of: dict[int, object] = {}
        classes: dict[object, list[int]] = {}
        for i in range(len(cluster.nodes)):
            usable = tuple(column[i] is None for column in statics)
            if not any(usable):
                continue
            signature[i] = signatures.setdefault(usable, len(signatures))
            key = (signature[i], cluster.free_key(i), ())
            key_of[i] = key
            classes.setdefault(key, []).append(i)
        return cls(signature, key_of, classes)

    def move(self, node: int, free_key: tuple[tuple[str, int], ...]) -> None:
        """Node ``node``'s free resources are now ``free_key``: regroup it."""
        old = self.key_of.get(node)
        if old is None:
            return
        key = (self.signature[node], free_key, ())
        if key == old:
            return
        members = self.classes[old]
        members.pop(bisect_left(members, node))
        if not members:
            del self.classes[old]
        self.key_of[node] = key
        insort(self.classes.setdefault(key, []), node)


@dataclass(frozen=True)
class Schedule:
    """The outcome: ``bindings`` (pod name -> node name), empty when the gang does not fit."""

    bindings: Mapping[str, str]
    message: str = ""
    #: Pod name -> the NPU ids the plugin picked for it on its node.
    devices: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    #: True when the search hit its budget (the message then says the job may still fit).
    gave_up: bool = False

    @property
    def fits(self) -> bool:
        return bool(self.bindings)


def schedule(
    nodes: Sequence[Obj],
    pods: Sequence[Obj],
    job_pods: Sequence[Obj],
    *,
    min_available: int | None = None,
    budget: int = DEFAULT_BUDGET,
) -> Schedule:
    """Bind ``job_pods`` on ``nodes`` next to the bound ``pods`` (all, or ``min_available``), or explain."""
    return schedule_pods(
        Cluster.from_objects(nodes, pods),
        [pod_info(p) for p in job_pods],
        min_available=min_available,
        budget=budget,
    )


class _Search:
    def __init__(
        self, cluster: Cluster, pods: Sequence[PodInfo], need: int, budget: int, pods_in_job: int
    ) -> None:
        self.cluster = cluster
        self.pods = pods
        self.need = need
        self.budget = budget
        self.nodes = cluster.nodes
        shapes: dict[tuple[object, ...], int] = {}
        self.shape = [shapes.setdefault(p.shape(), len(shapes)) for p in pods]
        examples = {shape: pods[i] for i, shape in reversed(list(enumerate(self.shape)))}
        self.static = {shape: cluster.static(pod, pods_in_job) for shape, pod in examples.items()}
        self.per_node = not cluster.other_keys and all(
            t.topology_key == HOSTNAME_LABEL for p in pods for t in p.anti_affinity
        )
        self.domains: dict[tuple[str, str], list[int]] = {}
        if not self.per_node:
            keys = {t.topology_key for p in pods for t in p.anti_affinity}
            keys |= {t.topology_key for p, _ in cluster.anti_bound for t in p.anti_affinity}
            for key in keys:
                for i, node in enumerate(self.nodes):
                    value = node.domain(key)
                    if value is not None:
                        self.domains.setdefault((key, value), []).append(i)
        # Anti-affinity against the pods already bound, per (shape, node); None: never.
        self.bound_conflict: dict[int, list[bool] | None] = {
            shape: (
                [self._conflicts_bound(pod, i) for i in range(len(self.nodes))]
                if pod.anti_affinity or cluster.anti_bound
                else None
            )
            for shape, pod in examples.items()
        }
        # Free resources where this search placed pods (copy on write); elsewhere the cluster's.
        self.changed_free: dict[int, dict[str, int]] = {}
        static_only = all(conflicts is None for conflicts in self.bound_conflict.values())
        # Indices of the job's pods on each node (made on first use: a search touches few nodes).
        self.placed: defaultdict[int, list[int]] = defaultdict(list)
        self.assignment: list[int | None] = [None] * len(pods)
        self.chosen: list[tuple[int, ...]] = [()] * len(pods)
        self.best: list[int | None] = []
        self.best_depth = -1
        self.steps = 0
        self.gave_up = False
        # Interchangeable nodes share a class; the search tries one node per class.
        self.classes: dict[object, list[int]] = {}
        self.key_of: dict[int, object] = {}
        if self.per_node and static_only:
            statics = (tuple(examples[shape].static_shape() for shape in self.static), pods_in_job)
            partition = cluster.partition(statics, list(self.static.values()))
            self.signature = list(partition.signature)
            self.key_of = dict(partition.key_of)
            self.classes = {k: list(v) for k, v in partition.classes.items()}
        elif self.per_node:
            # A node's signature: which pod shapes of the job it could take at all. Nodes that
            # take none are left out of the classes: they are never candidates.
            usable = [
                [self.static[s][i] is None and not self._bound(s, i) for i in range(len(self.nodes))]
                for s in self.static
            ]
            signatures: dict[tuple[bool, ...], int] = {}
            self.signature = [0] * len(self.nodes)
            for i in range(len(self.nodes)):
                signature = tuple(column[i] for column in usable)
                if not any(signature):
                    continue
                self.signature[i] = signatures.setdefault(signature, len(signatures))
                class_key = (self.signature[i], cluster.free_key(i), ())
                self.key_of[i] = class_key
                self.classes.setdefault(class_key, []).append(i)

    def free(self, node: int) -> dict[str, int]:
        changed = self.changed_free.get(node)
        return changed if changed is not None else self.cluster.free(node)

    def _bound(self, shape: int, node: int) -> bool:
        conflicts = self.bound_conflict[shape]
        return conflicts is not None and conflicts[node]

    # -- rules that depend on what is placed ---------------------------------------------------

    def _domain_nodes(self, node: int, key: str) -> list[int]:
        if key == HOSTNAME_LABEL and self.per_node:
            return [node]
        value = self.nodes[node].domain(key)
        return [] if value is None else self.domains.get((key, value), [node])

    def _conflicts_bound(self, pod: PodInfo, node: int) -> bool:
        for term in pod.anti_affinity:
            for other in self._domain_nodes(node, term.topology_key):
                if any(term.selects(q) for q in self.cluster.pods_on.get(self.nodes[other].name, ())):
                    return True
        # Bound pods' own required anti-affinity against the newcomer (symmetry, as in Kubernetes).
        here = self.nodes[node]
        for q, q_node in self.cluster.anti_bound:
            if self.per_node and q_node is not here:
                continue
            for term in q.anti_affinity:
                domain = here.domain(term.topology_key)
                if domain is not None and q_node.domain(term.topology_key) == domain and term.selects(pod):
                    return True
        return False

    def _conflicts_placed(self, index: int, node: int) -> bool:
        pod = self.pods[index]
        for term in pod.anti_affinity:
            for other in self._domain_nodes(node, term.topology_key):
                if any(term.selects(self.pods[j]) for j in self.placed[other]):
                    return True
        # Placed pods' own terms against this one; per node, only the pods on this node can object.
        nearby = [node] if self.per_node else range(len(self.nodes))
        for other_node in nearby:
            for j in self.placed[other_node]:
                for term in self.pods[j].anti_affinity:
                    if term.selects(pod) and node in self._domain_nodes(other_node, term.topology_key):
                        return True
        return False

    def reasons(self, index: int, node: int) -> list[str]:
        """Why pod ``index`` cannot go on ``node`` in the current state (empty: it can)."""
        shape = self.shape[index]
        static = self.static[shape][node]
        if static is not None:
            return [static]
        free = self.free(node)
        short = insufficient(self.pods[index].requests, free)
        if short:
            return short
        if self._pick(index, node, free) is None:
            return [TOPOLOGY]
        if self._bound(shape, node) or self._conflicts_placed(index, node):
            return [ANTI_AFFINITY]
        return []

    def _pick(self, index: int, node: int, free: Mapping[str, int]) -> tuple[int, ...] | None:
        """The NPU ids pod ``index`` would get on ``node`` now (``()``: no device rule applies)."""
        pod = self.pods[index]
        info = self.nodes[node]
        if not pod.npus or DEVICES not in free:
            return ()
        handler = pod.handler(info)
        if handler is None:
            return ()
        return devices.pick(handler, free[DEVICES], pod.npus, info.npu_capacity, info.share)

    # -- the search ----------------------------------------------------------------------------

    def _candidates(self, index: int) -> list[int]:
        start = 0
        if index > 0 and self.shape[index - 1] == self.shape[index]:
            previous = self.assignment[index - 1]
            start = previous if previous is not None else 0
        found = []
        if self.per_node:
            for members in self.classes.values():
                at = bisect_left(members, start)
                if at < len(members) and not self.reasons(index, members[at]):
                    found.append(members[at])
        else:
            found = [node for node in range(start, len(self.nodes)) if not self.reasons(index, node)]
        pod = self.pods[index]

        def leftover(node: int) -> tuple[int, int, int, str]:
            free = self.free(node)
            return (
                free.get(NPU_RESOURCE, 0) - pod.npus,
                free.get("cpu", 0) - pod.requests.get("cpu", 0),
                free.get("memory", 0) - pod.requests.get("memory", 0),
                self.nodes[node].name,
            )

        return sorted(found, key=leftover)  # best fit first: keep big holes for big pods

    def _place(self, index: int, node: int, sign: int) -> None:
        current = self.free(node)
        if sign > 0:
            self.chosen[index] = self._pick(index, node, current) or ()
        ids = self.chosen[index]
        free = dict(current)  # copy on write: the cluster's cache stays as it was
        for resource, amount in self.pods[index].requests.items():
            free[resource] = free.get(resource, 0) - sign * amount
        if ids and DEVICES in free:
            info = self.nodes[node]
            free[DEVICES] = devices.take(free[DEVICES], ids, self.pods[index].npus, sign, info.share)
        self.changed_free[node] = free
        if sign > 0:
            self.placed[node].append(index)
            self.assignment[index] = node
        else:
            self.placed[node].remove(index)
            self.assignment[index] = None
        if self.per_node:
            members = self.classes[self.key_of[node]]
            members.pop(bisect_left(members, node))
            if not members:
                del self.classes[self.key_of[node]]
            key = (
                self.signature[node],
                tuple(sorted(free.items())),
                tuple(sorted(self.shape[j] for j in self.placed[node])),
            )
            self.key_of[node] = key
            insort(self.classes.setdefault(key, []), node)

    def run(self, index: int = 0) -> bool:
        if index > self.best_depth:
            self.best_depth = index
            self.best = list(self.assignment)
        if index == len(self.pods):
            return True
        for node in self._candidates(index):
            self.steps += 1
            if self.steps > self.budget:
                self.gave_up = True
                return False
            self._place(index, node, +1)
            if self.run(index + 1):
                return True
            self._place(index, node, -1)
            if self.gave_up:
                return False
        return False


def _explain(search: _Search) -> str:
    """The nearest miss: how many pods fit at once, and why the next one fits on no node."""
    for index, node in enumerate(search.assignment):  # left placed when the budget ran out
        if node is not None:
            search._place(index, node, -1)
    for index, node in enumerate(search.best):
        if node is not None:
            search._place(index, node, +1)
    blocked = min(search.best_depth, len(search.pods) - 1)
    pod = search.pods[blocked]
    counts: Counter[str] = Counter()
    names: dict[str, list[str]] = {}
    for node in range(len(search.nodes)):
        for reason in search.reasons(blocked, node):
            counts[reason] += 1
            names.setdefault(reason, []).append(search.nodes[node].name)
    parts = []
    for reason, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        shown = names[reason][:_NAMES_SHOWN]
        more = ", ..." if len(names[reason]) > _NAMES_SHOWN else ""
        parts.append(f"{count} {reason} ({', '.join(shown)}{more})")
    total = len(search.pods)
    wanted = f"{search.need} of {total}" if search.need < total else f"all {total}"
    message = (
        f"gang of {wanted} pods does not fit at once (at most {search.best_depth} do): pod {pod.name}: "
        f"0/{len(search.nodes)} nodes are available"
    )
    if parts:
        message += ": " + ", ".join(parts)
    if search.gave_up:
        message += f"; the search gave up after {search.budget} placements"
    return message + "."


def schedule_pods(
    cluster: Cluster,
    pods: Sequence[PodInfo],
    *,
    min_available: int | None = None,
    budget: int = DEFAULT_BUDGET,
    pods_in_job: int | None = None,
) -> Schedule:
    """:func:`schedule` over parsed objects. ``pods`` go in priority order (the first ones are kept
    when only ``min_available`` fit). ``pods_in_job`` (default: the pods that take NPUs) picks the
    NPU sizes a pod may take per node: one such pod is a single-node job, more a distributed one.
    The cluster is left unchanged: bind the result with :meth:`Cluster.bind`.
    """
    if not pods:
        return Schedule({})
    total = len(pods)
    need = total if min_available is None else max(1, min(min_available, total))
    order = list(range(total))
    if need == total:
        # Hardest pods first; a stable sort keeps identical pods next to each other.
        order.sort(
            key=lambda i: (-pods[i].npus, -pods[i].requests.get("cpu", 0), -pods[i].requests.get("memory", 0))
        )
    ordered = [pods[i] for i in order]
    # The plugin counts a job's NPU tasks: one is a single-node job, more a distributed one.
    npu_pods = pods_in_job if pods_in_job is not None else sum(1 for p in pods if p.npus)
    search = _Search(cluster, ordered, need, budget, npu_pods)
    if not cluster.nodes:
        return Schedule({}, f"gang of {total} pods does not fit: the cluster has no nodes.")
    if search.run():
        return Schedule(
            {
                pod.name: cluster.nodes[n].name
                for pod, n in zip(ordered, search.assignment, strict=True)
                if n is not None
            },
            devices={pod.name: ids for pod, ids in zip(ordered, search.chosen, strict=True) if ids},
        )
    if search.best_depth >= need:
        placed = search.best[: search.best_depth]
        # The best partial gang, placed again in order so that its NPU ids are the ones it gets.
        for index, node in enumerate(search.assignment):
            if node is not None:
                search._place(index, node, -1)
        bindings: dict[str, str] = {}
        chosen: dict[str, tuple[int, ...]] = {}
        for i, n in enumerate(placed):
            if n is not None:
                search._place(i, n, +1)
                bindings[ordered[i].name] = cluster.nodes[n].name
                if search.chosen[i]:
                    chosen[ordered[i].name] = search.chosen[i]
        return Schedule(bindings, devices=chosen)
    return Schedule({}, _explain(search), gave_up=search.gave_up)
