"""Small Kubernetes objects for member tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

SAMPLE_JOB = Path(__file__).resolve().parents[3] / "config" / "samples" / "pytorch_multinodes_acjob_910b.yaml"


def sample_job() -> dict[str, Any]:
    """The MindCluster sample AscendJob, as a user writes it."""
    loaded: dict[str, Any] = yaml.safe_load(SAMPLE_JOB.read_text())
    return loaded


def job(name: str, **labels: str) -> dict[str, Any]:
    """A one-pod AscendJob named ``name`` with ``labels``."""
    return {
        "apiVersion": "mindxdl.gitee.com/v1",
        "kind": "AscendJob",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "replicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "template": {
                        "spec": {"containers": [{"name": "ascend", "image": "pytorch-test:latest"}]}
                    },
                }
            }
        },
    }


def node(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {
            "allocatable": {"huawei.com/Ascend910": "2", "cpu": "64", "memory": "256Gi", "pods": "110"}
        },
    }


def pod(name: str, node_name: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "busybox"}]},
    }


def names(objects: Any) -> list[str]:
    return [obj["metadata"]["name"] for obj in objects]
