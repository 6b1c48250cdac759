"""What the simulated scheduler reads from Node and Pod objects, and the per-node rules it applies.

Node and Pod dicts are parsed once into :class:`NodeInfo` / :class:`PodInfo` (quantities as the
canonical integers of :mod:`queues.quantity`), so that the search in :mod:`fleet.sim.scheduler`
only compares numbers and strings. Each rule returns the reason a node fails it in the words
kube-scheduler uses (``node(s) were unschedulable``, ``Insufficient cpu``...), because those
reasons end up in the job's ``PodGroupPending`` message.

This is deliberately an implementation of its own, independent of ``fleet.placement``: a
property test checks that the two agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleet.apiserver import Obj
from fleet.ascend import ACCELERATOR_TYPE_LABEL, HOSTNAME_LABEL, NPU_RESOURCE, SCHEDULE_POLICY_ANNOTATION
from fleet.sim.devices import (
    DEVICE_ANNOTATION,
    Handler,
    handler_for,
    is_share_node,
    parse_annotation,
    policy_reason,
    size_reason,
)
from queues import QuantityError, parse_quantity

__all__ = [
    "NOT_READY",
    "UNSCHEDULABLE",
    "AntiAffinityTerm",
    "LabelRequirement",
    "NodeInfo",
    "PodInfo",
    "PodSpecError",
    "TaintInfo",
    "Toleration",
    "node_info",
    "pod_info",
    "pod_requests",
    "static_reason",
]

NOT_READY = "node(s) were not ready"
UNSCHEDULABLE = "node(s) were unschedulable"
SELECTOR_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
TOO_MANY_PODS = "Too many pods"

_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_SCHEDULING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


class PodSpecError(ValueError):
    """A pod field the scheduler cannot read; the message names the field."""


@dataclass(frozen=True)
class LabelRequirement:
    """One requirement of a label selector or node selector term (``key op values``)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator == "In":
            return present and value in self.values
        if self.operator == "NotIn":
            return not present or value not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if self.operator in ("Gt", "Lt") and present and value is not None:
            try:
                have, bound = int(value), int(self.values[0])
            except (ValueError, IndexError):
                return False
            return have > bound if self.operator == "Gt" else have < bound
        return False


@dataclass(frozen=True)
class TaintInfo:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{{{self.key}: {self.value}}}" if self.value else f"{{{self.key}: }}"


@dataclass(frozen=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: TaintInfo) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True)
class AntiAffinityTerm:
    """A required pod anti-affinity term: no pod matching it in the same topology domain."""

    requirements: tuple[LabelRequirement, ...]
    topology_key: str
    namespaces: frozenset[str]

    def selects(self, pod: PodInfo) -> bool:
        return pod.namespace in self.namespaces and all(r.matches(pod.labels) for r in self.requirements)


@dataclass(frozen=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str]
    taints: tuple[TaintInfo, ...]
    ready: bool
    unschedulable: bool
    allocatable: Mapping[str, int]
    npu_capacity: int
    address: str
    #: Whether the node is open to soft-shared NPUs (its NPUs are 100 units a chip).
    share: bool = False

    def domain(self, topology_key: str) -> str | None:
        """The node's value of a topology key (its name stands in for a missing hostname label)."""
        if topology_key == HOSTNAME_LABEL:
            return self.labels.get(HOSTNAME_LABEL, self.name)
        return self.labels.get(topology_key)


