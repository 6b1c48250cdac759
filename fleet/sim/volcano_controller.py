"""The simulated Volcano job controller of one member: ``batch.volcano.sh/v1alpha1`` Job (vcjob).

It follows Volcano's job controller (volcano-sh/volcano ``pkg/controllers/job``: the state
machine of ``state/{pending,running,restarting,aborting,completing,terminating}.go``, the
policies of ``job_controller_util.go`` ``applyPolicies``, the pods of
``job_controller_actions.go``), level-triggered, one pass per tick over the member's vcjobs. Its
own rules, never Fleet's:

* pods ``<job>-<task>-<index>`` for each task, labelled ``volcano.sh/job-name``,
  ``volcano.sh/task-spec`` ... with the scheduler ``volcano`` unless the job names another;
* the gang: ``spec.minAvailable`` (else the tasks' ``minAvailable``, else their replicas, as the
  mutating webhook defaults it) bound at once by the simulator's scheduler
  (:func:`fleet.sim.scheduler.schedule_pods`), or none, each unbound pod then marked
  ``PodScheduled`` False, reason ``Unschedulable``, as Volcano's scheduler writes it;
* ``Pending`` until running + succeeded + failed pods reach the gang: ``Running``;
* after the job's duration (``sim.fleet.io/duration-seconds``) every pod exits with
  ``sim.fleet.io/exit-code`` (default 0; 137 when a failure was injected: :meth:`fail_job`).
  Exit 0: every pod Succeeded, and the job ``Completed`` once they are as many as its
  ``minAvailable`` (else ``Failed``). A failed pod raises ``PodFailed``: the first policy of its
  task, then of the job, that names the event, ``*`` or the exit code decides:
  ``RestartJob``/``RestartTask`` (``RestartPod``, ``RestartPartition``: the failed pod's task
  here) (pods deleted, ``retryCount`` + 1, ``Restarting``; then
  ``Failed`` once ``retryCount`` reached ``maxRetry`` (default 3), else ``Pending`` again with
  new pods), ``AbortJob`` (``Aborting`` then ``Aborted``), ``TerminateJob`` (``Terminating``
  then ``Terminated``), ``CompleteJob`` (``Completing`` then ``Completed``). No policy (or ``Ignore``): the
  pod's ``restartPolicy`` (OnFailure, Always: the kubelet runs it again) or, Never, it stays
  Failed and the job ends ``Failed`` when all its pods ended with too few succeeded;
* a pod on a node gone NotReady is evicted: ``PodEvicted``, decided by the policies the same way
  (without one, the pod fails);

Status as Volcano writes it: ``state.phase`` and ``lastTransitionTime``, ``minAvailable``,
``taskStatusCount`` (per task, pods per phase), ``pending``, ``running``, ``succeeded``,
``failed``, ``terminating``, ``unknown``, ``retryCount``, ``version`` and ``conditions`` (one per
phase change: ``status`` is the phase).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from fleet.apiserver import DELETED, EVENT, NODE, POD, AlreadyExists, MemoryStore, NotFound, Obj, ResourceType
from fleet.sim.jobs import _with_string_quantities, job_event
from fleet.sim.predicates import PodSpecError, pod_info
from fleet.sim.scheduler import schedule_pods
from fleet.sim.t9k_controller import T9kController
from fleet.sim.topology import Simulation
from fleet.timestamps import now_rfc3339
from fleet.volcano import (
    DEFAULT_MAX_RETRY,
    DEFAULT_SCHEDULER,
    FINAL_PHASES,
    JOB_NAME_LABEL,
    JOB_NAMESPACE_LABEL,
    QUEUE_NAME_LABEL,
    TASK_INDEX_LABEL,
    TASK_SPEC_LABEL,
    Action,
    Event,
    JobPhase,
)
from fleet.workloads import VOLCANO_JOB

__all__ = ["VolcanoController", "build_pods", "gang", "policy_action"]

log = logging.getLogger("fleet.sim.volcano_controller")

_COMPONENT: Final = "vc-controller-manager"
_KILLED: Final = 137
_POD_PHASES: Final = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
#: What each winding-down phase ends in, one pass later (its pods are deleted at once here).
#: The actions that restart pods (a task's, a pod's, a partition's: here the failed pod's task).
_RESTARTS: Final = (Action.RESTART_JOB, Action.RESTART_TASK, Action.RESTART_POD, Action.RESTART_PARTITION)
_WOUND_DOWN: Final = {
    JobPhase.ABORTING: JobPhase.ABORTED,
    JobPhase.TERMINATING: JobPhase.TERMINATED,
    JobPhase.COMPLETING: JobPhase.COMPLETED,
}


def _spec(job: Obj) -> Mapping[str, Any]:
    spec = job.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _tasks(job: Obj) -> list[Mapping[str, Any]]:
    return [t for t in _spec(job).get("tasks") or [] if isinstance(t, Mapping)]


def gang(job: Obj) -> int:
    """``spec.minAvailable``, else the sum of the tasks' ``minAvailable`` (else replicas)."""
    declared = _spec(job).get("minAvailable")
    if isinstance(declared, int) and declared > 0:
        return declared
    total = 0
    for task in _tasks(job):
        minimum = task.get("minAvailable")
        total += int(minimum) if isinstance(minimum, int) else int(task.get("replicas") or 0)
    return total


