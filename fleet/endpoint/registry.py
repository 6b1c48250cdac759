"""The kinds of the fleet endpoint, with their validation plugged in: :func:`fleet_registry`."""

from __future__ import annotations

from dataclasses import replace

from fleet.apiserver import COMPANION_KINDS, Registry, with_reviews
from fleet.endpoint.schemas import with_schema
from fleet.endpoint.validation import validate_job, validate_policy, validate_priority_class
from fleet.kinds import (
    ELASTIC_QUOTA_TREE,
    FLEET_EVENT,
    FLEET_JOB_KINDS,
    FLEET_NAMESPACE,
    MEMBER_CLUSTER,
    POLICY_KINDS,
    PRIORITY_CLASS,
    QUEUE,
)

__all__ = ["fleet_registry"]


def fleet_registry() -> Registry:
    """The job kinds (adapter validation), Event, the four policy kinds (model validation), the
    ElasticQuotaTree, PriorityClass (kube-apiserver's validation), the computed MemberCluster,
    Queue and Namespace kinds, the ConfigMaps, Secrets and Services jobs reference, and the self
    reviews of ``kubectl auth can-i`` and ``whoami``. Every kind carries its schema from
    :mod:`fleet.endpoint.schemas` (validation and OpenAPI)."""
    kinds = [
        *(replace(rt, validate=validate_job) for rt in FLEET_JOB_KINDS),
        FLEET_EVENT,
        *(replace(kind, validate=validate_policy) for kind in POLICY_KINDS),
        ELASTIC_QUOTA_TREE,
        replace(PRIORITY_CLASS, validate=validate_priority_class),
        MEMBER_CLUSTER,
        QUEUE,
        FLEET_NAMESPACE,
        *COMPANION_KINDS,
    ]
    return Registry([with_schema(rt) for rt in with_reviews(kinds)])
