"""The simulated T9k job controller of one member: TensorFlowTrainingJob and MPIJob.

It follows the state machine of the T9k seeds (``t9k-tensorflowtrainingjob.zh.txt``,
``t9k-mpijob.zh.txt``), level-triggered, one pass per tick over the member's T9k jobs:

* pods per replica: ``<job>-<type>-<index>`` for each ``spec.replicaSpecs`` entry; an MPIJob
  gets ``<job>-launcher`` (which requests nothing:
  :func:`fleet.t9k.launcher_template`; in the current shape, a launcher entry whose template has
  a pod spec is that pod) and its workers, from ``spec.worker`` or from the ``type: worker``
  entry of ``spec.replicaSpecs`` (T9k's tutorial repository's shape: :func:`_mpi_replicas`);
  ``Initialized`` once they exist, phase ``Pending``;
* the pods are bound as a gang (all of them, or none) by the simulator's own scheduler
  (:func:`fleet.sim.scheduler.schedule_pods`, never Fleet's placement code); bound: ``Running``;
* after the job's duration (``sim.fleet.io/duration-seconds``) the main replica (the chief, else
  worker 0; an MPIJob's launcher) exits with ``sim.fleet.io/exit-code`` (default 0), or with 137
  when a failure was injected (:meth:`T9kController.fail_job`). 0: ``Succeeded`` (``Completed``).
  Otherwise its replica's ``restartPolicy`` decides (Never: no; OnFailure, Always: yes;
  ExitCode: only for 130, 137, 138, 143), within ``runPolicy.backoffLimit`` restarts shared by
  every replica (``status.backoffCount``); a restart recreates the pod (``ReplicaFailure``), no
  restart fails the job (``Failed``). An MPIJob's launcher is never restarted;
* ``runPolicy.activeDeadlineSeconds`` past the start: ``Failed`` (reason ``DeadlineExceeded``);
* clean-up once finished (``cleanUpPolicy`` / ``cleanUpWorkers``): ``all`` deletes every pod,
  ``unfinished`` the ones still running (a TensorFlow ps keeps running after the chief is
  done), ``none`` keeps them;
* ``runMode.debug``: the pods run but training never starts (no end); ``runMode.pause``: the
  pods are deleted, phase ``Paused``; turned off again: ``Resuming``, pods recreated, then
  ``Running``.

``status.tasks`` (per replica type: restart count, each pod's phase and container states) and
``status.aggregate`` (pods per phase, ``deleted`` for the cleaned-up) are written with the phase.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from fleet.apiserver import DELETED, EVENT, NODE, POD, AlreadyExists, MemoryStore, NotFound, Obj, ResourceType
from fleet.sim.jobs import DURATION_ANNOTATION, EXIT_CODE_ANNOTATION, _with_string_quantities, job_event
from fleet.sim.predicates import PodSpecError, pod_info
from fleet.sim.scheduler import Cluster, schedule_pods
from fleet.sim.topology import Simulation
from fleet.t9k import (
    CHIEF,
    DEADLINE_EXCEEDED,
    INVALID_SPEC,
    LAUNCHER,
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
    T9K_JOB_NAME_LABEL,
    WORKER,
    T9kCondition,
    T9kPhase,
    clean_up_policy,
    launcher_template,
    mode_enabled,
    retriable_exit,
)
from fleet.timestamps import now_rfc3339
from fleet.workloads import T9K_MPIJOB, T9K_TFJOB

__all__ = ["KILLED", "T9K_KINDS", "T9kController", "build_pods", "restarts", "set_conditions"]

log = logging.getLogger("fleet.sim.t9k_controller")

_COMPONENT: Final = "t9k-job-controller"
#: The exit code of a pod killed by an injected failure or a deadline (SIGKILL).
KILLED: Final = 137
_FINISHED: Final = (T9kPhase.SUCCEEDED, T9kPhase.FAILED)
Key = tuple[str, str, str]  # kind, namespace, name
#: The kinds this controller runs (every member serves them: :data:`fleet.sim.kinds.SERVED`).
T9K_KINDS: Final = (T9K_TFJOB, T9K_MPIJOB)


@dataclass
class _Tracked:
    uid: str
    running_since: float | None = None
    finish_at: float | None = None
    #: Pods the clean-up deleted (counted as ``deleted`` in the aggregate).
    deleted: set[str] = field(default_factory=set)
    restarts: dict[str, int] = field(default_factory=dict)
    backoff: int = 0
    paused: bool = False
    last_exit: dict[str, int] = field(default_factory=dict)
    #: When the job first ran (monotonic): ``activeDeadlineSeconds`` counts from there.
    first_run: float | None = None


def _spec(job: Obj) -> Mapping[str, Any]:
    spec = job.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _annotations(job: Obj) -> Mapping[str, Any]:
    return (job.get("metadata") or {}).get("annotations") or {}


def replicas_of(job: Obj) -> list[tuple[str, int, Mapping[str, Any], str]]:
    """``(type, count, template, restartPolicy)`` per replica type, the main replica first."""
    spec = _spec(job)
    if job.get("kind") == T9K_MPIJOB.kind:
        launcher, template, count = _mpi_replicas(spec)
        return [(LAUNCHER, 1, launcher, "Never"), (WORKER, count, template, "Never")]
    out = []
    for replica in spec.get("replicaSpecs") or []:
        rtype = str(replica.get("type"))
        out.append(
            (
                rtype,
                int(replica.get("replicas", 1)),
                replica.get("template") or {},
                replica.get("restartPolicy") or "Never",
            )
        )
    order = {CHIEF: 0, WORKER: 1}
    return sorted(out, key=lambda r: order.get(r[0], 2))


def _mpi_replicas(spec: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any], int]:
    """An MPIJob's launcher template, worker template and worker count, in either shape.

    The older shape (the seed ``t9k-mpijob.zh.txt``): one ``spec.worker``; the launcher is made
    from its template. The current one (``t9k/tutorial-examples``
    ``job/mpijob/horovod-torch/job.yaml``, ``horovod-keras/job.yaml``, ...): a ``spec.replicaSpecs``
    list whose ``type: worker`` entry holds the workers and whose ``type: launcher`` entry
    (``template: {}`` in every tutorial) leaves the launcher's pod to the controller unless its
    template has a pod spec. A spec that writes both shapes, or lists no worker, cannot run
    (the pass fails it ``InvalidSpec``)."""
    entries = spec.get("replicaSpecs")
    if entries is None:
        worker = spec.get("worker") or {}
        template = worker.get("template") or {}
        return launcher_template(template), template, int(worker.get("replicas", 1))
    if "worker" in spec:
        raise ValueError("spec.worker and spec.replicaSpecs are two shapes of an MPIJob: write one")
    by_type = {str(e.get("type")): e for e in entries if isinstance(e, Mapping)}
    if WORKER not in by_type:
        raise ValueError("spec.replicaSpecs lists no worker")
    worker = by_type[WORKER]
    template = worker.get("template") or {}
    own = (by_type.get(LAUNCHER) or {}).get("template")
    launcher = own if isinstance(own, Mapping) and own.get("spec") else launcher_template(template)
    return launcher, template, int(worker.get("replicas", 1))


def main_replica(job: Obj) -> str:
    """The chief, else worker (its pod 0 decides); an MPIJob's launcher."""
    if job.get("kind") == T9K_MPIJOB.kind:
        return LAUNCHER
    return CHIEF if any(t == CHIEF and n > 0 for t, n, _, _ in replicas_of(job)) else WORKER


