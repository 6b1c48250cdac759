"""The fleet endpoint's ``Store``: one backend per kind behind the serving core's protocol.

The serving core stays generic (decoding, validation hooks, dry run, patches, Tables, watch
streaming, Status errors); what is particular to Fleet sits behind :class:`FleetStore`, which
hands each call to the backend of the call's kind (by storage identity, ``(group, plural)``)
and every other kind to the plain object store. It also turns a lost Redis connection into a
503 ``ServiceUnavailable`` that clients retry, instead of a 500.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Mapping

from fleet.apiserver import Obj, ResourceType, Store, WatchEvent
from fleet.endpoint.errors import redis_unavailable

__all__ = ["FleetStore"]


class FleetStore:
    """``Store`` that routes by kind: ``backends[rt.key]``, else ``default``."""

    def __init__(self, default: Store, backends: Mapping[tuple[str, str], Store]) -> None:
        self.default = default
        self.backends = dict(backends)

    def backend(self, rt: ResourceType) -> Store:
        return self.backends.get(rt.key, self.default)

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        with redis_unavailable():
            return await self.backend(rt).get(rt, namespace, name)

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
        with redis_unavailable():
            return await self.backend(rt).list(
                rt,
                namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=limit,
                continue_token=continue_token,
            )

    async def create(self, rt: ResourceType, obj: Obj, *, dry_run: bool = False) -> Obj:
        with redis_unavailable():
            return await self.backend(rt).create(rt, obj, dry_run=dry_run)

    async def update(
        self, rt: ResourceType, obj: Obj, *, subresource: str | None = None, dry_run: bool = False
    ) -> Obj:
        with redis_unavailable():
            return await self.backend(rt).update(rt, obj, subresource=subresource, dry_run=dry_run)

    async def delete(
        self, rt: ResourceType, namespace: str | None, name: str, *, dry_run: bool = False
    ) -> Obj:
        with redis_unavailable():
            return await self.backend(rt).delete(rt, namespace, name, dry_run=dry_run)

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
        events = self.backend(rt).watch(
            rt,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
            bookmark_interval=bookmark_interval,
        )
        try:
            while True:
                with redis_unavailable():
                    try:
                        event = await events.__anext__()
                    except StopAsyncIteration:
                        return
                yield event
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()
