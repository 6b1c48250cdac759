"""The rights Fleet needs in a member cluster: exactly what :class:`~fleet.members.access.Member`
calls, and nothing else.

``deploy/member/fleet-member.yaml`` is :func:`member_manifest` written out (``fleet member rbac``
prints it); ``tests/fleet/members/test_rights.py`` ties both to the ``kubernetes`` client calls in
:mod:`fleet.members.access`, so a new call without its right (or a right no call needs) fails
there, not with a 403 in someone's member.

- namespaces: ``get``, ``create``: a job's namespace is created in the member when it lacks it.
- nodes, pods: ``list``, ``watch``: the capacity summary (pods across all namespaces).
- the job kinds (every kind of the registry, :data:`fleet.workloads.KINDS`, which the caller
  passes: this layer does not know the kinds): ``create``, ``get``, ``delete`` (by uid
  precondition), ``list``, ``watch``: propagation, adoption, purge and status mirroring (the
  namespaced objects a job needs first, Kubeflow Trainer's TrainingRuntime, are created by the
  same calls, so the caller passes them with the job kinds). No
  ``update``/``patch``: Fleet never changes a member's copy, it deletes it and creates another.
- configmaps, secrets, services: ``get``, ``create``, ``update``, ``delete``: the objects a job
  references, made beside it with ``propagateDeps`` and kept as the fleet's copies change
  (:mod:`fleet.dispatch.companions`); only those Fleet made (label ``fleet.io/companion``) are
  ever updated or deleted.
- ``GET /readyz``: the health probe (Kubernetes grants it to everyone through
  ``system:public-info-viewer``; named here so the role states the whole contract).

Fleet reads no Events in members and writes none: the Events of a job live at the fleet.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "CLUSTER_ROLE_NAME",
    "COMPANION_VERBS",
    "JOB_VERBS",
    "PROBE_URLS",
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


#: What Fleet does to its copies of jobs, of every kind.
JOB_VERBS: Final = ("create", "get", "delete", "list", "watch")
#: What Fleet does to the ConfigMaps, Secrets and Services it makes beside a job.
COMPANION_VERBS: Final = ("get", "create", "update", "delete")
_CORE: Final = (
    Right("", "namespaces", ("get", "create")),
    Right("", "nodes", ("list", "watch")),
    Right("", "pods", ("list", "watch")),
    *(Right("", plural, COMPANION_VERBS) for plural in ("configmaps", "secrets", "services")),
)


def rights(job_kinds: Iterable[tuple[str, str]]) -> tuple[Right, ...]:
    """Every right Fleet needs, with ``job_kinds`` as (API group, plural) of each job kind."""
    return (*_CORE, *(Right(group, plural, JOB_VERBS) for group, plural in job_kinds))


#: Non-resource URLs Fleet reads (the health probe).
PROBE_URLS: Final = ("/readyz",)


def cluster_role(job_kinds: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The ClusterRole granting :func:`rights`, one rule per resource."""
    rules: list[dict[str, Any]] = [
        {"apiGroups": [right.group], "resources": [right.resource], "verbs": list(right.verbs)}
        for right in rights(job_kinds)
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


def member_manifest(
    job_kinds: Iterable[tuple[str, str]], namespace: str = "fleet-system", service_account: str = "fleet"
) -> list[dict[str, Any]]:
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
        cluster_role(job_kinds),
        cluster_role_binding(namespace, service_account),
    ]
