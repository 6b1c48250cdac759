"""The simulated ascend-operator and volcano scheduler of one member, as one in-process controller.

It watches the member's store directly (same event loop as the API server) and works in ticks:

1. a new AscendJob is validated (``Failed``/``JobValidFailed`` when unusable), its pods are
   created (``Created``/``JobCreated``) and it joins the scheduling queue, oldest first;
2. when something changed (a new job, a node, a pod that went away or finished), the queue is
   scheduled against one snapshot of the member with :func:`fleet.sim.scheduler.schedule_pods`:
   a gang that fits is bound at once (``Running``); the pods of one that does not get
   ``PodScheduled`` False, reason ``Unschedulable``, with the scheduler's explanation (as
   Volcano writes it), and an AscendJob stays ``Created``/``PodGroupPending`` (the
   ascend-operator says it on the job; Kubeflow's operators do not);
3. timers finish running jobs: ``Succeeded`` after their duration, or an injected failure that
   ``Restarting`` (pods recreated, the gang scheduled again) until ``backoffLimit``, then
   ``Failed``. A TFJob and an MPIJob follow their own controller's rules instead
   (:class:`fleet.sim.kinds.Rules`: the chief or the launcher decides, restart policies and exit
   codes, a parameter server or the workers serving on until ``cleanPodPolicy``).

Every transition is also an Event on the job, so ``kubectl describe acjob`` tells the story. The
pod cache is fed by the store's watch and by the operator's own writes, newest resourceVersion
wins, so the next job never sees capacity that was just taken.

The operator reads and writes with ``copy=False`` (:meth:`MemoryStore.create`): it reads the
stored objects themselves, read-only, hands each object it built over to the store and gets the
stored one back, so neither costs a copy. It never changes an object it read: a change is a
shallow copy with the changed parts new (``{**pod, "status": ...}``).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from fleet.apiserver import (
    ADDED,
    DELETED,
    EVENT,
    NODE,
    POD,
    AlreadyExists,
    MemoryStore,
    NotFound,
    Obj,
    ResourceType,
)
from fleet.ascend import Condition, Reason
from fleet.sim.devices import DEVICE_ANNOTATION, annotation
from fleet.sim.jobs import (
    BATCH_BACKOFF_LIMIT,
    backoff_limit,
    build_pods,
    clean_pod_policy,
    duration_seconds,
    exit_code,
    job_event,
    job_key,
    launcher_pod_name,
    min_available,
    past_backoff_limit,
    replica_statuses,
    restart_policy,
    restarts,
    restarts_on_failure,
    set_condition,
    state,
    tf_deciding_types,
    tf_succeeded,
    validate_job,
)
from fleet.sim.kinds import SIM_KINDS, Rules, SimKind, sim_kind
from fleet.sim.metrics import SimMetrics
from fleet.sim.predicates import NodeInfo, PodInfo, PodSpecError, node_info, pod_info
from fleet.sim.scheduler import Cluster, schedule_pods
from fleet.sim.topology import Simulation
from fleet.timestamps import now_rfc3339

__all__ = ["Operator"]

log = logging.getLogger("fleet.sim.operator")

_COMPONENT: Final = "ascend-operator"
#: Messages are written for the first kind and spelt for the job's own by :meth:`Operator._transition`.
_KIND_WORD: Final = SIM_KINDS[0].resource.kind
_SCHEDULER: Final = "volcano"
#: The exit code of a pod killed by an injected failure (SIGKILL), for the Kubeflow kinds whose
#: restart rules read it (``ExitCode``: 128 and above is the environment's doing).
KILLED: Final = 137

Key = tuple[str, str]


@dataclass
class _Job:
    key: Key
    uid: str
    created: float
    kind: SimKind = SIM_KINDS[0]
    pods: list[str] = field(default_factory=list)
    need: int = 0
    finish_at: float | None = None
    fail_at: float | None = None
    restarts: int = 0
    pending_message: str = ""
    #: The code its first pod exits with when it fails (its annotation's, else 1).
    exit_code: int = 0

    def reference(self) -> Obj:
        """Enough of the job for an Event's involvedObject, without reading it."""
        meta = {"name": self.key[1], "namespace": self.key[0], "uid": self.uid}
        return {
            "apiVersion": self.kind.resource.api_version,
            "kind": self.kind.resource.kind,
            "metadata": meta,
        }


