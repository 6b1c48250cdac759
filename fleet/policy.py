"""PropagationPolicy and ClusterPropagationPolicy: which jobs Fleet propagates how.

Both kinds are read in both API groups their users write them in: ACK One's
(``policy.one.alibabacloud.com/v1alpha1``, the fleet seed's samples in ``config/samples/``) and
Karmada's (``policy.karmada.io/v1alpha1``), with Karmada's shape (``pkg/apis/policy/v1alpha1/
propagation_types.go`` in karmada-io/karmada). Fleet acts on:

* ``resourceSelectors`` pick the jobs (apiVersion + kind, optionally name, namespace, labels;
  a selector with a name ignores its labelSelector, as Karmada's does);
* ``placement.clusterAffinity`` limits members: ``clusterNames``, ``exclude``, a
  ``labelSelector`` over member labels and a ``fieldSelector`` over the member's ``provider``,
  ``region`` and ``zone``, which Fleet reads from the member labels :data:`MEMBER_FIELDS` names;
* ``placement.clusterTolerations``: the one taint a Fleet member carries is Karmada's NotReady
  taint (``cluster.karmada.io/not-ready`` or ``cluster.karmada.io/unreachable``, ``NoExecute``):
  a toleration of it sets how long a job stays on a NotReady member before cluster failover
  (``tolerationSeconds``; without one, forever), as Karmada's taint manager reads it;
  ``placement.replicaScheduling.customSchedulingType: Gang`` is what Fleet always does, so any
  other value is refused rather than silently ignored;
* ``failover.application`` gives the toleration before a job is moved and the ``purgeMode`` of its
  old copy: ``Directly`` (Karmada's newer name) and ``Immediately`` delete it first,
  ``Gracefully`` (older spelling ``Graciously``) keeps it until the new copy runs or
  ``gracePeriodSeconds`` pass, ``Never`` leaves it; ``failover`` itself, Fleet's own fields,
  bounds the retries (``backoffLimit``, ``backoffSeconds``) and sizes how long a member a job
  failed on is avoided (``exclusionSeconds``, ``exclusionLimitSeconds``: see
  :mod:`fleet.dispatch.handback`);
* ``propagateDeps`` (and Karmada's deprecated ``association``): the ConfigMaps, Secrets and
  Services a job references go with it;
* ``priority`` and the precedence below;
* ``suspension.scheduling: true`` sends matching jobs through the quota queue (Kube Queue's
  convention; ``false`` limits them by capacity alone); Karmada's ``suspension.dispatching:
  true`` holds matching jobs queued, and ``suspension.dispatchingOnClusters.clusterNames`` keeps
  them off those members.

The other fields of Karmada's schema are accepted and not acted on; :func:`ignored_fields` names
them, and the API answers with a Warning for each. A field in neither schema is refused.

When several policies match a job, the most explicit wins as in Karmada: a PropagationPolicy of
the job's namespace before any ClusterPropagationPolicy; among either, higher ``priority``, then a
selector naming the job, then one with a label selector, then one matching the kind only, then
the name in alphabetical order. With none, :func:`default_policy` applies
(:data:`fleet.dispatch.context.DEFAULT_POLICY`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, ClassVar, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fleet.label_match import requirement_matches

__all__ = [
    "API_VERSION",
    "CLUSTER_KIND",
    "DEFAULT_POLICY_NAME",
    "KARMADA_API_VERSION",
    "KIND",
    "MEMBER_FIELDS",
    "NOT_READY_TAINTS",
    "ClusterAffinity",
    "LabelSelector",
    "PropagationPolicy",
    "PurgeMode",
    "ResourceSelector",
    "default_policy",
    "describe_policy",
    "ignored_fields",
    "policy_ref",
    "select_policy",
    "why_ignored",
]

GROUP = "policy.one.alibabacloud.com"
API_VERSION = f"{GROUP}/v1alpha1"
KARMADA_GROUP = "policy.karmada.io"
KARMADA_API_VERSION = f"{KARMADA_GROUP}/v1alpha1"
KIND = "PropagationPolicy"
CLUSTER_KIND = "ClusterPropagationPolicy"
#: Karmada's Cluster fields a ``fieldSelector`` matches (``provider``, ``region``, ``zone``),
#: and the member labels Fleet reads them from (it has no Cluster objects).
MEMBER_FIELDS: Final = {
    "provider": "fleet.io/provider",
    "region": "topology.kubernetes.io/region",
    "zone": "topology.kubernetes.io/zone",
}
#: The taints Karmada puts on a NotReady or unreachable cluster (``NoExecute``).
NOT_READY_TAINTS: Final = ("cluster.karmada.io/not-ready", "cluster.karmada.io/unreachable")


class _Strict(BaseModel):
    """Unknown fields are refused: a misspelt toleration must not silently become the default.

    ``IGNORED`` names the fields of Karmada's schema that Fleet accepts without acting on them,
    each with why (see :func:`ignored_fields`)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)
    IGNORED: ClassVar[Mapping[str, str]] = {}