def pod_name(job_name: str, rtype: str, index: int) -> str:
    return f"{job_name}-{LAUNCHER}" if rtype == LAUNCHER else f"{job_name}-{rtype}-{index}"


def build_pods(job: Obj) -> list[Obj]:
    """The pods of every replica, the main replica first, owned by the job."""
    meta = job["metadata"]
    name, namespace = meta["name"], meta.get("namespace") or "default"
    owner = {
        "apiVersion": job["apiVersion"],
        "kind": job["kind"],
        "name": name,
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }
    scheduler = (
        "t9k-scheduler" if (_spec(job).get("scheduler") or {}).get("t9kScheduler") else "default-scheduler"
    )
    pods = []
    for rtype, count, template, _ in replicas_of(job):
        template_meta = template.get("metadata") or {}
        for index in range(count):
            spec = _with_string_quantities(template.get("spec") or {})
            spec.setdefault("schedulerName", scheduler)
            spec["restartPolicy"] = "Never"  # the controller restarts replicas itself
            labels = {
                **(template_meta.get("labels") or {}),
                T9K_JOB_NAME_LABEL: name,
                REPLICA_TYPE_LABEL: rtype,
                REPLICA_INDEX_LABEL: str(index),
            }
            pod_meta = {"name": pod_name(name, rtype, index), "namespace": namespace, "labels": labels}
            pod_meta["ownerReferences"] = [owner]
            pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec})
    return pods


