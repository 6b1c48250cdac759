"""The base of every replica-spec kind: a job made of replica types, each a count and a pod template.

AscendJob and the Kubeflow kinds (PyTorchJob, TFJob, MPIJob) write their replicas as a map from
replica type to spec (``spec.replicaSpecs``, ``spec.pytorchReplicaSpecs``, ...); T9k's kinds as
a list with a lower-case ``type``: :meth:`ReplicaSpecAdapter.replica_specs` is the one place that
reads the shape, so a list-shaped kind overrides it (and :meth:`~ReplicaSpecAdapter.replica_path`)
and keeps the rest. What they share:

* status in the Kubeflow job controller's shape (``kubeflow/common`` ``JobStatus``, which the
  ascend-operator copies): ``conditions`` where setting one removes an older one of its type
  and appends it, so the last true condition is the state; ``replicaStatuses`` per type;
* the member copy: the fleet job's spec unchanged, fleet labels on the job and on every pod
  template, each replica type pinned to the nodes Fleet planned for it;
* priority and queue from ``spec.runPolicy.schedulingPolicy`` (``priorityClass``, ``queue``;
  override for other places);
* failure classification from the last condition's reason: a subclass names which reasons are
  the user's error (never retried) and which mean "waiting for the gang" (stuck pending).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from fleet.apiserver import ResourceType, clone
from fleet.placement import ReplicaTemplate
from fleet.workloads.base import (
    RUN_POLICY_QUEUE,
    Outcome,
    PriorityRequest,
    WorkloadStatus,
    fleet_labels,
    member_metadata,
    pin_to_nodes,
    run_policy_priority_class,
    run_policy_queue,
)

__all__ = ["ReplicaSpecAdapter"]


class ReplicaSpecAdapter:
    """What every replica-spec kind's adapter shares; a subclass sets the class attributes and
    writes ``validate`` and ``demand`` (the kind's own rules)."""

    #: The kind as its CRD serves it (set by each subclass).
    resource: ClassVar[ResourceType]
    #: The field under ``spec`` holding the replica specs (map-shaped kinds).
    specs_field: ClassVar[str] = "replicaSpecs"
    #: Replica types that lead the job, in order: their pods come first in the gang.
    leaders: ClassVar[tuple[str, ...]] = ()
    #: Reasons of a ``Failed`` condition that are the user's error: never retried elsewhere.
    user_error_reasons: ClassVar[frozenset[str]] = frozenset()
    #: Reasons of a ``Created`` condition that mean the gang waits for room in the member.
    pending_reasons: ClassVar[frozenset[str]] = frozenset()
    #: The label key the kind's operator puts the job's name under on each of its pods.
    pod_job_label: ClassVar[str] = ""
    #: Whether a copy's pods are the evidence that it waits for its gang (its operator never
    #: says so on the job): the syncer then reads them into
    #: :attr:`~fleet.workloads.base.WorkloadStatus.unschedulable` before classifying.
    reads_pods: ClassVar[bool] = False
    #: Where the job names its queue (:class:`~fleet.workloads.base.QueueNaming`).
    queue_field: ClassVar[str] = RUN_POLICY_QUEUE

    @property
    def api_version(self) -> str:
        return self.resource.api_version

    @property
    def kind(self) -> str:
        return self.resource.kind

    @property
    def plural(self) -> str:
        return self.resource.plural

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return obj.get("apiVersion") == self.api_version and obj.get("kind") == self.kind

    # --- the shape of the replicas --------------------------------------------------------------

    def replica_specs(self, spec: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """(replica type, its spec as written) in the order written; the spec may be of any type
        (validation says what is wrong with it). Mutating a returned spec mutates ``spec``."""
        specs = spec.get(self.specs_field)
        return [(str(t), s) for t, s in specs.items()] if isinstance(specs, Mapping) else []

    def replica_path(self, rtype: str) -> str:
        """Where replica type ``rtype``'s spec sits, for error messages."""
        return f"spec.{self.specs_field}.{rtype}"

    def pod_labels(self, name: str, rtype: str) -> dict[str, str]:
        """The labels the kind's operator puts on every pod of replica type ``rtype``."""
        return {self.pod_job_label: name} if self.pod_job_label else {}

    def ordered(self, types: Sequence[str]) -> list[str]:
        """Replica types leaders first (in :attr:`leaders` order), then the rest as written."""
        rank = {t: i for i, t in enumerate(self.leaders)}
        return sorted(types, key=lambda t: (rank.get(t, len(rank)), list(types).index(t)))

    def replica_templates(self, obj: Mapping[str, Any], counts: Mapping[str, int]) -> list[ReplicaTemplate]:
        """The templates of a validated job, leaders first, with the count each type was read as."""
        name = str((obj.get("metadata") or {}).get("name") or "")
        specs = dict(self.replica_specs(obj.get("spec") or {}))
        return [
            ReplicaTemplate(
                name=t,
                replicas=counts[t],
                template=specs[t]["template"],
                path=f"{self.replica_path(t)}.template",
                pod_labels=self.pod_labels(name, t),
            )
            for t in self.ordered(list(counts))
        ]

    # --- what the kinds share -------------------------------------------------------------------

    def priority_request(self, obj: Mapping[str, Any]) -> PriorityRequest:
        """``spec.runPolicy.schedulingPolicy.priorityClass`` (kubeflow/common ``SchedulingPolicy``)."""
        return run_policy_priority_class(obj)

    def queue(self, obj: Mapping[str, Any]) -> str | None:
        """``spec.runPolicy.schedulingPolicy.queue`` (kubeflow/common ``SchedulingPolicy``), unless
        it is Volcano's ``default`` (:data:`~fleet.workloads.base.DEFAULT_QUEUE`)."""
        return run_policy_queue(obj)

    def map_status(self, member_obj: Mapping[str, Any]) -> WorkloadStatus:
        status = member_obj.get("status") or {}
        conditions = [dict(c) for c in status.get("conditions") or [] if isinstance(c, Mapping)]
        last = next((c for c in reversed(conditions) if c.get("status") == "True"), None)
        return WorkloadStatus(
            state=last.get("type") if last else None,
            reason=last.get("reason") if last else None,
            message=last.get("message") if last else None,
            conditions=conditions,
            replica_statuses=dict(status.get("replicaStatuses") or {}),
            start_time=status.get("startTime"),
            completion_time=status.get("completionTime"),
        )

    def classify(self, status: WorkloadStatus) -> Outcome:
        if status.state == "Succeeded":
            return Outcome.SUCCEEDED
        if status.state == "Failed":
            return Outcome.USER_ERROR if status.reason in self.user_error_reasons else Outcome.RETRIABLE
        if status.state in ("Running", "Restarting"):
            return Outcome.RUNNING
        if status.reason in self.pending_reasons:
            return Outcome.STUCK_PENDING
        return Outcome.STARTING

    def member_copy(
        self,
        obj: Mapping[str, Any],
        fleet_uid: str,
        attempt: int,
        *,
        pin: Mapping[str, Sequence[str]] | None = None,
    ) -> dict[str, Any]:
        """Same name and namespace (the job's own anti-affinity names it), fleet labels on the
        job and on every pod template, no status and no server-owned metadata; with ``pin``,
        each replica type's pods restricted to its planned nodes."""
        body: dict[str, Any] = {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "metadata": member_metadata(obj, fleet_uid, attempt),
            "spec": clone(dict(obj.get("spec") or {})),
        }
        labels = fleet_labels(obj, fleet_uid, attempt)
        for rtype, spec in self.replica_specs(body["spec"]):
            if not isinstance(spec, dict):
                continue
            template = spec.setdefault("template", {})
            meta = template.setdefault("metadata", {})
            meta["labels"] = {**(meta.get("labels") or {}), **labels}
            if pin and pin.get(rtype):
                pin_to_nodes(template.setdefault("spec", {}), pin[rtype])
        return body