class PurgeMode(StrEnum):
    IMMEDIATELY = "Immediately"
    GRACEFULLY = "Gracefully"
    NEVER = "Never"


#: Other spellings of the purge modes: Karmada's older ``Graciously`` and its newer ``Directly``,
#: which replaces ``Immediately`` (both delete the old copy before the new one is made).
_PURGE_SPELLINGS: Final = {"Graciously": PurgeMode.GRACEFULLY, "Directly": PurgeMode.IMMEDIATELY}


class LabelRequirement(_Strict):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return requirement_matches(labels, self.key, self.operator, self.values)


class LabelSelector(_Strict):
    """A structured Kubernetes label selector (``matchLabels`` and ``matchExpressions``)."""

    match_labels: dict[str, str] = Field(default_factory=dict, alias="matchLabels")
    match_expressions: tuple[LabelRequirement, ...] = Field(default=(), alias="matchExpressions")

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )


class FieldRequirement(_Strict):
    """A ``NodeSelectorRequirement`` over a Cluster field, as Karmada's ``fieldSelector`` holds."""

    key: Literal["provider", "region", "zone"]
    operator: Literal["In", "NotIn"]
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return requirement_matches(labels, MEMBER_FIELDS[self.key], self.operator, self.values)


class FieldSelector(_Strict):
    match_expressions: tuple[FieldRequirement, ...] = Field(default=(), alias="matchExpressions")

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.match_expressions)


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
        if self.name is not None or self.label_selector is None:
            return True  # Karmada: with a name, the label selector is ignored
        return self.label_selector.matches(meta.get("labels") or {})

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
    field_selector: FieldSelector | None = Field(default=None, alias="fieldSelector")

    def allows(self, member: str, member_labels: Mapping[str, str]) -> bool:
        if member in self.exclude:
            return False
        if self.cluster_names and member not in self.cluster_names:
            return False
        if self.field_selector is not None and not self.field_selector.matches(member_labels):
            return False
        return self.label_selector is None or self.label_selector.matches(member_labels)


class Toleration(_Strict):
    """A Kubernetes toleration, matched against cluster taints as Karmada matches them."""

    key: str = ""
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    toleration_seconds: int | None = Field(default=None, alias="tolerationSeconds")

    def tolerates(self, key: str, effect: str, value: str = "") -> bool:
        """``Toleration.ToleratesTaint`` of ``k8s.io/api/core/v1``."""
        if self.effect and self.effect != effect:
            return False
        if self.key and self.key != key:
            return False
        if self.operator == "Exists":
            return True
        return bool(self.key) and self.value == value


class ReplicaScheduling(_Strict):
    IGNORED = {
        "replicaDivisionPreference": "a job is one gang, never divided",
        "weightPreference": "a job is one gang, never divided",
    }
    replica_scheduling_type: Literal["Divided", "Duplicated"] = Field(
        default="Divided", alias="replicaSchedulingType"
    )
    custom_scheduling_type: Literal["Gang"] = Field(default="Gang", alias="customSchedulingType")
    replica_division_preference: Any = Field(default=None, alias="replicaDivisionPreference")
    weight_preference: Any = Field(default=None, alias="weightPreference")


class Placement(_Strict):
    IGNORED = {
        "clusterAffinities": "Fleet reads one clusterAffinity",
        "spreadConstraints": "a job runs whole in one member",
        "workloadAffinity": "Fleet places each job on its own",
    }
    cluster_affinity: ClusterAffinity = Field(default_factory=ClusterAffinity, alias="clusterAffinity")
    cluster_tolerations: tuple[Toleration, ...] = Field(default=(), alias="clusterTolerations")
    replica_scheduling: ReplicaScheduling = Field(
        default_factory=ReplicaScheduling, alias="replicaScheduling"
    )
    #: Fleet's own choice among members that fit: least capacity left (pack) or most (spread).
    strategy: Literal["pack", "spread"] = "pack"
    cluster_affinities: Any = Field(default=None, alias="clusterAffinities")
    spread_constraints: Any = Field(default=None, alias="spreadConstraints")
    workload_affinity: Any = Field(default=None, alias="workloadAffinity")


class DecisionConditions(_Strict):
    toleration_seconds: int = Field(default=30, ge=0, alias="tolerationSeconds")


