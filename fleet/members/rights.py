"""The rights Fleet needs in a member cluster: exactly what :class:`~fleet.members.access.Member`
calls, and nothing else.

``deploy/member/fleet-member.yaml`` is :func:`member_manifest` written out (``fleet member rbac``
prints it); ``tests/fleet/members/test_rights.py`` ties both to the ``kubernetes`` client calls in
:mod:`fleet.members.access`, so a new call without its right (or a right no call needs) fails
there, not with a 403 in someone's member.

- namespaces: ``get``, ``create``: a job's namespace is created in the member when it lacks it.
- nodes, pods: ``list``, ``watch``: the capacity summary (pods across all namespaces).
- the job kinds: ``create``, ``get``, ``delete`` (by uid precondition), ``list``, ``watch``:
  propagation, adoption, purge and status mirroring. No ``update``/``patch``: Fleet never
  changes a member's copy, it deletes it and creates another.
- ``GET /readyz``: the health probe (Kubernetes grants it to everyone through
  ``system:public-info-viewer``; named here so the role states the whole contract).

Fleet reads no Events in members and writes none: the Events of a job live at the fleet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from fleet.ascend import ASCENDJOB_GROUP, ASCENDJOB_PLURAL

__all__ = [
    "CLUSTER_ROLE_NAME",
    "PROBE_URLS",
    "RIGHTS",
    "Right",
    "cluster_role",
    "cluster_role_binding",
    "member_manifest",
]

#: The name of the ClusterRole (and its binding) applied in each member.
CLUSTER_ROLE_NAME: Final = "fleet-member"


@dataclass(frozen=True)
class Right:
    """Verbs on one resource of one API group (``""``: the core group)."""

    group: str
    resource: str
    verbs: tuple[str, ...]


RIGHTS: Final = (
    Right("", "namespaces", ("get", "create")),
    Right("", "nodes", ("list", "watch")),
    Right("", "pods", ("list", "watch")),
    Right(ASCENDJOB_GROUP, ASCENDJOB_PLURAL, ("create", "get", "delete", "list", "watch")),
)
#: Non-resource URLs Fleet reads (the health probe).
PROBE_URLS: Final = ("/readyz",)


def cluster_role() -> dict[str, Any]:
    """The ClusterRole granting :data:`RIGHTS`, one rule per resource."""
    rules: list[dict[str, Any]] = [
        {"apiGroups": [right.group], "resources": [right.resource], "verbs": list(right.verbs)}
        for right in RIGHTS
    ]
    rules.append({"nonResourceURLs": list(PROBE_URLS), "verbs": ["get"]})
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": CLUSTER_ROLE_NAME, "labels": {"app.kubernetes.io/part-of": "fleet"}},
        "rules": rules,
    }


def cluster_role_binding(namespace: str = "fleet-system", service_account: str = "fleet") -> dict[str, Any]:
    """Binds :func:`cluster_role` to the ServiceAccount whose token Fleet's kubeconfig holds."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": CLUSTER_ROLE_NAME, "labels": {"app.kubernetes.io/part-of": "fleet"}},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": CLUSTER_ROLE_NAME,
        },
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}],
    }


def member_manifest(namespace: str = "fleet-system", service_account: str = "fleet") -> list[dict[str, Any]]:
    """What an admin applies in each member: a namespace, the ServiceAccount Fleet acts as, a
    long-lived token for it (what ``fleet member add`` puts in Fleet's kubeconfig), the
    ClusterRole and its binding."""
    labels = {"app.kubernetes.io/part-of": "fleet"}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": service_account, "namespace": namespace, "labels": labels},
            "automountServiceAccountToken": False,
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/service-account-token",
            "metadata": {
                "name": f"{service_account}-token",
                "namespace": namespace,
                "labels": labels,
                "annotations": {"kubernetes.io/service-account.name": service_account},
            },
        },
        cluster_role(),
        cluster_role_binding(namespace, service_account),
    ]