def build_pods(job: Obj) -> list[Obj]:
    """Every task's pods, in task order, owned by the job."""
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
    scheduler = _spec(job).get("schedulerName") or DEFAULT_SCHEDULER
    queue = _spec(job).get("queue") or "default"
    pods = []
    for task in _tasks(job):
        template = task.get("template") or {}
        template_meta = template.get("metadata") or {}
        tname = str(task.get("name") or "")
        for index in range(int(task.get("replicas") or 0)):
            spec = _with_string_quantities(template.get("spec") or {})
            spec.setdefault("schedulerName", scheduler)
            labels = {
                **(template_meta.get("labels") or {}),
                JOB_NAME_LABEL: name,
                JOB_NAMESPACE_LABEL: namespace,
                QUEUE_NAME_LABEL: str(queue),
                TASK_SPEC_LABEL: tname,
                TASK_INDEX_LABEL: str(index),
            }
            annotations = {
                **(template_meta.get("annotations") or {}),
                "scheduling.k8s.io/group-name": f"{name}-{meta.get('uid', '')}",
                JOB_NAME_LABEL: name,
                TASK_SPEC_LABEL: tname,
            }
            pod_meta = {
                "name": f"{name}-{tname}-{index}",
                "namespace": namespace,
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [owner],
            }
            pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec})
    return pods


def policy_action(job: Obj, task: str, event: str, exit_code: int | None) -> str | None:
    """The action of the first policy of ``task``, then of the job, that answers ``event`` (or
    ``*``) or ``exit_code`` (``applyPolicies``); None: no policy does (the job just syncs)."""
    own = next((t for t in _tasks(job) if t.get("name") == task), {})
    for policies in (own.get("policies") or [], _spec(job).get("policies") or []):
        for policy in policies:
            if not isinstance(policy, Mapping):
                continue
            events = [*(policy.get("events") or []), *([policy["event"]] if policy.get("event") else [])]
            if event in events or Event.ANY in events:
                return str(policy.get("action"))
            if exit_code is not None and policy.get("exitCode") == exit_code:
                return str(policy.get("action"))
    return None


@dataclass
class _Run:
    uid: str
    finish_at: float | None = None


