"""Which objects a job references, read from its pod templates as Kubernetes users write them."""

from __future__ import annotations

from typing import Any

import yaml

from fleet.dispatch.companions import (
    COMPANION_LABEL,
    COMPANIONS_ANNOTATION,
    Ref,
    held_by,
    member_body,
    references,
)

#: A MindSpore-style job whose pods take configuration every way a pod spec can.
JOB = yaml.safe_load(
    """
apiVersion: mindxdl.gitee.com/v1
kind: AscendJob
metadata: {name: ms-job, namespace: team-a}
spec:
  replicaSpecs:
    Scheduler:
      template:
        spec:
          subdomain: ms-job-hosts
          imagePullSecrets: [{name: registry-auth}]
          initContainers:
          - name: fetch
            image: busybox
            envFrom: [{secretRef: {name: obs-credentials}}]
          containers:
          - name: ascend
            image: mindspore:latest
            envFrom: [{configMapRef: {name: train-env}}]
            env:
            - name: LOG_LEVEL
              valueFrom: {configMapKeyRef: {name: log-settings, key: level, optional: true}}
            - name: TOKEN
              valueFrom: {secretKeyRef: {name: api-token, key: token}}
          volumes:
          - name: ascend-910-config
            configMap: {name: rings-config-ms-job}
          - name: certs
            secret: {secretName: tls-certs}
          - name: bundle
            projected:
              sources:
              - configMap: {name: hosts-file}
              - secret: {name: bundle-key}
    Worker:
      template:
        spec:
          containers:
          - name: ascend
            image: mindspore:latest
            envFrom: [{configMapRef: {name: train-env}}]
"""
)


def test_every_kind_of_reference_is_found_once() -> None:
    assert references(JOB) == [
        Ref("ConfigMap", "fault-config-ms-job", optional=True),
        Ref("ConfigMap", "hosts-file"),
        Ref("ConfigMap", "log-settings", optional=True),
        Ref("ConfigMap", "reset-config-ms-job", optional=True),
        Ref("ConfigMap", "rings-config-ms-job"),
        Ref("ConfigMap", "train-env"),
        Ref("Secret", "api-token"),
        Ref("Secret", "bundle-key"),
        Ref("Secret", "obs-credentials"),
        Ref("Secret", "registry-auth", optional=True),
        Ref("Secret", "tls-certs"),
        Ref("Service", "ms-job-hosts", optional=True),
    ]


def test_a_job_without_references_still_carries_mindclusters_configmaps_if_they_exist() -> None:
    bare: dict[str, Any] = {"metadata": {"name": "j"}, "spec": {"replicaSpecs": {}}}
    assert [r.name for r in references(bare)] == ["fault-config-j", "reset-config-j", "rings-config-j"]
    assert all(r.optional for r in references(bare))


def test_the_member_copy_keeps_content_and_labels_not_the_fleets_metadata() -> None:
    fleet_obj = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "s",
            "namespace": "team-a",
            "uid": "u",
            "resourceVersion": "7",
            "labels": {"app": "x"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}", "note": "n"},
        },
        "spec": {"clusterIP": "10.96.1.2", "clusterIPs": ["10.96.1.2"], "ports": [{"port": 2222}]},
        "status": {"loadBalancer": {}},
    }
    body = member_body(fleet_obj)
    assert body["metadata"] == {
        "name": "s",
        "namespace": "team-a",
        "labels": {"app": "x", COMPANION_LABEL: "true"},
        "annotations": {"note": "n"},
    }
    assert body["spec"] == {"ports": [{"port": 2222}]}  # the member gives its own address
    assert "status" not in body


def test_what_fleet_made_for_a_copy_is_read_from_its_annotation_only() -> None:
    copy = {"metadata": {"annotations": {COMPANIONS_ANNOTATION: "ConfigMap/a, Secret/b,Pod/x,Service/"}}}
    assert held_by(copy) == {("ConfigMap", "a"), ("Secret", "b")}
    assert held_by(JOB) == set()  # references alone are no licence to delete anything
