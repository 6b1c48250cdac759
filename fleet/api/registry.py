"""The kinds of the fleet endpoint, with their validation plugged in: :func:`fleet_registry`."""

from __future__ import annotations

from dataclasses import replace

from fleet.api.kinds import (
    ELASTIC_QUOTA_TREE,
    FLEET_ASCENDJOB,
    FLEET_EVENT,
    MEMBER_CLUSTER,
    POLICY_KINDS,
    PRIORITY_CLASS,
    QUEUE,
)
from fleet.api.validation import validate_job, validate_policy, validate_priority_class
from fleet.apiserver.companions import COMPANION_KINDS
from fleet.apiserver.resources import Registry

__all__ = ["fleet_registry"]


def fleet_registry() -> Registry:
    """AscendJob (adapter validation), Event, the four policy kinds (model validation), the
    ElasticQuotaTree, PriorityClass (kube-apiserver's validation), the computed MemberCluster
    and Queue kinds, and the ConfigMaps, Secrets and Services jobs reference."""
    return Registry(
        [
            replace(FLEET_ASCENDJOB, validate=validate_job),
            FLEET_EVENT,
            *(replace(kind, validate=validate_policy) for kind in POLICY_KINDS),
            ELASTIC_QUOTA_TREE,
            replace(PRIORITY_CLASS, validate=validate_priority_class),
            MEMBER_CLUSTER,
            QUEUE,
            *COMPANION_KINDS,
        ]
    )
