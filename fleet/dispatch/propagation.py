"""Making member copies: the propagation tasks RQ workers run.

Each task re-reads the fleet object and acts only if its attempt is still the current one, so a
task that runs late, twice, or after a dispatcher takeover changes nothing it should not. See
the package docstring for the rules of creation (adopt, replace an older attempt, refuse).

What a member's permanent refusal does depends on whom it is about (:func:`fleet.members.scope_of`):
the job itself (its API server's validation: every member would say the same) fails the job
(``MemberRejected``); the member's own rights, set-up or policy excludes that member for this job
for good, and fails the job when no member is left (``AllMembersRefused``); a passing refusal of
the member's (its namespace being deleted, its ResourceQuota used up) avoids it for a while,
firmly: that exclusion, like the one after a member could not be reached, does not give way when
no other member fits (:mod:`fleet.dispatch.handback`), or the job would loop on the refusal. Any
other error while building or sending one job's copy fails that job (``PropagationFailed``) with
the error; the rest of the batch goes on.

The member calls go to the member's lane, the attempts are claimed while they run
(:mod:`fleet.dispatch.lanes`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Final

import redis

from fleet.dispatch import companions
from fleet.dispatch.context import Context, current, policy_for
from fleet.dispatch.degraded import adopt
from fleet.dispatch.handback import COMPONENT, fail, give_back, inflight_entry
from fleet.dispatch.lanes import LANE_BACKLOG, LANE_WAIT, Claim, lanes
from fleet.jobs import (
    Attempt,
    Change,
    Dispatch,
    Ending,
    FleetReason,
    Phase,
    attempt_of,
    cluster_of,
    condition,
    get_jobs,
    mutate_jobs,
    transition,
)
from fleet.labels import ATTEMPT_LABEL, JOB_UID_LABEL
from fleet.members import (
    BulkheadFull,
    Conflict,
    MemberRefused,
    MemberUnavailable,
    NotFound,
    Scope,
    describe_refusal,
    safe_message,
    scope_of,
)
from fleet.state import record_events
from fleet.timestamps import parse_rfc3339
from fleet.workloads import RUNTIME_KINDS, Dependent, JobRef, is_dependent, job_ref, member_resource

__all__ = [
    "DEFER_SECONDS",
    "EXCLUDE_DEGRADED_SECONDS",
    "EXCLUDE_REFUSED_SECONDS",
    "EXCLUDE_UNAVAILABLE_SECONDS",
    "MEMBER_LAG_SECONDS",
    "Propagation",
    "propagate",
    "propagate_batch",
]

log = logging.getLogger("fleet.dispatch.tasks")

#: How long a member that refused a job for now (its namespace being deleted, its ResourceQuota
#: used up) is avoided for that job. A member that refused it for good is never tried again for it.
EXCLUDE_REFUSED_SECONDS: Final = 60.0
#: How long a member that could not be reached is avoided for that job.
EXCLUDE_UNAVAILABLE_SECONDS: Final = 60.0

#: How long a create that met a slow member (a timeout, its breaker open on timeouts, its
#: bulkhead full) waits before it is sent again (the dispatcher re-sends it when its in-flight
#: deadline, set to this, passes).
DEFER_SECONDS: Final = 5.0
#: How long a create whose member's lane is full waits before it is sent again (:func:`_busy`).
BUSY_SECONDS: Final = LANE_WAIT
#: How long a create for a member this worker does not know yet is sent again before the job
#: is handed back: the kubelet refreshes a mounted Secret within about a minute and a half
#: (its sync period and cache), so every role has read a member added by then.
MEMBER_LAG_SECONDS: Final = 120.0
#: How long a member that stayed degraded past the toleration is avoided by the jobs it lost.
EXCLUDE_DEGRADED_SECONDS: Final = 120.0
_MADE: Final = ("created", "adopted")

#: One attempt to create: (fleet job key, uid, attempt, member, nodes to pin per replica type).
Propagation = tuple[str, str, int, str, Mapping[str, Sequence[str]] | None]


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _wanted(obj: Mapping[str, Any] | None, uid: str, attempt: int, member: str) -> bool:
    """Whether fleet object ``obj`` still wants attempt ``attempt`` of job ``uid`` on ``member``."""
    if obj is None or (obj.get("metadata") or {}).get("uid") != uid:
        return False
    if obj["metadata"].get("deletionTimestamp"):
        return False
    return attempt_of(obj) == attempt and cluster_of(obj) == member


def propagate(
    key: str, uid: str, attempt: int, member: str, pin: Mapping[str, Sequence[str]] | None = None
) -> str:
    """Create attempt ``attempt`` of fleet job ``key`` in ``member``, waiting for the member's
    answer (at most :data:`LANE_WAIT`); returns what it did."""
    return propagate_batch([(key, uid, attempt, member, pin)], wait=LANE_WAIT)[0]


def propagate_batch(items: Sequence[Propagation], *, wait: float = 0.0) -> list[str]:
    """Create the member copies of many attempts; returns what it did for each.

    The dispatcher sends one batch per member per round, so the fleet objects are read in one
    round trip, and the Dispatched marks, in-flight entries and Events written in one pipeline
    each; the member calls (the Kubernetes API creates one object per request) go to the
    member's own lane, up to ``CREATE_CONCURRENCY`` at a time, so a batch waits on the member's
    latency a few times, not once per job.

    The task hands the creates to the lane and returns (after ``wait`` at most; the dispatcher's
    tasks do not wait): a worker takes its next batch while the members answer, so batches queue
    in the members' lanes, each bounded by its member, never behind a worker. A worker runs one
    task at a time, and one that waited for its creates held the next round's batches in the
    queue: 50 ms a task, with members 30 ms away, held admitted jobs a second there at 200
    admissions a second (docs/benchmarks.md). The batch's marks still go out together
    (:class:`_Batch`): the last of its creates to end writes them, or, when one outlasts
    :data:`LANE_WAIT`, a timer writes those that ended and the stragglers are marked as they end
    (:class:`_LateMarks`). What has not ended when the task returns is ``pending`` in its outcomes.

    Once a member cannot be reached, the items not yet started are handed back at once rather
    than each waiting out the retries again; a member that is slow (timeouts, its breaker open on
    timeouts) has its creates deferred, and handed back once it has been degraded longer than the
    job's toleration (:func:`_defer`).
    """
    ctx = current()
    objs = get_jobs(ctx.objects, [item[0] for item in items])
    stale: list[str] = []
    wanted: list[tuple[Propagation, dict[str, Any]]] = []
    for item, obj in zip(items, objs, strict=True):
        key, uid, attempt, member, _ = item
        if obj is None or not _wanted(obj, uid, attempt, member):
            stale.append(inflight_entry(key, uid, attempt))
        else:
            wanted.append((item, obj))
    if stale:
        ctx.client.zrem(ctx.keys.inflight, *stale)
    if not wanted:
        return ["superseded"] * len(items)
    marks = ctx.degraded.current()
    adopt(marks, {name: m.breaker for name, m in ctx.members.items()})
    unreachable: dict[str, MemberUnavailable] = {}
    batch = _Batch(ctx)
    by_key: dict[tuple[str, str, int], str] = {}
    # The creates handed to lanes are claimed until each ends, in the lane if not here.
    claim = Claim(ctx, [])
    busy: list[Propagation] = []
    now = time.time()
    policies = ctx.policies()  # once a batch: whether each job's references go with it
    deps = {item[:3]: policy_for(obj, policies).spec.deps for item, obj in wanted}
    found = companions.fetch(ctx, [obj for item, obj in wanted if deps[item[:3]]])
    handed: list[tuple[Propagation, Future[str]]] = []
    for item, obj in wanted:
        mark = marks.get(item[3])
        if mark is not None and mark.holds(now):  # not called while the fleet avoids it
            by_key[item[:3]] = _defer(ctx, item, obj, f"{item[3]} is degraded: {mark.reason}")
            continue
        entry = inflight_entry(*item[:3])
        claim.add(entry)
        future = lanes().submit(
            item[3],
            functools.partial(_propagate_one, ctx, item, obj, unreachable, deps=deps[item[:3]], found=found),
        )
        if future is None:
            claim.drop(entry)
            busy.append(item)
            by_key[item[:3]] = "deferred"
            continue
        handed.append((item, future))
        future.add_done_callback(functools.partial(_unclaim, claim, entry))
    claim.start()
    _busy(ctx, busy)
    batch.hand(handed, wait=wait)
    ended = batch.outcomes()
    by_key |= {item[:3]: ended.get(item[:3], "pending") for item, _ in handed}
    return [by_key.get(item[:3], "superseded") for item in items]


def _unclaim(claim: Claim, entry: str, _: Future[str]) -> None:
    """A create ended in its lane: its in-flight entry is no longer claimed by this worker."""
    claim.drop(entry)


class _Batch:
    """One task's creates in their lane, and their Dispatched marks written together.

    The marks are written once, by the first of: the create that ends last, the task at the end
    of its wait, a timer :data:`LANE_WAIT` after the hand-off. That write takes what has ended by
    then; a create that ends later is marked through the group commit of late marks
    (:class:`_LateMarks`), as one that outlasted its task always was."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._lock = threading.Lock()
        self._left = 0
        self._ended: dict[tuple[str, str, int], tuple[Propagation, str]] = {}
        self._writing = False
        self._written = threading.Event()
        self._all_ended = threading.Event()
        self._timer: threading.Timer | None = None

    def hand(self, handed: Sequence[tuple[Propagation, Future[str]]], *, wait: float) -> None:
        """Follow ``handed`` (their creates submitted) for ``wait`` at most: when all of them
        end within it, their marks are written when this returns."""
        if not handed:
            return
        with self._lock:
            self._left = len(handed)
        for item, future in handed:
            future.add_done_callback(functools.partial(self._ended_one, item))
        if self._all_ended.wait(min(wait, LANE_WAIT)) or wait >= LANE_WAIT:
            self.write()
            return
        with self._lock:
            if self._writing:
                return
            self._timer = threading.Timer(LANE_WAIT - wait, self._write_quietly)
            self._timer.daemon = True
            self._timer.name = "batch-marks"
        self._timer.start()

    def outcomes(self) -> dict[tuple[str, str, int], str]:
        """What each create that ended before the marks were written did; the rest ``pending``."""
        with self._lock:
            return {ident: outcome for ident, (_, outcome) in self._ended.items()}

    def write(self) -> None:
        """Write the marks of what has ended (once; a second caller waits for the first)."""
        with self._lock:
            first = not self._writing
            self._writing = True
            made = [ended for ended in self._ended.values() if ended[1] in _MADE]
            timer, self._timer = self._timer, None
        if not first:
            self._written.wait()
            return
        if timer is not None:
            timer.cancel()
        try:
            _mark_dispatched(self.ctx, made)
        finally:
            self._written.set()

    def _write_quietly(self) -> None:
        try:
            self.write()
        except Exception:  # Redis away: the syncer sees the copies and marks them, or in-flight resends
            log.exception("event=batch_marks_failed jobs=%d", len(self._ended))

    def _ended_one(self, item: Propagation, future: Future[str]) -> None:
        outcome = "failed" if future.exception() is not None else future.result()
        with self._lock:
            self._left -= 1
            late = self._writing
            if not late:
                self._ended[item[:3]] = (item, outcome)
            last = self._left == 0
        if late:
            if outcome in _MADE:
                _late_marks(self.ctx).put(item, outcome)
            return
        if last:
            self._all_ended.set()
            self._write_quietly()


