"""The work that touches member clusters, run by RQ workers: create and purge member copies.

Each task re-reads the fleet object and acts only if its attempt is still the current one, so a
task that runs late, twice, or after a dispatcher takeover changes nothing it should not. See
the package docstring for the rules of creation (adopt, replace an older attempt, refuse).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from fleet.api.kinds import FLEET_ASCENDJOB
from fleet.dispatch.context import Context, current
from fleet.dispatch.handback import COMPONENT, clear_inflight, give_back
from fleet.jobs.phases import FleetReason, Phase
from fleet.jobs.status import attempt_of, cluster_of, current_state, set_state
from fleet.jobs.submit import split_key
from fleet.members import Conflict, MemberRefused, MemberUnavailable, NotFound
from fleet.state import record_event
from fleet.workloads import adapter_for
from fleet.workloads.labels import ATTEMPT_LABEL, JOB_UID_LABEL

__all__ = ["EXCLUDE_REFUSED_SECONDS", "EXCLUDE_UNAVAILABLE_SECONDS", "propagate", "purge"]

log = logging.getLogger("fleet.dispatch.tasks")

#: How long a member that refused a job (422, 403, a name taken) is avoided for that job.
EXCLUDE_REFUSED_SECONDS: Final = 3600.0
#: How long a member that could not be reached is avoided for that job.
EXCLUDE_UNAVAILABLE_SECONDS: Final = 60.0


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _current(ctx: Context, key: str, uid: str, attempt: int, member: str) -> dict[str, Any] | None:
    """The fleet object when ``attempt`` on ``member`` is still what it wants; else None."""
    namespace, name = split_key(key)
    obj = ctx.objects.try_get(FLEET_ASCENDJOB, namespace, name)
    if obj is None or (obj.get("metadata") or {}).get("uid") != uid:
        return None
    if obj["metadata"].get("deletionTimestamp"):
        return None
    if attempt_of(obj) != attempt or cluster_of(obj) != member:
        return None
    return obj


def propagate(
    key: str, uid: str, attempt: int, member: str, pin: Mapping[str, Sequence[str]] | None = None
) -> str:
    """Create attempt ``attempt`` of fleet job ``key`` in ``member``; returns what it did."""
    ctx = current()
    obj = _current(ctx, key, uid, attempt, member)
    if obj is None:
        clear_inflight(ctx, key, uid, attempt)
        return "superseded"
    namespace, name = split_key(key)
    body = adapter_for(obj).member_copy(obj, uid, attempt, pin=pin)
    client = ctx.member(member)
    try:
        outcome = _create(client, namespace, name, body, uid=uid, attempt=attempt)
    except MemberRefused as error:
        give_back(
            ctx,
            key,
            uid,
            attempt,
            member=member,
            reason=FleetReason.MEMBER_REFUSED,
            message=f"{member} refused the job: {error.code} {error.reason}: {error.message}",
            exclude_for=EXCLUDE_REFUSED_SECONDS,
            count_failure=False,
        )
        return "refused"
    except MemberUnavailable as error:
        give_back(
            ctx,
            key,
            uid,
            attempt,
            member=member,
            reason=FleetReason.MEMBER_UNAVAILABLE,
            message=f"{member} could not be reached: {error}",
            exclude_for=EXCLUDE_UNAVAILABLE_SECONDS,
            count_failure=False,
        )
        return "unavailable"
    _mark_dispatched(ctx, key, uid, attempt, member=member, outcome=outcome)
    return outcome


def _create(client: Any, namespace: str, name: str, body: dict[str, Any], *, uid: str, attempt: int) -> str:
    for _ in range(3):
        try:
            client.create_job(namespace, body)
            return "created"
        except Conflict:
            try:
                existing = client.get_job(namespace, name)
            except NotFound:
                continue  # deleted meanwhile: create again
            labels = _labels(existing)
            if labels.get(JOB_UID_LABEL) != uid:
                raise MemberRefused(
                    client.name,
                    "create_job",
                    409,
                    "AlreadyExists",
                    f"another job named {namespace}/{name} exists there (not created by this fleet job)",
                ) from None
            if labels.get(ATTEMPT_LABEL) == str(attempt):
                return "adopted"
            # An older attempt of this very job: it goes first (its uid guards its successor).
            client.delete_job(namespace, name, uid=existing["metadata"]["uid"])
    raise MemberUnavailable(client.name, "create_job", "the old copy of this job is still being deleted")


def _mark_dispatched(ctx: Context, key: str, uid: str, attempt: int, *, member: str, outcome: str) -> None:
    namespace, name = split_key(key)
    done = "adopted the existing copy" if outcome == "adopted" else "created"
    message = f"{done} in {member} (attempt {attempt})"

    def change(obj: dict[str, Any]) -> dict[str, Any] | None:
        if (obj.get("metadata") or {}).get("uid") != uid or attempt_of(obj) != attempt:
            return None
        if current_state(obj) != Phase.ADMITTED:
            return None  # the syncer mirrored the copy already (its Dispatched entry included)
        status = obj.setdefault("status", {})
        reason = FleetReason.ADOPTED if outcome == "adopted" else FleetReason.DISPATCHED
        return obj if set_state(status, Phase.DISPATCHED, reason, message) else None

    stored = ctx.objects.mutate(FLEET_ASCENDJOB, namespace, name, change)
    clear_inflight(ctx, key, uid, attempt)
    log.info("event=%s job=%s attempt=%d member=%s", outcome, key, attempt, member)
    if stored is not None:
        record_event(ctx.objects, stored, reason=FleetReason.DISPATCHED, message=message, component=COMPONENT)


def purge(member: str, namespace: str, name: str, uid: str, attempt: int) -> str:
    """Delete the copy of fleet job uid ``uid``, attempt ``attempt``, from ``member``, if it is there.

    A copy of another attempt or job is never touched. Raises ``MemberUnavailable`` (RQ retries)
    when the member cannot be reached: a stale copy is also purged when its member returns.
    """
    ctx = current()
    client = ctx.member(member)
    try:
        existing = client.get_job(namespace, name)
    except NotFound:
        return "absent"
    labels = _labels(existing)
    if labels.get(JOB_UID_LABEL) != uid or labels.get(ATTEMPT_LABEL) != str(attempt):
        return "not ours"
    try:
        client.delete_job(namespace, name, uid=existing["metadata"]["uid"])
    except Conflict:
        return "replaced"
    log.info("event=purged member=%s job=%s/%s attempt=%d", member, namespace, name, attempt)
    obj = ctx.objects.try_get(FLEET_ASCENDJOB, namespace, name)
    if obj is not None and (obj.get("metadata") or {}).get("uid") == uid:
        record_event(
            ctx.objects,
            obj,
            reason=FleetReason.PURGED,
            message=f"deleted the copy of attempt {attempt} from {member}",
            component=COMPONENT,
        )
    return "purged"
