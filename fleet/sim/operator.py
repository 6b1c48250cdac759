"""The simulated ascend-operator and volcano scheduler of one member, as one in-process controller.

It watches the member's store directly (same event loop as the API server) and works in ticks:

1. a new AscendJob is validated (``Failed``/``JobValidFailed`` when unusable), its pods are
   created (``Created``/``JobCreated``) and it joins the scheduling queue, oldest first;
2. when something changed (a new job, a node, a pod that went away or finished), the queue is
   scheduled against one snapshot of the member with :func:`fleet.sim.scheduler.schedule_pods`:
   a gang that fits is bound at once (``Running``), one that does not stays
   ``Created``/``PodGroupPending`` with the scheduler's explanation;
3. timers finish running jobs: ``Succeeded`` after their duration, or an injected failure that
   ``Restarting`` (pods recreated, the gang scheduled again) until ``backoffLimit``, then
   ``Failed``.

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

from fleet.apiserver.errors import AlreadyExists, NotFound
from fleet.apiserver.kinds import EVENT, NODE, POD
from fleet.apiserver.resources import Obj, ResourceType
from fleet.apiserver.store import ADDED, DELETED, MemoryStore, now_rfc3339
from fleet.ascend import Condition, Reason
from fleet.sim.devices import DEVICE_ANNOTATION, annotation
from fleet.sim.jobs import (
    backoff_limit,
    build_pods,
    duration_seconds,
    exit_code,
    job_event,
    job_key,
    min_available,
    replica_statuses,
    restarts_on_failure,
    set_condition,
    state,
    validate_job,
)
from fleet.sim.kinds import SIM_KINDS, SimKind, sim_kind
from fleet.sim.metrics import SimMetrics
from fleet.sim.predicates import NodeInfo, PodInfo, PodSpecError, node_info, pod_info
from fleet.sim.scheduler import Cluster, schedule_pods
from fleet.sim.topology import Simulation

__all__ = ["Operator"]

log = logging.getLogger("fleet.sim.operator")

_COMPONENT: Final = "ascend-operator"
#: Messages are written for the first kind and spelt for the job's own by :meth:`Operator._transition`.
_KIND_WORD: Final = SIM_KINDS[0].resource.kind
_SCHEDULER: Final = "volcano"

Key = tuple[str, str]


@dataclass
class _Job:
    key: Key
    uid: str
    created: float
    kind: SimKind = SIM_KINDS[0]
    pods: list[str] = field(default_factory=list)
    need: int = 0
    running_since: float | None = None
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

    def pending_jobs(self) -> int:
        return len(self._queue)

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
                message = f"{_KIND_WORD} {key[0]}/{key[1]} is pending: {result.message}"
                await self._transition(key, Condition.CREATED, Reason.POD_GROUP_PENDING, message)
        if self.metrics is not None:
            self.metrics.schedule_seconds.labels(self.member).observe(time.perf_counter() - started)

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
        job.running_since = now
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
        job.running_since = job.finish_at = None
        self._queue.append(job.key)
        self._capacity_changed = True

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