class _LateMarks:
    """The Dispatched marks of creates that finished after their task stopped waiting, written
    together (a group commit): the lane thread that finds none being written writes what has
    gathered, and again until nothing is left; the others only add theirs. Under load most
    creates outlast :data:`LANE_WAIT` (their lane still holds earlier batches' creates), and
    marked one at a time they cost a job write, an in-flight ZREM and an Event write each."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._lock = threading.Lock()
        self._items: list[tuple[Propagation, str]] = []
        self._writing = False

    def put(self, item: Propagation, outcome: str) -> None:
        with self._lock:
            self._items.append((item, outcome))
            if self._writing:
                return  # the writer takes it in its next round
            self._writing = True
        while True:
            with self._lock:
                done, self._items = self._items, []
                if not done:
                    self._writing = False
                    return
            try:
                _mark_dispatched(self.ctx, done)
            except Exception:  # Redis away: the syncer sees the copies and marks them, or in-flight resends
                log.exception("event=late_marks_failed jobs=%d first=%s", len(done), done[0][0][0])


#: Per context (by id), its group commit while a writer holds it: one that nobody is writing
#: through is let go, and the next late mark starts another.
_LATE: weakref.WeakValueDictionary[int, _LateMarks] = weakref.WeakValueDictionary()
_LATE_LOCK = threading.Lock()


def _late_marks(ctx: Context) -> _LateMarks:
    """The group commit of ``ctx``'s late marks (a worker has one context)."""
    with _LATE_LOCK:
        marks = _LATE.get(id(ctx))
        if marks is None or marks.ctx is not ctx:
            marks = _LATE[id(ctx)] = _LateMarks(ctx)
        return marks


