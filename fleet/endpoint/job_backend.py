"""The backend of every job kind: submission goes through :mod:`fleet.jobs`; everything else is storage.

``create`` is how a job is accepted (see :mod:`fleet.jobs.submit`): :func:`~fleet.jobs.submit.prepare`
validates it with its workload adapter (each ``FieldError`` one 422 cause), resolves its quota
leaf (:meth:`queues.ElasticQuotaTree.leaf_for`: a namespace no tree node binds is a 422 naming
it, whatever the labels say; a quota label naming no leaf is a 422 naming the label; a quota
label naming a leaf that the tree does not make available in the job's namespace is a 403
Forbidden naming the label and the node, its cause the label's field, as an admission plugin
refuses), resolves its priority through the fleet's PriorityClasses (:mod:`fleet.jobs.priority`;
a class that does not exist is refused as Kubernetes' Priority admission plugin refuses a pod:
403 Forbidden, ``no PriorityClass with name <name> was found``, after the field
``spec.runPolicy.schedulingPolicy.priorityClass``, which the Status's causes name too; a priority
the job writes itself above the cap an admin set where it runs, or above 1,000,000,000, is a 403
naming its field too: :func:`fleet.jobs.priority.check_written`) and sets
its first status (``Queued``, the resolved priority) and the finalizer; the ledger's own argument
checks (priority range, request) run too, so that nothing that the ledger would refuse is ever
stored. Then the object is stored (``AsyncObjects``; ``AlreadyExists`` is a 409) and queued on its
leaf, and a ``Submitted`` Event is recorded. A process that dies between storing and queueing
loses nothing: the dispatcher's reconcile queues a stored job that the ledger lacks. A dry run
makes every one of these decisions and stops after the store's own dry run.

A ``Queued`` job read by name carries ``status.position`` and ``status.blocker``, computed at that
moment and never stored (see :mod:`fleet.endpoint.computed`): ``kubectl describe acjob NAME`` shows
where it stands in its leaf's queue and exactly what holds it. Lists and watches return the
stored objects, so their cost does not grow with the number of waiting jobs.

The ledger is synchronous (``redis.Redis``); its calls run in worker threads, off the event loop.

Status is Fleet's: the dispatcher and syncers write it through :class:`fleet.state.Objects`;
through the API only an admin may (the authorizer refuses the subresource to users). The spec
is what was queued and charged, so an update may change metadata but not the spec (delete and
submit again), except for the switch of a kind that has one (T9k's pause, Kubeflow's suspend:
:mod:`fleet.jobs.pause`: holding gives back the job's quota and member copy, releasing queues it
again). Of the metadata, what Fleet owns stays (:mod:`fleet.jobs.updates`: its finalizer, its
labels and annotations, the quota label): an update that would change it is a 422 naming each
field, whoever sends it; the job's owners may change the rest (their labels, annotations and
finalizers), as RBAC's ``update`` allows. ``delete``
marks the job (its finalizer holds it until the syncer has released its
quota and purged its member copy, then the object goes).
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import redis

from fleet.apiserver import Cause, NotFound, Obj, ResourceType, Timeout, WatchEvent, update_target
from fleet.endpoint.computed import waiting_fields, without_waiting_fields
from fleet.endpoint.errors import invalid
from fleet.endpoint.keys import DEFAULT_API_KEYS, ApiKeys
from fleet.endpoint.priority_classes import refused
from fleet.jobs import (
    HELD,
    PRIORITY_ANNOTATION,
    Durability,
    NotDurable,
    Phase,
    Prepared,
    PriorityClassNotFound,
    PriorityNotAllowed,
    SpecChanged,
    apply_pause,
    current_state,
    mark_paused,
    metadata_refusals,
    pause_field,
    paused_at_submission,
    prepare,
    priority_classes,
    queue_accepted,
    queue_source,
    switched,
)
from fleet.state import AsyncObjects, Objects
from fleet.workloads import InvalidWorkload, UnknownKind, adapter_for, is_pausable, job_ref
from queues import InvalidRequest, Ledger, QuotaNotAvailable, UnboundJob, request_args, score_of

__all__ = ["JobBackend"]

log = logging.getLogger("fleet.endpoint.job_backend")


def _quota_field(obj: Mapping[str, Any], error: UnboundJob) -> tuple[str, str]:
    """The field a quota refusal names, and its message: the namespace, the quota label, or, for
    a job that names its queue with Kueue's label or in its spec (:func:`fleet.jobs.queue_source`),
    that label or field when the quota label came from it."""
    if error.label is None:
        return "metadata.namespace", str(error)
    own = (obj.get("metadata") or {}).get("labels") or {}
    source = queue_source(obj)
    if error.label not in own and source is not None:
        where, queue = source
        return where, f"{where}={queue!r} names the job's quota leaf: {error}"
    return f"metadata.labels[{error.label}]", str(error)


class JobBackend:
    """The ``Store`` of the fleet's jobs, of every kind.

    With a ``durability`` that waits (:mod:`fleet.jobs.durability`), a submission is answered
    only once Redis confirmed its writes durable; a Redis failure while queueing is then a 504,
    not a deferred queueing, since the stored object itself may not have survived.
    """

    def __init__(
        self,
        store: AsyncObjects,
        ledger: Ledger,
        objects: Objects,
        *,
        durability: Durability | None = None,
        keys: ApiKeys = DEFAULT_API_KEYS,
    ) -> None:
        self.store = store
        self.ledger = ledger
        self.objects = objects
        self.classes = priority_classes(objects)
        self.durability = durability or Durability()
        self.keys = keys

    # --- submission ----------------------------------------------------------------------------

    def admission(self, rt: ResourceType, obj: Mapping[str, Any]) -> Prepared:
        """Every check a submission makes after the serving core's (the adapter's rules, the
        quota leaf and label, the PriorityClass, the ledger's arguments), raising the same
        errors, without storing anything: what the ``explain`` subresource asks
        (:mod:`fleet.endpoint.explain`). Synchronous: call it in a worker thread."""
        return self._prepare(rt, obj)

    def _prepare(self, rt: ResourceType, obj: Mapping[str, Any]) -> Prepared:
        try:
            prepared = prepare(obj, self.ledger, self.classes)
        except PriorityClassNotFound as error:
            name = str((obj.get("metadata") or {}).get("name") or "")
            reason = f"{error.field}: {error}"
            raise refused(rt, name, reason, [Cause(error.field, str(error), "FieldValueNotFound")]) from None
        except PriorityNotAllowed as error:
            name = str((obj.get("metadata") or {}).get("name") or "")
            reason = f"{error.field}: {error}"
            raise refused(rt, name, reason, [Cause(error.field, str(error), "FieldValueForbidden")]) from None
        except InvalidWorkload as error:
            raise invalid(rt, dict(obj), [Cause(e.path, e.message, e.reason) for e in error.errors]) from None
        except UnknownKind as error:
            raise invalid(rt, dict(obj), [Cause("kind", str(error), "FieldValueNotSupported")]) from None
        except QuotaNotAvailable as error:
            name = str((obj.get("metadata") or {}).get("name") or "")
            field, message = _quota_field(obj, error)
            raise refused(rt, name, message, [Cause(field, message, "FieldValueForbidden")]) from None
        except UnboundJob as error:
            field, message = _quota_field(obj, error)
            raise invalid(rt, dict(obj), [Cause(field, message)]) from None
        try:
            score_of(prepared.priority)
        except InvalidRequest as error:
            field = f"metadata.annotations[{PRIORITY_ANNOTATION}]"
            raise invalid(rt, dict(obj), [Cause(field, str(error))]) from None
        try:
            request_args(prepared.request)
        except InvalidRequest as error:
            raise invalid(rt, dict(obj), [Cause("spec", str(error))]) from None
        return prepared

    def _queue(self, prepared: Prepared, stored: Obj) -> None:
        durable = self.durability.waits
        try:
            queue_accepted(self.objects, self.ledger, prepared, stored)
        except (redis.ConnectionError, redis.TimeoutError) as error:
            if durable:  # the create itself may be lost with the Redis that failed
                raise self._not_acknowledged(prepared, f"Redis failed while queueing it: {error}") from None
            # Stored, hence accepted: the dispatcher's reconcile queues it.
            log.warning("event=enqueue_deferred job=%s error=%r", prepared.key, error)
        if durable:
            try:
                self.durability.confirm(self.objects.client, self.keys.durability_marker)
            except NotDurable as error:
                raise self._not_acknowledged(prepared, str(error)) from None

    def _not_acknowledged(self, prepared: Prepared, why: str) -> Timeout:
        ref = job_ref(prepared.key)
        log.warning("event=submission_not_durable job=%s error=%r", prepared.key, why)
        return Timeout(
            f"the job {prepared.key} was stored but not confirmed durable ({why}); it may exist: "
            "get it before submitting it again",
            details={"name": ref.name, "kind": ref.adapter.plural, "retryAfterSeconds": 1},
        )

    def _accept(self, rt: ResourceType, obj: Obj) -> Obj:
        """A submission's steps with Redis, one after the other in one worker thread (one hop
        off the event loop, not one per step): checked and prepared, stored (through the sync
        store, the same write script as ``AsyncObjects``), then queued with its Submitted Event."""
        prepared = self._prepared(rt, obj)
        # Handed over, not copied: prepare() made its top level and metadata, and what is under
        # them was decoded for this request alone (a whole copy was 4% of the API's CPU).
        stored = self.objects.create(rt, prepared.obj, copy=False)
        if current_state(stored) in HELD:
            log.info("event=submitted_held job=%s leaf=%s", prepared.key, prepared.leaf)
            return stored
        self._queue(prepared, stored)
        log.info("event=submitted job=%s leaf=%s priority=%d", prepared.key, prepared.leaf, prepared.priority)
        return stored

    def _prepared(self, rt: ResourceType, obj: Obj) -> Prepared:
        prepared = self._prepare(rt, obj)
        adapter = adapter_for(prepared.obj)
        if is_pausable(adapter) and paused_at_submission(prepared.obj):
            # Stored held, not queued (fleet.jobs.pause).
            mark_paused(prepared.obj, adapter)
        return prepared

    async def create(self, rt: ResourceType, obj: Obj, *, dry_run: bool = False) -> Obj:
        if dry_run:
            prepared = await asyncio.to_thread(self._prepared, rt, obj)
            return await self.store.create(rt, prepared.obj, dry_run=True)
        return await asyncio.to_thread(self._accept, rt, obj)

    # --- the rest: storage ----------------------------------------------------------------------

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        """The stored job; a ``Queued`` one with its position and blocker computed now
        (:func:`fleet.endpoint.computed.waiting_fields`; a list or a watch never computes them)."""
        obj = await self.store.get(rt, namespace, name)
        if current_state(obj) != Phase.QUEUED:
            return obj
        try:
            fields = await asyncio.to_thread(waiting_fields, self.ledger, obj)
        except redis.RedisError as error:
            # The object is what was asked for; its computed fields are a courtesy.
            log.warning("event=waiting_fields_failed namespace=%s name=%s error=%r", namespace, name, error)
            return obj
        if not fields:
            return obj
        # Stored objects are shared, never changed in place.
        return {**obj, "status": {**(obj.get("status") or {}), **fields}}

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

    async def update(
        self, rt: ResourceType, obj: Obj, *, subresource: str | None = None, dry_run: bool = False
    ) -> Obj:
        if subresource is None:
            namespace, name = update_target(rt, obj)
            current = await self.store.get(rt, namespace, name)
            switch = pause_field(current)
            try:
                pause = switched(current, obj)
            except SpecChanged:
                may = f" (a job of this kind may flip {switch})" if switch else ""
                raise invalid(
                    rt,
                    obj,
                    [
                        Cause(
                            "spec",
                            "field is immutable: the job was queued and charged with this spec; "
                            f"delete it and submit it again{may}",
                            "FieldValueForbidden",
                        )
                    ],
                ) from None
            refusals = metadata_refusals(current, obj)
            if refusals:
                raise invalid(rt, obj, [Cause(r.field, r.message, "FieldValueForbidden") for r in refusals])
            if pause is not None and not dry_run:
                stored = await asyncio.to_thread(
                    apply_pause, self.objects, self.ledger, rt, current, obj, pause=pause
                )
                if stored is None:
                    raise NotFound(f'{rt.plural}.{rt.group} "{name}" not found')
                return stored
        if subresource == "status":
            obj = without_waiting_fields(obj)  # computed on read, never stored
        return await self.store.update(rt, obj, subresource=subresource, dry_run=dry_run)

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
