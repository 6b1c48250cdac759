"""The PriorityClass backend: the checks kube-apiserver makes against other objects, then storage.

The serving core has already run :func:`fleet.endpoint.validation.validate_priority_class` (the
object on its own, ``ValidatePriorityClass``). What needs the stored objects is here, each rule
as Kubernetes has it:

* Defaulting (``SetDefaults_PriorityClass``, ``pkg/apis/scheduling/v1/defaults.go``): a class
  without ``preemptionPolicy`` gets ``PreemptLowerPriority``, on create and on update (so an
  update that leaves the field out keeps the default rather than changing it).
* Update (``ValidatePriorityClassUpdate``): ``value`` may not change (``value: Forbidden: may not
  be changed in an update.``), nor ``preemptionPolicy`` (``preemptionPolicy: Invalid value:
  "Never": field is immutable``): 422 Invalid. ``globalDefault`` and ``description`` may.
* One default (the Priority admission plugin's ``validatePriorityClass``,
  ``plugin/pkg/admission/priority/admission.go``): creating a class with ``globalDefault: true``
  while any class is the default, or marking a class default while another one is, is 403
  Forbidden, ``PriorityClass <other> is already marked as default. Only one default can exist``.
  The Status also names the field (``globalDefault``) in its causes. As in Kubernetes the check
  reads the classes, then writes: two replicas racing may both pass, and resolution then takes
  the default with the lowest value (:func:`fleet.jobs.priority.global_default`), as the plugin
  does.

Deleting a class is always allowed and changes nothing for the jobs that were resolved through
it: their priority was recorded at submission (:mod:`fleet.jobs.priority`).
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Sequence
from typing import Any

from fleet.apiserver import Cause, Forbidden, Obj, ResourceType, WatchEvent, clone, update_target
from fleet.endpoint.errors import invalid
from fleet.endpoint.validation import forbidden, immutable
from fleet.jobs import PREEMPT_LOWER_PRIORITY, ClassInfo, global_default
from fleet.state import AsyncObjects

__all__ = ["PriorityClassBackend", "refused"]


def refused(rt: ResourceType, name: str, reason: str, causes: Sequence[Cause] = ()) -> Forbidden:
    """The 403 an admission plugin answers (``admission.NewForbidden``): ``<resource> "<name>" is
    forbidden: <reason>``, with ``causes`` naming the fields when there are any."""
    return Forbidden(
        f'{rt.qualified} "{name}" is forbidden: {reason}',
        causes=list(causes),
        details={"name": name, "group": rt.group, "kind": rt.plural},
    )


def _defaulted(obj: Obj) -> Obj:
    body: Obj = clone(obj)
    if body.get("preemptionPolicy") is None:
        body["preemptionPolicy"] = PREEMPT_LOWER_PRIORITY
    return body


class PriorityClassBackend:
    """The ``Store`` of the fleet's PriorityClasses."""

    def __init__(self, store: AsyncObjects) -> None:
        self.store = store

    async def _one_default(self, rt: ResourceType, body: Obj, *, creating: bool) -> None:
        if body.get("globalDefault") is not True:
            return
        items, _, _ = await self.store.list(rt, None)
        current = global_default(c for c in (ClassInfo.of(item) for item in items) if c is not None)
        name = str(body["metadata"].get("name") or "")
        if current is not None and (creating or current.name != name):
            reason = f"PriorityClass {current.name} is already marked as default. Only one default can exist"
            raise refused(rt, name, reason, [forbidden("globalDefault", reason)])

    async def create(self, rt: ResourceType, obj: Obj, *, dry_run: bool = False) -> Obj:
        body = _defaulted(obj)
        await self._one_default(rt, body, creating=True)
        return await self.store.create(rt, body, dry_run=dry_run)

    async def update(
        self, rt: ResourceType, obj: Obj, *, subresource: str | None = None, dry_run: bool = False
    ) -> Obj:
        if subresource is not None:
            return await self.store.update(rt, obj, subresource=subresource, dry_run=dry_run)
        body = _defaulted(obj)
        _, name = update_target(rt, body)
        current = await self.store.get(rt, None, name)
        causes: list[Cause] = []
        if body.get("value") != current.get("value"):
            causes.append(forbidden("value", "may not be changed in an update."))
        policy: Any = body.get("preemptionPolicy")
        if policy != (current.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY):
            causes.append(immutable("preemptionPolicy", policy))
        if causes:
            raise invalid(rt, body, causes)
        await self._one_default(rt, body, creating=False)
        return await self.store.update(rt, body, dry_run=dry_run)

    # --- the rest: storage ----------------------------------------------------------------------

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        return await self.store.get(rt, namespace, name)

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
        return await self.store.list(
            rt,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
            continue_token=continue_token,
        )

    async def delete(
        self, rt: ResourceType, namespace: str | None, name: str, *, dry_run: bool = False
    ) -> Obj:
        return await self.store.delete(rt, namespace, name, dry_run=dry_run)

    def watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        bookmark_interval: float | None = None,
    ) -> AsyncIterator[WatchEvent]:
        return self.store.watch(
            rt,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
            bookmark_interval=bookmark_interval,
        )
