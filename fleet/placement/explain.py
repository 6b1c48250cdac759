"""Why a job fits nowhere: per member, the nearest miss in words.

The checks run in the order a pod meets them (usable nodes, node selector and affinity, taints,
Ascend NPU rules, free resources, then the gang as a whole) and the first stage that leaves no
node is the member's reason; a stage that leaves some nodes but too few says how many there are
and how many the job needs. Holds of in-flight reservations are named when they make the
difference. This is the slow path (nodes, not classes): it runs only when no member fits.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from fleet.ascend import NPU_RESOURCE
from fleet.placement.capacity import MemberCapacity, NodeClass, NodeInfo
from fleet.placement.demand import PODS_RESOURCE, Demand, PodShape
from fleet.placement.fit import (
    Group,
    fit_member,
    groups_of,
    npu_rule_failure,
    pods_per_node,
    selector_matches,
)
from fleet.placement.node_constraints import BLOCKING_EFFECTS, tolerates_all
from fleet.policy import ClusterAffinity
from queues import format_quantity

__all__ = ["NEVER", "explain_member", "explain_members", "never_fits", "say_avoided"]


def _nodes(n: int) -> str:
    return f"{n} node" if n == 1 else f"{n} nodes"


def _has(n: int) -> str:
    return f"{_nodes(n)} has" if n == 1 else f"{_nodes(n)} have"


def _amount(resource: str, amount: int) -> str:
    return f"{format_quantity(resource, amount)} {resource}"


def _types(group: Group) -> str:
    return "/".join(t for t, _ in group.replica_types)


def _selector_text(shape: PodShape, usable: list[NodeInfo]) -> str:
    missing = [f"{k}={v}" for k, v in shape.node_selector if not any(n.labels.get(k) == v for n in usable)]
    if missing:
        return ", ".join(missing)
    parts = [f"{k}={v}" for k, v in shape.node_selector]
    if shape.affinity is not None:
        parts.append(f"node affinity {shape.affinity}")
    return ", ".join(parts)


def _room_text(group: Group, demand: Demand, classes: list[NodeClass], need: int) -> str:
    """The resource shortfall of one group on nodes that pass every filter."""
    shape = group.shape
    wanted = dict(shape.requests)

    # The resource with the fewest nodes that have enough of it is the one to name (NPUs first).
    def enough(resource: str) -> int:
        return sum(1 for c in classes if c.available(resource) >= wanted[resource])

    order = sorted(
        (r for r in wanted if r != PODS_RESOURCE or len(wanted) == 1),
        key=lambda r: (enough(r), r != NPU_RESOURCE, r),
    )
    resource = order[0]
    amount = wanted[resource]
    with_room = sum(1 for c in classes if pods_per_node(shape, c, demand.hardware) > 0)
    if with_room == 0:
        best = max((c.available(resource) for c in classes), default=0)
        if resource == shape.npu_resource and best >= amount and any(c.groups for c in classes):
            return (
                f"no node has {format_quantity(resource, amount)} free {resource} within the HCCS "
                f"rings or HiAM pairs a {_types(group)} pod needs (most free on one node: "
                f"{format_quantity(resource, best)}, split across them)"
            )
        return (
            f"no node has {format_quantity(resource, amount)} free {resource} for a {_types(group)} pod "
            f"(most free on one node: {format_quantity(resource, max(best, 0))})"
        )
    if shape.exclusive:
        return (
            f"{_has(with_room)} {format_quantity(resource, amount)} free {resource} but the job needs "
            f"{_nodes(need)} (one pod per node)"
        )
    room = sum(pods_per_node(shape, c, demand.hardware) for c in classes)
    return f"room for {room} of the {need} pods ({_amount(resource, amount)} each) on {_nodes(with_room)}"


def _stages(cap: MemberCapacity, demand: Demand) -> str | None:
    """The first stage that stops the job, or ``None`` when every group passes alone."""
    infos = list(cap.nodes())
    usable = [n for n in infos if n.usable]
    if not infos:
        return "has no nodes"
    if not usable:
        kinds = sorted({n.why_unusable for n in infos})
        return f"no usable node ({_nodes(len(infos))}, all {' or '.join(kinds)})"
    for group in groups_of(demand):
        shape = group.shape
        matching = [n for n in usable if selector_matches(shape, n.labels, n.name)]
        if not matching:
            text = f"no node matches {_selector_text(shape, usable)}"
            idle = [n for n in infos if not n.usable and selector_matches(shape, n.labels, n.name)]
            if idle:
                text += f" that is Ready and schedulable ({_nodes(len(idle))} NotReady or cordoned)"
            return text
        tolerated = [n for n in matching if tolerates_all(shape.tolerations, n.taints)]
        if not tolerated:
            taints = sorted(
                {str(t) for n in matching for t in n.taints if t.effect in BLOCKING_EFFECTS}
                - {
                    str(t)
                    for n in matching
                    for t in n.taints
                    if any(x.tolerates(t) for x in shape.tolerations)
                }
            )
            return (
                f"{_has(len(matching))} the labels but the taint {', '.join(taints)} that the "
                f"{_types(group)} pods do not tolerate"
            )
        failures: list[str] = []
        allowed: list[NodeClass] = []
        for n in tolerated:
            cls = n.cls  # free capacity after holds
            if cls is None:
                continue
            why = npu_rule_failure(shape, demand, cls)
            if why is None:
                allowed.append(cls)
            elif why not in failures:
                failures.append(why)
        if not allowed:
            return "; ".join(failures)
        need = group.count
        room = sum(min(pods_per_node(shape, c, demand.hardware), need) for c in allowed)
        if room < need:
            return _room_text(group, demand, allowed, need)
    return None


def explain_member(cap: MemberCapacity, demand: Demand) -> str:
    """Why ``demand`` does not fit ``cap`` (the text after ``<member>: ``)."""
    reason = _stages(cap, demand)
    if reason is None:
        reason = (
            f"the job's {demand.gang} pods do not fit at the same time "
            "(each replica type alone would, together they need more nodes)"
        )
    held = sum(cap.held(n.name).get(NPU_RESOURCE, 0) for n in cap.nodes())
    if held and _fits_unheld(cap, demand):
        reason += f" ({_amount(NPU_RESOURCE, held)} held for jobs being dispatched)"
    return reason


def _fits_unheld(cap: MemberCapacity, demand: Demand) -> bool:
    held = {n.name: dict(cap.held(n.name)) for n in cap.nodes() if cap.held(n.name)}
    cap.set_held({})
    try:
        return fit_member(cap, demand) is not None
    finally:
        cap.set_held(held)


def explain_members(
    members: Iterable[MemberCapacity],
    demand: Demand,
    *,
    affinity: ClusterAffinity | None = None,
    avoid: Collection[str] = (),
    member_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> list[str]:
    """One ``<member>: <reason>`` line per member, in member order."""
    lines: list[str] = []
    for cap in members:
        if cap.name in avoid:
            lines.append(f"{cap.name}: avoided (the job failed there recently)")
            continue
        labels = (member_labels or {}).get(cap.name, cap.labels)
        if affinity is not None and not affinity.allows(cap.name, labels):
            lines.append(f"{cap.name}: excluded by the cluster affinity")
            continue
        if not cap.listed:
            lines.append(
                f"{cap.name}: capacity not known yet (its nodes and pods could not be listed so far)"
            )
            continue
        if fit_member(cap, demand) is not None:
            lines.append(f"{cap.name}: fits")
            continue
        empty = cap.emptied()
        if fit_member(empty, demand) is None:
            lines.append(f"{cap.name}: {NEVER}: {explain_member(empty, demand)}")
            continue
        lines.append(f"{cap.name}: {explain_member(cap, demand)}")
    return lines


#: What a member's line starts with when the job would not fit it even with all its nodes Ready
#: and free: waiting does not help there, only a change of its nodes.
NEVER = "can never fit, not even with all its nodes free"


def never_fits(lines: Iterable[str]) -> bool:
    """Whether every member's line says the job can never fit it (and there is at least one)."""
    found = list(lines)
    return bool(found) and all(line.partition(": ")[2].startswith(NEVER) for line in found)


def say_avoided(
    line: str,
    down: Collection[str],
    refused: Mapping[str, str],
    slow: Collection[str] = (),
    cordoned: Collection[str] = (),
) -> str:
    """A member avoided because it is NotReady, degraded or cordoned (drained), or because it
    refused the job, says so, not that the job failed there (the dispatcher's pending reasons and
    the API's explanations word it alike)."""
    member = line.split(":", 1)[0]
    if member in cordoned:
        return f"{member}: cordoned (spec.taints: cluster.karmada.io/unschedulable), takes no new jobs"
    if member in refused:
        return f"{member}: refused the job ({refused[member]})"
    if member in slow:
        return f"{member}: degraded (its calls keep timing out)"
    return f"{member}: NotReady (failing its health probes)" if member in down else line
