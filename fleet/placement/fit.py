"""Exact node-level gang fit on one member, and the choice among members.

A job fits a member when all of its gang (the first ``minAvailable`` pods, else every pod) can be
bound at the same time to that member's usable nodes, each pod on a node that passes its filters
(node selector, required node affinity, tolerated taints, Ascend NPU size and schedule policy)
and has room for its whole request. A job is never split across members.

The fit works on node classes (:mod:`fleet.placement.capacity`), so its cost follows the number
of classes. Pods are grouped by everything that places them (replica types with equal templates
form one group). Three cases, each exact:

* one group (the usual job: Master and Workers alike): a count over classes of
  ``nodes * pods per node`` (one per node with hostname anti-affinity against the job's pods);
* several groups that each need their own node: a bipartite b-matching of groups to classes,
  solved as a max flow;
* anything else (groups of different shapes sharing nodes): a memoised search over class states,
  bounded by :data:`SEARCH_BUDGET`; when the budget runs out the answer is "does not fit" (never
  a false yes, and the simulator's scheduler gives up the same way).

The decision loop asks :func:`gang_fits` (a yes/no that stops counting as soon as there is room)
for every member whose capacity changed, and builds a concrete :class:`Placement` (which node
takes which pods, so that exactly that capacity can be reserved) only for the member it chooses.
The placement follows the member scheduler's own preference (best fit: fewest free NPUs, then
cpu, memory, name), so that the hold sits on the nodes the member will really bind. Across
members :func:`choose` applies ``pack`` (least capacity left) or ``spread`` (most);
:func:`allowed` applies cluster affinity and exclusions.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from fleet.ascend import NPU_RESOURCE
from fleet.placement.capacity import GROUP_RESOURCE, IDENTITY_LABELS, MemberCapacity, NodeClass
from fleet.placement.demand import Demand, PodShape
from fleet.placement.node_constraints import NODE_NAME_FIELD, tolerates_all
from fleet.placement.npu import JobHardware, pods_fit, rule_failure, take_all
from fleet.policy import ClusterAffinity

__all__ = [
    "SEARCH_BUDGET",
    "Group",
    "Placement",
    "Strategy",
    "allowed",
    "choose",
    "fit_member",
    "gang_fits",
    "groups_of",
    "npu_rule_failure",
    "pods_per_node",
    "selector_matches",
]

Strategy = Literal["pack", "spread"]

#: States the mixed-shape search may visit before it gives up (and answers "does not fit").
SEARCH_BUDGET = 20_000


@dataclass(frozen=True)
class Group:
    """Replica types whose pods are interchangeable (same request and constraints)."""

    shape: PodShape  # the first replica type's shape; its count is the group's total
    replica_types: tuple[tuple[str, int], ...]
    #: Its selector names single nodes (hostname): checked node by node.
    identity: bool = False
    #: Pods in the group (set once: the fit reads it for every member).
    count: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "count", sum(n for _, n in self.replica_types))


def groups_of(demand: Demand) -> tuple[Group, ...]:
    """The gang's pods grouped by everything that places them (see :meth:`Demand.gang_shapes`)."""
    by_key: dict[tuple[object, ...], list[PodShape]] = {}
    for s in demand.gang_shapes():
        by_key.setdefault(s.placement_key(), []).append(s)
    return tuple(
        Group(shapes[0], tuple((s.replica_type, s.count) for s in shapes), _uses_identity(shapes[0]))
        for shapes in by_key.values()
    )


@dataclass(frozen=True)
class Placement:
    """Where one job's pods go on ``member``: ``(node, replica type, pods)`` rows."""

    member: str
    rows: tuple[tuple[str, str, int], ...]
    takes: Mapping[str, Mapping[str, int]] = field(hash=False)
    #: The member's free NPUs once this placement is taken (what pack and spread compare).
    npus_left: int = 0

    @property
    def pods(self) -> int:
        return sum(n for _, _, n in self.rows)

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(self.takes)

    def nodes_by_replica_type(self) -> dict[str, list[str]]:
        """Replica type -> its planned nodes (what ``member_copy(pin=...)`` takes)."""
        out: dict[str, list[str]] = {}
        for node, rtype, _ in self.rows:
            if node not in out.setdefault(rtype, []):
                out[rtype].append(node)
        return out


# ---- per-node rules ----------------------------------------------------------------------------