def _busy(ctx: Context, items: Sequence[Propagation]) -> None:
    """Creates whose member's lane is full (a burst, not a slow member: that one is degraded
    and deferred by :func:`_defer`): sent again once the lane has drained a good part of its
    backlog, in one write. A full lane of :data:`LANE_BACKLOG` creates drains in well under a
    second at a member's usual latency; waiting :data:`DEFER_SECONDS` for it held a burst's
    admitted jobs (and their quota) for seconds each."""
    if not items:
        return
    again = time.time() + BUSY_SECONDS
    ctx.client.zadd(
        ctx.keys.inflight, {inflight_entry(key, uid, attempt): again for key, uid, attempt, _, _ in items}
    )
    log.info(
        "event=deferred jobs=%d first=%s members=%s again_in=%.1f why=%r",
        len(items),
        items[0][0],
        ",".join(sorted({item[3] for item in items})),
        BUSY_SECONDS,
        f"{LANE_BACKLOG} creates waiting in the lane already",
    )


def _defer(ctx: Context, item: Propagation, obj: Mapping[str, Any], why: str) -> str:
    """A create its member is too slow for now: sent again later, or, once the member has been
    degraded (:mod:`fleet.dispatch.degraded`) longer than the job's toleration, handed back to
    be placed elsewhere, as a NotReady member's jobs are. A create that timed out may have been
    applied: the syncer sees such a copy and purges it as stale, by the job's purgeMode."""
    key, uid, attempt, member, _ = item
    now = time.time()
    mark = ctx.degraded.get(member, fresh=True)
    failover = policy_for(obj, ctx.policies()).spec.failover.application
    toleration = float(failover.decision_conditions.toleration_seconds)
    if mark is not None and now - mark.since > toleration:
        outcome = give_back(
            ctx,
            key,
            Attempt(uid, attempt, member, state=Phase.ADMITTED),  # only while no copy was seen
            reason=FleetReason.MEMBER_DEGRADED,
            message=(
                f"{member} has been degraded for {now - mark.since:.0f}s, its calls timing out "
                f"(toleration {toleration:g}s)"
            ),
            ending=Ending(exclude_for=EXCLUDE_DEGRADED_SECONDS),
        )
        if outcome.changed:
            log.warning("event=degraded_failover job=%s attempt=%d member=%s", key, attempt, member)
            return "replanned"
        return "superseded"  # its copy was seen meanwhile, or another task ended the attempt
    delay = DEFER_SECONDS
    if mark is not None:  # not past the toleration's end
        delay = min(delay, max(0.5, mark.since + toleration - now + 0.25))
    ctx.client.zadd(ctx.keys.inflight, {inflight_entry(key, uid, attempt): now + delay})
    log.info(
        "event=deferred job=%s attempt=%d member=%s again_in=%.1f why=%r", key, attempt, member, delay, why
    )
    return "deferred"


