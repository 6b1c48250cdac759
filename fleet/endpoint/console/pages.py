"""What each console page shows, read through the API's own readers and gated by its authorizer.

Every function here takes the :class:`~fleet.endpoint.console.access.Viewer` and returns plain
data for a template; nothing here renders HTML. The numbers and words are the API's: members and
their capacity are the MemberCluster objects (:mod:`fleet.endpoint.members`), the quota is the
queue views (:func:`queues.queue_views`, as the Queue kind computes them), a waiting job's place
and blocker are :func:`fleet.endpoint.computed.waiting_fields`, its reason the one the
dispatcher wrote, and "where would it fit now" is :class:`fleet.endpoint.explain.Explainer`.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import redis.asyncio

from fleet.apiserver import Obj, ResourceType
from fleet.ascend import Condition
from fleet.endpoint.backends import FleetStore
from fleet.endpoint.computed import waiting_fields
from fleet.endpoint.console.access import Viewer
from fleet.endpoint.console.index import JobIndex, Row, select
from fleet.endpoint.explain import Explainer
from fleet.jobs import (
    FINISHED,
    HELD,
    MEMBER_STATES,
    Phase,
    attempt_of,
    cluster_of,
    conditions_of,
    current_state,
    last_condition,
    status_of,
)
from fleet.kinds import FLEET_EVENT, FLEET_JOB_KINDS, MEMBER_CLUSTER, QUEUE, ready_condition
from fleet.placement import job_pod_key
from fleet.state import DispatchKeys, Objects, events_for, parse_capacity_nodes
from fleet.workloads import UnknownKind, job_ref
from queues import MAX_JOBS, ElasticQuotaTree, Ledger, QueueView, format_quantity, is_unlimited, queue_views

__all__ = [
    "PAGE_SIZE",
    "Bar",
    "Page",
    "fleet_page",
    "job_page",
    "jobs_page",
    "queues_page",
    "quota_page",
    "rt_named",
]

#: Rows per page of a list.
PAGE_SIZE: Final = 50
#: Members per page of the fleet page, jobs shown per member, per leaf and per queue.
MEMBERS_PER_PAGE: Final = 25
JOBS_SHOWN: Final = 10
QUEUE_SHOWN: Final = 25

_BY_PLURAL: Final = {rt.plural: rt for rt in FLEET_JOB_KINDS}


def rt_named(plural: str) -> ResourceType | None:
    """The job kind served under ``plural`` (``ascendjobs``)."""
    return _BY_PLURAL.get(plural)


@dataclass(frozen=True)
class Bar:
    """One bar: ``value`` of ``limit`` (a ``<meter>``), with the words it stands for."""

    label: str
    value: float
    limit: float
    text: str

    @property
    def percent(self) -> int:
        return 0 if self.limit <= 0 else round(100 * min(self.value, self.limit) / self.limit)


@dataclass
class Page:
    """A page of a longer list: 1-based ``number`` of ``pages``."""

    number: int
    pages: int
    total: int
    items: list[Any] = field(default_factory=list)


def paged(items: Sequence[Any], number: int, size: int) -> Page:
    pages = max(1, math.ceil(len(items) / size))
    number = min(max(1, number), pages)
    return Page(number, pages, len(items), list(items[(number - 1) * size : number * size]))


def _rows_for(viewer: Viewer, index: JobIndex) -> list[Row]:
    """The rows the viewer may list (the authorizer, per kind and namespace, asked once each)."""
    allowed: dict[tuple[str, str], bool] = {}

    def keep(row: Row) -> bool:
        key = (row.rt.plural, row.namespace)
        verdict = allowed.get(key)
        if verdict is None:
            verdict = allowed[key] = viewer.may("list", row.rt, row.namespace)
        return verdict

    return [row for row in index.rows() if keep(row)]


def _active(row: Row) -> bool:
    return row.state not in FINISHED


# --- the fleet -----------------------------------------------------------------------------------


@dataclass
class MemberView:
    name: str
    ready: str
    reason: str
    message: str
    since: str
    probed: str
    accelerators: list[dict[str, Any]]
    bars: list[Bar]
    jobs: list[Row]
    job_count: int
    observed: str


async def fleet_page(viewer: Viewer, store: FleetStore, index: JobIndex, number: int) -> dict[str, Any]:
    """Every member with its health, its capacity by accelerator type and its jobs."""
    members: list[Obj] = []
    if viewer.may("list", MEMBER_CLUSTER):
        members, _, _ = await store.list(MEMBER_CLUSTER, None)
    rows = [r for r in _rows_for(viewer, index) if r.member and _active(r)]
    by_member: dict[str, list[Row]] = {}
    for row in select(rows, keep=lambda _: True):
        by_member.setdefault(row.member, []).append(row)
    views = []
    for obj in members:
        name = str(obj["metadata"]["name"])
        status = obj.get("status") or {}
        ready = ready_condition(obj) or {}
        accelerators = [a for a in status.get("accelerators") or [] if isinstance(a, Mapping)]
        allocatable = status.get("allocatableNPUs") or {}
        free = status.get("freeNPUs") or {}
        bars = []
        for acc in accelerators:
            kind = str(acc.get("type"))
            total, left = int(allocatable.get(kind) or 0), int(free.get(kind) or 0)
            bars.append(Bar(f"{kind} free NPUs", left, total, f"{left} of {total} NPUs free"))
        jobs = by_member.get(name, [])
        views.append(
            MemberView(
                name=name,
                ready=str(ready.get("status") or "Unknown"),
                reason=str(ready.get("reason") or ""),
                message=str(ready.get("message") or ""),
                since=str(ready.get("lastTransitionTime") or ""),
                probed=str(ready.get("lastProbeTime") or ""),
                accelerators=[dict(a) for a in accelerators],
                bars=bars,
                jobs=jobs[:JOBS_SHOWN],
                job_count=len(jobs),
                observed=str(status.get("capacityObservedTime") or ""),
            )
        )
    page = paged(views, number, MEMBERS_PER_PAGE)
    ready_count = sum(1 for v in views if v.ready == "True")
    return {"members": page, "ready_count": ready_count, "member_count": len(views)}


def node_bars(accelerator: Mapping[str, Any]) -> list[Bar]:
    """Nodes of one accelerator type by free NPUs: one bar per free count, of all usable nodes."""
    by_free = accelerator.get("nodesByFreeNPUs") or {}
    usable = int(accelerator.get("usableNodes") or 0)
    out = []
    for free, count in by_free.items():
        out.append(
            Bar(f"nodes with {free} NPUs free", int(count), usable, f"{count} of {usable} nodes: {free} free")
        )
    return out


# --- the quota tree ------------------------------------------------------------------------------


@dataclass
class NodeView:
    name: str
    path: str
    depth: int
    leaf: bool
    queue: str
    bars: list[Bar]
    limits: list[tuple[str, str, str]]  # resource, min, max
    used: str
    borrowed: str
    admitted: list[Row]
    waiting: list[Row]
    admitted_count: int
    waiting_count: int


def _visible_paths(viewer: Viewer, tree: ElasticQuotaTree | None) -> set[str] | None:
    """The tree paths a tenant sees (the nodes that bind its namespaces and their ancestors);
    None for everything (an admin)."""
    if viewer.admin:
        return None
    if tree is None:
        return {"root"}
    paths: set[str] = set()
    for path, _, node in tree.walk():
        if set(node.namespaces) & viewer.namespaces:
            parts = path.split("/")
            paths.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return paths


def _amount(resource: str, amount: int) -> str:
    return "unlimited" if is_unlimited(resource, amount) else format_quantity(resource, amount)


def _quota_bars(view: QueueView) -> list[Bar]:
    bars = []
    for resource, limit in sorted(view.max.items()):
        used = view.admitted if resource == MAX_JOBS else view.used.get(resource, 0)
        if is_unlimited(resource, limit):
            continue
        low = view.min.get(resource)
        floor = f", min {format_quantity(resource, low)}" if low else ""
        bars.append(
            Bar(
                f"{resource} used of max",
                used,
                limit,
                f"{format_quantity(resource, used)} of {format_quantity(resource, limit)} {resource} "
                f"used{floor}",
            )
        )
        borrowed = view.borrowed.get(resource, 0)
        if borrowed and low is not None and limit > low:
            bars.append(
                Bar(
                    f"{resource} borrowed",
                    borrowed,
                    limit - low,
                    f"{format_quantity(resource, borrowed)} {resource} borrowed beyond min",
                )
            )
    return bars


def _amounts(amounts: Mapping[str, int]) -> str:
    return ", ".join(f"{r}={format_quantity(r, a)}" for r, a in sorted(amounts.items())) or "-"


async def quota_page(viewer: Viewer, ledger: Ledger, index: JobIndex) -> dict[str, Any]:
    """Every quota node the viewer may see, with its limits, use and jobs."""
    if not viewer.may("list", QUEUE):
        return {"nodes": [], "tree": False}
    views, tree = await asyncio.to_thread(lambda: (queue_views(ledger), ledger.tree()))
    visible = _visible_paths(viewer, tree)
    rows = _rows_for(viewer, index)
    by_queue: dict[str, list[Row]] = {}
    for row in select(rows, keep=_active):
        by_queue.setdefault(row.queue, []).append(row)
    leaves = {path for path, _, node in tree.walk() if not node.children} if tree is not None else {"root"}
    nodes = []
    for view in views:
        if visible is not None and view.path not in visible:
            continue
        jobs = by_queue.get(view.name, []) if view.path in leaves else []
        waiting = [r for r in jobs if r.state == Phase.QUEUED]
        admitted = [r for r in jobs if r.state != Phase.QUEUED and r.state not in HELD]
        nodes.append(
            NodeView(
                name=view.path.rsplit("/", 1)[-1],
                path=view.path,
                depth=view.path.count("/"),
                leaf=view.path in leaves,
                queue=view.name,
                bars=_quota_bars(view),
                limits=[
                    (
                        r,
                        _amount(r, view.min[r]) if r in view.min else "-",
                        _amount(r, view.max[r]) if r in view.max else "-",
                    )
                    for r in sorted(set(view.min) | set(view.max))
                ],
                used=_amounts({**view.used, MAX_JOBS: view.admitted}),
                borrowed=_amounts(view.borrowed),
                admitted=admitted[:JOBS_SHOWN],
                waiting=waiting[:JOBS_SHOWN],
                admitted_count=len(admitted),
                waiting_count=len(waiting),
            )
        )
    return {"nodes": nodes, "tree": tree is not None}


# --- the queues ----------------------------------------------------------------------------------


@dataclass
class Waiter:
    position: int
    row: Row | None
    reason: str
    message: str
    blocker: str
    where: str


@dataclass
class QueueOfLeaf:
    name: str
    path: str
    length: int
    waiters: list[Waiter]
    hidden: int


def _leaf_queue(ledger: Ledger, leaf: str, count: int) -> tuple[list[str], int]:
    return ledger.pending.peek(leaf, count), ledger.pending.length(leaf)


async def queues_page(
    viewer: Viewer, ledger: Ledger, store: FleetStore, index: JobIndex, only: str = ""
) -> dict[str, Any]:
    """Per leaf the viewer may see, its waiting jobs in queue order, each with its reason as the
    dispatcher wrote it and its position and blocker computed now."""
    if not viewer.may("list", QUEUE):
        return {"queues": []}
    views, tree = await asyncio.to_thread(lambda: (queue_views(ledger), ledger.tree()))
    visible = _visible_paths(viewer, tree)
    names = (
        {path: node.name for path, _, node in tree.walk() if not node.children} if tree else {"root": "root"}
    )
    out = []
    for view in views:
        if view.path not in names or (visible is not None and view.path not in visible):
            continue
        if only and view.name != only:
            continue
        keys, length = await asyncio.to_thread(_leaf_queue, ledger, names[view.path], QUEUE_SHOWN)
        waiters: list[Waiter] = []
        hidden = 0
        for position, key in enumerate(keys, start=1):
            waiter = await _waiter(viewer, ledger, store, index, key, position=position)
            if waiter is None:
                hidden += 1
            else:
                waiters.append(waiter)
        out.append(QueueOfLeaf(view.name, view.path, length, waiters, hidden))
    return {"queues": out, "shown": QUEUE_SHOWN}


async def _waiter(
    viewer: Viewer, ledger: Ledger, store: FleetStore, index: JobIndex, key: str, *, position: int
) -> Waiter | None:
    try:
        ref = job_ref(key)
    except UnknownKind:
        return None
    rt = rt_named(ref.adapter.resource.plural)
    if rt is None or not viewer.may("get", rt, ref.namespace, ref.name):
        return None
    try:
        obj = await store.get(rt, ref.namespace, ref.name)
    except Exception:  # gone since the queue was read
        return None
    fields = await asyncio.to_thread(waiting_fields, ledger, obj)
    last = last_condition(obj) or {}
    return Waiter(
        position=position,
        row=index.find(rt, ref.namespace, ref.name),
        reason=str(last.get("reason") or ""),
        message=str(last.get("message") or ""),
        blocker=str(fields.get("blocker") or ""),
        where=str(fields.get("position") or ""),
    )


# --- the jobs ------------------------------------------------------------------------------------


def jobs_page(viewer: Viewer, index: JobIndex, filters: Mapping[str, str], number: int) -> dict[str, Any]:
    """The jobs the viewer may list, filtered and paged on the server."""
    rows = _rows_for(viewer, index)
    found = select(
        rows,
        keep=(lambda r: r.queue == filters["queue"]) if filters.get("queue") else (lambda _: True),
        namespace=filters.get("namespace", ""),
        kind=filters.get("kind", ""),
        state=filters.get("state", ""),
        member=filters.get("member", ""),
        name=filters.get("name", ""),
    )
    return {
        "page": paged(found, number, PAGE_SIZE),
        "namespaces": sorted({r.namespace for r in rows}),
        "kinds": [(rt.plural, rt.kind) for rt in FLEET_JOB_KINDS],
        "states": sorted({r.state for r in rows if r.state}),
        "members": sorted({r.member for r in rows if r.member}),
        "filters": dict(filters),
    }


@dataclass
class JobView:
    rt: ResourceType
    obj: Obj
    state: str
    member: str
    attempt: int
    queue: str
    priority: Any
    position: str
    blocker: str
    #: The reason and message of the condition that is the job's state now.
    reason: str
    message: str
    conditions: list[dict[str, Any]]
    events: list[dict[str, Any]]
    nodes: list[tuple[str, int]]
    member_conditions: list[dict[str, Any]]
    explanation: dict[str, Any] | None


def _nodes(raw: bytes | str | None, obj: Obj) -> list[tuple[str, int]]:
    """The member's nodes holding the current attempt's pods, from its capacity record (the
    record names, per node, the jobs whose pods are bound there: :mod:`fleet.placement.snapshot`)."""
    record = parse_capacity_nodes(raw)
    if record is None:
        return []
    key = job_pod_key(str(obj["metadata"].get("uid")), attempt_of(obj))
    return [
        (str(n.get("name")), int((n.get("jobs") or {}).get(key) or 0))
        for n in record.get("nodes") or []
        if isinstance(n, Mapping) and key in (n.get("jobs") or {})
    ]


async def job_page(
    viewer: Viewer,
    rt: ResourceType,
    namespace: str,
    name: str,
    *,
    store: FleetStore,
    objects: Objects,
    explainer: Explainer,
    client: redis.asyncio.Redis,
    keys: DispatchKeys,
) -> JobView | None:
    """One job: state, timeline, member and nodes, conditions, where it would fit now. None when
    the viewer may not read it (the page then says it is not found, as the API's 403 would not
    tell either)."""
    if not viewer.may("get", rt, namespace, name):
        return None
    obj = await store.get(rt, namespace, name)
    status = status_of(obj)
    events: list[dict[str, Any]] = []
    if viewer.may("list", FLEET_EVENT, namespace):
        events = await asyncio.to_thread(events_for, objects, obj)
    member = cluster_of(obj) or ""
    nodes: list[tuple[str, int]] = []
    member_conditions: list[dict[str, Any]] = []
    if member:
        raw = await client.hget(keys.capacity_nodes, member)
        nodes = _nodes(raw, obj)
        if viewer.may("get", MEMBER_CLUSTER, None, member):
            try:
                cluster = await store.get(MEMBER_CLUSTER, None, member)
                member_conditions = list((cluster.get("status") or {}).get("conditions") or [])
            except Exception:
                member_conditions = []
    explanation = None
    if viewer.may("get", rt, namespace, name, "explain") and current_state(obj) not in FINISHED:
        explanation = (await asyncio.to_thread(explainer.explain_stored, obj)).get("status")
    conditions = [
        {**c, "source": "member" if c.get("type") in MEMBER_STATES and member else "fleet"}
        for c in conditions_of(obj)
    ]
    return JobView(
        rt=rt,
        obj=obj,
        state=current_state(obj) or "",
        member=member,
        attempt=attempt_of(obj),
        queue=str(status.get("queue") or ""),
        priority=status.get("priority", ""),
        position=str(status.get("position") or ""),
        blocker=str(status.get("blocker") or ""),
        reason=str((last_condition(obj) or {}).get("reason") or ""),
        message=str((last_condition(obj) or {}).get("message") or ""),
        conditions=conditions,
        events=events,
        nodes=nodes,
        member_conditions=member_conditions,
        explanation=explanation,
    )


def timeline(obj: Mapping[str, Any], events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The job's life oldest first: its Events (``events``: those the viewer may read) and the
    member's states that record none (the ``Running`` and ``Succeeded`` conditions now True: a
    job's happy path records three Events, the fleet's own acts; issue 30)."""
    entries: list[dict[str, Any]] = []
    for c in conditions_of(obj):
        if c.get("type") in _STEPS and c.get("status") == "True" and c.get("lastTransitionTime"):
            entries.append(
                _entry(str(c["lastTransitionTime"]), str(c.get("reason") or c["type"]), c.get("message"))
            )
    entries.extend(dict(e) for e in events)
    return sorted(entries, key=_when)


#: The steps of a job's life that are conditions only, no Event (the member's, mirrored).
_STEPS: Final = frozenset({Condition.RUNNING, Condition.SUCCEEDED})


def _when(entry: Mapping[str, Any]) -> str:
    """An entry's time as a sortable string: RFC 3339 with and without fractions of a second
    (conditions carry microseconds, Events and ``creationTimestamp`` whole seconds)."""
    at = str(entry.get("firstTimestamp") or entry.get("lastTimestamp") or entry.get("eventTime") or "")
    whole, _, fraction = at.rstrip("Z").partition(".")
    return f"{whole}.{fraction:0<6}"


def _entry(at: str, reason: str, message: object) -> dict[str, Any]:
    """A timeline entry that is not an Event, shaped as one for the page."""
    return {"type": "Normal", "reason": reason, "message": str(message or ""), "firstTimestamp": at}