def _uses_identity(shape: PodShape) -> bool:
    keys = {k for k, _ in shape.node_selector}
    if shape.affinity is not None:
        keys |= shape.affinity.keys()
    return bool(keys & (IDENTITY_LABELS | {NODE_NAME_FIELD}))


def selector_matches(shape: PodShape, labels: Mapping[str, str], node_name: str = "") -> bool:
    """The node selector and the required node affinity (NodeAffinity filter)."""
    if any(labels.get(k) != v for k, v in shape.node_selector):
        return False
    return shape.affinity is None or shape.affinity.matches(labels, node_name)


def npu_rule_failure(shape: PodShape, demand: Demand, cls: NodeClass) -> str | None:
    """Why MindCluster's rules keep this pod off nodes of ``cls``; ``None`` when they allow it
    (:func:`fleet.placement.npu.rule_failure`: the hardware the job means, its node types and
    size, the NPU counts single-node or distributed)."""
    node_npus = cls.npu_capacity if shape.npu_resource == NPU_RESOURCE else None
    return rule_failure(demand.hardware, shape.npus, demand.npu_pods, cls.label_map, node_npus)


def pods_per_node(shape: PodShape, cls: NodeClass, hardware: JobHardware | None = None) -> int:
    """How many pods of ``shape`` one node of ``cls`` has room for: resources, and with the
    job's ``hardware`` the free NPUs of the node's interconnect groups."""
    room: int | None = None
    for resource, amount in shape.requests:
        if amount <= 0:
            continue
        n = cls.free_map.get(resource, 0) // amount
        if n <= 0:
            return 0
        room = n if room is None else min(room, n)
    if room is None:
        return 1 << 30
    room = min(room, 1) if shape.exclusive else room
    if cls.groups and shape.npus and hardware is not None:
        rules = hardware.rules_on(cls.label_map)
        if rules is not None:
            room = pods_fit(rules, cls.groups, shape.npus, room)
    return room


def _static_ok(shape: PodShape, demand: Demand, cls: NodeClass, identity: bool) -> bool:
    """Every filter but free resources (selector, taints, Ascend rules) for nodes of ``cls``."""
    if not identity and not selector_matches(shape, cls.label_map):
        return False
    if cls.taints and not tolerates_all(shape.tolerations, cls.taints):
        return False
    return not (shape.npus > 0 and npu_rule_failure(shape, demand, cls))


#: Verdicts of :func:`_static_ok` per (pod constraints, job size, policy) and static node kind.
_STATIC: dict[tuple[object, ...], dict[int, bool]] = {}
_STATIC_LIMIT = 50_000


# ---- the fit -----------------------------------------------------------------------------------


@dataclass
class _Unit:
    """A class (or, when a selector names single nodes, one node of it) the fit hands out."""

    cls: NodeClass
    names: list[str]
    per_node: list[int]  # by group
    eligible: list[int]  # eligible node count by group

    @property
    def npus(self) -> int:
        return self.cls.free_map.get(NPU_RESOURCE, 0)


def _free_key(unit: _Unit) -> tuple[int, int, int]:
    """Best fit first: fewest free NPUs, then cpu, then memory."""
    free = unit.cls.free_map
    return (free.get(NPU_RESOURCE, 0), free.get("cpu", 0), free.get("memory", 0))


def _best_fit(unit: _Unit) -> tuple[int, int, int, str]:
    return (*_free_key(unit), min(unit.names))


def _verdicts(groups: Sequence[Group], demand: Demand, identity: bool) -> list[dict[int, bool]]:
    if len(_STATIC) > _STATIC_LIMIT:
        _STATIC.clear()
    return [
        _STATIC.setdefault(
            (
                s.node_selector,
                s.affinity,
                s.tolerations,
                s.npus,
                demand.npu_pods,
                demand.hardware,
                identity,
            ),
            {},
        )
        for s in (g.shape for g in groups)
    ]


