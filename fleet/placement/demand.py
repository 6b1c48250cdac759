"""A job's demand on one member: the pods it needs at once, as the member scheduler will see them.

Per replica type a :class:`PodShape`: the per-pod request (Kubernetes rules: a container's
request, or its limit where the request is missing; the larger of the summed app containers and
the largest init container; plus pod overhead; one ``pods`` each), how many such pods, and what
the pod asks of a node (node selector, required node affinity, tolerations, whether it must have
a node to itself among the job's pods). The job adds its ``minAvailable`` and the Ascend schedule
policy. Quantities go through :func:`queues.quantity.parse` only. Whether the requests are ones a
member accepts (whole extended resources, requests within or equal to limits) is the API
server's rule, checked at submission by :mod:`fleet.apiserver.pods`; here they are only read.

Demands are frozen and hashable and hold no job name: two jobs with identical templates have
equal demands, so the fit can cache its answer per demand and member state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from fleet.ascend import HOSTNAME_LABEL, NPU_RESOURCE, NPU_RESOURCES
from fleet.placement.node_constraints import (
    NodeAffinity,
    SelectorError,
    Toleration,
    parse_node_affinity,
    parse_tolerations,
)
from fleet.placement.npu import JobHardware, NpuRuleError, job_hardware
from fleet.policy import LabelSelector
from queues import QuantityError, parse_quantity

__all__ = [
    "PODS_RESOURCE",
    "Demand",
    "DemandError",
    "PodShape",
    "ReplicaTemplate",
    "Vector",
    "build_demand",
    "pod_requests",
]

#: Every pod takes one of its node's ``pods`` allocatable.
PODS_RESOURCE = "pods"

#: A resource vector in canonical units, sorted by resource name (hashable, comparable).
Vector = tuple[tuple[str, int], ...]


class DemandError(ValueError):
    """The job's pods cannot be read as a demand; ``path`` is the offending field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def _container_requests(container: Mapping[str, Any], path: str) -> dict[str, int]:
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise DemandError(f"{path}.resources", "must be an object")
    out: dict[str, int] = {}
    parsed: dict[str, dict[str, int]] = {}
    for part in ("limits", "requests"):
        values = resources.get(part) or {}
        if not isinstance(values, Mapping):
            raise DemandError(f"{path}.resources.{part}", "must be a map of resource to quantity")
        parsed[part] = {}
        for name, raw in values.items():
            try:
                amount = parse_quantity(str(name), raw)
            except QuantityError as exc:
                raise DemandError(f"{path}.resources.{part}.{name}", str(exc)) from exc
            if amount < 0:
                raise DemandError(f"{path}.resources.{part}.{name}", "must not be negative")
            parsed[part][str(name)] = amount
    limits, requests = parsed["limits"], parsed["requests"]
    out.update(limits)
    out.update(requests)
    return out


def pod_requests(spec: Mapping[str, Any], path: str = "spec") -> dict[str, int]:
    """What a pod with this spec takes from its node, as the Kubernetes scheduler counts it."""
    total: dict[str, int] = {}
    containers = spec.get("containers") or []
    for i, c in enumerate(containers if isinstance(containers, list) else []):
        for name, amount in _container_requests(c, f"{path}.containers[{i}]").items():
            total[name] = total.get(name, 0) + amount
    inits = spec.get("initContainers") or []
    for i, c in enumerate(inits if isinstance(inits, list) else []):
        for name, amount in _container_requests(c, f"{path}.initContainers[{i}]").items():
            total[name] = max(total.get(name, 0), amount)
    overhead = spec.get("overhead") or {}
    if isinstance(overhead, Mapping):
        for name, raw in overhead.items():
            try:
                total[str(name)] = total.get(str(name), 0) + parse_quantity(str(name), raw)
            except QuantityError as exc:
                raise DemandError(f"{path}.overhead.{name}", str(exc)) from exc
    total[PODS_RESOURCE] = 1
    return {k: v for k, v in total.items() if v > 0}