class Operator:
    """The controllers of one simulated member; :meth:`run` until cancelled."""

    def __init__(
        self,
        store: MemoryStore,
        simulation: Simulation,
        *,
        member: str,
        metrics: SimMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.simulation = simulation
        self.member = member
        self.metrics = metrics
        self.clock = clock
        self._jobs: dict[Key, _Job] = {}
        self._new: list[Key] = []
        self._queue: list[Key] = []  # jobs waiting for their gang, oldest first
        self._running: set[Key] = set()
        self._failures: dict[Key, bool] = {}  # injected: job -> always
        self._nodes: dict[str, tuple[int, NodeInfo]] = {}
        self._pods: dict[Key, tuple[int, PodInfo]] = {}
        self._capacity_changed = True
        # The scheduler's view of the member, kept up to date pod by pod between passes (a node
        # change drops it, the next pass rebuilds it), so a pass costs what its jobs need,
        # not a walk over every node and pod.
        self._cluster: Cluster | None = None
        # When running jobs finish or fail: (due, sequence, job), earliest first. A tick pops what
        # is due instead of looking at every running job.
        self._timers: list[tuple[float, int, Key]] = []
        self._timer_sequence = itertools.count()
        self._tasks: list[asyncio.Task[None]] = []

    # --- public --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the watches and the tick loop; returns once the watches hold the current state."""
        synced = [asyncio.Event() for _ in range(3)]
        self._tasks = [
            asyncio.create_task(self._watch_nodes(synced[0]), name=f"{self.member}-nodes"),
            asyncio.create_task(self._watch_pods(synced[1]), name=f"{self.member}-pods"),
            asyncio.create_task(self._watch_jobs(synced[2]), name=f"{self.member}-jobs"),
        ]
        for event in synced:
            await event.wait()
        self._tasks.append(asyncio.create_task(self._loop(), name=f"{self.member}-operator"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    def fail_job(self, namespace: str, name: str, *, always: bool = False) -> None:
        """Make the job's pod fail once it runs (once, or on every run when ``always``)."""
        key = (namespace, name)
        self._failures[key] = always
        job = self._jobs.get(key)
        if job is not None and key in self._running and job.fail_at is None:
            job.fail_at = self.clock() + self.simulation.failure_delay_seconds
            self._timer(job.fail_at, key)
        log.info("event=fault_armed member=%s job=%s/%s always=%s", self.member, namespace, name, always)

    # --- watches -------------------------------------------------------------------------------

    async def _watch_nodes(self, synced: asyncio.Event) -> None:
        stream = self.store.watch(NODE, None, resource_version=None)
        await self._drain_initial(NODE, synced, self._on_node)
        async for event in stream:
            self._on_node(event.type, event.object)

    async def _watch_pods(self, synced: asyncio.Event) -> None:
        stream = self.store.watch(POD, None, resource_version=None)
        await self._drain_initial(POD, synced, self._on_pod)
        async for event in stream:
            self._on_pod(event.type, event.object)

    async def _watch_jobs(self, synced: asyncio.Event) -> None:
        """Every kind's jobs, one watch each; ``synced`` once each listed what exists."""
        each = [asyncio.Event() for _ in SIM_KINDS]
        watches = [
            asyncio.ensure_future(self._watch_kind(k.resource, e))
            for k, e in zip(SIM_KINDS, each, strict=True)
        ]
        try:
            for event in each:
                await event.wait()
            synced.set()
            await asyncio.gather(*watches)
        finally:
            for watch in watches:
                watch.cancel()

    async def _watch_kind(self, rt: ResourceType, synced: asyncio.Event) -> None:
        stream = self.store.watch(rt, None, resource_version=None)
        await self._drain_initial(rt, synced, self._on_job)
        async for event in stream:
            self._on_job(event.type, event.object)

    async def _drain_initial(
        self, rt: Any, synced: asyncio.Event, handle: Callable[[str, Obj], None]
    ) -> None:
        # The watch with no resourceVersion starts with ADDED for what exists; a list gives the
        # same state at once so that start() can return with the caches filled.
        items, _, _ = await self.store.list(rt, None)
        for item in items:
            handle(ADDED, item)
        synced.set()

    def _on_node(self, kind: str, node: Obj) -> None:
        name = node["metadata"]["name"]
        rv = int(node["metadata"].get("resourceVersion") or 0)
        if rv < self._nodes.get(name, (0, None))[0]:
            return
        if kind == DELETED:
            self._nodes.pop(name, None)
        else:
            self._nodes[name] = (rv, node_info(node))
        self._cluster = None
        self._capacity_changed = True

    def _on_pod(self, kind: str, pod: Obj) -> None:
        meta = pod["metadata"]
        key = (meta.get("namespace") or "default", meta["name"])
        rv = int(meta.get("resourceVersion") or 0)
        known = self._pods.get(key)
        if known is not None and rv < known[0]:
            return  # an older event than what this operator wrote itself
        before = known[1] if known is not None else None
        if kind == DELETED:
            if self._pods.pop(key, None) is not None:
                self._capacity_changed = True
                self._rebind(before, None)
            return
        try:
            info = pod_info(pod)
        except PodSpecError:
            return
        self._pods[key] = (rv, info)
        self._rebind(before, info)
        if info.terminal:
            self._capacity_changed = True

    def _rebind(self, before: PodInfo | None, after: PodInfo | None) -> None:
        """Carry a pod's change of node (or its end) into the kept scheduler view."""
        cluster = self._cluster
        if cluster is None:
            return
        was = before.node_name if before is not None and not before.terminal else None
        now = after.node_name if after is not None and not after.terminal else None
        if was == now:
            return
        if was is not None and before is not None:
            cluster.unbind(before.name, before.namespace, was)
        if now is not None and after is not None:
            cluster.bind(after, now)

    def _on_job(self, kind: str, job: Obj) -> None:
        key = job_key(job)
        uid = job["metadata"].get("uid", "")
        known = self._jobs.get(key)
        if kind == DELETED:
            # Finished jobs are no longer tracked, but their pods still go (ownerReference GC).
            if known is not None and known.uid == uid:
                self._forget(key)
            names = [pod["metadata"]["name"] for pod in build_pods(job)] if validate_job(job) is None else []
            if sim_kind(job).rules is Rules.MPI:  # its launcher's pods have generated names
                self._spawn(self._delete_labelled_pods(key, uid, sim_kind(job).labels[0]))
            self._spawn(self._delete_pods(key, uid, names))
            return
        if known is not None and known.uid == uid:
            return
        if known is not None:  # deleted and created again between two events
            self._forget(key)
        if state(job) in (Condition.SUCCEEDED, Condition.FAILED):
            return
        self._jobs[key] = _Job(key, uid, self.clock(), sim_kind(job))
        self._new.append(key)

    def _timer(self, due: float, key: Key) -> None:
        heapq.heappush(self._timers, (due, next(self._timer_sequence), key))

    def _spawn(self, coroutine: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coroutine)
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)

    def _forget(self, key: Key) -> None:
        self._jobs.pop(key, None)
        self._running.discard(key)
        self._failures.pop(key, None)
        if key in self._queue:
            self._queue.remove(key)
        if key in self._new:
            self._new.remove(key)
        self._capacity_changed = True

    # --- the loop ------------------------------------------------------------------------------

    async def _loop(self) -> None:
        tick = self.simulation.tick_seconds
        while True:
            try:
                await self.reconcile()
            except Exception:
                log.exception("event=reconcile_failed member=%s", self.member)
            await asyncio.sleep(tick)

    async def reconcile(self) -> None:
        """One pass: admit new jobs, schedule the queue when capacity changed, fire due timers."""
        new, self._new = self._new, []
        for key in new:
            await self._admit(key)
        if self._queue and self._capacity_changed:
            self._capacity_changed = False
            await self._schedule()
        now = self.clock()
        while self._timers and self._timers[0][0] <= now:
            key = heapq.heappop(self._timers)[2]
            job = self._jobs.get(key)
            if job is None or key not in self._running:
                continue  # a timer of a job that ended or restarted meanwhile
            if job.fail_at is not None and job.fail_at <= now:
                await self._fail(job)
            elif job.finish_at is not None and job.finish_at <= now:
                await self._succeed(job)
        if self.metrics is not None:
            self.metrics.pending.labels(self.member).set(len(self._queue))
            self.metrics.running.labels(self.member).set(len(self._running))

    # --- steps ---------------------------------------------------------------------------------

    def _kind(self, key: Key) -> SimKind:
        known = self._jobs.get(key)
        return known.kind if known is not None else SIM_KINDS[0]

    async def _job(self, key: Key) -> Obj | None:
        try:
            return await self.store.get(self._kind(key).resource, key[0], key[1], copy=False)
        except NotFound:
            self._forget(key)
            return None

    async def _write_status(self, job: Obj) -> Obj | None:
        try:
            return await self.store.update(sim_kind(job).resource, job, subresource="status", copy=False)
        except NotFound:
            self._forget(job_key(job))
            return None

    async def _transition(
        self, key: Key, kind: str, reason: str, message: str, *, body: Obj | None = None, **extra: Any
    ) -> Obj | None:
        """Set the job's condition (and more status), and record it as an Event.

        ``body``: the job as the caller just read it, to save reading it again (left unchanged).
        """
        job = body if body is not None else await self._job(key)
        if job is None:
            return None
        sim = sim_kind(job)
        reason = sim.reason(reason)
        message = message.replace(_KIND_WORD, sim.resource.kind, 1)
        now = now_rfc3339()
        status = dict(job.get("status") or {})
        status.setdefault("startTime", now)
        changed = set_condition(status, kind, reason, message, now)
        status.update(extra)
        if kind in (Condition.SUCCEEDED, Condition.FAILED):
            status["completionTime"] = now
        written = await self._write_status({**job, "metadata": _unversioned(job), "status": status})
        if written is not None and changed:
            warnings = (Reason.JOB_FAILED, Reason.POD_GROUP_PENDING, Reason.JOB_VALID_FAILED)
            warning = reason in {sim.reason(r) for r in warnings}
            source = _SCHEDULER if reason == Reason.POD_GROUP_PENDING else sim.component
            await self._event(written, "Warning" if warning else "Normal", reason, message, source)
            if self.metrics is not None:
                self.metrics.transitions.labels(self.member, kind).inc()
            log.info(
                "event=job_%s member=%s job=%s/%s reason=%s",
                kind.lower(),
                self.member,
                key[0],
                key[1],
                reason,
            )
        return written

    async def _event(self, job: Obj, kind: str, reason: str, message: str, source: str = _COMPONENT) -> None:
        event = job_event(job, kind, reason, message, source=source, member=self.member)
        with contextlib.suppress(NotFound):
            await self.store.create(EVENT, event, copy=False)

    async def _admit(self, key: Key) -> None:
        job = await self._job(key)
        tracked = self._jobs.get(key)
        if job is None or tracked is None:
            return
        namespace, name = key
        problem = validate_job(job)
        if problem is not None:
            self._forget(key)
            await self._transition(
                key,
                Condition.FAILED,
                Reason.JOB_VALID_FAILED,
                f"Job {namespace}/{name} is invalid: {problem}",
                body=job,
            )
            return
        pods = await self._create_pods(job)
        tracked.pods = [p["metadata"]["name"] for p in pods]
        wanted = min_available(job)
        tracked.need = len(pods) if wanted is None else min(wanted, len(pods))
        if state(job) in (None, Condition.CREATED):
            await self._transition(
                key,
                Condition.CREATED,
                Reason.JOB_CREATED,
                f"{_KIND_WORD} {namespace}/{name} is created.",
                body=job,
            )
        self._queue.append(key)
        self._capacity_changed = True

    async def _create_pods(self, job: Obj) -> list[Obj]:
        pods = build_pods(job)
        for pod in pods:
            pod["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
            try:
                created = await self.store.create(POD, pod, copy=False)
            except AlreadyExists:
                continue
            self._on_pod(ADDED, created)
        return pods

    async def _schedule(self) -> None:
        started = time.perf_counter()
        cluster = self._cluster
        if cluster is None:
            cluster = Cluster.of(
                [info for _, info in self._nodes.values()], [info for _, info in self._pods.values()]
            )
            self._cluster = cluster
        for key in list(self._queue):
            job = self._jobs.get(key)
            if job is None:
                continue
            pods = [self._pods[(key[0], name)][1] for name in job.pods if (key[0], name) in self._pods]
            unbound = [p for p in pods if p.node_name is None and not p.terminal]
            bound = len(pods) - len(unbound)
            need = max(job.need - bound, 1) if bound < job.need else 1
            npu_pods = sum(1 for p in pods if p.npus)
            result = schedule_pods(cluster, unbound, min_available=need, pods_in_job=npu_pods)
            if result.fits:
                # Each written binding reaches the kept view through _on_pod, before the next job;
                # if a node change dropped that view meanwhile, this pass's copy is kept by hand.
                await self._bind(job, result.bindings, result.devices)
                if self._cluster is not cluster:
                    for pod in unbound:
                        if pod.name in result.bindings:
                            cluster.bind(pod, result.bindings[pod.name], result.devices.get(pod.name))
                if bound + len(result.bindings) >= job.need and key not in self._running:
                    await self._start_running(job)
                if bound + len(result.bindings) >= len(job.pods):
                    self._queue.remove(key)
            elif key not in self._running and result.message != job.pending_message:
                job.pending_message = result.message
                await self._unschedulable(key[0], unbound, result.message)
                if job.kind.pending_on_job:
                    message = f"{_KIND_WORD} {key[0]}/{key[1]} is pending: {result.message}"
                    await self._transition(key, Condition.CREATED, Reason.POD_GROUP_PENDING, message)
        if self.metrics is not None:
            self.metrics.schedule_seconds.labels(self.member).observe(time.perf_counter() - started)

    async def _unschedulable(self, namespace: str, pods: list[PodInfo], message: str) -> None:
        """What the scheduler writes on the pods of a gang it cannot place (Volcano's
        ``taskUnschedulable``, kube-scheduler's ``PodReasonUnschedulable``): ``PodScheduled``
        False, reason ``Unschedulable``, with its explanation. Kubeflow's operators say nothing
        on the job: this is all a member shows."""
        now = now_rfc3339()
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": now,
        }
        for info in pods:
            try:
                pod = await self.store.get(POD, namespace, info.name, copy=False)
            except NotFound:
                continue
            status = pod.get("status") or {}
            if status.get("phase", "Pending") != "Pending" or pod["spec"].get("nodeName"):
                continue
            kept = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
            written = {
                **pod,
                "metadata": _unversioned(pod),
                "status": {**status, "conditions": [*kept, condition]},
            }
            with contextlib.suppress(NotFound):
                self._on_pod(ADDED, await self.store.update(POD, written, subresource="status", copy=False))

    async def _bind(
        self, job: _Job, bindings: Mapping[str, str], chosen: Mapping[str, tuple[int, ...]]
    ) -> None:
        namespace = job.key[0]
        placed = []
        for pod_name, node_name in bindings.items():
            try:
                pod = await self.store.get(POD, namespace, pod_name, copy=False)
            except NotFound:
                continue
            node = self._nodes.get(node_name)
            address = node[1].address if node is not None else ""
            meta = _unversioned(pod)
            ids = chosen.get(pod_name)
            if ids:  # the NPUs the plugin picked, as it writes them on the pod
                meta["annotations"] = {**(meta.get("annotations") or {}), DEVICE_ANNOTATION: annotation(ids)}
            bound = {**pod, "metadata": meta, "spec": {**pod["spec"], "nodeName": node_name}}
            pod = await self.store.update(POD, bound, copy=False)
            self._on_pod(ADDED, pod)
            now = now_rfc3339()
            running = {**pod, "status": _running_status(pod, address, now)}
            pod = await self.store.update(POD, running, subresource="status", copy=False)
            self._on_pod(ADDED, pod)
            placed.append(f"{pod_name} -> {node_name}")
        if placed:
            message = f"Bound {len(placed)} pod(s): {', '.join(placed)}"
            await self._event(job.reference(), "Normal", "Scheduled", message, _SCHEDULER)
        if self.metrics is not None:
            self.metrics.pods_bound.labels(self.member).inc(len(placed))
        log.info(
            "event=gang_bound member=%s job=%s/%s pods=%d", self.member, namespace, job.key[1], len(placed)
        )

    async def _start_running(self, job: _Job) -> None:
        body = await self._job(job.key)
        if body is None:
            return
        namespace, name = job.key
        now = self.clock()
        job.finish_at = now + max(duration_seconds(body, self.simulation.job_duration_seconds), 0.0)
        self._timer(job.finish_at, job.key)
        job.exit_code = exit_code(body) or 0
        if job.exit_code:
            job.fail_at = job.finish_at  # its own code fails it when its work is done
        if job.key in self._failures:
            job.fail_at = now + self.simulation.failure_delay_seconds
            self._timer(job.fail_at, job.key)
        job.pending_message = ""
        self._running.add(job.key)
        statuses = replica_statuses(body, await self._job_pods(job))
        await self._transition(
            job.key,
            Condition.RUNNING,
            Reason.JOB_RUNNING,
            f"{_KIND_WORD} {namespace}/{name} is running.",
            body=body,
            replicaStatuses=statuses,
        )

    async def _job_pods(self, job: _Job) -> list[Obj]:
        return await self._owned_pods(job.key[0], job.uid, job.pods)

    async def _owned_pods(self, namespace: str, uid: str, names: list[str]) -> list[Obj]:
        """The named pods that this job (by uid) owns; pod names are fixed, so no list is needed."""
        pods = []
        for name in names:
            try:
                pod = await self.store.get(POD, namespace, name, copy=False)
            except NotFound:
                continue
            if any(o.get("uid") == uid for o in pod["metadata"].get("ownerReferences") or ()):
                pods.append(pod)
        return pods

    async def _finish_pods(self, job: _Job, failed: str | None, code: int = 1) -> list[Obj]:
        """End the job's pods: ``failed`` (a pod name) exits ``code``, the rest succeed (or are killed)."""
        finished = []
        now = now_rfc3339()
        for pod in await self._job_pods(job):
            phase = (pod.get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                finished.append(pod)
                continue
            name = pod["metadata"]["name"]
            if failed is None:
                status = _terminated_status(pod, "Succeeded", 0, "Completed", now)
            elif name == failed:
                status = _terminated_status(pod, "Failed", code, "Error", now)
            else:
                status = _terminated_status(pod, "Failed", 137, "Killed", now)
            ended = {**pod, "metadata": _unversioned(pod), "status": status}
            with contextlib.suppress(NotFound):
                written = await self.store.update(POD, ended, subresource="status", copy=False)
                self._on_pod(ADDED, written)
            finished.append(ended)
        return finished

    async def _succeed(self, job: _Job) -> None:
        if job.kind.rules is Rules.TENSORFLOW:
            await self._succeed_tf(job)
            return
        if job.kind.rules is Rules.MPI:
            await self._succeed_mpi(job)
            return
        namespace, name = job.key
        self._running.discard(job.key)
        pods = await self._finish_pods(job, None)
        body = await self._job(job.key)
        if body is None:
            return
        await self._transition(
            job.key,
            Condition.SUCCEEDED,
            Reason.JOB_SUCCEEDED,
            f"{_KIND_WORD} {namespace}/{name} successfully completed.",
            body=body,
            replicaStatuses=replica_statuses(body, pods),
        )
        self._jobs.pop(job.key, None)
        self._failures.pop(job.key, None)

    async def _fail(self, job: _Job) -> None:
        if job.kind.rules is not Rules.JOB:
            await self._fail_kubeflow(job)
            return
        namespace, name = job.key
        body = await self._job(job.key)
        if body is None:
            return
        always = self._failures.get(job.key, False)
        if not always:
            self._failures.pop(job.key, None)
        job.fail_at = None
        self._running.discard(job.key)
        victim = job.pods[0] if job.pods else ""
        pods = await self._finish_pods(job, victim, job.exit_code or 1)
        statuses = replica_statuses(body, pods)
        limit = backoff_limit(body)
        retry = job.restarts < limit if limit is not None else restarts_on_failure(body)
        if not retry:
            if limit is not None:
                message = f"Job {name} has failed because it has reached the specified backoff limit"
            else:
                message = f"Job {namespace}/{name} has failed because has pod failed."
            await self._transition(
                job.key, Condition.FAILED, Reason.JOB_FAILED, message, replicaStatuses=statuses
            )
            self._jobs.pop(job.key, None)
            self._failures.pop(job.key, None)
            return
        job.restarts += 1
        remain = f", remain retry times is <{limit - job.restarts}>" if limit is not None else ""
        message = f"Job {namespace}/{name} is restarting because pod {victim} failed{remain}."
        await self._transition(
            job.key, Condition.RESTARTING, Reason.JOB_RESTARTING, message, replicaStatuses=statuses
        )
        await self._delete_pods(job.key, job.uid, job.pods)
        await self._create_pods(body)
        job.finish_at = None
        self._queue.append(job.key)
        self._capacity_changed = True

    # --- the TFJob controller's and the MPI operator's rules (fleet.sim.kinds.Rules) ------------

    async def _end_pod(self, pod: Obj, phase: str, code: int, reason: str) -> Obj:
        ended = {
            **pod,
            "metadata": _unversioned(pod),
            "status": _terminated_status(pod, phase, code, reason, now_rfc3339()),
        }
        with contextlib.suppress(NotFound):
            written = await self.store.update(POD, ended, subresource="status", copy=False)
            self._on_pod(ADDED, written)
            return written
        return ended

    async def _restart_in_place(self, pod: Obj) -> None:
        """The kubelet restarting a container whose pod's restartPolicy is OnFailure or Always:
        the pod stays Running, its containers' ``restartCount`` goes up."""
        status = dict(pod.get("status") or {})
        status["containerStatuses"] = [
            {**c, "restartCount": int(c.get("restartCount") or 0) + 1}
            for c in status.get("containerStatuses") or ()
        ]
        with contextlib.suppress(NotFound):
            restarted = {**pod, "metadata": _unversioned(pod), "status": status}
            self._on_pod(ADDED, await self.store.update(POD, restarted, subresource="status", copy=False))

    def _type_of(self, job: _Job, body: Obj, pod: Obj) -> str:
        """The replica type (as the spec writes it) of one of ``job``'s pods, from its label."""
        label = str(((pod.get("metadata") or {}).get("labels") or {}).get(job.kind.labels[1], ""))
        return next((t for t in job.kind.specs(body) if t.lower() == label), label)

    def _deciding_pod(self, job: _Job, body: Obj, pods: list[Obj]) -> Obj | None:
        """The pod whose end decides the job: the MPI launcher; a TFJob's chief (or master), else
        worker 0."""
        wanted: set[tuple[str, str | None]]
        if job.kind.rules is Rules.MPI:
            wanted = {("launcher", None)}
        else:
            wanted = {(t.lower(), "0") for t in tf_deciding_types(body)}
        type_label, index_label = job.kind.labels[1], job.kind.labels[2]
        for pod in pods:
            labels = (pod.get("metadata") or {}).get("labels") or {}
            live = (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            index = None if job.kind.rules is Rules.MPI else labels.get(index_label)
            if live and (labels.get(type_label), index) in wanted:
                return pod
        return None

    async def _clean_up(self, job: _Job, body: Obj, *, workers_only: bool = False) -> None:
        """``runPolicy.cleanPodPolicy`` once the job is finished: All deletes every pod, Running
        the ones still running (or pending), None keeps them (a TFJob's parameter servers, an
        MPIJob's workers serve on). The MPI operator cleans its workers only
        (``cleanUpWorkerPods``)."""
        policy = clean_pod_policy(body)
        if policy not in ("All", "Running"):
            return
        for pod in await self._job_pods(job):
            labels = (pod.get("metadata") or {}).get("labels") or {}
            if workers_only and labels.get(job.kind.labels[1]) != "worker":
                continue
            phase = (pod.get("status") or {}).get("phase")
            if policy == "Running" and phase not in ("Running", "Pending"):
                continue
            with contextlib.suppress(NotFound):
                self._on_pod(DELETED, await self.store.delete(POD, job.key[0], pod["metadata"]["name"]))

    def _forget_finished(self, job: _Job) -> None:
        self._running.discard(job.key)
        self._jobs.pop(job.key, None)
        self._failures.pop(job.key, None)

    async def _succeed_tf(self, job: _Job) -> None:
        """Training is done: every replica but the parameter servers exits 0 (they serve until
        cleaned up); the TFJob controller's rule (:func:`fleet.sim.jobs.tf_succeeded`) then says
        Succeeded, and the active replicas are counted as succeeded."""
        self._running.discard(job.key)
        body = await self._job(job.key)
        if body is None:
            return
        pods = []
        for pod in await self._job_pods(job):
            live = (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            training = live and self._type_of(job, body, pod) != "PS"
            pods.append(await self._end_pod(pod, "Succeeded", 0, "Completed") if training else pod)
        if not tf_succeeded(body, pods):
            return  # not the controller's success (a worker 0 that did not run): wait
        statuses = replica_statuses(body, pods)
        for counts in statuses.values():
            active = counts.pop("active", 0)
            if active:
                counts["succeeded"] = counts.get("succeeded", 0) + active
        namespace, name = job.key
        await self._transition(
            job.key,
            Condition.SUCCEEDED,
            Reason.JOB_SUCCEEDED,
            f"TFJob {namespace}/{name} successfully completed.",
            body=body,
            replicaStatuses=statuses,
        )
        await self._clean_up(job, body)
        self._forget_finished(job)

    async def _succeed_mpi(self, job: _Job) -> None:
        """The launcher's ``mpirun`` exits 0: its batch Job completes, so the MPIJob succeeded;
        the workers (sshd) serve on until cleaned up."""
        self._running.discard(job.key)
        body = await self._job(job.key)
        if body is None:
            return
        pods = await self._job_pods(job)
        launcher = self._deciding_pod(job, body, pods)
        if launcher is not None:
            await self._end_pod(launcher, "Succeeded", 0, "Completed")
        await self._clean_up(job, body, workers_only=True)
        statuses = replica_statuses(body, await self._job_pods(job))
        statuses["Launcher"] = {"succeeded": 1, **({"failed": job.restarts} if job.restarts else {})}
        namespace, name = job.key
        await self._transition(
            job.key,
            Condition.SUCCEEDED,
            Reason.JOB_SUCCEEDED,
            f"MPIJob {namespace}/{name} successfully completed.",
            body=body,
            replicaStatuses=statuses,
        )
        self._forget_finished(job)

    async def _fail_kubeflow(self, job: _Job) -> None:
        """The deciding pod exits non-zero: its own code (``sim.fleet.io/exit-code``), or 137 when
        a failure was injected (killed, as by its environment). What follows is the kind's
        controller's (:meth:`_fail_tf`, :meth:`_fail_mpi`)."""
        body = await self._job(job.key)
        if body is None:
            return
        injected = job.key in self._failures
        if injected and not self._failures[job.key]:
            self._failures.pop(job.key, None)
        job.fail_at = None
        code = KILLED if injected else (job.exit_code or 1)
        pods = await self._job_pods(job)
        victim = self._deciding_pod(job, body, pods)
        if victim is None:
            return
        if job.kind.rules is Rules.MPI:
            await self._fail_mpi(job, body, victim, code)
        else:
            await self._fail_tf(job, body, victim, code)

    async def _fail_tf(self, job: _Job, body: Obj, victim: Obj, code: int) -> None:
        """The training operator's ``ReconcilePods`` and ``UpdateJobStatus``: a replica restarted
        by its restart policy (OnFailure, Always: in place, by the kubelet; ExitCode with a code of
        128 or more: the pod deleted and made again, ``Restarting``) until ``PastBackoffLimit``;
        otherwise the job Failed, naming the replica type. Then ``cleanPodPolicy``."""
        namespace, name = job.key
        rtype = self._type_of(job, body, victim)
        policy = restart_policy(body, rtype)
        again = restarts(policy, code)
        if again and past_backoff_limit(backoff_limit(body), job.restarts + 1):
            again = False
            message = f"Job {name} has failed because it has reached the specified backoff limit"
        else:
            message = f"TFJob {namespace}/{name} has failed because 1 {rtype} replica(s) failed."
        if again and policy != "ExitCode":
            job.restarts += 1
            await self._restart_in_place(victim)
            self._arm(job, body)
            return
        await self._end_pod(victim, "Failed", code, "Error")
        statuses = replica_statuses(body, await self._job_pods(job))
        if not again:
            await self._transition(
                job.key, Condition.FAILED, Reason.JOB_FAILED, message, body=body, replicaStatuses=statuses
            )
            await self._clean_up(job, body)
            self._forget_finished(job)
            return
        job.restarts += 1
        restarting = f"job {name} is restarting because {rtype} replica(s) failed."
        await self._transition(
            job.key,
            Condition.RESTARTING,
            Reason.JOB_RESTARTING,
            restarting,
            body=body,
            replicaStatuses=statuses,
        )
        with contextlib.suppress(NotFound):
            self._on_pod(DELETED, await self.store.delete(POD, namespace, victim["metadata"]["name"]))
        await self._create_pods(body)  # the missing pod only: the others exist
        self._reschedule(job)

    async def _fail_mpi(self, job: _Job, body: Obj, launcher: Obj, code: int) -> None:
        """The launcher is a batch Job (``backoffLimit`` from ``runPolicy``, else Kubernetes' 6):
        its failures are retried, a new pod (restartPolicy Never) or the container in place
        (OnFailure), and the MPIJob stays Running; past the limit the Job fails and so does the
        MPIJob, with the Job's reason (``updateMPIJobFailedStatus``: ``BackoffLimitExceeded``,
        and ``/`` plus the last failed pod's own reason when there is a failed pod)."""
        namespace, name = job.key
        policy = restart_policy(body, "Launcher")
        limit = backoff_limit(body)
        job.restarts += 1
        failed_pods = job.restarts if policy == "Never" else 0
        if job.restarts > (BATCH_BACKOFF_LIMIT if limit is None else limit):
            await self._end_pod(launcher, "Failed", code, "Error")
            await self._clean_up(job, body, workers_only=True)
            statuses = replica_statuses(body, await self._job_pods(job))
            statuses["Launcher"] = {"failed": failed_pods} if failed_pods else {}
            reason, message = "BackoffLimitExceeded", "Job has reached the specified backoff limit"
            if policy == "Never":  # the last failed pod's reason and message (empty for an exit)
                reason, message = f"{reason}/", f"{message}: "
            await self._transition(
                job.key, Condition.FAILED, reason, message, body=body, replicaStatuses=statuses
            )
            self._forget_finished(job)
            return
        if policy != "Never":
            await self._restart_in_place(launcher)
            self._arm(job, body)
            return
        await self._end_pod(launcher, "Failed", code, "Error")
        old = launcher["metadata"]["name"]
        replacement = {**build_pods(body)[0]}
        replacement["metadata"] = {
            **replacement["metadata"],
            "name": launcher_pod_name(name, job.uid, job.restarts),
        }
        replacement["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        with contextlib.suppress(AlreadyExists):
            self._on_pod(ADDED, await self.store.create(POD, replacement, copy=False))
        job.pods = [replacement["metadata"]["name"] if p == old else p for p in job.pods]
        statuses = replica_statuses(body, await self._job_pods(job))
        statuses["Launcher"] = {"failed": failed_pods}
        await self._transition(
            job.key,
            Condition.RUNNING,
            Reason.JOB_RUNNING,
            f"MPIJob {namespace}/{name} is running.",
            body=body,
            replicaStatuses=statuses,
        )
        self._reschedule(job)

    def _arm(self, job: _Job, body: Obj) -> None:
        """A process restarted in place runs its whole duration again (and fails again by its
        own exit code, if it has one)."""
        now = self.clock()
        job.finish_at = now + max(duration_seconds(body, self.simulation.job_duration_seconds), 0.0)
        self._timer(job.finish_at, job.key)
        if job.exit_code:
            job.fail_at = job.finish_at
        if job.key in self._failures:
            job.fail_at = now + self.simulation.failure_delay_seconds
            self._timer(job.fail_at, job.key)

    def _reschedule(self, job: _Job) -> None:
        """A pod made again waits for the scheduler; the job's timers start when it runs."""
        self._running.discard(job.key)
        job.finish_at = None
        if job.key not in self._queue:
            self._queue.append(job.key)
        self._capacity_changed = True

    async def _delete_labelled_pods(self, key: Key, uid: str, job_label: str) -> None:
        """Every pod labelled with the job's name and owned by it (garbage collection)."""
        pods, _, _ = await self.store.list(POD, key[0], label_selector=f"{job_label}={key[1]}")
        names = [p["metadata"]["name"] for p in pods]
        await self._delete_pods(key, uid, names)

    async def _delete_pods(self, key: Key, uid: str, names: list[str]) -> None:
        for pod in await self._owned_pods(key[0], uid, names):
            with contextlib.suppress(NotFound):
                gone = await self.store.delete(POD, key[0], pod["metadata"]["name"])
                self._on_pod(DELETED, gone)


def _unversioned(obj: Obj) -> dict[str, Any]:
    """A copy of ``obj``'s metadata without resourceVersion: an unconditional write's."""
    return {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}


def _container_statuses(pod: Obj, state: dict[str, Any], ready: bool) -> list[dict[str, Any]]:
    return [
        {
            "name": c.get("name", ""),
            "image": c.get("image", ""),
            "imageID": "",
            "containerID": f"containerd://{uuid.uuid4().hex}",
            "ready": ready,
            "started": ready,
            "restartCount": 0,
            "state": state,
        }
        for c in (pod.get("spec") or {}).get("containers") or ()
    ]


def _pod_conditions(now: str, ready: bool) -> list[dict[str, Any]]:
    value = "True" if ready else "False"
    return [
        {"type": kind, "status": status, "lastTransitionTime": now}
        for kind, status in (
            ("PodScheduled", "True"),
            ("Initialized", "True"),
            ("ContainersReady", value),
            ("Ready", value),
        )
    ]


def _pod_ip(pod: Obj) -> str:
    digest = uuid.uuid5(uuid.NAMESPACE_OID, pod["metadata"].get("uid") or pod["metadata"]["name"]).bytes
    return f"172.16.{digest[0]}.{max(digest[1], 1)}"


def _running_status(pod: Obj, host_ip: str, now: str) -> dict[str, Any]:
    ip = _pod_ip(pod)
    return {
        "phase": "Running",
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}] if host_ip else [],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": now,
        "qosClass": "BestEffort",
        "conditions": _pod_conditions(now, True),
        "containerStatuses": _container_statuses(pod, {"running": {"startedAt": now}}, True),
    }


def _terminated_status(pod: Obj, phase: str, code: int, reason: str, now: str) -> dict[str, Any]:
    status = dict(pod.get("status") or {})
    status["phase"] = phase
    status["conditions"] = _pod_conditions(now, False)
    started = status.get("startTime", now)
    status["containerStatuses"] = _container_statuses(
        pod,
        {"terminated": {"exitCode": code, "reason": reason, "startedAt": started, "finishedAt": now}},
        False,
    )
    return status
