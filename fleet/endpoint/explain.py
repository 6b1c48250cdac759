"""The ``explain`` subresource of every job kind: would the fleet accept this job, admit it, and
where would it fit now? (``fleet explain``, the console's job page.)

``POST /apis/<group>/<version>/namespaces/<ns>/<plural>/<name>/explain`` sends a job; the serving
core decodes, checks and validates it exactly as a create (``fieldValidation``, the kind's schema:
an unknown field is the same 400, a bad field the same 422), then :meth:`Explainer.explain_new`
runs the submission's own checks (:meth:`fleet.endpoint.job_backend.JobBackend.admission`: the
adapter's rules, the namespace's quota leaf, the quota label, the PriorityClass: the same 422 or
403), so a job the endpoint would refuse is refused here, with the same Status. ``GET`` on the
subresource explains a stored job (:meth:`Explainer.explain_stored`). Nothing is stored, queued
or reserved. The authorizer treats the subresource as a read of the namespace's jobs, so a
tenant's token is enough (:mod:`fleet.endpoint.auth`).

The answer is an ``Explanation`` (``fleet.io/v1alpha1``), named after the job::

    status:
      verdict: Fits            # Fits | Waits | NeverAdmitted | NeverFits
      message: fits now on member-2 (pack), 2nd of 2 in queue root-child-2
      queue: root-child-2
      position: 2 of 2 in queue root-child-2   # where it stands (or would stand, queued now)
      quota: quota admits it now               # or the refusal, or "can never be admitted: ..."
      policy: ClusterPropagationPolicy gang    # the policy that governs it ("" for the default)
      placement: {member: member-2, strategy: pack, nodes: [{node: n1, replicaType: Master, pods: 1}]}
      members:
      - {name: member-1, ready: "True", fits: false, never: true, message: "can never fit ..."}
      capacityObservedTime: ...                # the oldest capacity record the answer used

Every part comes from what the roles keep in Redis, never from calling members: the quota from
the ledger (:func:`queues.job_wait`, :func:`queues.job_would_wait`: the admission script's own
refusal, and whether a ``max`` of the chain is smaller than the job), the capacity from the
records the dispatcher's feed writes node by node (:mod:`fleet.placement.snapshot`), member health
from the syncer's records (:mod:`fleet.state.member_health`), the governing policy from the stored
PropagationPolicies (:func:`fleet.policy.select_policy`). The fit and the words are placement's
(:class:`fleet.placement.Placer`, :func:`fleet.placement.explain_members`,
:func:`fleet.placement.say_avoided`), and the members the job may not use are those the
dispatcher leaves out: NotReady ones, those that refused it, its firm exclusions and the
policy's suspended clusters; its other exclusions give way when nothing else fits, as in the
dispatcher (``Dispatcher._admit``). Members the dispatcher marks degraded (timing out) are not
known here (their record is the dispatch roles'), so they may be named as fitting.

Verdicts: ``NeverAdmitted`` when a ``max`` of its quota chain is smaller than the job (no
release will admit it); ``NeverFits`` when no member could take it even with all its nodes free;
``Waits`` when the quota or the capacity holds it now (or its policy suspends dispatching);
``Fits`` when the quota admits it now and a member has room (jobs ahead in its queue may still
go first: ``position`` says how many).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, Literal, NotRequired, TypedDict

import redis

from fleet.apiserver import Obj
from fleet.jobs import (
    Phase,
    Prepared,
    avoidance_of,
    current_state,
    job_key,
    refused_of,
    status_of,
)
from fleet.kinds import EXPLAIN, FLEET_JOB_KINDS, POLICY_KINDS
from fleet.placement import (
    Demand,
    MemberCapacity,
    Placement,
    Placer,
    Strategy,
    explain_members,
    load_nodes,
    never_fits,
    say_avoided,
)
from fleet.policy import ClusterAffinity, PropagationPolicy, default_policy, select_policy
from fleet.state import (
    CAPACITY_OBSERVED,
    DispatchKeys,
    Objects,
    parse_capacity_nodes,
    parse_health,
    parse_taints,
)
from fleet.timestamps import rfc3339
from fleet.workloads import InvalidWorkload, UnknownKind, stored_demand
from queues import Ledger, Waiting, job_wait, job_would_wait

__all__ = [
    "API_VERSION",
    "EXPLANATION_KIND",
    "Explainer",
    "ExplanationStatus",
    "MemberAnswer",
    "Verdict",
]

API_VERSION: Final = f"{EXPLAIN.group}/{EXPLAIN.version}"
EXPLANATION_KIND: Final = EXPLAIN.kind

Verdict = Literal["Fits", "Waits", "NeverAdmitted", "NeverFits"]

#: The policy of a job no policy selects (the dispatcher's default, :mod:`fleet.dispatch.context`).
_DEFAULT_POLICY: Final = default_policy([(rt.api_version, rt.kind) for rt in FLEET_JOB_KINDS])


class MemberAnswer(TypedDict):
    """One member: its health and what placement says of the job there."""

    name: str
    #: The member's Ready condition: ``True``, ``False`` or ``Unknown`` (never probed).
    ready: str
    fits: bool
    #: It could not take the job even with all its nodes free.
    never: bool
    message: str


class NodeRow(TypedDict):
    node: str
    replicaType: str
    pods: int


class PlacementAnswer(TypedDict):
    member: str
    strategy: str
    nodes: list[NodeRow]


class ExplanationStatus(TypedDict):
    verdict: Verdict
    message: str
    queue: str
    position: str
    quota: str
    policy: str
    members: list[MemberAnswer]
    state: NotRequired[str]
    placement: NotRequired[PlacementAnswer]
    capacityObservedTime: NotRequired[str]


def _decide(
    placer: Placer, demand: Demand, strategy: Strategy, affinity: ClusterAffinity, avoid: frozenset[str]
) -> Placement | None:
    return placer.decide(demand, strategy=strategy, affinity=affinity, avoid=avoid)


@dataclass
class _Fit:
    """Placement's part of an answer."""

    placement: Placement | None
    lines: list[str]
    strategy: str
    gave_way: frozenset[str] = frozenset()


