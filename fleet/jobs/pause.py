"""Holding a job back at the fleet, for the kinds with a switch for it
(:class:`~fleet.workloads.base.Pausable`): T9k's pause mode and Kubeflow's suspend, one mechanism.

T9k's seeds: in pause mode a job's replicas are deleted (or never created), and a user may flip
``spec.runMode.pause.enabled`` at any time. Kubeflow's training operator
(``pkg/controller.v1/common/job.go``, ``ReconcileJobs``) and MPI operator
(``pkg/controller/mpi_job_controller.go``): a job with ``spec.runPolicy.suspend`` has no pods
(they are deleted, ``replicaStatuses`` active 0) and the condition ``Suspended`` (reason
``<Kind>Suspended``); turned off, the condition turns False (``<Kind>Resumed``) and the pods are
made again. Kueue uses that same field as its admission gate (``kubernetes-sigs/kueue``,
``pkg/controller/jobframework/reconciler.go``, ``ReconcileGenericJob``): a suspended job runs
only once its Workload is admitted, and a job that stops being active has its admission cleared,
its quota released. Fleet is the queue here, so a job held by its switch holds nothing at the
fleet either:

* submitted held, it is stored in its kind's held state (``Paused``, ``Suspended``: its adapter's
  :attr:`~fleet.workloads.base.Pausable.held_state`) and not queued;
* held while ``Queued``, it leaves its queue; while ``Admitted``, ``Dispatched`` or running in a
  member, its quota is given back at once and the fleet object stops naming the member: the
  syncer then deletes the member copy at once whatever the purge mode (the copy is recorded in
  :attr:`~fleet.state.dispatch_keys.DispatchKeys.held`), and drops its capacity hold. A member copy is
  never suspended in place: Fleet holds the job, the member no longer has it;
* released (the switch off again), it is ``Queued`` again on its leaf, with the priority
  recorded at its submission, and goes through admission and placement like any job (a new
  attempt);
* a finished job keeps its state: the switch is stored and changes nothing.

The switch is the only part of the spec an update may change (:func:`switched`); any other
difference is refused as before, since the spec is what was queued and charged. Metadata
follows the rules of every job (:mod:`fleet.jobs.updates`).

An update stores the switch, then the state, then gives back or takes the quota: three writes.
A process that dies between them leaves a switch whose state does not match it, or a state
whose ledger entry does not; the dispatcher's reconcile brings both back in line
(:func:`converge`, and its release of a held job the ledger still holds), so the job neither
runs on held nor stays held once released.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet.apiserver import Obj, ResourceType
from fleet.jobs.conditions import current_state
from fleet.jobs.fleet_status import attempt_of, last_cluster_of, status_of
from fleet.jobs.lifecycle import Hold, Resume, step
from fleet.jobs.phases import FINISHED, HELD, FleetReason
from fleet.jobs.store import job_kind
from fleet.jobs.submit import COMPONENT, enqueue, job_key
from fleet.state import DispatchKeys, Objects, record_event
from fleet.workloads import Pausable, adapter_for, is_pausable
from queues import Ledger

__all__ = [
    "LAST_APPLIED",
    "SpecChanged",
    "apply",
    "converge",
    "held_entry",
    "held_message",
    "mark_paused",
    "parse_held_entry",
    "pausable",
    "pause_field",
    "paused_at_submission",
    "switch_out_of_step",
    "switched",
]


#: ``kubectl apply``'s record of what it applied: it changes with every apply, so it may change
#: when a user flips the pause switch by applying the job's file again.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


class SpecChanged(ValueError):
    """An update changes more of the spec than the pause switch."""


def _pausable(obj: Mapping[str, Any]) -> Pausable | None:
    adapter = adapter_for(obj)
    return adapter if is_pausable(adapter) else None


def held_message(adapter: Pausable) -> str:
    """Why a held job waits, naming its switch (the message of its held state)."""
    return (
        f"{adapter.held_state.lower()}: {adapter.pause_field} is true, so it is not admitted: no member "
        "copy, no replicas, no quota held until it is set to false"
    )


def switched(current: Mapping[str, Any], new: Mapping[str, Any]) -> bool | None:
    """What an update does to the switch: None (spec unchanged), True (hold), False (release).
    :class:`SpecChanged` when the spec changes otherwise, or the kind has no switch."""
    if new.get("spec") == current.get("spec"):
        return None
    adapter = _pausable(current)
    if adapter is None or adapter.without_pause_switch(new) != adapter.without_pause_switch(current):
        field = adapter.pause_field if adapter is not None else "the pause switch"
        raise SpecChanged(f"only {field} may change after submission")
    before, after = adapter.paused(current), adapter.paused(new)
    return None if before == after else after


def pausable(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj``'s kind has a switch (its owners may then update it: the switch only)."""
    return _pausable(obj) is not None


def pause_field(obj: Mapping[str, Any]) -> str | None:
    """Where ``obj``'s kind has its switch, or None when it has none."""
    adapter = _pausable(obj)
    return adapter.pause_field if adapter is not None else None


