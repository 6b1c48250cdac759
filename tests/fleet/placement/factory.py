"""Plain Kubernetes JSON for placement tests: nodes, pods and AscendJobs as a watch delivers them."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

from fleet.ascend import NPU_RESOURCE
from fleet.placement import Demand
from fleet.workloads import ascendjob

SAMPLE = Path(__file__).resolve().parents[3] / "config" / "samples" / "pytorch_multinodes_acjob_910b.yaml"


def node(
    name: str,
    npus: int = 8,
    accelerator: str | None = "module-910b-8",
    *,
    cpu: str = "64",
    memory: str = "256Gi",
    pods: int = 110,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    ready: bool = True,
    cordoned: bool = False,
) -> dict[str, Any]:
    all_labels = {"kubernetes.io/hostname": name, "host-arch": "huawei-arm", **(labels or {})}
    if accelerator is not None:
        all_labels["accelerator-type"] = accelerator
    allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if npus:
        allocatable[NPU_RESOURCE] = str(npus)
    spec: dict[str, Any] = {"taints": taints or []}
    if cordoned:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": spec,
        "status": {
            "capacity": dict(allocatable),
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    name: str,
    node_name: str | None,
    npus: int = 0,
    *,
    cpu: str | None = None,
    namespace: str = "default",
    phase: str = "Running",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    requests: dict[str, str] = {}
    if npus:
        requests[NPU_RESOURCE] = str(npus)
    if cpu:
        requests["cpu"] = cpu
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": {"requests": requests}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
        "status": {"phase": phase},
    }


@functools.cache
def _sample() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    return loaded


def sample_job() -> dict[str, Any]:
    """A fresh copy of ``config/samples/pytorch_multinodes_acjob_910b.yaml``."""
    return copy.deepcopy(_sample())


def job(
    name: str = "job",
    *,
    workers: int = 1,
    npus: int = 8,
    cpu: str | None = None,
    selector: dict[str, str] | None = None,
    exclusive: bool = True,
    min_available: int | None = None,
    tolerations: list[dict[str, str]] | None = None,
    policy: str | None = None,
    master_npus: int | None = None,
    family: str | None = None,
) -> dict[str, Any]:
    """A pytorch AscendJob: a Master and ``workers`` Workers of ``npus`` NPUs each.

    ``family``: its ``ring-controller.atlas`` label (``ascend-910b`` in the sample); without it
    the job names no accelerator family and may use any node type."""
    obj = sample_job()
    obj["metadata"]["name"] = name
    if family is None:
        obj["metadata"]["labels"].pop("ring-controller.atlas", None)
    else:
        obj["metadata"]["labels"]["ring-controller.atlas"] = family
    if policy:
        obj["metadata"]["annotations"] = {"huawei.com/schedule_policy": policy}
    specs = obj["spec"]["replicaSpecs"]
    if workers == 0:
        del specs["Worker"]
    else:
        specs["Worker"]["replicas"] = workers
    for rtype, spec in specs.items():
        tpl = spec["template"]["spec"]
        n = master_npus if rtype == "Master" and master_npus is not None else npus
        resources: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
        if n:
            resources["requests"][NPU_RESOURCE] = resources["limits"][NPU_RESOURCE] = str(n)
        if cpu:
            resources["requests"]["cpu"] = cpu
        tpl["containers"][0]["resources"] = resources
        tpl["nodeSelector"] = dict(selector or {})
        if not exclusive:
            tpl.pop("affinity", None)
        else:
            terms = tpl["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            terms[0]["labelSelector"]["matchExpressions"][0]["values"] = [name]
        if tolerations:
            tpl["tolerations"] = copy.deepcopy(tolerations)
    rp = obj["spec"]["runPolicy"]["schedulingPolicy"]
    if min_available is None:
        rp.pop("minAvailable", None)
    else:
        rp["minAvailable"] = min_available
    return obj


def demand(obj: dict[str, Any]) -> Demand:
    return ascendjob.demand(obj)
