"""PropagationPolicy: which jobs Fleet propagates how, as the fleet seed writes it.

The samples in ``config/samples/propagationpolicy-*.yaml`` use the fleet's own API group
(``policy.one.alibabacloud.com/v1alpha1``) and Karmada's shape. Fleet reads the parts that steer
its decisions:

* ``resourceSelectors`` pick the jobs (apiVersion + kind, optionally name, namespace, labels);
* ``placement.clusterAffinity`` limits members (names, exclusions, a label selector over member
  labels); ``placement.replicaScheduling.customSchedulingType: Gang`` is what Fleet always does,
  so any other value is refused rather than silently ignored;
* ``failover.application`` gives the toleration before a job is moved and the ``purgeMode`` of its
  old copy (``Graciously`` is the older spelling of ``Gracefully``); ``failover`` itself, Fleet's
  own fields, bounds the retries (``backoffLimit``, ``backoffSeconds``) and sizes how long a
  member a job failed on is avoided (``exclusionSeconds``, ``exclusionLimitSeconds``: see
  :mod:`fleet.dispatch.handback`);
* ``suspension.scheduling: true`` sends matching jobs through the quota queue (Kube Queue's
  convention); ``false`` limits them by capacity alone.

When several policies match a job, the most explicit wins as in Karmada: higher ``priority``,
then a selector naming the job, then one with a label selector, then one matching the kind only,
then the name in alphabetical order. With none, :func:`default_policy` applies
(:data:`fleet.dispatch.context.DEFAULT_POLICY`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "API_VERSION",
    "KIND",
    "ClusterAffinity",
    "LabelSelector",
    "PropagationPolicy",
    "PurgeMode",
    "ResourceSelector",
    "default_policy",
    "select_policy",
]

GROUP = "policy.one.alibabacloud.com"
API_VERSION = f"{GROUP}/v1alpha1"
KIND = "PropagationPolicy"


class _Strict(BaseModel):
    """Unknown fields are refused: a misspelt toleration must not silently become the default."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class PurgeMode(StrEnum):
    IMMEDIATELY = "Immediately"
    GRACEFULLY = "Gracefully"
    NEVER = "Never"


class LabelRequirement(_Strict):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        present = self.key in labels and labels[self.key] in self.values
        return present if self.operator == "In" else not present


class LabelSelector(_Strict):
    """A structured Kubernetes label selector (``matchLabels`` and ``matchExpressions``)."""

    match_labels: dict[str, str] = Field(default_factory=dict, alias="matchLabels")
    match_expressions: tuple[LabelRequirement, ...] = Field(default=(), alias="matchExpressions")

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )


class ResourceSelector(_Strict):
    api_version: str = Field(alias="apiVersion")
    kind: str
    name: str | None = None
    namespace: str | None = None
    label_selector: LabelSelector | None = Field(default=None, alias="labelSelector")

    def matches(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        if obj.get("apiVersion") != self.api_version or obj.get("kind") != self.kind:
            return False
        if self.name is not None and meta.get("name") != self.name:
            return False
        if self.namespace is not None and meta.get("namespace", "default") != self.namespace:
            return False
        return self.label_selector is None or self.label_selector.matches(meta.get("labels") or {})

    @property
    def explicitness(self) -> int:
        """Karmada's match levels: by name 3, by label selector 2, by kind only 1."""
        if self.name is not None:
            return 3
        return 2 if self.label_selector is not None else 1


class ClusterAffinity(_Strict):
    cluster_names: tuple[str, ...] = Field(default=(), alias="clusterNames")
    exclude: tuple[str, ...] = ()
    label_selector: LabelSelector | None = Field(default=None, alias="labelSelector")

    def allows(self, member: str, member_labels: Mapping[str, str]) -> bool:
        if member in self.exclude:
            return False
        if self.cluster_names and member not in self.cluster_names:
            return False
        return self.label_selector is None or self.label_selector.matches(member_labels)


class ReplicaScheduling(_Strict):
    replica_scheduling_type: Literal["Divided", "Duplicated"] = Field(
        default="Divided", alias="replicaSchedulingType"
    )
    custom_scheduling_type: Literal["Gang"] = Field(default="Gang", alias="customSchedulingType")


class Placement(_Strict):
    cluster_affinity: ClusterAffinity = Field(default_factory=ClusterAffinity, alias="clusterAffinity")
    replica_scheduling: ReplicaScheduling = Field(
        default_factory=ReplicaScheduling, alias="replicaScheduling"
    )
    #: Fleet's own choice among members that fit: least capacity left (pack) or most (spread).
    strategy: Literal["pack", "spread"] = "pack"


class DecisionConditions(_Strict):
    toleration_seconds: int = Field(default=30, ge=0, alias="tolerationSeconds")


class ApplicationFailover(_Strict):
    decision_conditions: DecisionConditions = Field(
        default_factory=DecisionConditions, alias="decisionConditions"
    )
    purge_mode: PurgeMode = Field(default=PurgeMode.IMMEDIATELY, alias="purgeMode")
    grace_period_seconds: int = Field(default=600, ge=1, alias="gracePeriodSeconds")

    @field_validator("purge_mode", mode="before")
    @classmethod
    def _old_spelling(cls, value: object) -> object:
        return PurgeMode.GRACEFULLY if value == "Graciously" else value


class Failover(_Strict):
    application: ApplicationFailover = Field(default_factory=ApplicationFailover)
    #: Attempts after the first before the job is Failed for good, and the first backoff delay.
    backoff_limit: int = Field(default=3, ge=0, alias="backoffLimit")
    backoff_seconds: float = Field(default=10.0, gt=0, alias="backoffSeconds")
    #: How long a member a job failed on is avoided the first time a failure there excludes it
    #: (doubling with each further failure there), and the longest it ever is
    #: (:func:`fleet.dispatch.handback.exclusion_seconds`).
    exclusion_seconds: float = Field(default=10.0, ge=0, alias="exclusionSeconds")
    exclusion_limit_seconds: float = Field(default=300.0, ge=0, alias="exclusionLimitSeconds")


class Suspension(_Strict):
    scheduling: bool = False


class PolicySpec(_Strict):
    propagate_deps: bool = Field(default=False, alias="propagateDeps")
    priority: int = 0
    resource_selectors: tuple[ResourceSelector, ...] = Field(alias="resourceSelectors", min_length=1)
    placement: Placement = Field(default_factory=Placement)
    failover: Failover = Field(default_factory=Failover)
    suspension: Suspension = Field(default_factory=Suspension)


class Metadata(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    name: str
    namespace: str = "default"


class PropagationPolicy(_Strict):
    api_version: Literal["policy.one.alibabacloud.com/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["PropagationPolicy"]
    metadata: Metadata
    spec: PolicySpec
    status: dict[str, Any] | None = None

    def match_level(self, job: Mapping[str, Any]) -> int:
        """How explicitly this policy selects ``job`` (0: it does not)."""
        levels = [s.explicitness for s in self.spec.resource_selectors if s.matches(job)]
        return max(levels, default=0)


def default_policy(kinds: Sequence[tuple[str, str]]) -> PropagationPolicy:
    """The policy of a job no policy selects (:func:`select_policy` found none): queued, with the
    defaults of every field. ``kinds``: (apiVersion, kind) of every job kind Fleet serves."""
    return PropagationPolicy.model_validate(
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": "fleet-default", "namespace": "kube-system"},
            "spec": {
                "resourceSelectors": [{"apiVersion": v, "kind": k} for v, k in kinds],
                "suspension": {"scheduling": True},
            },
        }
    )


#: What applies to a job no policy selects: gang, pack, queued under the quota tree, failover
#: after 30 s with the old copy purged first, 3 retries starting at 10 s and doubling, a member
#: the job failed on avoided from 10 s doubling to 300 s (not at all after one failure of its own).


def select_policy(job: Mapping[str, Any], policies: Iterable[PropagationPolicy]) -> PropagationPolicy | None:
    """The policy that governs ``job``, Karmada's precedence; ``None`` when none selects it.

    A policy only selects jobs of its own namespace, as a namespaced PropagationPolicy does.
    """
    namespace = (job.get("metadata") or {}).get("namespace", "default")
    candidates: Sequence[tuple[int, int, str, PropagationPolicy]] = [
        (p.spec.priority, level, p.metadata.name, p)
        for p in policies
        if p.metadata.namespace == namespace and (level := p.match_level(job)) > 0
    ]
    if not candidates:
        return None
    best = min(candidates, key=lambda c: (-c[0], -c[1], c[2]))
    return best[3]