def _units(cap: MemberCapacity, groups: Sequence[Group], demand: Demand) -> list[_Unit]:
    identity = any(g.identity for g in groups)
    verdicts = _verdicts(groups, demand, identity)
    units: list[_Unit] = []
    for cls, names in cap.classes_with_npus(min(g.shape.npu_bucket for g in groups)):
        per = []
        for group, verdict in zip(groups, verdicts, strict=True):
            ok = verdict.get(cls.static_id)
            if ok is None:
                ok = verdict[cls.static_id] = _static_ok(group.shape, demand, cls, identity)
            per.append(pods_per_node(group.shape, cls, demand.hardware) if ok else 0)
        if not any(per):
            continue
        if not identity:
            units.append(_Unit(cls, list(names), per, [len(names)] * len(groups)))
            continue
        for name in sorted(names):
            info = cap.node(name)
            labels = info.labels if info is not None else {}
            here = [
                p if selector_matches(g.shape, labels, name) else 0 for g, p in zip(groups, per, strict=True)
            ]
            if any(here):
                units.append(_Unit(cls, [name], here, [1] * len(groups)))
    if len(groups) > 1:
        # Best fit first: the nodes with the fewest free NPUs, then cpu, then memory, then by
        # name, which is also the order a binpacking member scheduler tries them in.
        units.sort(key=_best_fit)
    return units


def _max_flow(groups: Sequence[Group], units: Sequence[_Unit]) -> list[list[int]]:
    """Nodes of each unit given to each group when every pod needs its own node."""
    flow = [[0] * len(units) for _ in groups]
    left_group = [g.count for g in groups]
    left_unit = [len(u.names) for u in units]
    while True:
        # BFS over the residual graph: source -> group -> unit -> sink, with unit -> group
        # back edges where flow already runs.
        parent: dict[tuple[str, int], tuple[str, int] | None] = {}
        queue: deque[tuple[str, int]] = deque()
        for gi, left in enumerate(left_group):
            if left > 0:
                parent[("g", gi)] = None
                queue.append(("g", gi))
        end: tuple[str, int] | None = None
        while queue and end is None:
            kind, i = queue.popleft()
            if kind == "g":
                for ui, unit in enumerate(units):
                    if ("u", ui) not in parent and unit.per_node[i] > 0 and flow[i][ui] < unit.eligible[i]:
                        parent[("u", ui)] = (kind, i)
                        if left_unit[ui] > 0:
                            end = ("u", ui)
                            break
                        queue.append(("u", ui))
            else:
                for gi in range(len(groups)):
                    if ("g", gi) not in parent and flow[gi][i] > 0:
                        parent[("g", gi)] = (kind, i)
                        queue.append(("g", gi))
        if end is None:
            return flow
        # Augment by one node along the path (paths are short; counts are small).
        node: tuple[str, int] | None = end
        left_unit[end[1]] -= 1
        while node is not None:
            prev = parent[node]
            if prev is None:
                left_group[node[1]] -= 1
            elif node[0] == "u":
                flow[prev[1]][node[1]] += 1
            else:
                flow[node[1]][prev[1]] -= 1
            node = prev


def _search(
    groups: Sequence[Group], units: Sequence[_Unit], hardware: JobHardware
) -> dict[int, dict[tuple[int, ...], int]] | None:
    """Mixed shapes sharing nodes: per unit, node contents (pods by group) -> node count."""
    requests = [dict(g.shape.requests) for g in groups]
    exclusive = [g.shape.exclusive for g in groups]
    empty = (0,) * len(groups)
    states: list[dict[tuple[int, ...], int]] = [{empty: len(u.names)} for u in units]
    order = sorted(range(len(groups)), key=lambda i: (-groups[i].shape.npus, -groups[i].shape.request("cpu")))
    pods = [gi for gi in order for _ in range(groups[gi].count)]
    seen: set[tuple[object, ...]] = set()
    budget = [SEARCH_BUDGET]

    def fits(ui: int, content: tuple[int, ...], gi: int) -> bool:
        if content != empty and (exclusive[gi] or any(c and exclusive[j] for j, c in enumerate(content))):
            return False
        if content[gi] + 1 > units[ui].per_node[gi]:
            return False
        cls = units[ui].cls
        for r, a in requests[gi].items():
            used = sum(content[j] * requests[j].get(r, 0) for j in range(len(groups)))
            if used + a > cls.free_map.get(r, 0):
                return False
        if cls.groups and groups[gi].shape.npus:
            rules = hardware.rules_on(cls.label_map)
            sizes = [groups[j].shape.npus for j, c in enumerate(content) for _ in range(c)]
            if rules is not None and take_all(rules, cls.groups, [*sizes, groups[gi].shape.npus]) is None:
                return False
        return True

    def go(i: int) -> bool:
        if i == len(pods):
            return True
        budget[0] -= 1
        if budget[0] < 0:
            return False
        key = (i, tuple(tuple(sorted(s.items())) for s in states))
        if key in seen:
            return False
        seen.add(key)
        gi = pods[i]
        for ui, state in enumerate(states):
            for content in list(state):
                if not fits(ui, content, gi):
                    continue
                grown = tuple(c + (1 if j == gi else 0) for j, c in enumerate(content))
                state[content] -= 1
                if not state[content]:
                    del state[content]
                state[grown] = state.get(grown, 0) + 1
                if go(i + 1):
                    return True
                state[grown] -= 1
                if not state[grown]:
                    del state[grown]
                state[content] = state.get(content, 0) + 1
        return False

    if not go(0):
        return None
    return {ui: s for ui, s in enumerate(states) if any(c != empty for c in s)}


