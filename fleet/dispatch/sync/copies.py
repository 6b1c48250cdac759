"""Which fleet job's attempt a member copy is: the identity every concern keys its tables by."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleet.jobs import attempt_of, job_key
from fleet.labels import ATTEMPT_LABEL, JOB_NAME_LABEL, JOB_NAMESPACE_LABEL, JOB_UID_LABEL
from fleet.workloads import JobRef, UnknownKind, WorkloadStatus, adapter_for, job_ref, ref_for

__all__ = ["MemberCopy", "Seen"]


@dataclass(frozen=True)
class MemberCopy:
    """The fleet identity a member copy carries in its labels, and its kind (its own)."""

    member: str
    namespace: str
    name: str
    uid: str
    attempt: int
    #: The kind as job keys write it (:attr:`fleet.workloads.JobRef.tag`).
    kind: str = ""

    @property
    def ref(self) -> JobRef:
        return ref_for(self.kind, self.namespace, self.name)

    @property
    def key(self) -> str:
        return self.ref.key

    @classmethod
    def of(cls, member: str, obj: Mapping[str, Any]) -> MemberCopy | None:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        try:
            meta = obj.get("metadata") or {}
            kind = JobRef(adapter_for(obj), str(meta.get("namespace")), str(meta.get("name"))).tag
            return cls(
                member,
                str(labels[JOB_NAMESPACE_LABEL]),
                str(labels[JOB_NAME_LABEL]),
                str(labels[JOB_UID_LABEL]),
                int(labels[ATTEMPT_LABEL]),
                kind,
            )
        except (KeyError, ValueError, UnknownKind):
            return None

    @classmethod
    def of_job(cls, member: str, obj: Mapping[str, Any]) -> MemberCopy:
        """The copy the fleet job ``obj``'s current attempt has (or should have) in ``member``."""
        meta = obj.get("metadata") or {}
        ref = job_ref(job_key(obj))
        return cls(member, ref.namespace, ref.name, str(meta.get("uid")), attempt_of(obj), ref.tag)


@dataclass(frozen=True)
class Seen:
    """A current copy as observed, with the fleet object it was read against."""

    ident: MemberCopy
    seen: WorkloadStatus
    obj: dict[str, Any]