class ApplicationFailover(_Strict):
    IGNORED = {"statePreservation": "a job's copy is made from the fleet object alone"}
    decision_conditions: DecisionConditions = Field(
        default_factory=DecisionConditions, alias="decisionConditions"
    )
    purge_mode: PurgeMode = Field(default=PurgeMode.IMMEDIATELY, alias="purgeMode")
    grace_period_seconds: int = Field(default=600, ge=1, alias="gracePeriodSeconds")
    state_preservation: Any = Field(default=None, alias="statePreservation")

    @field_validator("purge_mode", mode="before")
    @classmethod
    def _other_spellings(cls, value: object) -> object:
        return _PURGE_SPELLINGS.get(value, value) if isinstance(value, str) else value


class Failover(_Strict):
    IGNORED = {"cluster": "cluster failover follows clusterTolerations and failover.application's purgeMode"}
    application: ApplicationFailover = Field(default_factory=ApplicationFailover)
    cluster: Any = None
    #: Attempts after the first before the job is Failed for good, and the first backoff delay.
    backoff_limit: int = Field(default=3, ge=0, alias="backoffLimit")
    backoff_seconds: float = Field(default=10.0, gt=0, alias="backoffSeconds")
    #: How long a member a job failed on is avoided the first time a failure there excludes it
    #: (doubling with each further failure there), and the longest it ever is
    #: (:func:`fleet.dispatch.handback.exclusion_seconds`).
    exclusion_seconds: float = Field(default=10.0, ge=0, alias="exclusionSeconds")
    exclusion_limit_seconds: float = Field(default=300.0, ge=0, alias="exclusionLimitSeconds")


class SuspendClusters(_Strict):
    cluster_names: tuple[str, ...] = Field(default=(), alias="clusterNames")


class Suspension(_Strict):
    #: Kube Queue's: matching jobs go through the quota queue.
    scheduling: bool = False
    #: Karmada's: hold matching jobs (queued, sent nowhere) / keep them off these members.
    dispatching: bool = False
    dispatching_on_clusters: SuspendClusters = Field(
        default_factory=SuspendClusters, alias="dispatchingOnClusters"
    )


class PolicySpec(_Strict):
    IGNORED = {
        "preemption": "a job keeps the policy it was placed by",
        "dependentOverrides": "Fleet applies no OverridePolicy",
        "schedulerName": "Fleet's dispatcher places every job",
        "conflictResolution": "a member copy of the same attempt is adopted, any other refused",
        "activationPreference": "a policy change applies to the next placement",
        "preserveResourcesOnDeletion": "a deleted job's copy is purged by failover.application.purgeMode",
        "schedulePriority": "a job's priority comes from its PriorityClass",
    }
    propagate_deps: bool = Field(default=False, alias="propagateDeps")
    #: Karmada's deprecated name of ``propagateDeps``.
    association: bool = False
    priority: int = 0
    resource_selectors: tuple[ResourceSelector, ...] = Field(alias="resourceSelectors", min_length=1)
    placement: Placement = Field(default_factory=Placement)
    failover: Failover = Field(default_factory=Failover)
    suspension: Suspension = Field(default_factory=Suspension)
    preemption: Any = None
    dependent_overrides: Any = Field(default=None, alias="dependentOverrides")
    scheduler_name: Any = Field(default=None, alias="schedulerName")
    conflict_resolution: Any = Field(default=None, alias="conflictResolution")
    activation_preference: Any = Field(default=None, alias="activationPreference")
    preserve_resources_on_deletion: Any = Field(default=None, alias="preserveResourcesOnDeletion")
    schedule_priority: Any = Field(default=None, alias="schedulePriority")

    @property
    def deps(self) -> bool:
        """Whether the objects a job references travel with it."""
        return self.propagate_deps or self.association

    def cluster_failover_seconds(self) -> float:
        """How long a job stays on a NotReady member before cluster failover: a cluster
        toleration of Karmada's NotReady taints decides (its ``tolerationSeconds``, or forever
        without one); without one, ``failover.application.decisionConditions``."""
        matching = [
            t
            for t in self.placement.cluster_tolerations
            if any(t.tolerates(k, "NoExecute") for k in NOT_READY_TAINTS)
        ]
        if not matching:
            return float(self.failover.application.decision_conditions.toleration_seconds)
        seconds = [t.toleration_seconds for t in matching]
        return float("inf") if None in seconds else float(max(s for s in seconds if s is not None))