def paused_at_submission(obj: Mapping[str, Any]) -> bool:
    """Whether a job being submitted is held by its switch (stored held, not queued)."""
    adapter = _pausable(obj)
    return adapter is not None and adapter.paused(obj)


def hold(adapter: Pausable) -> Hold:
    """The transition that holds a job in ``adapter``'s kind's word, no longer naming a member
    (the copy's attempt is over, and with it what the copy's status said)."""
    return Hold(adapter.held_state, adapter.held_reason, held_message(adapter))


def mark_paused(obj: dict[str, Any], adapter: Pausable) -> None:
    """Hold ``obj`` (a job being submitted, not stored yet) in its kind's word."""
    status = step(obj, hold(adapter))
    if status is not None:
        obj["status"] = status


def held_entry(member: str, key: str, uid: str, attempt: int) -> str:
    """The record, in :attr:`fleet.state.dispatch_keys.DispatchKeys.held`, of the copy in ``member``
    of attempt ``attempt`` of held job ``key`` (uid ``uid``), for the syncer to purge."""
    return f"{member}|{key}|{uid}|{attempt}"


def parse_held_entry(raw: bytes | str) -> tuple[str, str, str, int] | None:
    """``(member, job key, uid, attempt)`` of a :func:`held_entry`; None when it is not one."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    parts = text.split("|")
    if len(parts) != 4 or not parts[3].isdigit():
        return None
    return parts[0], parts[1], parts[2], int(parts[3])


def switch_out_of_step(obj: Mapping[str, Any]) -> bool | None:
    """Whether a stored job's switch and state disagree: True (the switch holds it, the state
    does not), False (the state holds it, the switch no longer does), None (they agree, the job
    has no switch, is finished or is being deleted)."""
    adapter = _pausable(obj)
    state = current_state(obj)
    if adapter is None or state in FINISHED or (obj.get("metadata") or {}).get("deletionTimestamp"):
        return None
    switch, held = adapter.paused(obj), state in HELD
    return None if switch == held else switch


def apply(
    objects: Objects, ledger: Ledger, rt: ResourceType, current: Obj, new: Obj, *, pause: bool
) -> Obj | None:
    """Store ``new`` (whose switch differs from ``current``'s) and hold or release the job."""
    meta = current["metadata"]
    namespace, name = meta.get("namespace"), str(meta["name"])
    stored = objects.mutate(rt, namespace, name, lambda _: new, subresource=None, current=current)
    if stored is None or meta.get("deletionTimestamp"):
        return stored
    return _follow_switch(objects, ledger, rt, stored, pause=pause)


def converge(objects: Objects, ledger: Ledger, obj: Obj) -> Obj | None:
    """Bring a stored job's state in line with its switch, as :func:`apply` would have after
    storing it (a process died between the switch and the state): hold it, giving its quota
    back, or queue it again. Nothing when they agree; returns the job as stored after."""
    pause = switch_out_of_step(obj)
    if pause is None:
        return obj
    return _follow_switch(objects, ledger, job_kind(adapter_for(obj)), obj, pause=pause)


def _follow_switch(
    objects: Objects, ledger: Ledger, rt: ResourceType, stored: Obj, *, pause: bool
) -> Obj | None:
    """Make the state of ``stored`` (switch already stored) what ``pause`` says, then release or
    queue it in the ledger and record the Event. Idempotent: a job already in that state, or
    finished, or of another uid, is left as it is."""
    adapter = _pausable(stored)
    if adapter is None:
        return stored
    meta = stored["metadata"]
    namespace, name, uid = meta.get("namespace"), str(meta["name"]), meta.get("uid")
    key = job_key(stored)
    acted: list[str] = []

    def change(obj: dict[str, Any]) -> dict[str, Any] | None:
        acted.clear()
        if obj["metadata"].get("uid") != uid:
            return None
        event = hold(adapter) if pause else Resume(f"resumed: waiting in queue {status_of(obj).get('queue')}")
        status = step(obj, event)
        if status is None:
            return None
        obj["status"] = status
        acted.append(last_cluster_of(obj) or "")
        return obj

    result = objects.mutate(rt, namespace, name, change, current=stored)
    if result is None or not acted:
        return result
    if pause and acted[0]:  # its copy there goes at once (the syncer purges it)
        entry = held_entry(acted[0], key, str(uid), attempt_of(result))
        objects.client.sadd(DispatchKeys.within(objects.keys).held, entry)  # the objects' deployment
    if pause:
        ledger.release(key)  # out of its queue, or its admitted usage returned: idempotent
        where = f" (its copy in {acted[0]} is deleted)" if acted[0] else ""
        message = f"{held_message(adapter)}{where}"
        reason = adapter.held_reason
    else:
        enqueue(ledger, result)
        message = f"resumed: waiting in queue {status_of(result).get('queue')}"
        reason = FleetReason.RESUMED
    record_event(objects, result, type="Normal", reason=reason, message=message, component=COMPONENT)
    return result
