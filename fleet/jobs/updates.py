"""What a user's update may change of a submitted job: its own metadata, never what Fleet owns.

Kubernetes RBAC lets whoever may ``update`` a resource change its labels, annotations and
finalizers (``kubectl label``, ``kubectl annotate``, ``kubectl patch``); a job's owners at the
fleet may do the same (:mod:`fleet.endpoint.auth`), except for what Fleet reserves, which it
refuses as an admission rule would (a ValidatingAdmissionPolicy on a cluster, matching
``request.userInfo`` against the controller's service account):

* **Fleet's finalizer** :data:`~fleet.jobs.submit.FINALIZER` (``fleet.io/dispatch``). It holds a
  deleted job until its member copy is gone and its quota released
  (:mod:`fleet.dispatch.deletion`); a client that dropped it (``kubectl replace -f`` of the
  job's file, ``kubectl edit``) would let a delete remove the job at the fleet while its copy
  runs on. Only Fleet's own roles remove it (they write through :class:`fleet.state.Objects`,
  not the API), and only Fleet adds it (at submission). Refused for every user, admins included.
* **Fleet's labels and annotations**: every key of the ``fleet.io`` domain and its subdomains
  (``fleet.io/priority``, ``sim.fleet.io/duration-seconds``, the ``fleet.io/job-*`` labels of
  the member copies...): the job was queued and charged by them.
* **The quota label** :data:`queues.QUOTA_LABEL`: the leaf the job is queued and charged in
  (its routing rules were checked at submission, :meth:`queues.ElasticQuotaTree.leaf_for`).
* **The annotations a kind reads as its spec**: ``huawei.com/schedule_policy``
  (:data:`fleet.ascend.SCHEDULE_POLICY_ANNOTATION`), which decided the job's demand and
  placement.

Everything else of ``metadata.labels``, ``metadata.annotations``, ``metadata.finalizers`` (a
tenant's own finalizer may be added and removed, so a tenant's job never stays ``Terminating``
for want of an admin) and ``metadata.ownerReferences`` may change. The spec stays what was
queued (:func:`fleet.jobs.pause.switched`: only a kind's switch may flip).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from fleet.ascend import SCHEDULE_POLICY_ANNOTATION
from fleet.jobs.pause import LAST_APPLIED
from fleet.jobs.submit import FINALIZER
from queues import QUOTA_LABEL

__all__ = ["FLEET_DOMAIN", "Refusal", "metadata_refusals", "reserved_key"]

#: The domain of Fleet's own labels and annotations (and of its subdomains).
FLEET_DOMAIN: Final = "fleet.io"
#: Keys outside :data:`FLEET_DOMAIN` that are part of what a job was queued and placed by.
_RESERVED_LABELS: Final = frozenset({QUOTA_LABEL})
_RESERVED_ANNOTATIONS: Final = frozenset({SCHEDULE_POLICY_ANNOTATION})


@dataclass(frozen=True)
class Refusal:
    """One change an update may not make: the field (``metadata.labels[key]``) and the rule."""

    field: str
    message: str


def _fleets(key: str) -> bool:
    prefix, slash, _ = key.partition("/")
    return bool(slash) and (prefix == FLEET_DOMAIN or prefix.endswith("." + FLEET_DOMAIN))


def reserved_key(key: str, *, annotation: bool) -> bool:
    """Whether label (or annotation) ``key`` is Fleet's: no user's update may set, change or
    remove it on a submitted job."""
    own = _RESERVED_ANNOTATIONS if annotation else _RESERVED_LABELS
    return _fleets(key) or key in own


def _mapping(meta: Mapping[str, Any], field: str) -> Mapping[str, Any]:
    value = meta.get(field)
    return value if isinstance(value, Mapping) else {}


def _finalizers(meta: Mapping[str, Any]) -> list[Any]:
    value = meta.get("finalizers")
    return list(value) if isinstance(value, list) else []


def metadata_refusals(current: Mapping[str, Any], new: Mapping[str, Any]) -> list[Refusal]:
    """Every change of Fleet's reserved metadata that updating ``current`` to ``new`` makes
    (empty: the update may go on), one per field, in a stable order."""
    before, after = current.get("metadata") or {}, new.get("metadata") or {}
    refusals: list[Refusal] = []
    had, has = FINALIZER in _finalizers(before), FINALIZER in _finalizers(after)
    if had and not has:
        refusals.append(
            Refusal(
                "metadata.finalizers",
                f"Forbidden: {FINALIZER} is Fleet's finalizer: it holds the job until its member copy "
                "is deleted and its quota released, and only Fleet removes it; delete the job instead",
            )
        )
    elif has and not had:
        refusals.append(
            Refusal("metadata.finalizers", f"Forbidden: {FINALIZER} is Fleet's finalizer: only Fleet adds it")
        )
    for field, annotation in (("labels", False), ("annotations", True)):
        old, now = _mapping(before, field), _mapping(after, field)
        for key in sorted(str(k) for k in set(old) | set(now)):
            if key == LAST_APPLIED or old.get(key) == now.get(key):
                continue
            if reserved_key(key, annotation=annotation):
                what = "label" if not annotation else "annotation"
                refusals.append(
                    Refusal(
                        f"metadata.{field}[{key}]",
                        f"Forbidden: {what} {key} is reserved to Fleet: the job was queued, charged and "
                        "placed by it, so it may not be set, changed or removed after submission",
                    )
                )
    return refusals
