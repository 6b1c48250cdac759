"""MindCluster's NPU rules as the gang fit applies them: which hardware a job means, which NPU
counts its pods may take there, and which of a node's interconnect groups can serve them.

The rules themselves (sizes, groups, layouts, the schedule-policy vocabulary) are data in
:mod:`fleet.ascend`, each with its upstream source. This module decides, per job:

* **which hardware it means** (:func:`job_hardware`), as MindCluster's volcano plugin picks a
  handler (``component/ascend-for-volcano/internal/npu/factory.go``, ``get910CardHandlerName``):
  its ``huawei.com/schedule_policy`` first (its rules, on any node: a policy never compares the
  node's ``accelerator-type``); else the ``accelerator-type`` its pods select; else the
  ``ring-controller.atlas`` label (``ascend-910`` or ``ascend-910b``) limits it to that family's
  node types. A job that says none of these is placed by the rules of each node it may land on
  (the plugin would apply its 910 ``module`` rules to it: Fleet warns and does not guess);
* **whether a node can take a pod** (:func:`rule_failure`): the node types the pods select, the
  handler's largest node (a policy never compares the node's ``accelerator-type``: see
  :data:`fleet.ascend.SCHEDULE_POLICIES`), the NPU count single-node or distributed;
* **which groups a pod's NPUs come from** (:func:`take`), on the free NPUs per group the capacity
  summary keeps per node class, in the order MindCluster's documents give (for 910 rings the
  "1, then 3, then 2, then 4 free" table; elsewhere the fullest group that still fits).

Where MindCluster is ambiguous Fleet chooses and says so in a warning (:attr:`JobHardware.warnings`):
an ``sp-block`` (logical
SuperPoD placement stays the member's), a soft-share request that differs from its aicoreQuota.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from fleet.ascend import (
    ACCELERATOR_TYPE_LABEL,
    FAMILY_TYPES,
    MODULE_910,
    NPU_RESOURCE,
    RING_CONTROLLER_LABEL,
    SCHEDULE_POLICIES,
    SCHEDULE_POLICY_ANNOTATION,
    SOFT_SHARE,
    SOFT_SHARE_AICORE_LABEL,
    SOFT_SHARE_HBM_LABEL,
    SOFT_SHARE_NODE_LABEL,
    SOFT_SHARE_POLICIES,
    SOFT_SHARE_POLICY_LABEL,
    SP_BLOCK_ANNOTATION,
    Hardware,
    node_hardware,
)

__all__ = [
    "JobHardware",
    "NpuRuleError",
    "job_hardware",
    "pods_fit",
    "rule_failure",
    "take",
    "take_all",
]


class NpuRuleError(ValueError):
    """A job MindCluster's plugin would refuse outright; ``path`` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


@dataclass(frozen=True)
class JobHardware:
    """What a job says about the NPUs it needs (hashable: it keys the fit's caches)."""

    #: The schedule policy as written (``None``: none).
    policy: str | None = None
    #: The hardware whose rules apply on every node (``None``: each node's own).
    hardware: Hardware | None = None
    #: Node ``accelerator-type`` values it may use (``None``: any), and what in the job says so.
    types: frozenset[str] | None = None
    types_from: str = ""
    #: Why it was read this way, for the submitter (kubectl Warnings); not part of equality.
    warnings: tuple[str, ...] = field(default=(), compare=False, hash=False)

    def rules_on(self, labels: Mapping[str, str]) -> Hardware | None:
        """The hardware rules a pod of this job follows on a node with ``labels``."""
        return self.hardware if self.hardware is not None else node_hardware(labels)


def _selected_types(selectors: Iterable[Mapping[str, str]]) -> frozenset[str] | None:
    found = {s[ACCELERATOR_TYPE_LABEL] for s in selectors if ACCELERATOR_TYPE_LABEL in s}
    return frozenset(found) if found else None


