"""Pause and resume at the fleet, for the kinds with a pause mode (:class:`~fleet.workloads.base.Pausable`).

T9k's seeds: in pause mode a job's replicas are deleted (or never created), and a user may flip
``spec.runMode.pause.enabled`` at any time. A paused job runs nowhere, so at the fleet it holds
nothing either:

* submitted paused, it is stored ``Paused`` and not queued;
* paused while ``Queued``, it leaves its queue; while ``Admitted``, ``Dispatched`` or running in
  a member, its quota is given back at once and the fleet object stops naming the member: the
  syncer then deletes the member copy whatever the purge mode, and drops its capacity hold
  (:meth:`fleet.dispatch.syncer.Syncer`, stale copies);
* resumed (the switch off again), it is ``Queued`` again on its leaf, with the priority recorded
  at its submission, and goes through admission and placement like any job (a new attempt);
* a finished job keeps its state: the switch is stored and changes nothing.

The switch is the only part of the spec an update may change (:func:`switched`); any other
difference is refused as before, since the spec is what was queued and charged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet.apiserver.resources import Obj, ResourceType
from fleet.jobs.phases import FINISHED, FleetReason, Phase
from fleet.jobs.status import current_state, set_state
from fleet.jobs.submit import COMPONENT, enqueue, job_key
from fleet.state import Objects, record_event
from fleet.workloads import adapter_for
from fleet.workloads.base import MIRRORED_FIELDS, Pausable
from queues import Ledger

__all__ = [
    "LAST_APPLIED",
    "PAUSED_MESSAGE",
    "SpecChanged",
    "apply",
    "mark_paused",
    "metadata_changed",
    "pausable",
    "paused_at_submission",
    "switched",
]

PAUSED_MESSAGE = "paused: its replicas are removed and its quota is given back until it is resumed"


#: ``kubectl apply``'s record of what it applied: it changes with every apply, so it may change
#: when a user flips the pause switch by applying the job's file again.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


class SpecChanged(ValueError):
    """An update changes more of the spec than the pause switch."""


def _pausable(obj: Mapping[str, Any]) -> Pausable | None:
    adapter = adapter_for(obj)
    return adapter if isinstance(adapter, Pausable) else None


def switched(current: Mapping[str, Any], new: Mapping[str, Any]) -> bool | None:
    """What an update does to the pause switch: None (spec unchanged), True (pause), False
    (resume). :class:`SpecChanged` when the spec changes otherwise, or the kind has no pause."""
    if new.get("spec") == current.get("spec"):
        return None
    adapter = _pausable(current)
    if adapter is None or adapter.without_pause_switch(new) != adapter.without_pause_switch(current):
        raise SpecChanged("only spec.runMode.pause.enabled may change after submission")
    before, after = adapter.paused(current), adapter.paused(new)
    return None if before == after else after


def pausable(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj``'s kind has a pause mode (its owners may then update it: the switch only)."""
    return _pausable(obj) is not None


def metadata_changed(current: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """The metadata field (``labels``, ``annotations``, ``finalizers``, ``ownerReferences``) an
    update of a pausable job changes, or None: its owners may flip the switch and nothing else
    (not the finalizer that holds its quota, not the labels it was queued by)."""
    before, after = current.get("metadata") or {}, new.get("metadata") or {}
    for field in ("labels", "annotations", "finalizers", "ownerReferences"):
        old, now = before.get(field) or {}, after.get(field) or {}
        if field == "annotations" and isinstance(old, Mapping) and isinstance(now, Mapping):
            old = {k: v for k, v in old.items() if k != LAST_APPLIED}
            now = {k: v for k, v in now.items() if k != LAST_APPLIED}
        if old != now:
            return field
    return None


def paused_at_submission(obj: Mapping[str, Any]) -> bool:
    """Whether a job being submitted is paused (stored ``Paused``, not queued)."""
    adapter = _pausable(obj)
    return adapter is not None and adapter.paused(obj)


def mark_paused(status: dict[str, Any]) -> None:
    """Make a status ``Paused``, no longer naming a member (the copy's attempt is over, and with
    it what the copy's status said: its phase, tasks and aggregate)."""
    member = status.pop("cluster", None)
    if member:
        status["lastCluster"] = member
    for key in ("reservation", *MIRRORED_FIELDS):
        status.pop(key, None)
    set_state(status, Phase.PAUSED, FleetReason.PAUSED, PAUSED_MESSAGE)


def apply(
    objects: Objects, ledger: Ledger, rt: ResourceType, current: Obj, new: Obj, *, pause: bool
) -> Obj | None:
    """Store ``new`` (whose switch differs from ``current``'s) and pause or resume the job."""
    meta = current["metadata"]
    namespace, name, uid = meta.get("namespace"), str(meta["name"]), meta.get("uid")
    stored = objects.mutate(rt, namespace, name, lambda _: new, subresource=None, current=current)
    if stored is None or meta.get("deletionTimestamp"):
        return stored
    key = job_key(stored)
    acted: list[str] = []

    def change(obj: dict[str, Any]) -> dict[str, Any] | None:
        acted.clear()
        state = current_state(obj)
        if obj["metadata"].get("uid") != uid or state in FINISHED or obj["metadata"].get("deletionTimestamp"):
            return None
        status = obj.setdefault("status", {})
        if pause and state != Phase.PAUSED:
            mark_paused(status)
        elif not pause and state == Phase.PAUSED:
            set_state(
                status, Phase.QUEUED, FleetReason.RESUMED, f"resumed: waiting in queue {status.get('queue')}"
            )
        else:
            return None
        acted.append(str(status.get("lastCluster") or ""))
        return obj

    result = objects.mutate(rt, namespace, name, change, current=stored)
    if result is None or not acted:
        return result
    if pause:
        ledger.release(key)  # out of its queue, or its admitted usage returned: idempotent
        where = f" (its copy in {acted[0]} is deleted)" if acted[0] else ""
        message = f"{PAUSED_MESSAGE}{where}"
    else:
        enqueue(ledger, result)
        message = f"resumed: waiting in queue {(result.get('status') or {}).get('queue')}"
    reason = FleetReason.PAUSED if pause else FleetReason.RESUMED
    record_event(objects, result, type="Normal", reason=reason, message=message, component=COMPONENT)
    return result
