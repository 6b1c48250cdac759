"""PropagationPolicy: the seed's samples load as written; selection follows Karmada's precedence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from fleet.dispatch.context import DEFAULT_POLICY
from fleet.policy import PropagationPolicy, PurgeMode, select_policy

SAMPLES = Path(__file__).resolve().parents[2] / "config" / "samples"
ACJOB = {"apiVersion": "mindxdl.gitee.com/v1", "kind": "AscendJob"}


def _policy(name: str, **spec: Any) -> PropagationPolicy:
    body = {"resourceSelectors": [ACJOB], **spec}
    return PropagationPolicy.model_validate(
        {"apiVersion": "policy.one.alibabacloud.com/v1alpha1", "kind": "PropagationPolicy",
         "metadata": {"name": name}, "spec": body}
    )  # fmt: skip


def _job(name: str = "j", namespace: str = "default", **labels: str) -> dict[str, Any]:
    return {**ACJOB, "metadata": {"name": name, "namespace": namespace, "labels": labels}}


@pytest.mark.parametrize("sample", ["propagationpolicy-gang.yaml", "propagationpolicy-gang-queue.yaml"])
def test_samples_load_as_written(sample: str) -> None:
    policy = PropagationPolicy.model_validate(yaml.safe_load((SAMPLES / sample).read_text()))
    assert policy.spec.failover.application.decision_conditions.toleration_seconds == 30
    assert policy.spec.failover.application.purge_mode is PurgeMode.IMMEDIATELY
    assert policy.spec.placement.replica_scheduling.custom_scheduling_type == "Gang"


def test_queue_sample_selects_ascendjobs_and_queues_them() -> None:
    raw = yaml.safe_load((SAMPLES / "propagationpolicy-gang-queue.yaml").read_text())
    policy = PropagationPolicy.model_validate(raw)
    assert policy.spec.suspension.scheduling is True
    assert select_policy(_job(), [policy]) is policy
    gang_only = PropagationPolicy.model_validate(
        yaml.safe_load((SAMPLES / "propagationpolicy-gang.yaml").read_text())
    )
    assert select_policy(_job(), [gang_only]) is None  # it selects PyTorchJobs only


def test_older_graciously_spelling_is_gracefully() -> None:
    policy = _policy("p", failover={"application": {"purgeMode": "Graciously"}})
    assert policy.spec.failover.application.purge_mode is PurgeMode.GRACEFULLY


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        ({"failover": {"application": {"decisionConditions": {"tolerationSecond": 5}}}},
         "spec.failover.application.decisionConditions.tolerationSecond"),
        ({"failover": {"application": {"purgeMode": "Sometimes"}}}, "spec.failover.application.purgeMode"),
        ({"failover": {"application": {"decisionConditions": {"tolerationSeconds": -1}}}},
         "spec.failover.application.decisionConditions.tolerationSeconds"),
        ({"placement": {"replicaScheduling": {"customSchedulingType": "Spread"}}},
         "spec.placement.replicaScheduling.customSchedulingType"),
    ],
)  # fmt: skip
def test_bad_fields_are_refused_by_path(spec: dict[str, Any], where: str) -> None:
    with pytest.raises(ValidationError) as info:
        _policy("p", **spec)
    paths = {".".join(str(p) for p in e["loc"]) for e in info.value.errors()}
    assert where in paths


def test_precedence_priority_then_explicitness_then_name() -> None:
    by_kind = _policy("a-kind")
    by_label = _policy(
        "b-label", resourceSelectors=[{**ACJOB, "labelSelector": {"matchLabels": {"team": "x"}}}]
    )
    by_name = _policy("c-name", resourceSelectors=[{**ACJOB, "name": "j"}])
    urgent = _policy("d-urgent", priority=5)
    job = _job(team="x")
    assert select_policy(job, [by_kind, by_label]) is by_label
    assert select_policy(job, [by_kind, by_label, by_name]) is by_name
    assert select_policy(job, [by_kind, by_label, by_name, urgent]) is urgent
    assert select_policy(_job(team="y"), [by_label, by_kind]) is by_kind
    assert select_policy(job, [_policy("z"), _policy("m")]).metadata.name == "m"  # type: ignore[union-attr]


def test_policy_only_selects_jobs_in_its_namespace() -> None:
    assert select_policy(_job(namespace="other"), [_policy("p")]) is None


def test_cluster_affinity_names_exclusions_and_labels() -> None:
    policy = _policy(
        "p",
        placement={"clusterAffinity": {"clusterNames": ["m1", "m2"], "exclude": ["m2"],
                                       "labelSelector": {"matchExpressions": [
                                           {"key": "zone", "operator": "In", "values": ["a"]}]}}},
    )  # fmt: skip
    affinity = policy.spec.placement.cluster_affinity
    assert affinity.allows("m1", {"zone": "a"})
    assert not affinity.allows("m1", {"zone": "b"})
    assert not affinity.allows("m2", {"zone": "a"})
    assert not affinity.allows("m3", {"zone": "a"})


def test_default_policy_queues_ascendjobs_with_bounded_retries() -> None:
    assert DEFAULT_POLICY.match_level(_job()) == 1
    assert DEFAULT_POLICY.spec.suspension.scheduling is True
    assert DEFAULT_POLICY.spec.failover.backoff_limit == 3
    assert DEFAULT_POLICY.spec.failover.application.purge_mode is PurgeMode.IMMEDIATELY