def _replicas_if_valid(job: Obj) -> list[tuple[str, int, Mapping[str, Any], str]]:
    """:func:`replicas_of`, or none for a spec that cannot run (failed ``InvalidSpec``)."""
    try:
        return replicas_of(job)
    except (KeyError, TypeError, ValueError):
        return []


def _pods_if_valid(job: Obj) -> list[Obj]:
    """:func:`build_pods`, or none for a spec that cannot run (failed ``InvalidSpec``)."""
    try:
        return build_pods(job)
    except (KeyError, TypeError, ValueError):
        return []


def restarts(policy: str, code: int) -> bool:
    """Whether a replica with restart ``policy`` that exited ``code`` (not 0) is restarted."""
    if policy in ("OnFailure", "Always"):
        return True
    return policy == "ExitCode" and retriable_exit(code)


def set_conditions(status: dict[str, Any], now: str, true: Mapping[str, tuple[str, str]]) -> None:
    """Write T9k's conditions: each type once; ``true`` (type -> reason, message) are ``True``,
    the others known so far ``False``; a condition's time moves only when its status flips."""
    known = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, Mapping)}
    order = [T9kCondition.INITIALIZED, T9kCondition.RUNNING, T9kCondition.REPLICA_FAILURE]
    order += [T9kCondition.COMPLETED, T9kCondition.FAILED, T9kCondition.PAUSED]
    out = []
    for kind in order:
        before = known.get(kind)
        if kind in true:
            reason, message = true[kind]
            value = "True"
        elif before is not None:
            reason, message, value = (
                str(before.get("reason") or "-"),
                str(before.get("message") or ""),
                "False",
            )
        else:
            continue
        flipped = before is None or before.get("status") != value
        stamp = now if flipped else str(before.get("lastTransitionTime") or now) if before else now
        out.append(
            {"type": kind, "status": value, "reason": reason, "message": message, "lastTransitionTime": stamp}
        )
    status["conditions"] = out


def _container_states(pod: Obj) -> list[dict[str, Any]]:
    out = []
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        state = c.get("state") or {}
        entry: dict[str, Any] = {"name": c.get("name", "")}
        if "terminated" in state:
            entry["state"] = "Terminated"
            entry["exitCode"] = state["terminated"].get("exitCode", 0)
        else:
            entry["state"] = "Running" if "running" in state else "Waiting"
        out.append(entry)
    return out