def job_hardware(
    annotations: Mapping[str, str],
    labels: Mapping[str, str],
    selectors: Sequence[Mapping[str, str]],
    npus: Sequence[int],
) -> JobHardware:
    """Read a job's hardware from its annotations, labels, pod node selectors and per-pod NPUs.

    Raises :class:`NpuRuleError` only where the plugin refuses the job itself (a soft-share job
    without its quota labels, an NPU count its hardware never takes); anything else it would
    read one way or another is accepted with a warning.
    """
    warnings: list[str] = []
    policy = annotations.get(SCHEDULE_POLICY_ANNOTATION) or None
    selected = _selected_types(selectors)
    hardware: Hardware | None = None
    types = selected
    path = f"metadata.annotations.{SCHEDULE_POLICY_ANNOTATION}"
    if policy is not None and policy not in SCHEDULE_POLICIES:
        known = ", ".join(sorted(SCHEDULE_POLICIES))
        warnings.append(
            f"{path}: {policy!r} is not a schedule policy MindCluster knows ({known}); "
            "its volcano plugin ignores it, and so does Fleet"
        )
        policy = None
    if policy is not None:
        hardware = SCHEDULE_POLICIES[policy]
    if hardware is None and selected is not None and len(selected) == 1:
        (only,) = selected
        hardware = node_hardware({ACCELERATOR_TYPE_LABEL: only})
    # A policy never compares the node's accelerator-type (fleet.ascend.SCHEDULE_POLICIES): only the
    # pods' own nodeSelector narrows the node types.
    types_from = "the pods' nodeSelector"
    family = labels.get(RING_CONTROLLER_LABEL)
    if family in FAMILY_TYPES and hardware is None and selected is None:
        types = FAMILY_TYPES[family]
        types_from = f"label {RING_CONTROLLER_LABEL}={family}"
    if hardware is None and selected is None and family not in FAMILY_TYPES and any(npus):
        warnings.append(
            "the job names no accelerator-type, schedule policy or ring-controller.atlas family: "
            f"MindCluster's volcano plugin would apply its {MODULE_910.name} rules to it; Fleet "
            "places each pod by the rules of the node it lands on"
        )
    if annotations.get(SP_BLOCK_ANNOTATION):
        warnings.append(
            f"metadata.annotations.{SP_BLOCK_ANNOTATION}: Fleet places the job on one member by "
            "node rules; which SuperPoD its nodes share is left to the member's scheduler"
        )
    if hardware is SOFT_SHARE:
        _soft_share(labels, npus, warnings)
    if hardware is not None:
        npu_pods = sum(1 for n in npus if n)
        sizes = hardware.sizes(npu_pods)
        for n in npus:
            if n and n not in sizes:
                mode = "a single-pod job" if npu_pods <= 1 else "a distributed job"
                raise NpuRuleError(
                    "spec.replicaSpecs",
                    f"{n} {hardware.resource} per pod is not allowed for {mode} on {hardware.name} "
                    f"(allowed: {_sizes(sizes)}; {hardware.source})",
                )
    return JobHardware(policy, hardware, types, types_from if types is not None else "", tuple(warnings))


def _soft_share(labels: Mapping[str, str], npus: Sequence[int], warnings: list[str]) -> None:
    """chip1softsharedev/job.go: the three quota labels are required and checked."""
    for key in (SOFT_SHARE_AICORE_LABEL, SOFT_SHARE_HBM_LABEL, SOFT_SHARE_POLICY_LABEL):
        if key not in labels:
            raise NpuRuleError(f"metadata.labels.{key}", "is required by schedule policy chip1-softShareDev")
    try:
        aicore, hbm = int(labels[SOFT_SHARE_AICORE_LABEL]), int(labels[SOFT_SHARE_HBM_LABEL])
    except ValueError:
        raise NpuRuleError(
            f"metadata.labels.{SOFT_SHARE_AICORE_LABEL}", "aicoreQuota and hbmQuota must be integers"
        ) from None
    if not 1 <= aicore <= 100:
        raise NpuRuleError(f"metadata.labels.{SOFT_SHARE_AICORE_LABEL}", f"{aicore} is not in [1, 100]")
    if hbm < 1:
        raise NpuRuleError(f"metadata.labels.{SOFT_SHARE_HBM_LABEL}", f"{hbm} must be at least 1")
    if labels[SOFT_SHARE_POLICY_LABEL] not in SOFT_SHARE_POLICIES:
        raise NpuRuleError(
            f"metadata.labels.{SOFT_SHARE_POLICY_LABEL}",
            f"must be one of {', '.join(sorted(SOFT_SHARE_POLICIES))}",
        )
    if any(n and n != aicore for n in npus):
        warnings.append(
            f"metadata.labels.{SOFT_SHARE_AICORE_LABEL}: {aicore}, but the pods request "
            f"{', '.join(str(n) for n in sorted(set(npus)) if n)} {NPU_RESOURCE}: MindCluster says they "
            "must agree; Fleet places the pods by what they request"
        )


def _sizes(sizes: Iterable[int]) -> str:
    ordered = sorted(sizes)
    if len(ordered) > 8 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]} to {ordered[-1]}"
    return ", ".join(str(s) for s in ordered)