def _known_later(ctx: Context, item: Propagation, obj: Mapping[str, Any], error: LookupError) -> bool:
    """Whether this worker knows the job's member after reading its kubeconfig again; ``False``:
    not yet, the create is to be sent again later. Each role reads the members' Secret as its own
    pod's copy is refreshed (the kubelet's sync period), so a dispatcher may place a job on a
    member added a minute before this worker sees it. Raises ``MemberUnavailable`` (the job is
    handed back) after :data:`MEMBER_LAG_SECONDS` in Admitted: the member may be gone instead."""
    member = item[3]
    ctx.refresh_members()
    if member in ctx.members:
        return True
    since = parse_rfc3339((condition(obj, Phase.ADMITTED) or {}).get("lastTransitionTime"))
    if since is not None and time.time() - since.timestamp() < MEMBER_LAG_SECONDS:
        return False
    raise MemberUnavailable(member, "create_job", str(error)) from None


def _propagate_one(
    ctx: Context,
    item: Propagation,
    obj: dict[str, Any],
    unreachable: dict[str, MemberUnavailable],
    *,
    deps: bool = False,
    found: companions.Found | None = None,
) -> str:
    key, uid, attempt, member, pin = item
    ref = job_ref(key)
    body: dict[str, Any] = obj
    try:
        if member in unreachable:
            raise unreachable[member]
        try:
            client = ctx.member(member)
        except LookupError as error:
            if not _known_later(ctx, item, obj, error):
                return _defer(ctx, item, obj, str(error))
            client = ctx.member(member)
        body = ref.adapter.member_copy(obj, uid, attempt, pin=pin)
        if is_dependent(ref.adapter):  # before the job: it cannot run without them
            _dependencies(client, ref.adapter, obj)
        if deps:  # before the job: its pods need them to start
            held = companions.push(ctx, client, obj, found=found)
            if held:
                annotations = body.setdefault("metadata", {}).setdefault("annotations", {})
                annotations[companions.COMPANIONS_ANNOTATION] = ",".join(held)
        return _create(client, ref, body, uid=uid, attempt=attempt)
    except MemberRefused as error:
        return _refused(ctx, item, str(body.get("kind") or ""), error)
    except MemberUnavailable as error:
        if member not in unreachable:
            log.warning(
                "event=member_unavailable job=%s attempt=%d member=%s error=%r",
                key,
                attempt,
                member,
                str(error),
            )
        unreachable[member] = error
        if error.timed_out or isinstance(error, BulkheadFull):
            return _defer(ctx, item, obj, safe_message(error))
        give_back(
            ctx,
            key,
            Attempt(uid, attempt, member),
            reason=FleetReason.MEMBER_UNAVAILABLE,
            message=f"{member} could not be reached ({safe_message(error)})",
            ending=Ending(exclude_for=EXCLUDE_UNAVAILABLE_SECONDS, gives_way=False),
        )
        return "unavailable"
    except redis.RedisError:
        # The fleet's own store is away (a restart, a Sentinel failover): not the job's fault.
        # The task fails and the propagation is sent again once its claim lapses.
        raise
    except Exception as error:  # building or sending this job's copy failed: the job, not the batch
        log.exception("event=propagation_failed job=%s attempt=%d member=%s", key, attempt, member)
        what = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        fail(
            ctx,
            key,
            Attempt(uid, attempt, member),
            reason=FleetReason.PROPAGATION_FAILED,
            message=f"the copy of the job for {member} could not be made: {what}"[:1024],
        )
        return "failed"


