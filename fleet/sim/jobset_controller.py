"""The simulated JobSet controller of one member (``jobset.x-k8s.io/v1alpha2``).

Written from kubernetes-sigs/jobset's controller (``pkg/controllers/jobset_controller.go``,
``api/jobset/v1alpha2/jobset_types.go``) on its own terms, never from Fleet's adapter or
placement code, so that it judges what Fleet sends. One pass per tick over the member's
unfinished JobSets:

* pods: for each replicated job, ``replicas`` Jobs of ``parallelism`` pods (a Job runs no more
  than its ``completions``), named ``<jobset>-<replicatedJob>-<jobIndex>-<podIndex>`` and
  labelled ``jobset.sigs.k8s.io/jobset-name``, ``replicatedjob-name``, ``job-index``; a suspended
  JobSet has none (condition ``Suspended``);
* bound as one gang (every pod or none) by the simulator's own scheduler
  (:func:`fleet.sim.scheduler.schedule_pods`): the Jobs are then active and ready;
* after the JobSet's duration (``sim.fleet.io/duration-seconds``) every pod exits with
  ``sim.fleet.io/exit-code`` (default 0; 137 after :meth:`JobSetController.fail_job`). 0: every
  Job succeeded, so the success policy (All or Any of its target replicated jobs) is met:
  ``Completed`` (reason ``AllJobsCompleted``), ``terminalState: Completed``. Otherwise the Jobs
  failed: a ``FailJobSet`` rule of the failure policy that targets them ends the JobSet
  (``Failed``, ``FailJobSetActionMatched``); else, while ``restarts`` is below
  ``failurePolicy.maxRestarts`` (default 0), every Job is recreated (``restarts`` + 1); else
  ``Failed`` with reason ``ReachedMaxRestarts``;
* ``status.replicatedJobsStatus`` counts each replicated job's Jobs (``ready``, ``active``,
  ``succeeded``, ``failed``, ``suspended``).

A child JobSet made by another controller (a Kubeflow TrainJob's) is run the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from fleet.apiserver import DELETED, EVENT, NODE, POD, AlreadyExists, MemoryStore, NotFound, Obj
from fleet.jobset import (
    COMPLETED,
    FAILED,
    JOB_INDEX_LABEL,
    JOBSET_NAME_LABEL,
    REPLICATED_JOB_LABEL,
    SUSPENDED,
)
from fleet.sim.jobs import DURATION_ANNOTATION, EXIT_CODE_ANNOTATION, _with_string_quantities, job_event
from fleet.sim.predicates import PodSpecError, pod_info
from fleet.sim.scheduler import Cluster, schedule_pods
from fleet.sim.topology import Simulation
from fleet.timestamps import now_rfc3339
from fleet.workloads import JOBSET

__all__ = ["JobSetController", "jobset_pod_specs"]

log = logging.getLogger("fleet.sim.jobset_controller")

_COMPONENT: Final = "jobset-controller"
_KILLED: Final = 137
Key = tuple[str, str]


@dataclass
class _Tracked:
    uid: str
    finish_at: float | None = None


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _count(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


def jobset_pod_specs(job: Obj) -> list[tuple[str, int, int, Mapping[str, Any]]]:
    """``(replicatedJob, jobIndex, podIndex, pod template)`` for every pod the JobSet runs."""
    out = []
    for raw in _map(job.get("spec")).get("replicatedJobs") or []:
        rjob = _map(raw)
        job_spec = _map(_map(rjob.get("template")).get("spec"))
        pods = _count(job_spec.get("parallelism"), 1)
        if isinstance(job_spec.get("completions"), int):
            pods = min(pods, _count(job_spec.get("completions"), pods))
        for j in range(_count(rjob.get("replicas"), 1)):
            for p in range(pods):
                out.append((str(rjob.get("name")), j, p, _map(job_spec.get("template"))))
    return out


def _build_pods(job: Obj) -> list[Obj]:
    meta = job["metadata"]
    name, namespace = meta["name"], meta.get("namespace") or "default"
    owner = {
        "apiVersion": job["apiVersion"],
        "kind": job["kind"],
        "name": name,
        "uid": meta.get("uid", ""),
        "controller": True,
    }
    pods = []
    for rjob, j, p, template in jobset_pod_specs(job):
        spec = _with_string_quantities(_map(template.get("spec")))
        labels = {
            **_map(_map(template.get("metadata")).get("labels")),
            JOBSET_NAME_LABEL: name,
            REPLICATED_JOB_LABEL: rjob,
            JOB_INDEX_LABEL: str(j),
        }
        pod_meta = {
            "name": f"{name}-{rjob}-{j}-{p}",
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [owner],
        }
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec})
    return pods


class JobSetController:
    """The JobSet controller of one simulated member; :meth:`start` it next to the operator."""

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
        self._active: set[Key] = set()
        self._failures: set[Key] = set()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._watch(), name=f"{self.member}-jobsets"),
            asyncio.create_task(self._loop(), name=f"{self.member}-jobset"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    def fail_job(self, namespace: str, name: str) -> None:
        """Make the JobSet's pods exit 137 when their run is up."""
        self._failures.add((namespace, name))

    async def _watch(self) -> None:
        async for event in self.store.watch(JOBSET, None, resource_version=None):
            meta = event.object["metadata"]
            key = (meta.get("namespace") or "default", meta["name"])
            if event.type == DELETED:
                self._active.discard(key)
                self._jobs.pop(key, None)
                await self._delete_pods(event.object)
            elif _map(event.object.get("status")).get("terminalState"):
                self._active.discard(key)
            else:
                self._active.add(key)

    async def _loop(self) -> None:
        while True:
            try:
                await self.reconcile()
            except Exception:
                log.exception("event=jobset_reconcile_failed member=%s", self.member)
            await asyncio.sleep(self.simulation.tick_seconds)

    async def reconcile(self) -> None:
        for namespace, name in sorted(self._active):
            try:
                job = await self.store.get(JOBSET, namespace, name)
            except NotFound:
                continue
            if _map(job.get("status")).get("terminalState"):
                continue
            try:
                await self._reconcile(job)
            except (KeyError, TypeError, ValueError, PodSpecError) as exc:
                await self._end(job, [], FAILED, "InvalidSpec", f"the JobSet cannot run: {exc}")

    async def _reconcile(self, job: Obj) -> None:
        meta = job["metadata"]
        key = (meta.get("namespace") or "default", meta["name"])
        tracked = self._jobs.get(key)
        if tracked is None or tracked.uid != meta.get("uid"):
            tracked = self._jobs[key] = _Tracked(uid=str(meta.get("uid")))
        if _map(job.get("spec")).get("suspend") is True:
            await self._delete_pods(job)
            tracked.finish_at = None
            await self._write(job, [], {SUSPENDED: ("SuspendedJobs", "jobset is suspended")})
            return
        wanted = _build_pods(job)
        pods = await self._ensure_pods(job, wanted)
        unbound = [p for p in pods if not _map(p.get("spec")).get("nodeName")]
        if unbound:
            await self._schedule(job, unbound)
            pods = await self._pods(job)
        if any(not _map(p.get("spec")).get("nodeName") for p in pods):
            await self._write(job, pods, {})
            return
        now = self.clock()
        if tracked.finish_at is None:
            tracked.finish_at = now + self._duration(job)
        if now < tracked.finish_at:
            await self._write(job, pods, {})
            return
        code = self._exit_code(job, key)
        for pod in pods:
            await self._terminate(pod, code)
        pods = await self._pods(job)
        if code == 0:
            await self._end(job, pods, COMPLETED, "AllJobsCompleted", "jobset completed successfully")
            return
        failure = _map(_map(job.get("spec")).get("failurePolicy"))
        for raw in failure.get("rules") or []:
            rule = _map(raw)
            if rule.get("action") == "FailJobSet":
                message = f"failure policy rule {rule.get('name') or ''!r} matched: FailJobSet"
                await self._end(job, pods, FAILED, "FailJobSetActionMatched", message)
                return
        restarts = _count(_map(job.get("status")).get("restarts"), 0)
        if restarts < _count(failure.get("maxRestarts"), 0):
            await self._delete_pods(job)
            tracked.finish_at = None
            await self._write(job, [], {}, restarts=restarts + 1)
            await self._event(
                job, "Warning", "Restarting", f"jobs failed (exit {code}); restart {restarts + 1}"
            )
            return
        await self._end(
            job, pods, FAILED, "ReachedMaxRestarts", "jobset failed due to reaching max number of restarts"
        )

    def _duration(self, job: Obj) -> float:
        raw = _map(job["metadata"].get("annotations")).get(DURATION_ANNOTATION)
        try:
            return max(float(raw), 0.0) if raw is not None else self.simulation.job_duration_seconds
        except (TypeError, ValueError):
            return self.simulation.job_duration_seconds

    def _exit_code(self, job: Obj, key: Key) -> int:
        if key in self._failures:
            self._failures.discard(key)
            return _KILLED
        try:
            return int(str(_map(job["metadata"].get("annotations")).get(EXIT_CODE_ANNOTATION, 0)))
        except ValueError:
            return 1

    async def _end(self, job: Obj, pods: list[Obj], kind: str, reason: str, message: str) -> None:
        await self._write(job, pods, {kind: (reason, message)}, terminal=kind)
        self._jobs.pop((job["metadata"].get("namespace") or "default", job["metadata"]["name"]), None)
        log.info(
            "event=jobset_%s member=%s job=%s reason=%s",
            kind.lower(),
            self.member,
            job["metadata"]["name"],
            reason,
        )

    # -- pods ---------------------------------------------------------------------------------------

    async def _pods(self, job: Obj) -> list[Obj]:
        uid = job["metadata"].get("uid")
        namespace = job["metadata"].get("namespace") or "default"
        items, _, _ = await self.store.list(
            POD, namespace, label_selector=f"{JOBSET_NAME_LABEL}={job['metadata']['name']}"
        )
        return [
            p for p in items if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or ())
        ]

    async def _ensure_pods(self, job: Obj, wanted: list[Obj]) -> list[Obj]:
        have = {p["metadata"]["name"] for p in await self._pods(job)}
        for pod in wanted:
            if pod["metadata"]["name"] in have:
                continue
            pod["status"] = {"phase": "Pending"}
            with contextlib.suppress(AlreadyExists):
                await self.store.create(POD, pod)
        return await self._pods(job)

    async def _schedule(self, job: Obj, unbound: list[Obj]) -> None:
        nodes, _, _ = await self.store.list(NODE, None)
        all_pods, _, _ = await self.store.list(POD, None)
        bound = [p for p in all_pods if _map(p.get("spec")).get("nodeName")]
        cluster = Cluster.from_objects(nodes, bound)
        infos = [pod_info(p) for p in unbound]
        result = schedule_pods(cluster, infos)
        if not result.fits:
            return
        now = now_rfc3339()
        for pod in unbound:
            node = result.bindings.get(pod["metadata"]["name"])
            if node is None:
                continue
            pod["metadata"].pop("resourceVersion", None)
            pod["spec"]["nodeName"] = node
            placed = await self.store.update(POD, pod)
            placed["metadata"].pop("resourceVersion", None)
            placed["status"] = {"phase": "Running", "startTime": now}
            await self.store.update(POD, placed, subresource="status")
        await self._event(job, "Normal", "Scheduled", f"Bound {len(result.bindings)} pod(s)")

    async def _terminate(self, pod: Obj, code: int) -> None:
        pod["metadata"].pop("resourceVersion", None)
        pod["status"] = {
            **_map(pod.get("status")),
            "phase": "Succeeded" if code == 0 else "Failed",
            "containerStatuses": [
                {"name": c.get("name", ""), "state": {"terminated": {"exitCode": code}}}
                for c in pod["spec"].get("containers") or ()
            ],
        }
        with contextlib.suppress(NotFound):
            await self.store.update(POD, pod, subresource="status")

    async def _delete_pods(self, job: Obj) -> None:
        for pod in await self._pods(job):
            with contextlib.suppress(NotFound):
                await self.store.delete(POD, pod["metadata"].get("namespace"), pod["metadata"]["name"])

    # -- status -------------------------------------------------------------------------------------

    def _replicated_status(self, job: Obj, pods: list[Obj]) -> list[dict[str, Any]]:
        by_job: dict[tuple[str, str], list[str]] = {}
        for pod in pods:
            labels = _map(pod["metadata"].get("labels"))
            phase = str(_map(pod.get("status")).get("phase") or "Pending")
            bound = bool(_map(pod.get("spec")).get("nodeName"))
            by_job.setdefault(
                (str(labels.get(REPLICATED_JOB_LABEL)), str(labels.get(JOB_INDEX_LABEL))), []
            ).append(phase if bound or phase != "Pending" else "Unbound")
        suspended = _map(job.get("spec")).get("suspend") is True
        out = []
        for rjob in _map(job.get("spec")).get("replicatedJobs") or []:
            name = str(_map(rjob).get("name"))
            counts = dict.fromkeys(("ready", "succeeded", "failed", "active", "suspended"), 0)
            for (rname, _), phases in by_job.items():
                if rname != name:
                    continue
                if all(p == "Succeeded" for p in phases):
                    counts["succeeded"] += 1
                elif any(p == "Failed" for p in phases):
                    counts["failed"] += 1
                elif all(p == "Running" for p in phases):
                    counts["ready"] += 1
                    counts["active"] += 1
                elif any(p in ("Running", "Pending") for p in phases):
                    counts["active"] += 1
            if suspended:
                counts["suspended"] = _count(_map(rjob).get("replicas"), 1)
            out.append({"name": name, **counts})
        return out

    async def _write(
        self,
        job: Obj,
        pods: list[Obj],
        true: Mapping[str, tuple[str, str]],
        *,
        terminal: str | None = None,
        restarts: int | None = None,
    ) -> None:
        now = now_rfc3339()
        status = dict(_map(job.get("status")))
        known = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, Mapping)}
        conditions = []
        for kind in (SUSPENDED, COMPLETED, FAILED):
            before = known.get(kind)
            if kind in true:
                reason, message = true[kind]
                flipped = before is None or before.get("status") != "True"
                stamp = now if flipped else str(before.get("lastTransitionTime") or now) if before else now
                conditions.append(
                    {
                        "type": kind,
                        "status": "True",
                        "reason": reason,
                        "message": message,
                        "lastTransitionTime": stamp,
                    }
                )
            elif before is not None:
                flipped = before.get("status") != "False"
                stamp = now if flipped else str(before.get("lastTransitionTime") or now)
                conditions.append({**before, "status": "False", "lastTransitionTime": stamp})
        status["conditions"] = conditions
        status["replicatedJobsStatus"] = self._replicated_status(job, pods)
        status["restarts"] = restarts if restarts is not None else _count(status.get("restarts"), 0)
        if terminal is not None:
            status["terminalState"] = terminal
        if status == job.get("status"):
            return
        body = {**job, "metadata": {k: v for k, v in job["metadata"].items() if k != "resourceVersion"}}
        body["status"] = status
        with contextlib.suppress(NotFound):
            await self.store.update(JOBSET, body, subresource="status")
        if terminal is not None:
            reason, message = true[terminal]
            await self._event(job, "Normal" if terminal == COMPLETED else "Warning", reason, message)

    async def _event(self, job: Obj, kind: str, reason: str, message: str) -> None:
        event = job_event(job, kind, reason, message, source=_COMPONENT, member=self.member)
        with contextlib.suppress(NotFound):
            await self.store.create(EVENT, event)
