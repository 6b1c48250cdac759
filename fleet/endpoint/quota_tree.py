"""The ElasticQuotaTree backend: apply checks the tree and applies it to the ledger, then stores it.

A create or update (``kubectl apply``, patches included: the serving core turns them into updates)
goes through three gates, each of which may refuse it, before anything is written:

1. :func:`queues.validation.check`: every error is one 422 cause, its field a path into the
   object (``spec.root.children[0].min.cpu``) and its message naming the tree node
   (``root/child-2: min.cpu 20 exceeds max.cpu 10``). Warnings (the sample's root ``max``
   differing from its ``min``) are returned as ``Warning`` headers, which kubectl prints.
   Only ``kube-system`` holds a tree, and only one: a second name is a 422 too.
2. The store's own dry run: ``AlreadyExists``, a stale resourceVersion (409), a missing object.
3. :meth:`queues.Ledger.apply`: a node that would disappear while it holds jobs, or a ``max``
   below what is in use, is a 409 with the ledger's message; nothing changes.

Then the ledger holds the new tree and the object (as the user wrote it, without status) is
stored. Replicas take a Redis lock around gates 2 and 3 and the write, so two applies cannot
interleave their ledger and object writes. A dry run passes gates 1 and 2 only (the ledger has no
dry run). The tree cannot be deleted: removing quota while jobs hold it has no safe meaning, so
an admin applies a changed tree instead.

Reads return the stored object with ``status`` computed from the ledger at that moment::

    status:
      version: 3                  # the tree version the ledger holds
      nodes:
      - {name: child-2, path: root/child-2, queue: root-child-2,
         used: {cpu: "4"}, requested: {cpu: "8"}, admitted: 1, pending: 2}

``used`` is what the node's admitted jobs use, ``requested`` what its pending jobs ask for (a scan
of the pending records, so its cost grows with the number of queued jobs; the per-node counters
give ``used``, ``admitted`` and ``pending`` in two round trips).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

import redis.asyncio
import redis.exceptions

from fleet.apiserver import (
    ADDED,
    DELETED,
    MODIFIED,
    Cause,
    Conflict,
    MethodNotAllowed,
    Obj,
    ResourceType,
    WatchEvent,
    clone,
)
from fleet.endpoint.errors import invalid
from fleet.endpoint.keys import DEFAULT_API_KEYS, ApiKeys
from fleet.endpoint.warning_headers import warn
from fleet.kinds import TreeNodeStatus, TreeStatus, format_amounts
from fleet.state import AsyncObjects
from queues import (
    DOCUMENT,
    TREE_NAMESPACE,
    ApplyRefused,
    ElasticQuotaTree,
    Ledger,
    Problem,
    Severity,
    TreeInvalid,
    check,
    queue_views,
)

__all__ = ["TreeBackend", "problem_field", "tree_status"]

log = logging.getLogger("fleet.endpoint.quota")

_LOCK_SECONDS: Final = 30.0
_LOCK_WAIT: Final = 10.0


def problem_field(document: Mapping[str, Any], problem: Problem) -> str:
    """The field path of ``problem`` in ``document``: its node found by name under ``spec.root``."""
    if problem.path == DOCUMENT:
        return problem.field or "<document>"
    spec = document.get("spec")
    node: Any = spec.get("root") if isinstance(spec, Mapping) else None
    path = "spec.root"
    for name in problem.path.split("/")[1:]:
        children = node.get("children") if isinstance(node, Mapping) else None
        index = next(
            (
                i
                for i, child in enumerate(children if isinstance(children, list) else [])
                if isinstance(child, Mapping) and child.get("name") == name
            ),
            None,
        )
        if index is None:
            return f"spec.root[{problem.path}]" + (f".{problem.field}" if problem.field else "")
        path += f".children[{index}]"
        node = children[index] if isinstance(children, list) else None
    return path + (f".{problem.field}" if problem.field else "")


def tree_status(ledger: Ledger) -> TreeStatus:
    """What the ledger says of each node now (sync: run it in a worker thread)."""
    tree = ledger.tree()
    views = queue_views(ledger)
    paths = tree.paths() if tree is not None else {}
    requested: dict[str, dict[str, int]] = {}
    for record in ledger.pending.records().values():
        chain = paths.get(record.leaf, record.leaf).split("/")
        for node in chain:
            sums = requested.setdefault(node, {})
            for resource, amount in record.request.items():
                sums[resource] = sums.get(resource, 0) + amount
    nodes: list[TreeNodeStatus] = []
    for view in views:
        name = view.path.rsplit("/", 1)[-1]
        nodes.append(
            {
                "name": name,
                "path": view.path,
                "queue": view.name,
                "used": format_amounts(view.used),
                "requested": format_amounts(requested.get(name, {})),
                "admitted": view.admitted,
                "pending": view.pending,
            }
        )
    return {"version": ledger.version(), "nodes": nodes}


def _without_status(obj: Obj) -> Obj:
    body: Obj = clone(obj)
    body.pop("status", None)
    return body


class TreeBackend:
    """The ``Store`` of the ElasticQuotaTree."""

    def __init__(
        self,
        store: AsyncObjects,
        ledger: Ledger,
        client: redis.asyncio.Redis,
        *,
        keys: ApiKeys = DEFAULT_API_KEYS,
    ) -> None:
        self.store = store
        self.ledger = ledger
        self.client = client
        self.keys = keys

    # --- reads: the stored object, status from the ledger ----------------------------------------

    async def _with_status(self, objects: builtins.list[Obj]) -> builtins.list[Obj]:
        if not objects:
            return objects
        status = await asyncio.to_thread(tree_status, self.ledger)
        for obj in objects:
            obj["status"] = clone(status)
        return objects

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        return (await self._with_status([await self.store.get(rt, namespace, name)]))[0]

    async def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> tuple[builtins.list[Obj], str, str | None]:
        items, version, token = await self.store.list(
            rt,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
            continue_token=continue_token,
        )
        return await self._with_status(items), version, token

    async def watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        bookmark_interval: float | None = None,
    ) -> AsyncIterator[WatchEvent]:
        events = self.store.watch(
            rt,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
            bookmark_interval=bookmark_interval,
        )
        try:
            async for shared in events:
                event = shared
                if shared.type in (ADDED, MODIFIED, DELETED):
                    # Watch events are shared and read-only: status goes on a copy.
                    event = WatchEvent(shared.type, (await self._with_status([dict(shared.object)]))[0])
                yield event
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()

    # --- writes --------------------------------------------------------------------------------

    def _check(self, rt: ResourceType, body: Obj) -> tuple[ElasticQuotaTree, builtins.list[Problem]]:
        tree, problems = check(body)
        errors = [p for p in problems if p.severity is Severity.ERROR]
        if tree is None or errors:
            causes = [Cause(problem_field(body, p), str(p)) for p in errors]
            raise invalid(rt, body, causes or [Cause("spec", "the tree did not parse")])
        return tree, [p for p in problems if p.severity is Severity.WARNING]

    async def _only_tree(self, rt: ResourceType, body: Obj) -> None:
        items, _, _ = await self.store.list(rt, None)
        meta = body.get("metadata") or {}
        for item in items:
            other = item["metadata"]
            if (other.get("namespace"), other.get("name")) != (meta.get("namespace"), meta.get("name")):
                where = f"{other.get('namespace') or TREE_NAMESPACE}/{other['name']}"
                raise invalid(
                    rt,
                    body,
                    [
                        Cause(
                            "metadata.name",
                            f"only one ElasticQuotaTree is supported and {where} exists: apply changes to it",
                            "FieldValueForbidden",
                        )
                    ],
                )

    def _apply(self, tree: ElasticQuotaTree) -> tuple[int, builtins.list[Problem]]:
        """Apply to the ledger: its version, and each ``max`` set below what is in use (applied
        with a warning, as Kubernetes' ResourceQuota takes a hard limit below its use)."""
        try:
            applied = self.ledger.apply(tree)
        except TreeInvalid as error:  # checked before; the ledger checks again
            raise Conflict(str(error)) from None
        except ApplyRefused as error:
            raise Conflict(f"the quota ledger refused the tree: {error}") from None
        return applied.version, applied.lowered

    @contextlib.asynccontextmanager
    async def _exclusive(self) -> AsyncIterator[None]:
        lock = self.client.lock(self.keys.tree_lock, timeout=_LOCK_SECONDS, blocking_timeout=_LOCK_WAIT)
        if not await lock.acquire():
            raise Conflict("another ElasticQuotaTree change is in progress; try again")
        try:
            yield
        finally:
            with contextlib.suppress(redis.exceptions.LockError):
                await lock.release()

    def _warn(self, warnings: builtins.list[Problem]) -> None:
        for problem in warnings:
            warn(str(problem))

    async def create(self, rt: ResourceType, obj: Obj, *, dry_run: bool = False) -> Obj:
        body = _without_status(obj)
        tree, warnings = self._check(rt, body)
        async with self._exclusive():
            await self._only_tree(rt, body)
            result = await self.store.create(rt, body, dry_run=True)
            if not dry_run:
                version, lowered = await asyncio.to_thread(self._apply, tree)
                warnings = [*warnings, *lowered]
                result = await self.store.create(rt, body)
                log.info("event=tree_applied version=%d nodes=%d", version, sum(1 for _ in tree.walk()))
        self._warn(warnings)
        return (await self._with_status([result]))[0]

    async def update(
        self, rt: ResourceType, obj: Obj, *, subresource: str | None = None, dry_run: bool = False
    ) -> Obj:
        if subresource is not None:
            raise MethodNotAllowed(f"the status of {rt.qualified} is computed from the quota ledger")
        body = _without_status(obj)
        tree, warnings = self._check(rt, body)
        async with self._exclusive():
            result = await self.store.update(rt, body, dry_run=True)
            if not dry_run:
                version, lowered = await asyncio.to_thread(self._apply, tree)
                warnings = [*warnings, *lowered]
                result = await self.store.update(rt, body)
                log.info("event=tree_applied version=%d nodes=%d", version, sum(1 for _ in tree.walk()))
        self._warn(warnings)
        return (await self._with_status([result]))[0]

    async def delete(
        self, rt: ResourceType, namespace: str | None, name: str, *, dry_run: bool = False
    ) -> Obj:
        raise MethodNotAllowed(
            "the ElasticQuotaTree cannot be deleted while Fleet queues under it; apply a changed tree instead"
        )
