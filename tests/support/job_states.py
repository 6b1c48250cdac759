"""A fleet job put in a state by hand, through the state machine's own transitions: for tests that
need a job as a role would leave it (admitted to a member, its copy created, running there, held)
without running that role. Each helper changes ``obj`` (a stored job, or one about to be) in place
and returns it; the transitions' guards are not asked (a test says where the job is)."""

from __future__ import annotations

from typing import Any

from fleet.jobs import Admit, Dispatch, FleetReason, Hold, Mirror, Phase, Submit, attempt_of, step
from fleet.jobs.lifecycle import Transition
from fleet.workloads import WorkloadStatus

__all__ = ["admit", "dispatch", "enter", "hold", "run"]


def _apply(obj: dict[str, Any], event: Transition) -> dict[str, Any]:
    status = step(obj, event)
    assert status is not None, f"{type(event).__name__} does not apply to {obj.get('status')}"
    obj["status"] = status
    return obj


def admit(
    obj: dict[str, Any], member: str, *, attempt: int | None = None, message: str | None = None
) -> dict[str, Any]:
    """Admitted to ``member`` as attempt ``attempt`` (the next one by default)."""
    status = obj.setdefault("status", {})
    if not status.get("conditions"):  # never submitted: queued first
        _apply(obj, Submit(str(status.get("queue") or "root")))
    attempt = attempt_of(obj) + 1 if attempt is None else attempt
    uid = str((obj.get("metadata") or {}).get("uid") or "uid")
    return _apply(obj, Admit(member, attempt, f"{uid}/{attempt}", message or f"placed on {member}"))


def dispatch(obj: dict[str, Any], message: str = "created") -> dict[str, Any]:
    """Its copy created (from Admitted)."""
    return _apply(obj, Dispatch(FleetReason.DISPATCHED, message))


def run(obj: dict[str, Any], member: str, state: str = "Running") -> dict[str, Any]:
    """Its copy reporting ``state`` (from Admitted or Dispatched)."""
    condition = {"type": state, "status": "True", "reason": state, "message": f"{state} in {member}"}
    seen = WorkloadStatus(state=state, reason=state, message=None, conditions=[condition])
    return _apply(obj, Mirror(seen, member, attempt_of(obj)))


def hold(obj: dict[str, Any], state: str = Phase.PAUSED, message: str = "held") -> dict[str, Any]:
    """Held by its kind's switch (``Paused``, ``Suspended``)."""
    reason = FleetReason.PAUSED if state == Phase.PAUSED else FleetReason.SUSPENDED
    return _apply(obj, Hold(state, reason, message))


def enter(obj: dict[str, Any], state: str, member: str = "member-1") -> dict[str, Any]:
    """``state`` by the way a job gets there: Admitted, Dispatched, a member's state, held."""
    if state == Phase.ADMITTED:
        return admit(obj, member)
    if state == Phase.DISPATCHED:
        return dispatch(admit(obj, member))
    if state in (Phase.PAUSED, Phase.SUSPENDED):
        return hold(obj, state)
    return run(admit(obj, member), member, state)