def _takes(
    rows: Iterable[tuple[str, Group, int]],
    classes: Mapping[str, NodeClass] | None = None,
    hardware: JobHardware | None = None,
) -> tuple[tuple[tuple[str, str, int], ...], dict[str, dict[str, int]]]:
    """Split group pods back into replica types (in order) and sum what each node takes; on
    nodes with interconnect groups also what each group gives (``GROUP_RESOURCE<i>``), chosen
    by the hardware's rules, so that the hold sits on the groups the pods will use."""
    rows = list(rows)
    sizes: dict[str, list[int]] = {}
    out_rows: list[tuple[str, str, int]] = []
    takes: dict[str, dict[str, int]] = {}
    remaining: dict[int, list[list[object]]] = {}
    for node, group, n in rows:
        queue = remaining.setdefault(id(group), [[t, c] for t, c in group.replica_types])
        left = n
        while left > 0 and queue:
            rtype, count = queue[0]
            assert isinstance(count, int) and isinstance(rtype, str)
            k = min(left, count)
            out_rows.append((node, rtype, k))
            left -= k
            if k == count:
                queue.pop(0)
            else:
                queue[0][1] = count - k
        take = takes.setdefault(node, {})
        for r, a in group.shape.requests:
            take[r] = take.get(r, 0) + a * n
        if group.shape.npus:
            sizes.setdefault(node, []).extend([group.shape.npus] * n)
    if classes is not None and hardware is not None:
        for node, npus in sizes.items():
            cls = classes.get(node)
            if cls is None or not cls.groups:
                continue
            rules = hardware.rules_on(cls.label_map)
            given = take_all(rules, cls.groups, npus) if rules is not None else None
            for i, a in enumerate(given or ()):
                if a:
                    takes[node][f"{GROUP_RESOURCE}{i}"] = a
    return tuple(out_rows), takes


_GROUPS: dict[Demand, tuple[Group, ...]] = {}
#: The one group's verdicts per demand (the fast path's shortcut into :data:`_STATIC`).
_BY_DEMAND: dict[Demand, dict[int, bool]] = {}


def _groups(demand: Demand) -> tuple[Group, ...]:
    groups = _GROUPS.get(demand)
    if groups is None:
        if len(_GROUPS) > _STATIC_LIMIT:
            _GROUPS.clear()
        groups = _GROUPS[demand] = groups_of(demand)
    return groups


def gang_fits(cap: MemberCapacity, demand: Demand) -> bool:
    """Whether :func:`fit_member` finds a placement, without building it (the decision loop's
    per-member test; only the chosen member's placement is built).

    For one group of interchangeable pods the answer is a count over classes that stops as soon
    as there is room; other demands take the full fit.
    """
    groups = _groups(demand)
    if not groups:
        return True
    group = groups[0]
    shape = group.shape
    if len(groups) > 1 or group.identity:
        return fit_member(cap, demand) is not None
    need = group.count
    if shape.npu_bucket * need > cap.free_total(NPU_RESOURCE):
        return False
    verdict = _BY_DEMAND.get(demand)
    if verdict is None:
        verdict = _BY_DEMAND[demand] = _verdicts(groups, demand, False)[0]
    wanted = [(r, a) for r, a in shape.requests if a > 0]
    exclusive = shape.exclusive
    room = 0
    for cls, names in cap.classes_with_npus(shape.npu_bucket):
        ok = verdict.get(cls.static_id)
        if ok is None:
            ok = verdict[cls.static_id] = _static_ok(shape, demand, cls, False)
        if not ok:
            continue
        free = cls.free_map
        per = need  # pods_per_node, inlined: this loop runs for every changed member and class
        for resource, amount in wanted:
            n = free.get(resource, 0) // amount
            if n < per:
                per = n
                if per <= 0:
                    break
        if per > 0 and exclusive:
            per = 1
        if per > 0 and cls.groups and shape.npus:
            rules = demand.hardware.rules_on(cls.label_map)
            if rules is not None:
                per = pods_fit(rules, cls.groups, shape.npus, per)
        if per > 0:
            room += per * len(names)
            if room >= need:
                return True
    return False