@dataclass(frozen=True)
class PodShape:
    """``count`` identical pods of one replica type."""

    replica_type: str
    count: int
    requests: Vector
    node_selector: tuple[tuple[str, str], ...] = ()
    affinity: NodeAffinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    #: Required hostname anti-affinity against the job's own pods: no other pod of the job may
    #: share this pod's node.
    exclusive: bool = False

    def __post_init__(self) -> None:
        requests = dict(self.requests)
        resource = next((r for r in NPU_RESOURCES if requests.get(r)), NPU_RESOURCE)
        object.__setattr__(self, "npu_resource", resource)
        object.__setattr__(self, "npus", requests.get(resource, 0))

    #: NPUs per pod (set once: the fit reads it for every class), of :attr:`npu_resource`
    #: (``huawei.com/Ascend910``, or ``huawei.com/npu`` for the Atlas 350/850/950 handlers).
    npus: int = field(init=False, compare=False, repr=False, default=0)
    npu_resource: str = field(init=False, compare=False, repr=False, default=NPU_RESOURCE)

    @property
    def npu_bucket(self) -> int:
        """The free ``huawei.com/Ascend910`` a node needs at least (what classes are bucketed by)."""
        return self.npus if self.npu_resource == NPU_RESOURCE else 0

    def request(self, resource: str) -> int:
        return dict(self.requests).get(resource, 0)

    def placement_key(self) -> tuple[object, ...]:
        """Everything but the name and count: pods with equal keys are interchangeable."""
        return (self.requests, self.node_selector, self.affinity, self.tolerations, self.exclusive)


@dataclass(frozen=True)
class Demand:
    """``shapes`` in the job's pod order (leader first); the first ``gang`` pods must fit at once.

    With ``minAvailable`` below the job's pod count the gang is the first ``minAvailable`` pods in
    that order, as the operator creates them: a job without its leader cannot start, so a gang
    of workers alone does not count.
    """

    shapes: tuple[PodShape, ...]
    #: Pods that must be placed at once (``minAvailable``), at most :attr:`pods`.
    gang: int
    #: What the job says about its NPUs (schedule policy, accelerator-type, family).
    hardware: JobHardware = field(default_factory=JobHardware)

    def __post_init__(self) -> None:
        # Demands key the fit cache (one lookup per member per decision): hash once.
        object.__setattr__(self, "_hash", hash((self.shapes, self.gang, self.hardware)))
        object.__setattr__(self, "pods", sum(s.count for s in self.shapes))
        object.__setattr__(self, "npu_pods", sum(s.count for s in self.shapes if s.npus))

    def gang_total(self, resource: str) -> int:
        """What the gang (the pods that must fit at once) takes of ``resource``."""
        return sum(s.request(resource) * s.count for s in self.gang_shapes())

    def __hash__(self) -> int:
        return self._hash  # type: ignore[no-any-return, attr-defined]

    def gang_shapes(self) -> tuple[PodShape, ...]:
        """The shapes of the first :attr:`gang` pods (what the fit must place)."""
        out: list[PodShape] = []
        left = self.gang
        for s in self.shapes:
            if left <= 0:
                break
            out.append(s if s.count <= left else replace(s, count=left))
            left -= s.count
        return tuple(out)

    #: Pods of the whole job (set once).
    pods: int = field(init=False, compare=False, repr=False, default=0)
    #: Pods that take NPUs: one of them is a single-node job to MindCluster, more a distributed one.
    npu_pods: int = field(init=False, compare=False, repr=False, default=0)

    def total(self, resource: str) -> int:
        """The whole job's amount of ``resource`` (all pods, not only the gang)."""
        return sum(s.request(resource) * s.count for s in self.shapes)

    @property
    def npus(self) -> int:
        return self.total(NPU_RESOURCE)


