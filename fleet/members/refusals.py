"""Whose fault a member's refusal is: the job's (every member would refuse it) or the member's.

A member that answers a create with a permanent refusal (:class:`~fleet.members.MemberRefused`)
says either that the object itself is wrong, which any Kubernetes API server would say again, or
that this cluster will not take it: its own rights, set-up or policy. Fleet fails the job for
the first and tries another member for the second; callers decide by :func:`scope_of`, never by
reading messages themselves. The evidence is the ``Status`` the member sent, as the API server
builds it:

* :data:`Scope.JOB`: ``422`` with reason ``Invalid`` built by the API server's own validation of
  the object (``apierrors.NewInvalid``, the CRD's schema and the metadata rules): its
  ``details.kind`` is the kind that was sent (``AscendJob``) and every one of its
  ``details.causes`` is a field error (``FieldValueInvalid``, ``FieldValueRequired``,
  ``FieldValueTooLong``, ...: ``field.ErrorType``), not an ``InternalError`` and not
  ``FieldValueForbidden`` or ``FieldValueNotFound`` (those depend on the cluster: a feature gate
  off, a referenced object missing). Nothing in it came through admission.
* :data:`Scope.MEMBER`, the member's own, not tried there again for this job: everything else.
  ``403 Forbidden`` (its RBAC does not let Fleet create there, a policy), ``401``, ``404`` (its
  CRD or the namespace is missing), ``409`` (the name is taken there by another job),
  ``400``/``405``/``413``/``415`` (what that server's version or limits make of the request), and
  every admission denial whatever its code: an admission webhook's (``admission webhook "..."
  denied the request``; with 422 and field causes too, as a kubebuilder webhook's
  ``NewInvalid`` is: the webhook is that member's installation) and a ValidatingAdmissionPolicy's
  (422 ``Invalid`` by default, but built by ``admission.NewForbidden``: ``details.kind`` is the
  resource, ``ascendjobs``, and its one cause has no field type).
* :data:`Scope.MEMBER_FOR_NOW`, the member's own and passing: ``403`` whose causes include
  ``NamespaceTerminating`` (the namespace is being deleted there; NamespaceLifecycle), and the
  ResourceQuota admission's ``403 ... exceeded quota:`` (the member's quota frees as its jobs
  end). Avoided for a while, as an unreachable member is.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final

from fleet.members.errors import MemberRefused, redact

__all__ = ["FIELD_ERRORS", "Scope", "describe", "scope_of"]


class Scope(StrEnum):
    """Who a refusal is about."""

    #: The object itself: every member would refuse it the same way.
    JOB = "job"
    #: This member's rights, set-up or policy: another member may take the job.
    MEMBER = "member"
    #: This member, for now: it may take the job later.
    MEMBER_FOR_NOW = "member-for-now"


#: ``field.ErrorType`` cause types that say the object's own value is wrong (Kubernetes'
#: ``k8s.io/apimachinery/pkg/util/validation/field``), whichever server judges it.
FIELD_ERRORS: Final = frozenset(
    {
        "FieldValueInvalid",
        "FieldValueRequired",
        "FieldValueDuplicate",
        "FieldValueNotSupported",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueTypeInvalid",
    }
)

#: How the API server words a refusal that came through admission (webhooks, policies).
_ADMISSION: Final = ('admission webhook "', "ValidatingAdmissionPolicy '", "denied the request")
#: ``v1.NamespaceTerminatingCause``.
_NAMESPACE_TERMINATING: Final = "NamespaceTerminating"
#: The ResourceQuota admission plugin's words (``exceeded quota: <name>, requested: ...``).
_QUOTA_EXCEEDED: Final = "exceeded quota:"


def _causes(error: MemberRefused) -> list[Mapping[str, Any]]:
    causes = error.details.get("causes")
    if not isinstance(causes, list | tuple):
        return []
    return [cause for cause in causes if isinstance(cause, Mapping)]


def scope_of(error: MemberRefused, *, kind: str) -> Scope:
    """Who the refusal ``error`` of a create of a ``kind`` object is about (see the module)."""
    causes = _causes(error)
    if error.code == 403 and (
        any(cause.get("reason") == _NAMESPACE_TERMINATING for cause in causes)
        or _QUOTA_EXCEEDED in error.message
    ):
        return Scope.MEMBER_FOR_NOW
    if (
        error.code == 422
        and error.reason == "Invalid"
        and error.details.get("kind") == kind
        and causes
        and all(cause.get("reason") in FIELD_ERRORS for cause in causes)
        and not any(words in error.message for words in _ADMISSION)
    ):
        return Scope.JOB
    return Scope.MEMBER


def describe(error: MemberRefused) -> str:
    """The refusal as a job's condition says it: ``<code> <reason>: <the member's message>``,
    with any address or credential the member's message carries taken out (:func:`redact`)."""
    reason = f" {error.reason}" if error.reason else ""
    return f"{error.code}{reason}: {redact(error.message)}"