def fit_member(cap: MemberCapacity, demand: Demand) -> Placement | None:
    """Where ``demand``'s gang fits on ``cap`` right now (reservations included), or ``None``."""
    if demand.pods == 0:
        return Placement(cap.name, (), {}, cap.free_total())
    groups = _groups(demand)
    units = _units(cap, groups, demand)
    if not units:
        return None
    chosen: list[tuple[str, Group, int]] = []
    if len(groups) == 1:
        group = groups[0]
        picks = _in_member_order(units, group)
        if picks is None:
            return None
        chosen.extend((name, group, n) for name, n in picks)
    elif all(g.shape.exclusive for g in groups):
        flow = _max_flow(groups, units)
        if sum(map(sum, flow)) < sum(g.count for g in groups):
            return None
        for gi, group in enumerate(groups):
            for ui, unit in enumerate(units):
                chosen.extend((name, group, 1) for name in _pick(unit, flow[gi][ui], chosen))
    else:
        contents = _search(groups, units, demand.hardware)
        if contents is None:
            return None
        for ui, state in contents.items():
            names = iter(sorted(units[ui].names))
            for content, count in sorted(state.items(), reverse=True):
                if not any(content):
                    continue
                for _ in range(count):
                    name = next(names)
                    chosen.extend((name, groups[gi], n) for gi, n in enumerate(content) if n)
    classes = {name: unit.cls for unit in units for name in unit.names}
    rows, takes = _takes(chosen, classes, demand.hardware)
    npus = sum(t.get(NPU_RESOURCE, 0) for t in takes.values())
    return Placement(cap.name, rows, takes, cap.free_total() - npus)


def _in_member_order(units: Sequence[_Unit], group: Group) -> list[tuple[str, int]] | None:
    """Nodes for one group of interchangeable pods, chosen the way the member scheduler does.

    The hold should sit on the nodes the member will bind, or a decision made before the feed
    shows those pods may count on nodes already taken. The member (volcano's binpack, and the
    simulator) places the pods one by one, each on the best-fitting node: fewest free NPUs,
    then cpu, then memory, then name. A node it just used fits even better afterwards, so pods
    fill it up before the next; for identical pods that greedy order never strands one, so this
    is the member's choice whenever the room suffices (``None`` when it does not).
    """
    if sum(u.per_node[0] * len(u.names) for u in units) < group.count:
        return None
    # Each node takes at least one pod, so the first ``count`` of the order are all it can use
    # (``nsmallest`` is ``sorted(...)[:count]``); a unit's free amounts are read once for its
    # nodes, not once per node.
    keyed = [(_free_key(unit), unit.per_node[0], unit.names) for unit in units]
    order = heapq.nsmallest(group.count, ((*key, name, room) for key, room, names in keyed for name in names))
    out: list[tuple[str, int]] = []
    left = group.count
    for *_, name, room in order:
        if left <= 0:
            break
        n = min(room, left)
        out.append((name, n))
        left -= n
    return out


def _pick(unit: _Unit, n: int, chosen: Sequence[tuple[str, Group, int]]) -> list[str]:
    if n <= 0:
        return []
    taken = {name for name, _, _ in chosen}
    return [name for name in sorted(unit.names) if name not in taken][:n]


# ---- choosing a member -------------------------------------------------------------------------


def allowed(
    member: str, labels: Mapping[str, str], affinity: ClusterAffinity | None, avoid: Collection[str]
) -> bool:
    if member in avoid:
        return False
    return affinity is None or affinity.allows(member, labels)


def choose(candidates: Iterable[tuple[str, int]], strategy: Strategy = "pack") -> str | None:
    """Among ``(member, NPUs left after placing)`` pairs of members that fit: pack takes the one
    with the fewest NPUs left, spread the most. The member name breaks ties (deterministic)."""
    sign = 1 if strategy == "pack" else -1
    best: str | None = None
    best_key: tuple[int, str] | None = None
    for member, left in candidates:
        key = (sign * left, member)
        if best_key is None or key < best_key:
            best, best_key = member, key
    return best