class VolcanoController(T9kController):
    """Volcano's job controller of one simulated member (the T9k controller's pod plumbing, its
    own state machine); :meth:`start` it next to the operator."""

    def __init__(
        self,
        store: MemoryStore,
        simulation: Simulation,
        *,
        member: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(store, simulation, member=member, clock=clock)
        self._runs: dict[tuple[str, str], _Run] = {}
        self._down: set[str] | None = None

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._watch(VOLCANO_JOB), name=f"{self.member}-vcjobs"),
            *(
                asyncio.create_task(self._watch_capacity(rt), name=f"{self.member}-vc-{rt.plural}")
                for rt in (NODE, POD)
            ),
            asyncio.create_task(self._loop(), name=f"{self.member}-volcano"),
        ]

    async def _watch(self, rt: ResourceType) -> None:
        async for event in self.store.watch(rt, None, resource_version=None):
            meta = event.object["metadata"]
            key = (rt.kind, meta.get("namespace") or "default", meta["name"])
            phase = ((event.object.get("status") or {}).get("state") or {}).get("phase")
            if event.type != DELETED:
                if phase in FINAL_PHASES:
                    self._active.pop(key, None)
                else:
                    self._active[key] = rt
                continue
            self._active.pop(key, None)
            self._runs.pop((key[1], key[2]), None)
            await self._delete_pods(event.object, [p["metadata"]["name"] for p in build_pods(event.object)])

    async def reconcile(self) -> None:
        """One pass over the member's unfinished vcjobs."""
        self._cluster = None
        self._down = None
        schedule, self._capacity_changed = self._capacity_changed, False
        for (_, namespace, name), rt in list(self._active.items()):
            try:
                job = await self.store.get(rt, namespace, name)
            except NotFound:
                continue
            if _phase(job) in FINAL_PHASES:
                continue
            try:
                await self._step(job, schedule=schedule)
            except (KeyError, TypeError, ValueError, PodSpecError) as exc:
                log.warning("event=vcjob_invalid member=%s job=%s error=%s", self.member, name, exc)
                await self._write(job, JobPhase.FAILED, pods=[])

    # -- the state machine ------------------------------------------------------------------------

    async def _step(self, job: Obj, *, schedule: bool) -> None:
        meta = job["metadata"]
        key = (meta.get("namespace") or "default", meta["name"])
        run = self._runs.get(key)
        if run is None or run.uid != meta.get("uid"):
            run = self._runs[key] = _Run(uid=str(meta.get("uid")))
        phase = _phase(job)
        if phase is None:  # initiateJob: the job is Pending before its pods are made
            await self._write(job, JobPhase.PENDING, pods=[])
            return
        wanted = build_pods(job)
        names = [p["metadata"]["name"] for p in wanted]
        if phase in _WOUND_DOWN:
            pods = await self._pods(job, wanted)
            keep = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"]
            await self._delete_pods(job, [p["metadata"]["name"] for p in pods if p not in keep])
            await self._write(job, _WOUND_DOWN[phase], pods=keep)
            return
        if phase == JobPhase.RESTARTING:
            await self._delete_pods(job, names)
            retries = int((job.get("status") or {}).get("retryCount") or 0)
            limit = _spec(job).get("maxRetry", DEFAULT_MAX_RETRY)
            run.finish_at = None
            if retries >= (limit if isinstance(limit, int) else DEFAULT_MAX_RETRY):
                await self._write(job, JobPhase.FAILED, pods=[])
            else:
                await self._write(job, JobPhase.PENDING, pods=[])
            return
        created = len(await self._pods(job, wanted)) < len(wanted)
        pods = await self._create_pods(job, wanted)
        unbound = [p for p in pods if not (p.get("spec") or {}).get("nodeName")]
        if phase == JobPhase.PENDING and unbound and (schedule or created):
            await self._schedule_gang(job, unbound)
            pods = await self._pods(job, wanted)
        started = sum(
            1 for p in pods if (p.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed")
        )
        if phase == JobPhase.PENDING:
            if started >= max(gang(job), 1):
                run.finish_at = self.clock() + self._duration(job)
                await self._write(job, JobPhase.RUNNING, pods=pods)
            else:
                await self._write(job, JobPhase.PENDING, pods=pods)
            return
        # Running
        down = await self._not_ready_nodes()
        evicted = [
            p
            for p in pods
            if (p.get("spec") or {}).get("nodeName") in down
            and (p.get("status") or {}).get("phase") == "Running"
        ]
        if evicted:
            await self._evicted(job, run, pods, evicted)
            return
        if run.finish_at is None:
            run.finish_at = self.clock() + self._duration(job)
        if self.clock() < run.finish_at:
            await self._write(job, JobPhase.RUNNING, pods=pods)
            return
        await self._exits(job, run, pods)

    async def _exits(self, job: Obj, run: _Run, pods: list[Obj]) -> None:
        """The run is up: every pod exits with the job's code; the policies decide."""
        code = self._exit_code(job)
        live = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        if code == 0:
            for pod in live:
                await self._terminate(pod, 0)
            pods = await self._pods(job, build_pods(job))
            succeeded = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Succeeded")
            end = JobPhase.COMPLETED if succeeded >= gang(job) else JobPhase.FAILED
            await self._write(job, end, pods=pods)
            return
        first = live[0] if live else None
        task = str(((first or {}).get("metadata") or {}).get("labels", {}).get(TASK_SPEC_LABEL, ""))
        action = policy_action(job, task, Event.POD_FAILED, code)
        name = job["metadata"]["name"]
        if action is not None:
            await self._event(
                job, "Normal", "ExecuteAction", f"Start to execute action {action} (PodFailed, exit {code})"
            )
        if action in _RESTARTS:
            await self._restart(job, run, pods, live=live, task=task, action=action, code=code)
            return
        winding = {
            Action.ABORT_JOB: JobPhase.ABORTING,
            Action.TERMINATE_JOB: JobPhase.TERMINATING,
            Action.COMPLETE_JOB: JobPhase.COMPLETING,
        }.get(action or "")
        for pod in live:
            policy = (pod.get("spec") or {}).get("restartPolicy") or "Always"
            if winding is None and policy in ("OnFailure", "Always"):
                continue  # the kubelet runs it again
            await self._terminate(pod, code)
        if winding is not None:
            await self._write(job, winding, pods=await self._pods(job, build_pods(job)))
            return
        pods = await self._pods(job, build_pods(job))
        ended = [p for p in pods if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")]
        if len(ended) == len(pods):
            succeeded = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Succeeded")
            await self._write(
                job, JobPhase.COMPLETED if succeeded >= gang(job) else JobPhase.FAILED, pods=pods
            )
            return
        run.finish_at = self.clock() + self._duration(job)  # restarted in place: another run
        log.info("event=vcjob_pods_restarted member=%s job=%s code=%d", self.member, name, code)
        await self._write(job, JobPhase.RUNNING, pods=pods)

    async def _restart(
        self, job: Obj, run: _Run, pods: list[Obj], *, live: list[Obj], task: str, action: str, code: int
    ) -> None:
        """``RestartJob`` (every pod) or ``RestartTask`` (the task's): pods ended and deleted,
        ``retryCount`` + 1, ``Restarting``."""
        doomed = [
            p["metadata"]["name"]
            for p in pods
            if action == Action.RESTART_JOB or p["metadata"]["labels"].get(TASK_SPEC_LABEL) == task
        ]
        for pod in live:
            await self._terminate(pod, code)
        await self._delete_pods(job, doomed)
        run.finish_at = None
        status = dict(job.get("status") or {})
        job = {**job, "status": {**status, "retryCount": int(status.get("retryCount") or 0) + 1}}
        await self._write(job, JobPhase.RESTARTING, pods=[], bump_version=True)

    async def _evicted(self, job: Obj, run: _Run, pods: list[Obj], evicted: list[Obj]) -> None:
        """Pods on a node gone NotReady are evicted: ``PodEvicted``, and the first policy of
        their task, then of the job, that answers it decides (MindCluster's vcjobs restart the
        job: ``PodEvicted`` -> ``RestartJob``); with none, the evicted pods fail (Evicted)."""
        task = str(evicted[0]["metadata"].get("labels", {}).get(TASK_SPEC_LABEL, ""))
        action = policy_action(job, task, Event.POD_EVICTED, None)
        live = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        if action is not None:
            await self._event(
                job, "Normal", "ExecuteAction", f"Start to execute action {action} (PodEvicted)"
            )
        if action in _RESTARTS:
            await self._restart(job, run, pods, live=live, task=task, action=action, code=_KILLED)
            return
        winding = {
            Action.ABORT_JOB: JobPhase.ABORTING,
            Action.TERMINATE_JOB: JobPhase.TERMINATING,
            Action.COMPLETE_JOB: JobPhase.COMPLETING,
        }.get(action or "")
        for pod in live if winding is not None else evicted:
            await self._terminate(pod, _KILLED)
        pods = await self._pods(job, build_pods(job))
        await self._write(job, winding or JobPhase.RUNNING, pods=pods)

    async def _not_ready_nodes(self) -> set[str]:
        """The member's nodes whose Ready condition is not True (read once per pass)."""
        if self._down is None:
            nodes, _, _ = await self.store.list(NODE, None)
            self._down = {
                n["metadata"]["name"]
                for n in nodes
                if not any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (n.get("status") or {}).get("conditions") or ()
                )
            }
        return self._down

    def _exit_code(self, job: Obj) -> int:
        meta = job["metadata"]
        key = (meta.get("namespace") or "default", meta["name"])
        if key in self._failures:
            self._failures.discard(key)
            return _KILLED
        return super()._exit_code(job)

    async def _create_pods(self, job: Obj, wanted: list[Obj]) -> list[Obj]:
        have = {p["metadata"]["name"] for p in await self._pods(job, wanted)}
        for pod in wanted:
            if pod["metadata"]["name"] not in have:
                pod["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
                with contextlib.suppress(AlreadyExists):
                    await self.store.create(POD, pod)
        return await self._pods(job, wanted)

    # -- scheduling ---------------------------------------------------------------------------------

    async def _schedule_gang(self, job: Obj, unbound: list[Obj]) -> None:
        """Bind the gang (at least ``minAvailable`` of the pods) or mark every pod unschedulable."""
        cluster = await self._view()
        infos = [pod_info(p) for p in unbound]
        need = max(1, gang(job) - (len(build_pods(job)) - len(unbound)))
        result = schedule_pods(cluster, infos, min_available=min(need, len(infos)))
        now = now_rfc3339()
        if not result.fits:
            message = f"{len(unbound)}/{len(build_pods(job))} tasks in gang unschedulable: {result.message}"
            for pod in unbound:
                status = pod.get("status") or {}
                kept = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
                if any(c.get("message") == message for c in status.get("conditions") or ()):
                    continue
                condition = {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastTransitionTime": now,
                }
                pod["metadata"].pop("resourceVersion", None)
                pod["status"] = {**status, "conditions": [*kept, condition]}
                with contextlib.suppress(NotFound):
                    await self.store.update(POD, pod, subresource="status")
            return
        for info in infos:
            if info.name in result.bindings:
                cluster.bind(info, result.bindings[info.name])
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
                "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now}],
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

    # -- status -------------------------------------------------------------------------------------

    async def _write(  # type: ignore[override]
        self, job: Obj, phase: str, *, pods: list[Obj], bump_version: bool = False
    ) -> None:
        now = now_rfc3339()
        before = dict(job.get("status") or {})
        counts = dict.fromkeys(("pending", "running", "succeeded", "failed", "terminating", "unknown"), 0)
        per_task: dict[str, dict[str, dict[str, int]]] = {}
        for pod in pods:
            pod_phase = str((pod.get("status") or {}).get("phase") or "Pending")
            pod_phase = pod_phase if pod_phase in _POD_PHASES else "Unknown"
            counts[pod_phase.lower()] += 1
            task = str(pod["metadata"].get("labels", {}).get(TASK_SPEC_LABEL, ""))
            tally = per_task.setdefault(task, {"phase": {}})["phase"]
            tally[pod_phase] = tally.get(pod_phase, 0) + 1
        raw_state = before.get("state")
        old_state: Mapping[str, Any] = raw_state if isinstance(raw_state, Mapping) else {}
        changed = old_state.get("phase") != phase
        state = {
            "phase": phase,
            "lastTransitionTime": now if changed else old_state.get("lastTransitionTime", now),
        }
        conditions = list(before.get("conditions") or [])
        if changed:
            conditions.append({"status": phase, "lastTransitionTime": now})
        status: dict[str, Any] = {
            **{k: v for k, v in before.items() if k not in counts},
            "state": state,
            "minAvailable": gang(job),
            "taskStatusCount": per_task,
            **{k: v for k, v in counts.items() if v},
            "retryCount": int(before.get("retryCount") or 0),
            "version": int(before.get("version") or 0) + (1 if bump_version else 0),
            "conditions": conditions,
        }
        if status == job.get("status"):
            return
        body = {**job, "metadata": {k: v for k, v in job["metadata"].items() if k != "resourceVersion"}}
        body["status"] = status
        try:
            await self.store.update(VOLCANO_JOB, body, subresource="status")
        except NotFound:
            return
        if changed:
            warning = phase in (JobPhase.FAILED, JobPhase.ABORTED, JobPhase.RESTARTING)
            await self._event(job, "Warning" if warning else "Normal", phase, f"Job {phase}")
            log.info("event=vcjob_%s member=%s job=%s", phase.lower(), self.member, job["metadata"]["name"])

    async def _event(self, job: Obj, kind: str, reason: str, message: str) -> None:
        event = job_event(job, kind, reason, message, source=_COMPONENT, member=self.member)
        with contextlib.suppress(NotFound):
            await self.store.create(EVENT, event)


def _phase(job: Obj) -> str | None:
    state = (job.get("status") or {}).get("state")
    phase = state.get("phase") if isinstance(state, Mapping) else None
    return phase if isinstance(phase, str) else None
