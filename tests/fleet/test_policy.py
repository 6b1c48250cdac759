"""PropagationPolicy: the seed's samples load as written; selection follows Karmada's precedence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from fleet.dispatch.context import DEFAULT_POLICY
from fleet.policy import PropagationPolicy, PurgeMode, ignored_fields, select_policy, why_ignored

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


def _karmada(text: str) -> PropagationPolicy:
    return PropagationPolicy.model_validate(yaml.safe_load(text))


#: A Karmada user's policy for AscendJobs: regions by field, a GPU-free cluster excluded, the
#: NotReady taint tolerated for two minutes, the newer purge mode, fields Fleet does not act on.
KARMADA_POLICY = """
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: ascend-training
  namespace: team-a
spec:
  resourceSelectors:
    - apiVersion: mindxdl.gitee.com/v1
      kind: AscendJob
  propagateDeps: true
  priority: 10
  schedulerName: default-scheduler
  conflictResolution: Abort
  placement:
    clusterAffinity:
      fieldSelector:
        matchExpressions:
          - key: region
            operator: In
            values:
              - cn-north-1
      exclude:
        - member-3
    clusterTolerations:
      - key: cluster.karmada.io/not-ready
        operator: Exists
        effect: NoExecute
        tolerationSeconds: 120
      - key: cluster.karmada.io/unreachable
        operator: Exists
        effect: NoExecute
        tolerationSeconds: 120
    spreadConstraints:
      - spreadByField: cluster
        maxGroups: 1
        minGroups: 1
  failover:
    application:
      decisionConditions:
        tolerationSeconds: 60
      purgeMode: Directly
"""


def test_a_karmada_policy_loads_and_names_what_fleet_ignores() -> None:
    policy = _karmada(KARMADA_POLICY)
    assert policy.spec.failover.application.purge_mode is PurgeMode.IMMEDIATELY  # Directly
    assert policy.spec.deps and policy.spec.priority == 10
    assert sorted(ignored_fields(policy)) == [
        "spec.conflictResolution",
        "spec.placement.spreadConstraints",
        "spec.schedulerName",
    ]
    assert why_ignored("spec.placement.spreadConstraints") == "a job runs whole in one member"
    assert select_policy(_job(namespace="team-a"), [policy]) is policy


def test_field_selector_matches_the_member_region_zone_and_provider_labels() -> None:
    affinity = _karmada(KARMADA_POLICY).spec.placement.cluster_affinity
    north = {"topology.kubernetes.io/region": "cn-north-1"}
    assert affinity.allows("member-1", north)
    assert not affinity.allows("member-1", {"topology.kubernetes.io/region": "cn-south-1"})
    assert not affinity.allows("member-1", {})  # no region: In does not match
    assert not affinity.allows("member-3", north)  # excluded
    not_aws = _policy(
        "p",
        placement={"clusterAffinity": {"fieldSelector": {"matchExpressions": [
            {"key": "provider", "operator": "NotIn", "values": ["aws"]}]}}},
    ).spec.placement.cluster_affinity  # fmt: skip
    assert not_aws.allows("m", {}) and not not_aws.allows("m", {"fleet.io/provider": "aws"})


def test_a_field_selector_on_a_field_karmada_does_not_have_is_refused() -> None:
    with pytest.raises(ValidationError, match="provider"):
        _policy("p", placement={"clusterAffinity": {"fieldSelector": {"matchExpressions": [
            {"key": "rack", "operator": "In", "values": ["r1"]}]}}})  # fmt: skip


def test_cluster_tolerations_of_the_not_ready_taint_set_the_cluster_failover_time() -> None:
    assert _karmada(KARMADA_POLICY).spec.cluster_failover_seconds() == 120
    assert _policy("p").spec.cluster_failover_seconds() == 30  # decisionConditions
    forever = _policy("p", placement={"clusterTolerations": [{"operator": "Exists"}]})
    assert forever.spec.cluster_failover_seconds() == float("inf")
    other = _policy("p", placement={"clusterTolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "npu", "effect": "NoSchedule"}]})  # fmt: skip
    assert other.spec.cluster_failover_seconds() == 30


@pytest.mark.parametrize(
    ("written", "mode"),
    [("Directly", PurgeMode.IMMEDIATELY), ("Immediately", PurgeMode.IMMEDIATELY),
     ("Gracefully", PurgeMode.GRACEFULLY), ("Graciously", PurgeMode.GRACEFULLY), ("Never", PurgeMode.NEVER)],
)  # fmt: skip
def test_every_purge_mode_spelling(written: str, mode: PurgeMode) -> None:
    policy = _policy("p", failover={"application": {"purgeMode": written}})
    assert policy.spec.failover.application.purge_mode is mode


def test_a_namespaced_policy_wins_over_a_cluster_policy_of_higher_priority() -> None:
    cluster = PropagationPolicy.model_validate(
        {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
         "metadata": {"name": "everyone"}, "spec": {"priority": 100, "resourceSelectors": [ACJOB]}}
    )  # fmt: skip
    mine = _policy("mine")
    assert select_policy(_job(namespace="default"), [cluster, mine]) is mine
    assert select_policy(_job(namespace="team-b"), [cluster, mine]) is cluster  # any namespace


def test_a_selector_with_a_name_ignores_its_label_selector() -> None:
    named = _policy(
        "n", resourceSelectors=[{**ACJOB, "name": "j", "labelSelector": {"matchLabels": {"a": "b"}}}]
    )
    assert select_policy(_job(), [named]) is named


def test_suspension_as_karmada_writes_it() -> None:
    held = _policy("p", suspension={"dispatching": True})
    assert held.spec.suspension.dispatching
    some = _policy("p", suspension={"dispatchingOnClusters": {"clusterNames": ["member-1"]}})
    assert some.spec.suspension.dispatching_on_clusters.cluster_names == ("member-1",)
