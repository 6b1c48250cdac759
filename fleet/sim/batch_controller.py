"""The simulated Kubernetes Job controller of one member: ``batch/v1`` Job.

It follows kube-controller-manager's job controller (kubernetes ``pkg/controller/job``:
``job_controller.go`` ``syncJob``, ``manageJob``, ``pod_failure_policy.go``), level-triggered,
one pass per tick over the member's Jobs. Its own rules, never Fleet's:

* pods ``<job>-<5 characters>`` (Indexed: ``<job>-<index>-<5 characters>``, annotated and
  labelled with their completion index), labelled ``batch.kubernetes.io/job-name``,
  ``batch.kubernetes.io/controller-uid`` and the legacy ``job-name``, ``controller-uid``: as many
  at once as ``parallelism`` (1 when unset) allows and ``completions`` still needs;
* no gang: the default scheduler binds each pod on its own (what fits now), an unbound pod is
  marked ``PodScheduled`` False, reason ``Unschedulable``;
* a pod runs for the job's duration (``sim.fleet.io/duration-seconds``) then exits with
  ``sim.fleet.io/exit-code`` (default 0; 137 for an injected failure: :meth:`fail_job`).
  0: Succeeded. Else the ``podFailurePolicy`` rules (``onExitCodes``, ``In``/``NotIn``) decide
  first: ``FailJob`` fails the job (``PodFailurePolicy``), ``Ignore`` does not count the
  failure; otherwise the pod's ``restartPolicy``: OnFailure restarts it in place, Never leaves
  it Failed and a new pod is made. Once more failures than ``backoffLimit`` (6 when unset):
  ``FailureTarget`` then ``Failed`` (``BackoffLimitExceeded``), the running pods killed;
* ``activeDeadlineSeconds`` past ``startTime``: ``Failed`` (``DeadlineExceeded``);
* done when ``completions`` pods succeeded (without ``completions``: once one succeeded and none
  is left running): ``SuccessCriteriaMet`` then ``Complete``, with ``completionTime``;
* ``suspend: true``: the pods deleted, ``Suspended`` (``JobSuspended``); false again: resumed.

Status as the controller writes it: ``active``, ``ready``, ``succeeded``, ``failed``,
``terminating``, ``startTime``, ``completionTime``, ``completedIndexes``, ``conditions``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from fleet.apiserver import DELETED, EVENT, POD, AlreadyExists, MemoryStore, NotFound, Obj, ResourceType
from fleet.batch import (
    BACKOFF_LIMIT_EXCEEDED,
    COMPLETION_INDEX_ANNOTATION,
    CONTROLLER_UID_LABEL,
    DEADLINE_EXCEEDED,
    DEFAULT_BACKOFF_LIMIT,
    JOB_NAME_LABEL,
    LEGACY_CONTROLLER_UID_LABEL,
    LEGACY_JOB_NAME_LABEL,
    POD_FAILURE_POLICY,
    SUSPENDED_REASON,
    JobCondition,
)
from fleet.sim.jobs import _with_string_quantities, job_event
from fleet.sim.predicates import PodSpecError, pod_info
from fleet.sim.scheduler import schedule_pods
from fleet.sim.t9k_controller import T9kController
from fleet.sim.topology import Simulation
from fleet.timestamps import now_rfc3339
from fleet.workloads import BATCH_JOB

__all__ = ["JobController", "exit_action"]

log = logging.getLogger("fleet.sim.batch_controller")

_COMPONENT: Final = "job-controller"
_KILLED: Final = 137
_DONE: Final = (JobCondition.COMPLETE, JobCondition.FAILED)


def _spec(job: Obj) -> Mapping[str, Any]:
    spec = job.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def exit_action(job: Obj, code: int) -> str | None:
    """The action of the first ``podFailurePolicy`` rule whose ``onExitCodes`` match ``code``."""
    policy = _spec(job).get("podFailurePolicy") or {}
    for rule in policy.get("rules") or []:
        codes = rule.get("onExitCodes") if isinstance(rule, Mapping) else None
        if not isinstance(codes, Mapping):
            continue
        values = codes.get("values") or []
        matched = code in values if codes.get("operator") == "In" else code not in values
        if matched:
            return str(rule.get("action"))
    return None


@dataclass
class _Run:
    uid: str
    #: Pod name -> when it exits (monotonic).
    finish: dict[str, float] = field(default_factory=dict)
    started: float | None = None
    completed: set[int] = field(default_factory=set)


class JobController(T9kController):
    """Kubernetes' job controller of one simulated member (the T9k controller's pod plumbing,
    its own rules); :meth:`start` it next to the operator."""

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

    async def start(self) -> None:
        # No capacity watch: the default scheduler tries a Job's unbound pods every pass.
        self._tasks = [
            asyncio.create_task(self._watch(BATCH_JOB), name=f"{self.member}-jobs"),
            asyncio.create_task(self._loop(), name=f"{self.member}-job-controller"),
        ]

    async def _watch(self, rt: ResourceType) -> None:
        async for event in self.store.watch(rt, None, resource_version=None):
            meta = event.object["metadata"]
            key = (rt.kind, meta.get("namespace") or "default", meta["name"])
            if event.type != DELETED:
                if _finished(event.object):
                    self._active.pop(key, None)
                else:
                    self._active[key] = rt
                continue
            self._active.pop(key, None)
            self._runs.pop((key[1], key[2]), None)
            for pod in await self._own_pods(event.object):
                with contextlib.suppress(NotFound):
                    await self.store.delete(POD, key[1], pod["metadata"]["name"])

    async def reconcile(self) -> None:
        """One pass over the member's unfinished Jobs."""
        self._cluster = None
        for (_, namespace, name), rt in list(self._active.items()):
            try:
                job = await self.store.get(rt, namespace, name)
            except NotFound:
                continue
            if _finished(job):
                continue
            try:
                await self._sync(job)
            except (KeyError, TypeError, ValueError, PodSpecError) as exc:
                log.warning("event=job_invalid member=%s job=%s error=%s", self.member, name, exc)

    # -- syncJob ------------------------------------------------------------------------------------

    async def _sync(self, job: Obj) -> None:
        meta = job["metadata"]
        key = (meta.get("namespace") or "default", meta["name"])
        run = self._runs.get(key)
        if run is None or run.uid != meta.get("uid"):
            run = self._runs[key] = _Run(uid=str(meta.get("uid")))
        status = dict(job.get("status") or {})
        pods = await self._own_pods(job)
        if _spec(job).get("suspend") is True:
            await self._delete(pods)
            run.finish.clear()
            status.update(active=0, ready=0)
            await self._put(job, status, {JobCondition.SUSPENDED: (SUSPENDED_REASON, "Job suspended")})
            return
        now = self.clock()
        if run.started is None:
            run.started = now
            status.setdefault("startTime", now_rfc3339())
        conditions: dict[str, tuple[str, str]] = {}
        deadline = _spec(job).get("activeDeadlineSeconds")
        if isinstance(deadline, int) and now - run.started >= deadline:
            await self._kill(pods)
            message = "Job was active longer than specified deadline"
            await self._end(job, status, await self._own_pods(job), DEADLINE_EXCEEDED, message)
            return
        failed = int(status.get("failed") or 0)
        succeeded = int(status.get("succeeded") or 0)
        # Pods whose run is up exit now.
        for pod in pods:
            name = pod["metadata"]["name"]
            phase = (pod.get("status") or {}).get("phase")
            if phase != "Running" or name not in run.finish or now < run.finish[name]:
                continue
            code = self._exit_code(job)
            if code == 0:
                await self._terminate(pod, 0)
                succeeded += 1
                index = pod["metadata"].get("annotations", {}).get(COMPLETION_INDEX_ANNOTATION)
                if index is not None:
                    run.completed.add(int(index))
                continue
            action = exit_action(job, code)
            if action == "Ignore":
                await self._terminate(pod, code)
                await self._delete([pod])
                continue
            failed += 1
            if action == "FailJob":
                await self._terminate(pod, code)
                status.update(failed=failed, succeeded=succeeded)
                message = (
                    f"Container {name} for pod {key[0]}/{name} failed with exit code {code} "
                    "matching FailJob rule"
                )
                await self._kill(await self._own_pods(job))
                await self._end(job, status, await self._own_pods(job), POD_FAILURE_POLICY, message)
                return
            if (pod.get("spec") or {}).get("restartPolicy") == "OnFailure":
                run.finish[name] = now + self._duration(job)  # the kubelet restarts the container
                continue
            await self._terminate(pod, code)
        status.update(failed=failed, succeeded=succeeded)
        pods = await self._own_pods(job)
        limit = _spec(job).get("backoffLimit", DEFAULT_BACKOFF_LIMIT)
        if failed > (limit if isinstance(limit, int) else DEFAULT_BACKOFF_LIMIT):
            await self._kill(pods)
            await self._end(
                job,
                status,
                await self._own_pods(job),
                BACKOFF_LIMIT_EXCEEDED,
                "Job has reached the specified backoff limit",
            )
            return
        running = [p for p in pods if (p.get("status") or {}).get("phase") in ("Pending", "Running")]
        completions = _spec(job).get("completions")
        done = succeeded >= completions if isinstance(completions, int) else succeeded > 0 and not running
        if done:
            conditions[JobCondition.SUCCESS_CRITERIA_MET] = (
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            )
            conditions[JobCondition.COMPLETE] = (
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            )
            await self._kill(running)
            status["completionTime"] = now_rfc3339()
            await self._put(job, self._counts(job, status, await self._own_pods(job), run), conditions)
            log.info("event=job_complete member=%s job=%s", self.member, key[1])
            return
        # manageJob: as many pods as parallelism allows and completions still needs.
        parallelism = _spec(job).get("parallelism")
        want = parallelism if isinstance(parallelism, int) else 1
        if isinstance(completions, int):
            want = min(want, completions - succeeded)
        elif succeeded > 0:
            want = 0
        for _ in range(max(want - len(running), 0)):
            await self._make_pod(job, run, running)
            running = [
                p
                for p in await self._own_pods(job)
                if (p.get("status") or {}).get("phase") in ("Pending", "Running")
            ]
        unbound = [p for p in running if not (p.get("spec") or {}).get("nodeName")]
        if unbound:
            await self._bind(job, unbound, run)
        await self._put(job, self._counts(job, status, await self._own_pods(job), run), conditions)

    def _exit_code(self, job: Obj) -> int:
        meta = job["metadata"]
        key = (meta.get("namespace") or "default", meta["name"])
        if key in self._failures:
            self._failures.discard(key)
            return _KILLED
        return super()._exit_code(job)

    async def _end(
        self, job: Obj, status: dict[str, Any], pods: list[Obj], reason: str, message: str
    ) -> None:
        conditions = {JobCondition.FAILURE_TARGET: (reason, message), JobCondition.FAILED: (reason, message)}
        run = self._runs.get((job["metadata"].get("namespace") or "default", job["metadata"]["name"]))
        counts = self._counts(job, status, pods, run or _Run(uid=""))
        await self._put(job, counts, conditions)
        log.info("event=job_failed member=%s job=%s reason=%s", self.member, job["metadata"]["name"], reason)

    # -- pods ---------------------------------------------------------------------------------------

    async def _own_pods(self, job: Obj) -> list[Obj]:
        namespace = job["metadata"].get("namespace") or "default"
        uid = job["metadata"].get("uid")
        pods, _, _ = await self.store.list(POD, namespace)
        return [
            p for p in pods if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or ())
        ]

    async def _make_pod(self, job: Obj, run: _Run, running: list[Obj]) -> None:
        meta = job["metadata"]
        name, namespace, uid = meta["name"], meta.get("namespace") or "default", meta.get("uid", "")
        template = _spec(job).get("template") or {}
        template_meta = template.get("metadata") or {}
        labels = {
            **(template_meta.get("labels") or {}),
            JOB_NAME_LABEL: name,
            CONTROLLER_UID_LABEL: uid,
            LEGACY_JOB_NAME_LABEL: name,
            LEGACY_CONTROLLER_UID_LABEL: uid,
        }
        annotations = dict(template_meta.get("annotations") or {})
        pod_name = f"{name}-{secrets.token_hex(3)[:5]}"
        if _spec(job).get("completionMode") == "Indexed":
            taken = run.completed | {
                int(p["metadata"].get("annotations", {}).get(COMPLETION_INDEX_ANNOTATION, -1))
                for p in running
            }
            index = next(i for i in range(int(_spec(job).get("completions") or 0) + 1) if i not in taken)
            annotations[COMPLETION_INDEX_ANNOTATION] = str(index)
            labels[COMPLETION_INDEX_ANNOTATION] = str(index)
            pod_name = f"{name}-{index}-{secrets.token_hex(3)[:5]}"
        owner = {
            "apiVersion": job["apiVersion"],
            "kind": job["kind"],
            "name": name,
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod_name,
                "namespace": namespace,
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [owner],
            },
            "spec": _with_string_quantities(template.get("spec") or {}),
            "status": {"phase": "Pending", "qosClass": "BestEffort"},
        }
        with contextlib.suppress(AlreadyExists):
            await self.store.create(POD, pod)

    async def _bind(self, job: Obj, unbound: list[Obj], run: _Run) -> None:
        """The default scheduler: each pod on its own, as many as fit now."""
        cluster = await self._view()
        infos = [pod_info(p) for p in unbound]
        result = schedule_pods(cluster, infos, min_available=1)
        now = now_rfc3339()
        for info in infos:
            if info.name in result.bindings:
                cluster.bind(info, result.bindings[info.name])
        for pod in unbound:
            node = result.bindings.get(pod["metadata"]["name"])
            pod["metadata"].pop("resourceVersion", None)
            if node is None:
                status = pod.get("status") or {}
                message = result.message or "0 nodes are available"
                if any(c.get("message") == message for c in status.get("conditions") or ()):
                    continue
                condition = {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastTransitionTime": now,
                }
                pod["status"] = {**status, "conditions": [condition]}
                with contextlib.suppress(NotFound):
                    await self.store.update(POD, pod, subresource="status")
                continue
            pod["spec"]["nodeName"] = node
            bound = await self.store.update(POD, pod)
            bound["metadata"].pop("resourceVersion", None)
            bound["status"] = {
                "phase": "Running",
                "startTime": now,
                "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                    {"type": "Ready", "status": "True", "lastTransitionTime": now},
                ],
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
            run.finish[bound["metadata"]["name"]] = self.clock() + self._duration(job)

    async def _kill(self, pods: list[Obj]) -> None:
        for pod in pods:
            if (pod.get("status") or {}).get("phase") in ("Pending", "Running"):
                await self._terminate(pod, _KILLED)

    async def _delete(self, pods: list[Obj]) -> None:
        for pod in pods:
            with contextlib.suppress(NotFound):
                await self.store.delete(
                    POD, pod["metadata"].get("namespace") or "default", pod["metadata"]["name"]
                )

    # -- status -------------------------------------------------------------------------------------

    def _counts(self, job: Obj, status: dict[str, Any], pods: list[Obj], run: _Run) -> dict[str, Any]:
        phases = [(p.get("status") or {}).get("phase") for p in pods]
        out = dict(status)
        out["active"] = sum(1 for p in phases if p in ("Pending", "Running"))
        out["ready"] = sum(1 for p in phases if p == "Running")
        out["terminating"] = 0
        out.setdefault("succeeded", 0)
        out.setdefault("failed", 0)
        out["uncountedTerminatedPods"] = {}
        if _spec(job).get("completionMode") == "Indexed" and run.completed:
            out["completedIndexes"] = _ranges(sorted(run.completed))
        return out

    async def _put(
        self,
        job: Obj,
        status: dict[str, Any],
        true: Mapping[str, tuple[str, str]],
    ) -> None:
        now = now_rfc3339()
        known = [dict(c) for c in (job.get("status") or {}).get("conditions") or [] if isinstance(c, Mapping)]
        by_type = {c.get("type"): c for c in known}
        for kind, (reason, message) in true.items():
            before = by_type.get(kind)
            if before is not None and before.get("status") == "True":
                continue
            condition = {
                "type": kind,
                "status": "True",
                "reason": reason,
                "message": message,
                "lastProbeTime": now,
                "lastTransitionTime": now,
            }
            if before is not None:
                known[known.index(before)] = condition
            else:
                known.append(condition)
        if JobCondition.SUSPENDED not in true:
            for i, c in enumerate(known):
                if c.get("type") == JobCondition.SUSPENDED and c.get("status") == "True":
                    known[i] = {
                        **c,
                        "status": "False",
                        "reason": "JobResumed",
                        "message": "Job resumed",
                        "lastTransitionTime": now,
                    }
        status["conditions"] = known
        if status == job.get("status"):
            return
        body = {**job, "metadata": {k: v for k, v in job["metadata"].items() if k != "resourceVersion"}}
        body["status"] = status
        try:
            await self.store.update(BATCH_JOB, body, subresource="status")
        except NotFound:
            return
        for kind, (reason, message) in true.items():
            if (by_type.get(kind) or {}).get("status") != "True":
                warning = kind in (JobCondition.FAILED, JobCondition.FAILURE_TARGET)
                await self._event(job, "Warning" if warning else "Normal", reason, message)

    async def _event(self, job: Obj, kind: str, reason: str, message: str) -> None:
        event = job_event(job, kind, reason, message, source=_COMPONENT, member=self.member)
        with contextlib.suppress(NotFound):
            await self.store.create(EVENT, event)


def _finished(job: Obj) -> bool:
    return any(
        isinstance(c, Mapping) and c.get("type") in _DONE and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def _ranges(indexes: list[int]) -> str:
    """``1,3-5,7``: completed indexes as the controller writes them."""
    out: list[str] = []
    start = prev = indexes[0]
    for i in [*indexes[1:], -2]:
        if i == prev + 1:
            prev = i
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = i
    return ",".join(out)
