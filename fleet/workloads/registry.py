"""The job kinds Fleet serves: one line per kind, and the job key that names a job of any kind.

Everything that handles jobs of every kind (the dispatcher, syncer, workers, API, authorisation,
CLI) iterates :data:`KINDS` or looks an adapter up here; nothing else names a kind.

The job key (the ledger's member, RQ payloads, reservations) carries the kind:
``<plural>.<group>:<namespace>/<name>`` (``pytorchjobs.kubeflow.org:default/train``), so jobs of
two kinds with one name in one namespace never collide. The first kind, AscendJob, keeps the key
Fleet wrote before it served other kinds, ``<namespace>/<name>``: every key stored before stays
valid as it is (no migration), and a key without a kind names an AscendJob. Namespaces and names
are DNS labels and subdomains: neither holds a ``:`` nor a ``/``, so the key parses back.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from fleet.apiserver import ResourceType
from fleet.placement import Demand
from fleet.workloads.ascendjob import ascendjob
from fleet.workloads.base import UnknownKind, WorkloadAdapter, is_accepted_demand
from fleet.workloads.batch_jobs import batch_job
from fleet.workloads.jobset import jobset
from fleet.workloads.kubeflow_jobs import mpijob, pytorchjob, tfjob
from fleet.workloads.mpijob_v1 import MPIJOB_V1
from fleet.workloads.t9k_jobs import t9k_mpijob, t9k_tfjob
from fleet.workloads.trainjob import CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME, trainjob
from fleet.workloads.volcano_jobs import vcjob

__all__ = [
    "KINDS",
    "OTHER_VERSIONS",
    "RUNTIME_KINDS",
    "JobRef",
    "adapter_by_resource",
    "adapter_for",
    "job_key",
    "job_ref",
    "kind_tag",
    "ref_for",
    "stored_demand",
]

#: Every job kind, one line each. The first one's keys carry no kind (see the module doc). The
#: order is discovery's: Kubernetes' batch/v1 Job before Volcano's, as kube-apiserver lists its own
#: groups before CRDs', so ``kubectl get jobs`` (and ``jobs.batch``) is Kubernetes' Job.
KINDS: Final[tuple[WorkloadAdapter, ...]] = (
    ascendjob,
    pytorchjob,
    tfjob,
    mpijob,
    t9k_tfjob,
    t9k_mpijob,
    jobset,
    trainjob,
    batch_job,
    vcjob,
)

#: Other served versions of a kind of :data:`KINDS`, one line each: stored at the kind's own
#: version (``storage_version``), converted on the way in and out by the API.
OTHER_VERSIONS: Final[tuple[ResourceType, ...]] = (MPIJOB_V1,)

#: Kinds a job kind depends on, served and stored at the fleet, never queued; one line each:
#: Kubeflow Trainer's runtimes. A member gets one before a job that needs it
#: (:class:`fleet.workloads.base.Dependent`), so it serves the namespaced ones.
RUNTIME_KINDS: Final[tuple[ResourceType, ...]] = (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME)

_BY_RESOURCE: Final = {(a.resource.group, a.resource.plural): a for a in KINDS}
_BY_TYPE: Final = {(a.api_version, a.kind): a for a in KINDS}
_BY_TAG: Final = {f"{a.resource.plural}.{a.resource.group}": a for a in KINDS}


def adapter_for(obj: Mapping[str, Any]) -> WorkloadAdapter:
    """The adapter of ``obj``'s apiVersion and kind; :class:`UnknownKind` when Fleet serves none."""
    adapter = _BY_TYPE.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
    if adapter is None:
        raise UnknownKind(
            f"no workload adapter for apiVersion {obj.get('apiVersion')!r}, kind {obj.get('kind')!r}"
        )
    return adapter


def stored_demand(obj: Mapping[str, Any]) -> Demand:
    """The demand of a job Fleet stored, whose kind's rules accepted it at submission: read
    without asking them again where the kind can (:class:`~fleet.workloads.base.AcceptedDemand`);
    a job that reading cannot take is judged by the kind's full rules, which raise
    :class:`~fleet.workloads.base.InvalidWorkload` naming what is wrong. ``UnknownKind`` when
    Fleet serves no such kind."""
    adapter = adapter_for(obj)
    if is_accepted_demand(adapter):
        try:
            return adapter.accepted_demand(obj)
        except (ValueError, LookupError, TypeError, AttributeError):  # DemandError is a ValueError
            pass  # not as its rules accept a job: they say why
    return adapter.demand(obj)


def adapter_by_resource(group: str, plural: str) -> WorkloadAdapter | None:
    """The adapter serving ``plural`` in ``group``, if it is a job kind."""
    return _BY_RESOURCE.get((group, plural))


def kind_tag(adapter: WorkloadAdapter) -> str:
    """``pytorchjobs.kubeflow.org``: how a job key and logs name a kind."""
    return f"{adapter.resource.plural}.{adapter.resource.group}"


@dataclass(frozen=True)
class JobRef:
    """A job of any kind: its adapter, namespace and name, and its key."""

    adapter: WorkloadAdapter
    namespace: str
    name: str

    @property
    def tag(self) -> str:
        """The kind as the key writes it: empty for the first kind (see the module doc)."""
        return "" if self.adapter is KINDS[0] else kind_tag(self.adapter)

    @property
    def key(self) -> str:
        return _key_of(self.adapter, self.namespace, self.name)

    @property
    def names(self) -> tuple[str, str]:
        return self.namespace, self.name


#: How many refs :func:`ref_for` and :func:`job_ref` keep: the syncer and dispatcher name the same
#: running jobs dozens of times each (every copy read, every key parsed), and a ref is immutable.
_REFS_KEPT: Final = 1 << 16


@functools.lru_cache(maxsize=_REFS_KEPT)
def ref_for(tag: str, namespace: str, name: str) -> JobRef:
    """The job of kind ``tag`` (:attr:`JobRef.tag`; empty: the first kind) named ``namespace/name``."""
    adapter = _BY_TAG.get(tag) if tag else KINDS[0]
    if adapter is None:
        raise UnknownKind(f"no job kind {tag!r}")
    return JobRef(adapter, namespace, name)


@functools.lru_cache(maxsize=_REFS_KEPT)
def job_ref(key: str) -> JobRef:
    """The job a key names; a key without a kind names the first kind's job. ``UnknownKind`` when
    the key names a kind Fleet does not serve."""
    tag, sep, rest = key.partition(":")
    if not sep:
        tag, rest = "", key
    namespace, _, name = rest.partition("/")
    return ref_for(tag, namespace, name)


def job_key(obj: Mapping[str, Any]) -> str:
    """The key of job ``obj`` (of any kind Fleet serves)."""
    meta = obj.get("metadata") or {}
    return _key_of(adapter_for(obj), str(meta.get("namespace") or "default"), str(meta.get("name")))


def _key_of(adapter: WorkloadAdapter, namespace: str, name: str) -> str:
    """The one spelling of a job key (see the module doc); :func:`job_key` uses it without
    making a :class:`JobRef` (it runs once per job in every role)."""
    plain = f"{namespace}/{name}"
    return plain if adapter is KINDS[0] else f"{kind_tag(adapter)}:{plain}"
