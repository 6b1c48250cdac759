"""The kinds of the fleet endpoint, with their validation plugged in: :func:`fleet_registry`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from fleet.apiserver import COMPANION_KINDS, Obj, Registry, ResourceType, with_reviews
from fleet.endpoint.schemas import with_schema
from fleet.endpoint.validation import validate_job, validate_policy, validate_priority_class
from fleet.kinds import (
    ELASTIC_QUOTA_TREE,
    FLEET_EVENT,
    FLEET_JOB_KINDS,
    FLEET_JOB_VERSIONS,
    FLEET_NAMESPACE,
    MEMBER_CLUSTER,
    POLICY_KINDS,
    PRIORITY_CLASS,
    QUEUE,
)
from fleet.workloads import RUNTIME_KINDS, Dependent, adapter_by_resource

#: How the endpoint finds a stored object (the kind, its namespace or None, its name).
Lookup = Callable[[ResourceType, str | None, str], Mapping[str, Any] | None]

__all__ = ["fleet_registry", "served_kinds"]


def _resolving(rt: ResourceType, lookup: Lookup | None) -> ResourceType:
    """A job kind that depends on other objects (:class:`fleet.workloads.Dependent`: a TrainJob
    its training runtime) records them when it is created: its demand and member copy are made
    of that record."""
    adapter: object = adapter_by_resource(rt.group, rt.plural)
    if lookup is None or not isinstance(adapter, Dependent):
        return rt
    resolver: Dependent = adapter
    find: Lookup = lookup

    def prepare(obj: Obj) -> None:
        resolver.resolve(
            obj, lambda kind, namespace, name: find(kind, namespace if kind.namespaced else None, name)
        )

    return replace(rt, prepare_create=prepare)


def fleet_registry(lookup: Lookup | None = None) -> Registry:
    """The job kinds (adapter validation), Event, the four policy kinds (model validation), the
    ElasticQuotaTree, PriorityClass (kube-apiserver's validation), the computed MemberCluster,
    Queue and Namespace kinds, the ConfigMaps, Secrets and Services jobs reference, and the self
    reviews of ``kubectl auth can-i`` and ``whoami``, and Kubeflow Trainer's runtimes (``lookup``
    lets a TrainJob find the one it names when it is created). Every kind carries its schema from
    :mod:`fleet.endpoint.schemas` (validation and OpenAPI)."""
    kinds = [
        *(_resolving(replace(rt, validate=validate_job), lookup) for rt in FLEET_JOB_KINDS),
        *(replace(rt, validate=validate_job) for rt in FLEET_JOB_VERSIONS),
        FLEET_EVENT,
        *(replace(kind, validate=validate_policy) for kind in POLICY_KINDS),
        ELASTIC_QUOTA_TREE,
        replace(PRIORITY_CLASS, validate=validate_priority_class),
        MEMBER_CLUSTER,
        QUEUE,
        FLEET_NAMESPACE,
        *COMPANION_KINDS,
        *RUNTIME_KINDS,
    ]
    return Registry([with_schema(rt) for rt in with_reviews(kinds)], describe_unserved=True)


def served_kinds() -> list[str]:
    """``Kind (apiVersion)`` of every kind a client may create at the fleet (what an unserved
    kind's refusal lists: the API's 404, ``fleet explain``)."""
    return fleet_registry().served_kinds()
