"""The kinds of the fleet endpoint, with their validation plugged in: :func:`fleet_registry`."""

from __future__ import annotations

from dataclasses import replace

from fleet.api.kinds import (
    ELASTIC_QUOTA_TREE,
    FLEET_EVENT,
    FLEET_JOB_KINDS,
    MEMBER_CLUSTER,
    PRIORITY_CLASS,
    PROPAGATION_POLICY,
    QUEUE,
)
from fleet.api.validation import validate_job, validate_policy, validate_priority_class
from fleet.apiserver.resources import Registry

__all__ = ["fleet_registry"]


def fleet_registry() -> Registry:
    """The job kinds (adapter validation), Event, PropagationPolicy (model validation), the
    ElasticQuotaTree, PriorityClass (kube-apiserver's validation), and the computed MemberCluster
    and Queue kinds."""
    return Registry(
        [
            *(replace(rt, validate=validate_job) for rt in FLEET_JOB_KINDS),
            FLEET_EVENT,
            replace(PROPAGATION_POLICY, validate=validate_policy),
            ELASTIC_QUOTA_TREE,
            replace(PRIORITY_CLASS, validate=validate_priority_class),
            MEMBER_CLUSTER,
            QUEUE,
        ]
    )
