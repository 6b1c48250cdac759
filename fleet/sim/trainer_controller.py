"""The simulated Kubeflow Trainer v2 controller of one member: TrainJob on a training runtime.

Written from kubeflow/trainer on its own terms (never from Fleet's adapter), one pass per tick
over the member's unfinished TrainJobs:

* the runtime is the one ``spec.runtimeRef`` names in the member (a TrainingRuntime of the job's
  namespace, or a ClusterTrainingRuntime); none: ``Failed``, reason
  ``TrainingRuntimeNotSupported`` (``pkg/runtime/core``);
* the TrainJob becomes a JobSet of its name, owned by it (``pkg/runtime/framework/plugins/jobset``):
  the runtime's JobSet template; the replicated job labelled
  ``trainer.kubeflow.org/trainjob-ancestor-step: trainer`` gets one replica of ``numNodes`` pods
  (the TrainJob's ``trainer.numNodes``, else the runtime's ``mlPolicy.numNodes``, else 1) as its
  ``parallelism`` and ``completions``, and its ``node`` container the TrainJob's image, command,
  args, env and ``resourcesPerNode`` (per resource, over the runtime's); ``spec.suspend`` is
  passed on. The JobSet is run by the member's JobSet controller
  (:mod:`fleet.sim.jobset_controller`);
* the TrainJob's status follows the JobSet's (``JobSet.Status`` in the plugin): a true JobSet
  ``Completed`` becomes ``Complete``, a true ``Failed`` stays ``Failed`` (reason and message
  kept), ``replicatedJobsStatus`` becomes ``jobsStatus``; suspended: ``Suspended``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Mapping
from typing import Any, Final

from fleet.apiserver import DELETED, AlreadyExists, MemoryStore, NotFound, Obj
from fleet.sim.topology import Simulation
from fleet.timestamps import now_rfc3339
from fleet.trainer import (
    ANCESTOR_LABEL,
    ANCESTOR_TRAINER,
    COMPLETE,
    FAILED,
    NODE,
    RUNTIME_KIND,
    RUNTIME_NOT_SUPPORTED,
    SUSPENDED,
)
from fleet.workloads import JOBSET, RUNTIME_KINDS, TRAINJOB

__all__ = ["TrainerController"]

log = logging.getLogger("fleet.sim.trainer_controller")

_RUNTIMES: Final = {rt.kind: rt for rt in RUNTIME_KINDS}


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _child(job: Obj, runtime: Obj) -> Obj:
    """The JobSet the plugin builds of TrainJob ``job`` on ``runtime``."""
    spec = _map(job.get("spec"))
    trainer = _map(spec.get("trainer"))
    rspec = _map(runtime.get("spec"))
    template = _map(rspec.get("template"))
    js_spec: dict[str, Any] = copy.deepcopy(dict(_map(template.get("spec"))))
    nodes = trainer.get("numNodes") or _map(rspec.get("mlPolicy")).get("numNodes") or 1
    for rjob in js_spec.get("replicatedJobs") or []:
        job_template = rjob.setdefault("template", {})
        if _map(_map(job_template.get("metadata")).get("labels")).get(ANCESTOR_LABEL) != ANCESTOR_TRAINER:
            continue
        rjob["replicas"] = 1
        job_spec = job_template.setdefault("spec", {})
        job_spec["parallelism"] = job_spec["completions"] = nodes
        for container in job_spec.setdefault("template", {}).setdefault("spec", {}).get("containers") or []:
            if container.get("name") != NODE:
                continue
            for field in ("image", "command", "args"):
                if trainer.get(field) is not None:
                    container[field] = copy.deepcopy(trainer[field])
            env = {e.get("name"): e for e in container.get("env") or []}
            env.update({e.get("name"): e for e in trainer.get("env") or []})
            if env:
                container["env"] = list(env.values())
            wanted = _map(trainer.get("resourcesPerNode"))
            if wanted:
                resources = dict(_map(container.get("resources")))
                for part in ("limits", "requests"):
                    merged = {**_map(resources.get(part)), **_map(wanted.get(part))}
                    if merged:
                        resources[part] = merged
                container["resources"] = resources
    if spec.get("suspend") is True:
        js_spec["suspend"] = True
    meta = job["metadata"]
    annotations = dict(_map(meta.get("annotations")))
    return {
        "apiVersion": JOBSET.api_version,
        "kind": JOBSET.kind,
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace") or "default",
            "labels": dict(_map(template.get("metadata")).get("labels") or {}),
            "annotations": annotations,  # the simulation's duration and exit code ride along
            "ownerReferences": [
                {
                    "apiVersion": job["apiVersion"],
                    "kind": job["kind"],
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                    "controller": True,
                }
            ],
        },
        "spec": js_spec,
    }


class TrainerController:
    """The Trainer controller of one simulated member; :meth:`start` it next to the operator."""

    def __init__(self, store: MemoryStore, simulation: Simulation, *, member: str) -> None:
        self.store = store
        self.simulation = simulation
        self.member = member
        self._active: set[tuple[str, str]] = set()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._watch(), name=f"{self.member}-trainjobs"),
            asyncio.create_task(self._loop(), name=f"{self.member}-trainer"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def _watch(self) -> None:
        async for event in self.store.watch(TRAINJOB, None, resource_version=None):
            meta = event.object["metadata"]
            key = (meta.get("namespace") or "default", meta["name"])
            if event.type == DELETED:
                self._active.discard(key)
                with contextlib.suppress(NotFound):
                    child = await self.store.get(JOBSET, key[0], key[1])
                    owners = child["metadata"].get("ownerReferences") or []
                    if any(o.get("uid") == meta.get("uid") for o in owners):
                        await self.store.delete(JOBSET, key[0], key[1])
            elif self._finished(event.object):
                self._active.discard(key)
            else:
                self._active.add(key)

    @staticmethod
    def _finished(job: Obj) -> bool:
        return any(
            c.get("type") in (COMPLETE, FAILED) and c.get("status") == "True"
            for c in _map(job.get("status")).get("conditions") or []
        )

    async def _loop(self) -> None:
        while True:
            for namespace, name in sorted(self._active):
                try:
                    await self._reconcile(namespace, name)
                except NotFound:
                    continue
                except Exception:
                    log.exception(
                        "event=trainjob_reconcile_failed member=%s job=%s/%s", self.member, namespace, name
                    )
            await asyncio.sleep(self.simulation.tick_seconds)

    async def _runtime(self, job: Obj) -> Obj | None:
        ref = _map(_map(job.get("spec")).get("runtimeRef"))
        kind = str(ref.get("kind") or "ClusterTrainingRuntime")
        rt = _RUNTIMES.get(kind)
        if rt is None:
            return None
        namespace = (job["metadata"].get("namespace") or "default") if kind == RUNTIME_KIND else None
        try:
            return await self.store.get(rt, namespace, str(ref.get("name") or ""))
        except (NotFound, KeyError):
            return None

    async def _reconcile(self, namespace: str, name: str) -> None:
        job = await self.store.get(TRAINJOB, namespace, name)
        if self._finished(job):
            return
        try:
            child = await self.store.get(JOBSET, namespace, name)
        except NotFound:
            runtime = await self._runtime(job)
            if runtime is None:
                ref = _map(_map(job.get("spec")).get("runtimeRef"))
                kind = ref.get("kind") or "ClusterTrainingRuntime"
                message = f"the runtime {kind} {ref.get('name')!r} is not found"
                await self._write(job, {FAILED: (RUNTIME_NOT_SUPPORTED, message)}, [])
                return
            with contextlib.suppress(AlreadyExists):
                await self.store.create(JOBSET, _child(job, runtime))
            return
        status = _map(child.get("status"))
        true: dict[str, tuple[str, str]] = {}
        for condition in status.get("conditions") or []:
            if condition.get("status") != "True":
                continue
            kind = {"Completed": COMPLETE, "Failed": FAILED, "Suspended": SUSPENDED}.get(
                str(condition.get("type"))
            )
            if kind is not None:
                true[kind] = (str(condition.get("reason") or kind), str(condition.get("message") or ""))
        jobs = [
            {k: j.get(k, 0) for k in ("name", "ready", "succeeded", "failed", "active", "suspended")}
            for j in status.get("replicatedJobsStatus") or []
        ]
        await self._write(job, true, jobs)

    async def _write(self, job: Obj, true: Mapping[str, tuple[str, str]], jobs: list[dict[str, Any]]) -> None:
        now = now_rfc3339()
        status = dict(_map(job.get("status")))
        known = {c.get("type"): c for c in status.get("conditions") or []}
        conditions = []
        for kind in (SUSPENDED, COMPLETE, FAILED):
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
                conditions.append({**before, "status": "False"})
        status["conditions"] = conditions
        status["jobsStatus"] = jobs
        if status == job.get("status"):
            return
        body = {**job, "metadata": {k: v for k, v in job["metadata"].items() if k != "resourceVersion"}}
        body["status"] = status
        with contextlib.suppress(NotFound):
            await self.store.update(TRAINJOB, body, subresource="status")