def rule_failure(
    job: JobHardware, npus: int, pods_in_job: int, labels: Mapping[str, str], node_npus: int | None
) -> str | None:
    """Why MindCluster's rules keep a pod of ``npus`` NPUs off a node (``None``: they allow it).

    ``node_npus``: the node's NPUs of the pod's resource (``None``: not known, not checked)."""
    if npus <= 0:
        return None
    accel = labels.get(ACCELERATOR_TYPE_LABEL)
    if job.types is not None and accel not in job.types:
        wanted = ", ".join(sorted(job.types)) or "none"
        return f"{job.types_from} asks for accelerator-type {wanted}; these nodes are {accel or 'unlabelled'}"
    shared = labels.get(SOFT_SHARE_NODE_LABEL) == "true"
    if shared and job.hardware is not SOFT_SHARE:
        # Their NPUs are offered as shares (100 a chip): MindCluster keeps other jobs off them
        # (soft partitioning document: mixed deployments label the other nodes false).
        return f"these nodes ({SOFT_SHARE_NODE_LABEL}=true) serve schedule policy chip1-softShareDev only"
    hardware = job.rules_on(labels)
    if hardware is None:
        return None
    if hardware is SOFT_SHARE and not shared:
        return f"schedule policy chip1-softShareDev needs nodes labelled {SOFT_SHARE_NODE_LABEL}=true"
    largest = hardware.node_npus
    if job.hardware is not None and largest and node_npus is not None and node_npus > largest:
        source = f"schedule policy {job.policy}" if job.policy else "the pods' accelerator-type"
        return (
            f"{source} ({hardware.name}) takes nodes of at most {hardware.node_npus} NPUs "
            f"(MindCluster's MaxNodeNPUNum), these have {node_npus}"
        )
    sizes = hardware.sizes(pods_in_job)
    if npus not in sizes:
        mode = "single-pod" if pods_in_job <= 1 else "distributed"
        return (
            f"{npus} NPUs per pod is not allowed on {hardware.name} for a {mode} job "
            f"(allowed: {_sizes(sizes)})"
        )
    return None


#: MindCluster's ring choice on 910 modules: for a pod of n NPUs, the ring free counts to try in
#: order (docs: "Affinity Policy in Single-Node Scenarios", table of groups A to D;
#: module910x8/task.go getNPUAllocPriorityArray).
_RING_ORDER: dict[int, tuple[int, ...]] = {1: (1, 3, 2, 4), 2: (2, 4, 3), 4: (4,)}


def take(hardware: Hardware, groups: Sequence[int], npus: int) -> list[int] | None:
    """NPUs a pod of ``npus`` takes from each group of a node with ``groups`` free per group, or
    ``None`` when the hardware's rules leave no room. ``groups`` empty: the node has no groups
    (the caller checks its free total)."""
    if not groups:
        return []
    k, m = hardware.need(npus)
    out = [0] * len(groups)
    if k == 0:
        if sum(groups) < npus:
            return None
        left = npus
        # A3: the emptiest open die first, so whole dies stay whole (ascend910a3/base.go); a
        # mesh count without affinity (5, 6, 7): the lowest ids (chip4nodex selectNPUFromNode).
        if hardware.layout == "mesh":
            order = list(range(len(groups)))
        else:
            order = sorted(range(len(groups)), key=lambda i: (groups[i] == 0, groups[i], i))
        for i in order:
            step = min(left, groups[i])
            out[i] = step
            left -= step
            if not left:
                break
        return out
    fit = [i for i, free in enumerate(groups) if free >= m]
    if len(fit) < k:
        return None
    ring_order = _RING_ORDER.get(npus) if hardware is MODULE_910 and k == 1 else None
    if ring_order is not None:
        fit = [i for want in ring_order for i in fit if groups[i] == want]
        if not fit:
            return None
    else:
        fit.sort(key=lambda i: (groups[i], i))
    for i in fit[:k]:
        out[i] = m
    return out


def take_all(hardware: Hardware, groups: Sequence[int], sizes: Iterable[int]) -> list[int] | None:
    """What pods of ``sizes`` NPUs take from each group together (largest first), or ``None``."""
    left = list(groups)
    total = [0] * len(groups)
    for n in sorted(sizes, reverse=True):
        got = take(hardware, left, n)
        if got is None:
            return None
        for i, a in enumerate(got):
            left[i] -= a
            total[i] += a
    return total


@functools.lru_cache(maxsize=65_536)
def _pods_fit(hardware: Hardware, groups: tuple[int, ...], npus: int, limit: int) -> int:
    left = list(groups)
    count = 0
    while count < limit:
        got = take(hardware, left, npus)
        if got is None:
            break
        for i, a in enumerate(got):
            left[i] -= a
        count += 1
    return count


def pods_fit(hardware: Hardware, groups: Sequence[int], npus: int, limit: int) -> int:
    """How many pods of ``npus`` a node's groups can serve at once (at most ``limit``; the fit
    asks this for every class it looks at, so answers are kept)."""
    if not groups or npus <= 0:
        return limit
    return _pods_fit(hardware, tuple(groups), npus, min(limit, sum(groups)))