@dataclass(frozen=True)
class ReplicaTemplate:
    """One replica type as a job kind spells it: its name, count and pod template."""

    name: str
    replicas: int
    template: Mapping[str, Any]
    path: str  # where the template sits in the job, for error messages
    #: The labels the kind's operator adds to each of these pods (the ascend-operator's
    #: ``job-name``, Kubeflow's ``training.kubeflow.org/job-name``, ...): what a required pod
    #: anti-affinity against the job's own pods selects them by.
    pod_labels: Mapping[str, str] = field(default_factory=dict)


def _own_labels(replica: ReplicaTemplate) -> dict[str, str]:
    meta = replica.template.get("metadata") or {}
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    return {**labels, **replica.pod_labels}


def _selects(selector: Any, labels: Mapping[str, str]) -> bool:
    """Whether a pod label selector (non-empty) matches ``labels``; a malformed one matches nothing."""
    if not isinstance(selector, Mapping) or not (
        selector.get("matchLabels") or selector.get("matchExpressions")
    ):
        return False
    try:
        return LabelSelector.model_validate(selector).matches(labels)
    except ValidationError:
        return False


def _exclusive(affinity: Any, own_labels: Mapping[str, str]) -> bool:
    """Whether a required pod anti-affinity on the hostname selects the job's own pods.

    The sample's form is ``job-name In [<job>]`` (the ascend-operator labels every pod of a job
    with ``job-name``); any selector matching the pod's own labels counts the same way. Terms
    against other workloads' pods are left to the member scheduler.
    """
    if not isinstance(affinity, Mapping):
        return False
    anti = affinity.get("podAntiAffinity")
    if not isinstance(anti, Mapping):
        return False
    terms = anti.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    return any(
        isinstance(t, Mapping)
        and t.get("topologyKey") == HOSTNAME_LABEL
        and _selects(t.get("labelSelector"), own_labels)
        for t in terms
    )


def _shape(replica: ReplicaTemplate) -> PodShape:
    tpath = f"{replica.path}.spec"
    spec = replica.template.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise DemandError(tpath, "must be an object")
    requests = pod_requests(spec, tpath)
    selector = spec.get("nodeSelector") or {}
    if not isinstance(selector, Mapping):
        raise DemandError(f"{tpath}.nodeSelector", "must be a map of label to value")
    try:
        affinity = parse_node_affinity(spec.get("affinity"), f"{tpath}.affinity")
        tolerations = parse_tolerations(spec.get("tolerations"), f"{tpath}.tolerations")
    except SelectorError as exc:
        path, _, message = str(exc).partition(": ")
        raise DemandError(path, message) from exc
    return PodShape(
        replica_type=replica.name,
        count=replica.replicas,
        requests=tuple(sorted(requests.items())),
        node_selector=tuple(sorted((str(k), str(v)) for k, v in selector.items())),
        affinity=affinity,
        tolerations=tolerations,
        exclusive=_exclusive(spec.get("affinity"), _own_labels(replica)),
    )


def build_demand(
    replicas: Sequence[ReplicaTemplate],
    *,
    min_available: int | None = None,
    annotations: Mapping[str, Any] | None = None,
    labels: Mapping[str, Any] | None = None,
) -> Demand:
    """The demand of a job made of ``replicas``; raises :class:`DemandError` naming the field.

    The job's annotations and labels say which Ascend hardware it means
    (:func:`fleet.placement.npu.job_hardware`); their warnings ride on ``demand.hardware``."""
    shapes = tuple(_shape(r) for r in replicas if r.replicas > 0)
    pods = sum(s.count for s in shapes)
    if min_available is not None and not 1 <= min_available <= max(pods, 1):
        raise DemandError(
            "spec.runPolicy.schedulingPolicy.minAvailable", f"must be between 1 and the job's {pods} pods"
        )
    try:
        hardware = job_hardware(
            {str(k): str(v) for k, v in (annotations or {}).items()},
            {str(k): str(v) for k, v in (labels or {}).items()},
            [dict(s.node_selector) for s in shapes],
            [s.npus for s in shapes for _ in range(s.count)],
        )
    except NpuRuleError as exc:
        raise DemandError(exc.path, exc.message) from exc
    return Demand(shapes=shapes, gang=min_available or pods, hardware=hardware)