@dataclass(frozen=True)
class PodInfo:
    name: str
    namespace: str
    labels: Mapping[str, str]
    requests: Mapping[str, int]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    #: Required node affinity: any term (each a conjunction of requirements) must match.
    node_terms: tuple[tuple[LabelRequirement, ...], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    anti_affinity: tuple[AntiAffinityTerm, ...] = ()
    #: ``huawei.com/schedule_policy`` as written on the pod (the operator copies the job's).
    schedule_policy: str | None = None
    node_name: str | None = None
    terminal: bool = False
    #: The NPU ids the plugin gave the pod (its ``huawei.com/Ascend910`` annotation).
    devices: tuple[int, ...] = ()

    @property
    def npus(self) -> int:
        return self.requests.get(NPU_RESOURCE, 0) or self.requests.get("huawei.com/npu", 0)

    def handler(self, node: NodeInfo) -> Handler | None:
        """The plugin handler that places this pod's NPUs on ``node``."""
        return handler_for(self.schedule_policy, self.node_selector.get(ACCELERATOR_TYPE_LABEL), node.labels)

    def static_shape(self) -> tuple[Any, ...]:
        """What the static rules (:func:`static_reason`) read of a pod."""
        return (
            self.npus,
            tuple(sorted(self.node_selector.items())),
            self.node_terms,
            self.tolerations,
            self.schedule_policy,
        )

    def shape(self) -> tuple[Any, ...]:
        """What makes two pods interchangeable for the scheduler (everything but the name)."""
        return (
            self.namespace,
            tuple(sorted(self.labels.items())),
            tuple(sorted(self.requests.items())),
            tuple(sorted(self.node_selector.items())),
            self.node_terms,
            self.tolerations,
            self.anti_affinity,
            self.schedule_policy,
        )


def _str_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PodSpecError(f"{where}: must be a map of strings")
    return {str(k): str(v) for k, v in value.items()}


def _resources(values: Any, where: str) -> dict[str, int]:
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise PodSpecError(f"{where}: must be a map of quantities")
    parsed: dict[str, int] = {}
    for resource, amount in values.items():
        try:
            parsed[str(resource)] = parse_quantity(str(resource), amount)
        except QuantityError as exc:
            raise PodSpecError(f"{where}.{resource}: {exc}") from None
        if parsed[str(resource)] < 0:
            raise PodSpecError(f"{where}.{resource}: {amount!r} must not be negative")
    return parsed


def _container_requests(container: Any, where: str) -> dict[str, int]:
    """Requests, with limits standing in for missing requests as the API server defaults them."""
    if not isinstance(container, Mapping):
        raise PodSpecError(f"{where}: must be an object")
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise PodSpecError(f"{where}.resources: must be an object")
    limits = _resources(resources.get("limits"), f"{where}.resources.limits")
    requests = _resources(resources.get("requests"), f"{where}.resources.requests")
    return {**limits, **requests}


def pod_requests(spec: Mapping[str, Any], where: str = "spec") -> dict[str, int]:
    """A pod's effective requests: containers summed, at least each init container, plus overhead.

    Every pod also takes one of the node's ``pods``.
    """
    total: dict[str, int] = {}
    containers = spec.get("containers") or []
    if not isinstance(containers, list):
        raise PodSpecError(f"{where}.containers: must be a list")
    for i, container in enumerate(containers):
        for resource, amount in _container_requests(container, f"{where}.containers[{i}]").items():
            total[resource] = total.get(resource, 0) + amount
    init = spec.get("initContainers") or []
    if not isinstance(init, list):
        raise PodSpecError(f"{where}.initContainers: must be a list")
    for i, container in enumerate(init):
        for resource, amount in _container_requests(container, f"{where}.initContainers[{i}]").items():
            total[resource] = max(total.get(resource, 0), amount)
    for resource, amount in _resources(spec.get("overhead"), f"{where}.overhead").items():
        total[resource] = total.get(resource, 0) + amount
    total["pods"] = 1
    return {resource: amount for resource, amount in total.items() if amount > 0}


def _requirements(expressions: Any, where: str) -> tuple[LabelRequirement, ...]:
    if expressions is None:
        return ()
    if not isinstance(expressions, list):
        raise PodSpecError(f"{where}: must be a list")
    found = []
    for i, expression in enumerate(expressions):
        if not isinstance(expression, Mapping) or not expression.get("key") or not expression.get("operator"):
            raise PodSpecError(f"{where}[{i}]: key and operator are required")
        operator = str(expression["operator"])
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
            raise PodSpecError(f"{where}[{i}].operator: {operator!r} is not a valid operator")
        values = tuple(str(v) for v in expression.get("values") or ())
        found.append(LabelRequirement(str(expression["key"]), operator, values))
    return tuple(found)


def _selector(selector: Any, where: str) -> tuple[LabelRequirement, ...]:
    if selector is None:
        return ()
    if not isinstance(selector, Mapping):
        raise PodSpecError(f"{where}: must be an object")
    labels = _str_map(selector.get("matchLabels"), f"{where}.matchLabels")
    exact = tuple(LabelRequirement(key, "In", (value,)) for key, value in sorted(labels.items()))
    return exact + _requirements(selector.get("matchExpressions"), f"{where}.matchExpressions")


def _node_terms(affinity: Mapping[str, Any]) -> tuple[tuple[LabelRequirement, ...], ...]:
    where = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    required = (affinity.get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    found = []
    for i, term in enumerate(terms):
        if not isinstance(term, Mapping):
            raise PodSpecError(f"{where}[{i}]: must be an object")
        labels = _requirements(term.get("matchExpressions"), f"{where}[{i}].matchExpressions")
        # matchFields supports metadata.name only, as in Kubernetes; it is matched as a pseudo label.
        fields = tuple(
            LabelRequirement("metadata.name", r.operator, r.values)
            for r in _requirements(term.get("matchFields"), f"{where}[{i}].matchFields")
        )
        found.append(labels + fields)
    return tuple(found)


def _anti_affinity(affinity: Mapping[str, Any], namespace: str) -> tuple[AntiAffinityTerm, ...]:
    where = "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    terms = (affinity.get("podAntiAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or []
    if not isinstance(terms, list):
        raise PodSpecError(f"{where}: must be a list")
    found = []
    for i, term in enumerate(terms):
        if not isinstance(term, Mapping) or not term.get("topologyKey"):
            raise PodSpecError(f"{where}[{i}].topologyKey: is required")
        namespaces = frozenset(str(n) for n in term.get("namespaces") or ()) or frozenset({namespace})
        found.append(
            AntiAffinityTerm(
                _selector(term.get("labelSelector"), f"{where}[{i}].labelSelector"),
                str(term["topologyKey"]),
                namespaces,
            )
        )
    return tuple(found)


def _tolerations(value: Any) -> tuple[Toleration, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise PodSpecError("spec.tolerations: must be a list")
    return tuple(
        Toleration(
            str(t.get("key") or ""),
            str(t.get("operator") or "Equal"),
            str(t.get("value") or ""),
            str(t.get("effect") or ""),
        )
        for t in value
        if isinstance(t, Mapping)
    )


def pod_info(pod: Obj) -> PodInfo:
    """Parse what scheduling needs from a Pod; raises :class:`PodSpecError` naming a bad field."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    namespace = str(meta.get("namespace") or "default")
    affinity = spec.get("affinity") or {}
    annotations = meta.get("annotations") or {}
    policy = annotations.get(SCHEDULE_POLICY_ANNOTATION)
    return PodInfo(
        name=str(meta.get("name", "")),
        namespace=namespace,
        labels=_str_map(meta.get("labels"), "metadata.labels"),
        requests=pod_requests(spec),
        node_selector=_str_map(spec.get("nodeSelector"), "spec.nodeSelector"),
        node_terms=_node_terms(affinity),
        tolerations=_tolerations(spec.get("tolerations")),
        anti_affinity=_anti_affinity(affinity, namespace),
        schedule_policy=str(policy) if policy else None,
        node_name=spec.get("nodeName") or None,
        terminal=(pod.get("status") or {}).get("phase") in _TERMINAL_PHASES,
        devices=parse_annotation(annotations.get(DEVICE_ANNOTATION)),
    )


def node_info(node: Obj) -> NodeInfo:
    """Parse a Node; a quantity that does not parse counts as zero (the node offers nothing of it)."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    allocatable: dict[str, int] = {}
    for resource, amount in (status.get("allocatable") or {}).items():
        try:
            allocatable[resource] = parse_quantity(resource, amount)
        except QuantityError:
            allocatable[resource] = 0
    try:
        npu_capacity = parse_quantity(NPU_RESOURCE, (status.get("capacity") or {}).get(NPU_RESOURCE, "0"))
    except QuantityError:
        npu_capacity = 0
    conditions = status.get("conditions") or []
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions if isinstance(c, dict)
    )
    address = next(
        (str(a.get("address")) for a in status.get("addresses") or () if a.get("type") == "InternalIP"), ""
    )
    taints = tuple(
        TaintInfo(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect", "")))
        for t in spec.get("taints") or ()
        if isinstance(t, dict)
    )
    return NodeInfo(
        name=str(meta.get("name", "")),
        labels=_str_map(meta.get("labels"), "metadata.labels"),
        taints=taints,
        ready=ready,
        unschedulable=bool(spec.get("unschedulable")),
        allocatable=allocatable,
        npu_capacity=npu_capacity or allocatable.get(NPU_RESOURCE, 0),
        address=address,
        share=is_share_node(meta.get("labels") or {}),
    )


def static_reason(pod: PodInfo, node: NodeInfo, pods_in_job: int) -> str | None:
    """The first rule (in kube-scheduler's filter order) that rules the node out whatever runs on it."""
    if not node.ready:
        return NOT_READY
    if node.unschedulable:
        return UNSCHEDULABLE
    for taint in node.taints:
        if taint.effect in _SCHEDULING_EFFECTS and not any(t.tolerates(taint) for t in pod.tolerations):
            return f"node(s) had untolerated taint {taint}"
    if any(node.labels.get(key) != value for key, value in pod.node_selector.items()):
        return SELECTOR_MISMATCH
    if pod.node_terms:
        labels = {**node.labels, "metadata.name": node.name}
        if not any(all(r.matches(labels) for r in term) for term in pod.node_terms):
            return SELECTOR_MISMATCH
    npus = pod.npus
    if npus > 0:
        size = node.npu_capacity or node.allocatable.get("huawei.com/npu", 0)
        why = policy_reason(pod.schedule_policy, node.labels, size)
        if why is not None:
            return why
        handler = pod.handler(node)
        if handler is not None:
            return size_reason(handler, npus, pods_in_job)
    return None


def insufficient(requests: Mapping[str, int], free: Mapping[str, int]) -> list[str]:
    """kube-scheduler's resource reasons for the requests that do not fit in ``free``."""
    reasons = []
    for resource, amount in sorted(requests.items()):
        if amount > free.get(resource, 0):
            reasons.append(TOO_MANY_PODS if resource == "pods" else f"Insufficient {resource}")
    return reasons


def used_by(pods: Sequence[PodInfo]) -> dict[str, int]:
    """What non-terminal pods take from a node."""
    used: dict[str, int] = {}
    for pod in pods:
        if pod.terminal:
            continue
        for resource, amount in pod.requests.items():
            used[resource] = used.get(resource, 0) + amount
    return used