class T9kController:
    """The T9k job controller of one simulated member; :meth:`start` it next to the operator."""

    def __init__(
        self,
        store: MemoryStore,
        simulation: Simulation,
        *,
        member: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.simulation = simulation
        self.member = member
        self.clock = clock
        self._jobs: dict[Key, _Tracked] = {}
        #: The unfinished jobs, as the watches report them: a pass reads only these.
        self._active: dict[Key, ResourceType] = {}
        self._failures: set[tuple[str, str]] = set()
        self._tasks: list[asyncio.Task[None]] = []
        #: Set by any node or pod change: waiting gangs are scheduled again only then (or when
        #: their pods were just made), against one view of the member per pass.
        self._capacity_changed = True
        self._cluster: Cluster | None = None

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._watch(rt), name=f"{self.member}-{rt.plural}") for rt in T9K_KINDS
        ]
        self._tasks += [
            asyncio.create_task(self._watch_capacity(rt), name=f"{self.member}-t9k-{rt.plural}")
            for rt in (NODE, POD)
        ]
        self._tasks.append(asyncio.create_task(self._loop(), name=f"{self.member}-t9k"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    def fail_job(self, namespace: str, name: str) -> None:
        """Make the job's main replica be killed (exit 137) when its run is up."""
        self._failures.add((namespace, name))

    async def _watch(self, rt: ResourceType) -> None:
        async for event in self.store.watch(rt, None, resource_version=None):
            meta = event.object["metadata"]
            key = (rt.kind, meta.get("namespace") or "default", meta["name"])
            if event.type != DELETED:
                if (event.object.get("status") or {}).get("phase") in _FINISHED:
                    self._active.pop(key, None)
                else:
                    self._active[key] = rt
                continue
            self._active.pop(key, None)
            if (tracked := self._jobs.get(key)) is not None and tracked.uid == meta.get("uid"):
                self._jobs.pop(key, None)
            await self._delete_pods(
                event.object, [p["metadata"]["name"] for p in _pods_if_valid(event.object)]
            )

    async def _watch_capacity(self, rt: ResourceType) -> None:
        async for _ in self.store.watch(rt, None, resource_version=None):
            self._capacity_changed = True

    async def _loop(self) -> None:
        while True:
            try:
                await self.reconcile()
            except Exception:
                log.exception("event=t9k_reconcile_failed member=%s", self.member)
            await asyncio.sleep(self.simulation.tick_seconds)

    async def reconcile(self) -> None:
        """One pass over the member's unfinished T9k jobs."""
        self._cluster = None
        schedule, self._capacity_changed = self._capacity_changed, False
        for (_, namespace, name), rt in list(self._active.items()):
            try:
                job = await self.store.get(rt, namespace, name)
            except NotFound:
                continue
            if (job.get("status") or {}).get("phase") in _FINISHED:
                continue
            try:
                await self._reconcile(rt, job, schedule=schedule)
            except (KeyError, TypeError, ValueError, PodSpecError) as exc:
                await self._finish(
                    rt,
                    job,
                    None,
                    succeeded=False,
                    reason=INVALID_SPEC,
                    message=f"the job cannot run: {exc}",
                )

    # -- one job ------------------------------------------------------------------------------------

    async def _reconcile(self, rt: ResourceType, job: Obj, *, schedule: bool = True) -> None:
        meta = job["metadata"]
        key = (rt.kind, meta.get("namespace") or "default", meta["name"])
        tracked = self._jobs.get(key)
        if tracked is None or tracked.uid != meta.get("uid"):
            tracked = self._jobs[key] = _Tracked(uid=str(meta.get("uid")))
        wanted = build_pods(job)
        if mode_enabled(job, "pause"):
            await self._delete_pods(job, [p["metadata"]["name"] for p in wanted])
            tracked.paused = True
            tracked.running_since = tracked.finish_at = None
            message = "The job is paused: its replicas are deleted."
            tracked.deleted.update(p["metadata"]["name"] for p in wanted)
            paused = {T9kCondition.PAUSED: ("Paused", message)}
            await self._write(rt, job, T9kPhase.PAUSED, paused, pods=[], tracked=tracked)
            return
        created = len(await self._pods(job, wanted)) < len(wanted)
        pods = await self._ensure_pods(job, wanted, tracked)
        phase = T9kPhase.RESUMING if tracked.paused else T9kPhase.PENDING
        initialized = {T9kCondition.INITIALIZED: ("-", "The job has been initialized successfully.")}
        unbound = [p for p in pods if not (p.get("spec") or {}).get("nodeName")]
        if unbound and (schedule or created):
            await self._schedule(job, unbound)
            pods = await self._pods(job, wanted)
        if any(not (p.get("spec") or {}).get("nodeName") for p in pods):
            await self._write(rt, job, phase, initialized, pods=pods, tracked=tracked)
            return
        now = self.clock()
        if tracked.running_since is None:
            tracked.paused = False
            tracked.running_since = now
            tracked.first_run = tracked.first_run if tracked.first_run is not None else now
            duration = self._duration(job)
            tracked.finish_at = None if mode_enabled(job, "debug") else now + duration
        deadline = _spec(job).get("runPolicy", {}).get("activeDeadlineSeconds")
        started = tracked.first_run
        if isinstance(deadline, int) and started is not None and now - started >= deadline:
            message = f"The job ran longer than its activeDeadlineSeconds ({deadline})."
            await self._kill_all(pods)
            await self._finish(rt, job, tracked, succeeded=False, reason=DEADLINE_EXCEEDED, message=message)
            return
        if tracked.finish_at is not None and now >= tracked.finish_at:
            await self._main_exits(rt, job, tracked, pods)
            return
        message = (
            "The environment is up; training is not started (debug mode)."
            if mode_enabled(job, "debug")
            else ""
        )
        running = {**initialized, T9kCondition.RUNNING: ("-", message or "All pods are running normally.")}
        await self._write(rt, job, T9kPhase.RUNNING, running, pods=pods, tracked=tracked)

    def _duration(self, job: Obj) -> float:
        raw = _annotations(job).get(DURATION_ANNOTATION)
        try:
            return max(float(raw), 0.0) if raw is not None else self.simulation.job_duration_seconds
        except (TypeError, ValueError):
            return self.simulation.job_duration_seconds

    def _exit_code(self, job: Obj) -> int:
        meta = job["metadata"]
        if (meta.get("namespace") or "default", meta["name"]) in self._failures:
            self._failures.discard((meta.get("namespace") or "default", meta["name"]))
            return KILLED
        try:
            return int(str(_annotations(job).get(EXIT_CODE_ANNOTATION, 0)))
        except ValueError:
            return 1

    async def _main_exits(self, rt: ResourceType, job: Obj, tracked: _Tracked, pods: list[Obj]) -> None:
        """The run is up: the main replica's pod 0 exits; the job succeeds, restarts it or fails."""
        main = main_replica(job)
        code = self._exit_code(job)
        name = job["metadata"]["name"]
        main_pod = pod_name(name, main, 0)
        if code == 0:
            for pod in pods:
                if (pod["metadata"]["labels"] or {}).get(REPLICA_TYPE_LABEL) != "ps":
                    await self._terminate(pod, 0)  # the ps keep serving: clean-up's business
            await self._finish(
                rt,
                job,
                tracked,
                succeeded=True,
                reason="Succeeded",
                message="The job has finished successfully.",
            )
            return
        victim = next(p for p in pods if p["metadata"]["name"] == main_pod)
        await self._terminate(victim, code)
        tracked.last_exit[main] = code
        policy = next((p for t, _, _, p in replicas_of(job) if t == main), "Never")
        limit = _spec(job).get("runPolicy", {}).get("backoffLimit")
        within = not isinstance(limit, int) or tracked.backoff < limit
        if restarts(policy, code) and within:
            tracked.backoff += 1
            tracked.restarts[main] = tracked.restarts.get(main, 0) + 1
            tracked.running_since = tracked.finish_at = None
            await self._delete_pods(job, [main_pod])
            message = f"Replica {main_pod} exited with code {code}; restarting it ({policy})."
            conditions = {
                T9kCondition.INITIALIZED: ("-", "The job has been initialized successfully."),
                T9kCondition.RUNNING: ("-", "Restarting a failed replica."),
                T9kCondition.REPLICA_FAILURE: ("ReplicaFailed", message),
            }
            pods = await self._pods(job, build_pods(job))
            await self._write(rt, job, T9kPhase.RUNNING, conditions, pods=pods, tracked=tracked)
            return
        why = "its backoffLimit is used up" if restarts(policy, code) else f"restartPolicy {policy}"
        message = f"The job exited with an error code: {main_pod} exited with {code} ({why})."
        await self._finish(rt, job, tracked, succeeded=False, reason="Failed", message=message)

    async def _finish(
        self,
        rt: ResourceType,
        job: Obj,
        tracked: _Tracked | None,
        *,
        succeeded: bool,
        reason: str,
        message: str,
    ) -> None:
        tracked = tracked or _Tracked(uid=str(job["metadata"].get("uid")))
        wanted = _pods_if_valid(job)
        pods = await self._pods(job, wanted)
        policy = clean_up_policy(job)
        doomed = [
            p["metadata"]["name"]
            for p in pods
            if policy == "all"
            or (policy == "unfinished" and p.get("status", {}).get("phase") not in _FINISHED)
        ]
        shown = list(pods)
        await self._delete_pods(job, doomed)
        tracked.deleted.update(doomed)
        end = T9kCondition.COMPLETED if succeeded else T9kCondition.FAILED
        conditions = {
            T9kCondition.INITIALIZED: ("-", "The job has been initialized successfully."),
            end: (reason, message),
        }
        if not succeeded and reason == "Failed":  # a replica's exit failed it
            conditions[T9kCondition.REPLICA_FAILURE] = ("ReplicaFailed", message)
        phase = T9kPhase.SUCCEEDED if succeeded else T9kPhase.FAILED
        await self._write(rt, job, phase, conditions, pods=shown, tracked=tracked, finished=True)
        self._jobs.pop(
            (rt.kind, job["metadata"].get("namespace") or "default", job["metadata"]["name"]), None
        )
        log.info(
            "event=t9k_%s member=%s job=%s reason=%s",
            phase.lower(),
            self.member,
            job["metadata"]["name"],
            reason,
        )

    # -- pods ---------------------------------------------------------------------------------------

    async def _pods(self, job: Obj, wanted: list[Obj]) -> list[Obj]:
        uid = job["metadata"].get("uid")
        namespace = job["metadata"].get("namespace") or "default"
        out = []
        for pod in wanted:
            try:
                found = await self.store.get(POD, namespace, pod["metadata"]["name"])
            except NotFound:
                continue
            if any(o.get("uid") == uid for o in found["metadata"].get("ownerReferences") or ()):
                out.append(found)
        return out

    async def _ensure_pods(self, job: Obj, wanted: list[Obj], tracked: _Tracked) -> list[Obj]:
        have = {p["metadata"]["name"] for p in await self._pods(job, wanted)}
        for pod in wanted:
            if pod["metadata"]["name"] in have:
                continue
            pod["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
            with contextlib.suppress(AlreadyExists):
                await self.store.create(POD, pod)
            tracked.deleted.discard(pod["metadata"]["name"])
        return await self._pods(job, wanted)

    async def _view(self) -> Cluster:
        """The member as the scheduler sees it, read once per pass and kept up to date with the
        pass's own bindings."""
        if self._cluster is None:
            nodes, _, _ = await self.store.list(NODE, None)
            pods, _, _ = await self.store.list(POD, None)
            bound = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
            self._cluster = Cluster.from_objects(nodes, bound)
        return self._cluster

    async def _schedule(self, job: Obj, unbound: list[Obj]) -> None:
        cluster = await self._view()
        infos = [pod_info(p) for p in unbound]
        result = schedule_pods(cluster, infos)
        if not result.fits:
            return
        for info in infos:
            if info.name in result.bindings:
                cluster.bind(info, result.bindings[info.name])
        now = now_rfc3339()
        for pod in unbound:
            node = result.bindings.get(pod["metadata"]["name"])
            if node is None:
                continue
            pod["metadata"].pop("resourceVersion", None)
            pod["spec"]["nodeName"] = node
            bound = await self.store.update(POD, pod)
            bound["metadata"].pop("resourceVersion", None)
            bound["status"] = {
                "phase": "Running",
                "startTime": now,
                "containerStatuses": [
                    {
                        "name": c.get("name", ""),
                        "ready": True,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": now}},
                    }
                    for c in bound["spec"].get("containers") or ()
                ],
            }
            await self.store.update(POD, bound, subresource="status")
        placed = ", ".join(f"{p} -> {n}" for p, n in result.bindings.items())
        await self._event(job, "Normal", "Scheduled", f"Bound {len(result.bindings)} pod(s): {placed}")

    async def _terminate(self, pod: Obj, code: int) -> None:
        now = now_rfc3339()
        pod["metadata"].pop("resourceVersion", None)
        reason = "Completed" if code == 0 else "Error"
        pod["status"] = {
            **(pod.get("status") or {}),
            "phase": "Succeeded" if code == 0 else "Failed",
            "containerStatuses": [
                {
                    "name": c.get("name", ""),
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": code, "reason": reason, "finishedAt": now}},
                }
                for c in pod["spec"].get("containers") or ()
            ],
        }
        with contextlib.suppress(NotFound):
            await self.store.update(POD, pod, subresource="status")

    async def _kill_all(self, pods: list[Obj]) -> None:
        for pod in pods:
            if (pod.get("status") or {}).get("phase") not in _FINISHED:
                await self._terminate(pod, KILLED)

    async def _delete_pods(self, job: Obj, names: list[str]) -> None:
        namespace = job["metadata"].get("namespace") or "default"
        uid = job["metadata"].get("uid")
        for name in names:
            try:
                pod = await self.store.get(POD, namespace, name)
            except NotFound:
                continue
            if any(o.get("uid") == uid for o in pod["metadata"].get("ownerReferences") or ()):
                with contextlib.suppress(NotFound):
                    await self.store.delete(POD, namespace, name)

    # -- status -------------------------------------------------------------------------------------

    def _task_status(
        self, job: Obj, pods: list[Obj], tracked: _Tracked
    ) -> tuple[list[dict[str, Any]], dict[str, int]]:
        by_name = {p["metadata"]["name"]: p for p in pods}
        aggregate = dict.fromkeys(
            ("creating", "pending", "running", "succeeded", "failed", "unknown", "deleted"), 0
        )
        tasks: list[dict[str, Any]] = []
        replicas_key = "status" if job.get("kind") == T9K_MPIJOB.kind else "replicas"
        name = job["metadata"]["name"]
        for rtype, count, _, _ in _replicas_if_valid(job):
            entries: list[dict[str, Any]] = []
            for index in range(count):
                pname = pod_name(name, rtype, index)
                pod = by_name.get(pname)
                if pod is None:
                    phase = "Deleted" if pname in tracked.deleted else "Creating"
                    entries.append({"name": pname, "phase": phase, "containers": []})
                    aggregate[phase.lower()] += 1
                    continue
                # A pod the clean-up deleted keeps its last container states (its exit code).
                phase = str((pod.get("status") or {}).get("phase") or "Pending")
                phase = "Deleted" if pname in tracked.deleted else phase
                entry = {"name": pname, "uid": pod["metadata"].get("uid", ""), "phase": phase}
                entries.append({**entry, "containers": _container_states(pod)})
                aggregate[phase.lower()] = aggregate.get(phase.lower(), 0) + 1
            tasks.append(
                {"type": rtype, "restartCount": tracked.restarts.get(rtype, 0), replicas_key: entries}
            )
        return tasks, aggregate

    async def _write(
        self,
        rt: ResourceType,
        job: Obj,
        phase: str,
        true: Mapping[str, tuple[str, str]],
        *,
        pods: list[Obj],
        tracked: _Tracked,
        finished: bool = False,
    ) -> None:
        now = now_rfc3339()
        status = dict(job.get("status") or {})
        before = (
            status.get("phase"),
            [(c.get("type"), c.get("status")) for c in status.get("conditions") or []],
        )
        set_conditions(status, now, true)
        tasks, aggregate = self._task_status(job, pods, tracked)
        status.update(phase=phase, tasks=tasks, aggregate=aggregate, backoffCount=tracked.backoff)
        if phase == T9kPhase.RUNNING:
            status.setdefault("startTime", now)
        if finished:
            status["completionTime"] = now
        if status == job.get("status"):
            return
        body = {**job, "metadata": {k: v for k, v in job["metadata"].items() if k != "resourceVersion"}}
        body["status"] = status
        try:
            await self.store.update(rt, body, subresource="status")
        except NotFound:
            return
        after = (phase, [(c.get("type"), c.get("status")) for c in status["conditions"]])
        if after != before:
            last = next(iter(true.items()))[1] if len(true) == 1 else list(true.values())[-1]
            warning = phase == T9kPhase.FAILED or T9kCondition.REPLICA_FAILURE in true
            await self._event(job, "Warning" if warning else "Normal", phase, last[1])

    async def _event(self, job: Obj, kind: str, reason: str, message: str) -> None:
        event = job_event(job, kind, reason, message, source=_COMPONENT, member=self.member)
        with contextlib.suppress(NotFound):
            await self.store.create(EVENT, event)