def _dependencies(client: Any, adapter: Dependent, obj: Mapping[str, Any]) -> None:
    """Create in the member what the job needs first (a TrainJob's training runtime); one the
    member already has is left as it is (Karmada's ``conflictResolution: Abort``)."""
    served = {rt.kind: rt for rt in RUNTIME_KINDS if rt.namespaced}
    for dep in adapter.dependencies(obj):
        rt = served.get(str(dep.get("kind")))
        if rt is None:
            continue
        with contextlib.suppress(Conflict):
            client.create_job(member_resource(rt), str(dep["metadata"]["namespace"]), dep)


def _refused(ctx: Context, item: Propagation, kind: str, error: MemberRefused) -> str:
    """Act on a member's permanent refusal by whom it is about (see the module docstring)."""
    key, uid, attempt, member, _ = item
    said = describe_refusal(error)
    scope = scope_of(error, kind=kind)
    # The whole answer in the log; the job's condition and Event get it without addresses.
    log.info(
        "event=refused job=%s attempt=%d member=%s scope=%s error=%r", key, attempt, member, scope, str(error)
    )
    if scope is Scope.JOB:
        fail(
            ctx,
            key,
            Attempt(uid, attempt, member),
            reason=FleetReason.MEMBER_REJECTED,
            message=f"{member} rejected the job itself, as every member would: {said}",
        )
        return "rejected"
    give_back(
        ctx,
        key,
        Attempt(uid, attempt, member),
        reason=FleetReason.MEMBER_REFUSED,
        message=f"{member} refused the job: {said}",
        ending=Ending(
            exclude_for=EXCLUDE_REFUSED_SECONDS if scope is Scope.MEMBER_FOR_NOW else 0.0,
            gives_way=False,
            refused=said if scope is Scope.MEMBER else None,
        ),
    )
    return "refused"


