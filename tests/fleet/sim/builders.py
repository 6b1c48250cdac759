"""Node, pod and job dicts for the simulator's tests, shaped as a real cluster shows them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from fleet.apiserver.resources import Obj
from fleet.sim.jobs import build_pods

SAMPLE = Path(__file__).resolve().parents[3] / "config" / "samples" / "pytorch_multinodes_acjob_910b.yaml"


def node(
    name: str,
    *,
    npus: int = 8,
    accelerator_type: str | None = "module-910b-8",
    cpu: str = "188",
    memory: str = "1500Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
) -> Obj:
    all_labels = {
        "kubernetes.io/hostname": name,
        "host-arch": "huawei-arm",
        "accelerator": "huawei-Ascend910",
    }
    if accelerator_type is not None:
        all_labels["accelerator-type"] = accelerator_type
    all_labels.update(labels or {})
    resources = {"huawei.com/Ascend910": str(npus), "cpu": cpu, "memory": memory, "pods": pods}
    spec: dict[str, Any] = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": spec,
        "status": {
            "allocatable": resources,
            "capacity": dict(resources),
            "conditions": [{"type": "Ready", "status": "True" if ready else "Unknown"}],
            "addresses": [{"type": "InternalIP", "address": f"10.0.0.{abs(hash(name)) % 250 + 1}"}],
        },
    }


def sample_job(name: str = "default-test-pytorch", namespace: str = "default") -> Obj:
    job: Obj = yaml.safe_load(SAMPLE.read_text())
    job["metadata"]["name"] = name
    job["metadata"]["namespace"] = namespace
    job["metadata"]["uid"] = f"uid-{name}"
    for spec in job["spec"]["replicaSpecs"].values():
        terms = spec["template"]["spec"]["affinity"]["podAntiAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        terms[0]["labelSelector"]["matchExpressions"][0]["values"] = [name]
    return job


def simple_job(
    name: str,
    *,
    workers: int = 1,
    npus: int = 8,
    cpu: str | None = None,
    memory: str | None = None,
    node_selector: dict[str, str] | None = None,
    anti_affinity: bool = True,
    tolerations: list[dict[str, str]] | None = None,
    namespace: str = "default",
) -> Obj:
    """A one-replica-type job (``Worker``) of ``workers`` identical pods."""
    requests: dict[str, str] = {"huawei.com/Ascend910": str(npus)} if npus else {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    pod_spec: dict[str, Any] = {
        "containers": [
            {
                "name": "ascend",
                "image": "train:latest",
                "resources": {"requests": requests, "limits": requests},
            }
        ],
    }
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    if tolerations:
        pod_spec["tolerations"] = tolerations
    if anti_affinity:
        pod_spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {
                            "matchExpressions": [{"key": "job-name", "operator": "In", "values": [name]}]
                        },
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
    return {
        "apiVersion": "mindxdl.gitee.com/v1",
        "kind": "AscendJob",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {"replicaSpecs": {"Worker": {"replicas": workers, "template": {"spec": pod_spec}}}},
    }


def pods_of(job: Obj) -> list[Obj]:
    return build_pods(job)


def bound(pod: Obj, node_name: str, phase: str = "Running") -> Obj:
    placed = copy.deepcopy(pod)
    placed["spec"]["nodeName"] = node_name
    placed["status"] = {"phase": phase}
    return placed