class Metadata(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    name: str
    namespace: str | None = None


class PropagationPolicy(_Strict):
    """A PropagationPolicy or a ClusterPropagationPolicy (``kind`` tells), in either group."""

    api_version: Literal["policy.one.alibabacloud.com/v1alpha1", "policy.karmada.io/v1alpha1"] = Field(
        alias="apiVersion"
    )
    kind: Literal["PropagationPolicy", "ClusterPropagationPolicy"]
    metadata: Metadata
    spec: PolicySpec
    status: dict[str, Any] | None = None

    @property
    def cluster_scoped(self) -> bool:
        return self.kind == CLUSTER_KIND

    def selects_namespace(self, namespace: str) -> bool:
        """A PropagationPolicy selects only jobs of its own namespace; a cluster one, any."""
        return self.cluster_scoped or (self.metadata.namespace or "default") == namespace

    def match_level(self, job: Mapping[str, Any]) -> int:
        """How explicitly this policy selects ``job`` (0: it does not)."""
        levels = [s.explicitness for s in self.spec.resource_selectors if s.matches(job)]
        return max(levels, default=0)


def ignored_fields(policy: BaseModel, path: str = "spec") -> list[str]:
    """The paths of the fields set in ``policy`` (a model or a part of one) that Fleet accepts
    without acting on them: ``spec.placement.spreadConstraints``, ..."""
    out: list[str] = []
    model = policy.spec if isinstance(policy, PropagationPolicy) else policy
    names = {info.alias or name: name for name, info in type(model).model_fields.items()}
    ignored = getattr(type(model), "IGNORED", {})
    for alias, name in names.items():
        if name not in model.model_fields_set:
            continue
        value = getattr(model, name)
        if alias in ignored:
            out.append(f"{path}.{alias}")
        elif isinstance(value, BaseModel):
            out += ignored_fields(value, f"{path}.{alias}")
    return out


def why_ignored(path: str) -> str:
    """Why Fleet does not act on the field at ``path`` (one of :func:`ignored_fields`)."""
    owners: tuple[type[_Strict], ...] = (
        PolicySpec,
        Placement,
        ReplicaScheduling,
        Failover,
        ApplicationFailover,
    )
    leaf = path.rsplit(".", 1)[-1]
    for owner in owners:
        if leaf in owner.IGNORED:
            return owner.IGNORED[leaf]
    return "not acted on"


def default_policy(kinds: Sequence[tuple[str, str]]) -> PropagationPolicy:
    """The policy of a job no policy selects (:func:`select_policy` found none): queued, with the
    defaults of every field. ``kinds``: (apiVersion, kind) of every job kind Fleet serves."""
    return PropagationPolicy.model_validate(
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": DEFAULT_POLICY_NAME, "namespace": "kube-system"},
            "spec": {
                "resourceSelectors": [{"apiVersion": v, "kind": k} for v, k in kinds],
                "propagateDeps": True,
                "suspension": {"scheduling": True},
            },
        }
    )


#: The name of :func:`default_policy`'s policy: a job governed by none of the fleet's.
DEFAULT_POLICY_NAME: Final = "fleet-default"


def policy_ref(policy: PropagationPolicy) -> dict[str, str]:
    """How a job's status names the policy that governs it (``status.propagationPolicy``): its
    apiVersion, kind, name and, for a PropagationPolicy, namespace (Karmada's ResourceBinding
    names its policy by the same fields, in labels). The default policy, which no object holds,
    is ``{kind: PropagationPolicy, name: fleet-default}`` with no namespace."""
    ref = {"apiVersion": policy.api_version, "kind": policy.kind, "name": policy.metadata.name}
    if not policy.cluster_scoped and policy.metadata.name != DEFAULT_POLICY_NAME:
        ref["namespace"] = policy.metadata.namespace or "default"
    return ref


def describe_policy(ref: Mapping[str, str]) -> str:
    """``PropagationPolicy default/gang``, ``ClusterPropagationPolicy spread``, or the default's
    ``no policy selects it (fleet-default)``."""
    if ref.get("name") == DEFAULT_POLICY_NAME:
        return f"no policy selects it ({DEFAULT_POLICY_NAME})"
    where = f"{ref['namespace']}/" if ref.get("namespace") else ""
    return f"{ref.get('kind')} {where}{ref.get('name')}"


def select_policy(job: Mapping[str, Any], policies: Iterable[PropagationPolicy]) -> PropagationPolicy | None:
    """The policy that governs ``job``, Karmada's precedence; ``None`` when none selects it.

    A PropagationPolicy selects only jobs of its own namespace and wins over every
    ClusterPropagationPolicy (Karmada's resource detector looks for one first).
    """
    namespace = (job.get("metadata") or {}).get("namespace", "default")
    candidates: Sequence[tuple[bool, int, int, str, PropagationPolicy]] = [
        (p.cluster_scoped, p.spec.priority, level, p.metadata.name, p)
        for p in policies
        if p.selects_namespace(namespace) and (level := p.match_level(job)) > 0
    ]
    if not candidates:
        return None
    best = min(candidates, key=lambda c: (c[0], -c[1], -c[2], c[3]))
    return best[4]