def _policies(objects: Objects) -> list[PropagationPolicy]:
    out = []
    for kind in POLICY_KINDS:
        for item in objects.list(kind)[0]:
            try:
                out.append(PropagationPolicy.model_validate(item))
            except ValueError:
                continue  # refused at the API; an old invalid one is ignored, as the dispatcher does
    return out


def _ready(raw: bytes | str | None) -> tuple[str, bool]:
    """The member's Ready status and whether it is NotReady (probed and failing)."""
    record = parse_health(raw)
    if record is None or record.ready is None:
        return "Unknown", False
    return ("True", False) if record.ready else ("False", True)


class Explainer:
    """Explains jobs from the records in one Redis (see the module docstring). Synchronous: the
    API calls it in a worker thread. Loaded capacity records are kept until they change, so an
    explanation costs one read of the records and a fit per member."""

    def __init__(
        self,
        ledger: Ledger,
        objects: Objects,
        client: redis.Redis,
        keys: DispatchKeys,
        members: Callable[[], list[str]],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ledger = ledger
        self.objects = objects
        self.client = client
        self.keys = keys
        self.members = members
        self.clock = clock
        self._loaded: dict[str, tuple[bytes, MemberCapacity, float]] = {}
        # Explaining lays and lifts holds on the loaded summaries: one explanation at a time.
        self._lock = threading.Lock()

    # ---- the two entries ----------------------------------------------------------------------

    def explain_new(self, prepared: Prepared) -> Obj:
        """A job that passed the submission's checks (``prepared``), as if submitted now."""
        wait = job_would_wait(self.ledger, prepared.key, prepared.leaf, prepared.request, prepared.priority)
        return self._answer(prepared.obj, prepared.demand, wait, None)

    def explain_stored(self, obj: Obj) -> Obj:
        """A stored job, as it stands now: a ``Queued`` one with its place and the quota's answer
        (:func:`queues.job_wait`), any other with its state (its quota is in use or released)."""
        state = current_state(obj) or ""
        try:
            demand = stored_demand(obj)  # as the dispatcher reads it
        except (InvalidWorkload, UnknownKind) as error:
            return self._object(
                obj,
                {
                    "verdict": "NeverFits",
                    "message": f"the job is invalid: {error}",
                    "queue": str(status_of(obj).get("queue") or ""),
                    "position": "",
                    "quota": "",
                    "policy": "",
                    "members": [],
                    "state": state,
                },
            )
        wait = job_wait(self.ledger, job_key(obj)) if state == Phase.QUEUED else None
        return self._answer(obj, demand, wait, state)

    # ---- the answer ---------------------------------------------------------------------------

    def _answer(self, obj: Obj, demand: Demand, wait: Waiting | None, state: str | None) -> Obj:
        now = self.clock()
        policies = _policies(self.objects)
        policy = select_policy(obj, policies)
        governing = policy or _DEFAULT_POLICY
        names = list(self.members())
        health: list[Any] = []
        records: list[Any] = []
        if names:
            with self.client.pipeline(transaction=False) as pipe:
                pipe.hmget(self.keys.health, names)
                pipe.hmget(self.keys.capacity_nodes, names)
                pipe.hmget(self.keys.taints, names)
                health, records, taints = pipe.execute()
        else:
            taints = []
        # Cordoned or drained members (a NoSchedule or NoExecute taint) take no new job.
        cordoned = frozenset(name for name, raw in zip(names, taints, strict=True) if parse_taints(raw))
        ready = {name: _ready(raw) for name, raw in zip(names, health, strict=True)}
        down = frozenset(name for name, (_, not_ready) in ready.items() if not_ready)
        observed: list[float] = []
        with self._lock:
            caps = [self._capacity(name, raw, observed) for name, raw in zip(names, records, strict=True)]
            fit = self._fit(
                obj, demand=demand, policy=governing, caps=caps, down=down, cordoned=cordoned, now=now
            )
        members = self._members(names, ready, fit.lines)
        quota = ""
        if wait is not None:
            admits = wait.refusal is None and wait.never is None
            quota = "quota admits it now" if admits else wait.blocker("")
        verdict, message = self._verdict(wait, fit, governing, names, state)
        status: ExplanationStatus = {
            "verdict": verdict,
            "message": message,
            "queue": wait.queue if wait is not None else str(status_of(obj).get("queue") or ""),
            "position": wait.where if wait is not None else "",
            "quota": quota,
            "policy": f"{policy.kind} {policy.metadata.name}" if policy is not None else "",
            "members": members,
        }
        if state is not None:
            status["state"] = state
        if fit.placement is not None:
            status["placement"] = {
                "member": fit.placement.member,
                "strategy": fit.strategy,
                "nodes": [{"node": n, "replicaType": t, "pods": p} for n, t, p in fit.placement.rows],
            }
        if observed:
            status["capacityObservedTime"] = rfc3339(min(observed))
        return self._object(obj, status)

    def _capacity(self, name: str, raw: bytes | str | None, observed: list[float]) -> MemberCapacity:
        """The member's summary from its record (kept while the record is unchanged); an
        unlisted summary when it has none (its capacity is not known yet)."""
        data = raw.encode() if isinstance(raw, str) else raw
        if data is None:
            self._loaded.pop(name, None)
            return MemberCapacity(name, listed=False)
        kept = self._loaded.get(name)
        if kept is not None and kept[0] == data:
            observed.append(kept[2])
            return kept[1]
        record = parse_capacity_nodes(data)
        try:
            cap = load_nodes(name, record) if record is not None else None
        except ValueError:
            cap = None
        if cap is None or record is None:
            return MemberCapacity(name, listed=False)
        stamp = record.get(CAPACITY_OBSERVED)
        when = float(stamp) if isinstance(stamp, int | float) else 0.0
        self._loaded[name] = (data, cap, when)
        observed.append(when)
        return cap

    @staticmethod
    def _fit(
        obj: Obj,
        *,
        demand: Demand,
        policy: PropagationPolicy,
        caps: Sequence[MemberCapacity],
        down: frozenset[str],
        now: float,
        cordoned: frozenset[str] = frozenset(),
    ) -> _Fit:
        """Where the dispatcher would place the job now, and each member's line."""
        refused = refused_of(obj)
        kept_off = avoidance_of(obj, policy, now=now, unusable=down | cordoned)
        affinity = policy.spec.placement.cluster_affinity
        strategy = policy.spec.placement.strategy
        placer = Placer()
        for cap in caps:
            placer.add_member(cap)
        placement, avoid = kept_off.place(partial(_decide, placer, demand, strategy, affinity))
        gave_way = (
            kept_off.excluded & {placement.member}
            if placement is not None and avoid == kept_off.never
            else frozenset()
        )
        lines = explain_members(caps, demand, affinity=affinity, avoid=avoid)
        lines = [say_avoided(line, down, refused, cordoned=cordoned) for line in lines]
        return _Fit(placement, lines, strategy, gave_way)

    @staticmethod
    def _members(
        names: Sequence[str], ready: Mapping[str, tuple[str, bool]], lines: Collection[str]
    ) -> list[MemberAnswer]:
        by_member = {line.split(": ", 1)[0]: line.split(": ", 1)[1] for line in lines}
        answers: list[MemberAnswer] = []
        for name in names:
            message = by_member.get(name, "")
            answers.append(
                {
                    "name": name,
                    "ready": ready.get(name, ("Unknown", False))[0],
                    "fits": message == "fits",
                    "never": never_fits([f"{name}: {message}"]),
                    "message": message,
                }
            )
        return answers

    @staticmethod
    def _verdict(
        wait: Waiting | None, fit: _Fit, policy: PropagationPolicy, names: Sequence[str], state: str | None
    ) -> tuple[Verdict, str]:
        if wait is not None and wait.never is not None:
            return "NeverAdmitted", f"can never be admitted: {wait.never}; it waits for the tree to change"
        if not names:
            return "Waits", "no member cluster is known yet"
        if fit.placement is None:
            if never_fits(fit.lines):
                return "NeverFits", "no member cluster can ever fit the whole job as the fleet is"
            return "Waits", "no member cluster fits the whole job now"
        where = f"fits now on {fit.placement.member} ({fit.strategy})"
        if fit.gave_way:
            where += f"; its exclusion from {fit.placement.member} gives way: no other member fits"
        if policy.spec.suspension.dispatching:
            return "Waits", (
                f"{where}, but {policy.kind} {policy.metadata.name} suspends dispatching "
                "(spec.suspension.dispatching)"
            )
        if wait is not None and wait.refusal is not None:
            return "Waits", f"{where}, but the quota holds it: {wait.refusal}"
        if wait is not None:
            return "Fits", f"{where}; {'it would be ' if state is None else ''}{wait.where}"
        return "Fits", f"{where} (the job is {state or 'stored'})"

    @staticmethod
    def _object(job: Obj, status: ExplanationStatus) -> Obj:
        meta = job.get("metadata") or {}
        return {
            "apiVersion": API_VERSION,
            "kind": EXPLANATION_KIND,
            "metadata": {"name": meta.get("name") or "", "namespace": meta.get("namespace")},
            "spec": {
                "job": {
                    "apiVersion": job.get("apiVersion"),
                    "kind": job.get("kind"),
                    "namespace": meta.get("namespace"),
                    "name": meta.get("name"),
                }
            },
            "status": dict(status),
        }