def _create(client: Any, ref: JobRef, body: dict[str, Any], *, uid: str, attempt: int) -> str:
    namespace, name = ref.names
    kind = member_resource(ref.adapter.resource)
    for _ in range(3):
        try:
            client.create_job(kind, namespace, body)
            return "created"
        except Conflict:
            try:
                existing = client.get_job(kind, namespace, name)
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
            client.delete_job(kind, namespace, name, uid=existing["metadata"]["uid"])
    raise MemberUnavailable(client.name, "create_job", "the old copy of this job is still being deleted")


def _mark_dispatched(ctx: Context, done: Sequence[tuple[Propagation, str]]) -> None:
    """Mark the created (or adopted) copies Dispatched on their fleet objects, at once."""
    if not done:
        return
    changes = []
    messages = []
    for (key, uid, attempt, member, _), outcome in done:
        verb = "adopted the existing copy" if outcome == "adopted" else "created"
        message = f"{verb} in {member} (attempt {attempt})"
        reason = FleetReason.ADOPTED if outcome == "adopted" else FleetReason.DISPATCHED
        messages.append(message)
        changes.append((key, _dispatched(uid, attempt, reason, message)))
    stored = mutate_jobs(ctx.objects, changes)
    ctx.client.zrem(ctx.keys.inflight, *(inflight_entry(i[0], i[1], i[2]) for i, _ in done))
    events = []
    for ((key, _, attempt, member, _), outcome), obj, message in zip(done, stored, messages, strict=True):
        log.info("event=%s job=%s attempt=%d member=%s", outcome, key, attempt, member)
        if obj is not None:
            events.append((obj, str(FleetReason.DISPATCHED), message))
    record_events(ctx.objects, events, component=COMPONENT)


def _dispatched(uid: str, attempt: int, reason: str, message: str) -> Change:
    """Admitted to Dispatched (:class:`fleet.jobs.Dispatch`); nothing when the syncer mirrored
    the copy already (its Dispatched condition included)."""
    return transition(Dispatch(reason, message), Attempt(uid, attempt))
