"""The Ascend and AscendJob vocabulary: one home for names that several parts of Fleet share.

The member simulator's scheduler, Fleet's gang placement and the workload adapter all speak of
the same labels, resource names, condition types and reasons. They come from the MindCluster
documents in ``shared/seeds`` and are defined here once.

MindCluster's hardware rules (:class:`Hardware`): which NPU counts a pod may take on which
hardware, single node and distributed, and how its NPUs must sit in the node's interconnect
groups; :data:`SCHEDULE_POLICIES` is the whole ``huawei.com/schedule_policy`` vocabulary. Fleet's
placement reads them (:mod:`fleet.placement.npu`); the member simulator keeps its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "ACCELERATOR_TYPE_LABEL",
    "ASCENDJOB_GROUP",
    "ASCENDJOB_KIND",
    "ASCENDJOB_PLURAL",
    "ASCENDJOB_VERSION",
    "BY_ACCELERATOR_TYPE",
    "FAMILY_TYPES",
    "FRAMEWORK_LABEL",
    "HOSTNAME_LABEL",
    "JOB_NAME_LABEL",
    "NPU_RESOURCE",
    "NPU_RESOURCES",
    "REPLICA_INDEX_LABEL",
    "REPLICA_TYPE_LABEL",
    "RING_CONTROLLER_LABEL",
    "SCHEDULE_POLICIES",
    "SCHEDULE_POLICY_ANNOTATION",
    "SOFT_SHARE",
    "SOFT_SHARE_AICORE_LABEL",
    "SOFT_SHARE_HBM_LABEL",
    "SOFT_SHARE_NODE_LABEL",
    "SOFT_SHARE_POLICIES",
    "SOFT_SHARE_POLICY_LABEL",
    "SP_BLOCK_ANNOTATION",
    "Condition",
    "Hardware",
    "Reason",
    "device_ids",
    "node_hardware",
]

ASCENDJOB_GROUP: Final = "mindxdl.gitee.com"
ASCENDJOB_VERSION: Final = "v1"
ASCENDJOB_KIND: Final = "AscendJob"
ASCENDJOB_PLURAL: Final = "ascendjobs"

#: The extended resource an Ascend 910 NPU is requested as.
NPU_RESOURCE: Final = "huawei.com/Ascend910"

# Node labels set by the Ascend device plugin / node labeller.
ACCELERATOR_TYPE_LABEL: Final = "accelerator-type"  # card-910b-2, module-910b-8, module, ...
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"

# Job labels and annotations.
FRAMEWORK_LABEL: Final = "framework"  # pytorch, mindspore or tensorflow
JOB_NAME_LABEL: Final = "job-name"  # set by the ascend-operator on every pod of a job
REPLICA_TYPE_LABEL: Final = "replica-type"  # the pod's replica type, lower case (master, worker)
REPLICA_INDEX_LABEL: Final = "replica-index"  # the pod's index within its replica type
SCHEDULE_POLICY_ANNOTATION: Final = "huawei.com/schedule_policy"


class Condition:
    """AscendJob condition types; the last condition in ``status.conditions`` is the state."""

    CREATED: Final = "Created"
    RUNNING: Final = "Running"
    RESTARTING: Final = "Restarting"
    SUCCEEDED: Final = "Succeeded"
    FAILED: Final = "Failed"


class Reason:
    """Condition reasons as the ascend-operator writes them (case as in the seed documents)."""

    JOB_CREATED: Final = "JobCreated"
    JOB_RUNNING: Final = "JobRunning"
    JOB_SUCCEEDED: Final = "JobSucceeded"
    JOB_FAILED: Final = "JobFailed"
    JOB_RESTARTING: Final = "jobRestarting"
    SYNC_POD_GROUP_FAILED: Final = "SyncPodGroupFailed"
    POD_GROUP_NOT_INITIALIZED: Final = "PodGroupNotInitialized"
    POD_GROUP_PENDING: Final = "PodGroupPending"
    SYNC_SERVICE_FAILED: Final = "SyncServiceFailed"
    POD_CREATE_FAILED: Final = "PodCreateFailed"
    JOB_VALID_FAILED: Final = "JobValidFailed"


# ---- MindCluster's hardware rules ----------------------------------------------------------------
#
# Sources (Ascend/mind-cluster, read at 22bb3d9): the volcano plugin's handlers under
# component/ascend-for-volcano/internal/npu (factory.go picks one handler per job: its schedule
# policy first, else its nodeSelector's accelerator-type, else the 910 "module" handler) and the
# affinity document docs/en/scheduling/usage/basic_scheduling/01_affinity_scheduling/
# 03_ascend_ai_processor_based_affinity.md (rules per product, single node and distributed).

#: Resource names a MindCluster job asks NPUs by (the 910 family, and the generic name the Atlas
#: 350/850/950 handlers read: common/util/constants.go NPUCardName).
NPU_RESOURCES: Final = (NPU_RESOURCE, "huawei.com/npu")
#: The job label MindCluster's operators read to tell 910 from 910B jobs (ring-controller.atlas:
#: ascend-910 / ascend-910b; common/util/constants.go JobKind910Value, JobKind910BValue).
RING_CONTROLLER_LABEL: Final = "ring-controller.atlas"
#: Node label that opens a node to soft-shared NPUs (chip1-softShareDev).
SOFT_SHARE_NODE_LABEL: Final = "huawei.com/scheduler.chip1softsharedev.enable"
#: Job labels a soft-share job states its share with (all three required by the plugin).
SOFT_SHARE_AICORE_LABEL: Final = "huawei.com/scheduler.softShareDev.aicoreQuota"
SOFT_SHARE_HBM_LABEL: Final = "huawei.com/scheduler.softShareDev.hbmQuota"
SOFT_SHARE_POLICY_LABEL: Final = "huawei.com/scheduler.softShareDev.policy"
SOFT_SHARE_POLICIES: Final = frozenset({"fixed-share", "elastic", "best-effort"})
#: Job annotation naming a logical SuperPoD size (super-pod placement is the member's business).
SP_BLOCK_ANNOTATION: Final = "sp-block"

Layout = Literal["any", "ring", "mesh", "pairs"]


def _upto(n: int, *, skip: tuple[int, ...] = ()) -> frozenset[int]:
    return frozenset(i for i in range(1, n + 1) if i not in skip)


@dataclass(frozen=True)
class Hardware:
    """One of MindCluster's NPU handlers: which NPU counts a pod may ask for, and which NPUs of a
    node can serve it.

    ``group`` is the node's interconnect unit (an HCCS ring, a HiAM pair, a 4-NPU mesh; for soft
    share the share units of one chip) and ``layout`` how a pod uses it:

    * ``ring``: a pod of up to ``group`` NPUs inside one group; a whole node takes every group;
      above one group (910B x16's 10/12/14) half in each of two groups;
    * ``mesh``: up to ``group`` inside one group, multiples of ``group`` as whole groups, other
      counts anywhere (Atlas 350 4P mesh);
    * ``pairs``: one NPU anywhere, an even count as whole pairs (A3 HiAM);
    * ``any``: any free NPUs (fully connected nodes, cards).
    """

    name: str
    #: Node ``accelerator-type`` values that are this hardware (empty: none by label). They say which
    #: rules a node's own label selects; a schedule policy never compares them with the node.
    accelerator_types: frozenset[str]
    #: Most NPUs a node may offer to this handler (its ``MaxNodeNPUNum``: ``GetUsableTopFromNode``
    #: in ``internal/npu/base/node.go`` refuses a node whose NPUs are more; 0: not checked).
    node_npus: int
    group: int
    layout: Layout
    single: frozenset[int]
    distributed: frozenset[int]
    #: ``910`` or ``910b`` (the ring-controller.atlas family), or ``""`` when neither.
    family: str
    resource: str = NPU_RESOURCE
    #: The upstream file or document the rule is read from.
    source: str = ""

    def sizes(self, pods_in_job: int) -> frozenset[int]:
        return self.single if pods_in_job <= 1 else self.distributed

    def need(self, npus: int) -> tuple[int, int]:
        """``(k, m)``: a pod of ``npus`` takes ``m`` NPUs in each of ``k`` groups; ``(0, 0)``: any."""
        g = self.group
        if g <= 0 or self.layout == "any" or npus <= 0:
            return (0, 0)
        if self.layout == "pairs":
            return (0, 0) if npus == 1 else (npus // g, g)
        if npus <= g:
            return (1, npus)
        if npus % g == 0:
            return (npus // g, g)
        if self.layout == "ring" and npus % 2 == 0:
            return (2, npus // 2)
        return (0, 0)


_910 = "component/ascend-for-volcano/internal/npu"
_DOC = (
    "docs/en/scheduling/usage/basic_scheduling/01_affinity_scheduling/"
    "03_ascend_ai_processor_based_affinity.md"
)

MODULE_910: Final = Hardware(
    "Atlas 800 training server (910, module)",
    frozenset({"module"}),
    8,
    4,
    "ring",
    # module910x8/frame.go: NpuNumInvalidMap {3, 5, 6, 7}; the same sizes distributed since
    # 5.0.RC1 (the affinity document, "Affinity Policy in Distributed Scenarios").
    frozenset({1, 2, 4, 8}),
    frozenset({1, 2, 4, 8}),
    "910",
    source=f"{_910}/ascend910/ascend910old/module910x8/frame.go, task.go; {_DOC}",
)
HALF_910: Final = Hardware(
    "910 x4 (half)",
    frozenset({"half"}),
    4,
    4,
    "ring",
    frozenset({1, 2, 4}),
    frozenset({1, 2, 4}),
    "910",
    source=f"{_910}/factory.go (half910x4: max 4, NpuNumInvalidMap {{3}})",
)
CARD_910: Final = Hardware(
    "Atlas 300T training card (910)",
    frozenset({"card"}),
    8,
    0,
    "any",
    _upto(8),
    _upto(8),
    "910",
    source=f"{_910}/factory.go (card910x2: base handler, max 8; any accelerator-type containing card)",
)
CARD_910B: Final = Hardware(
    "Atlas 300T A2 training card (910B)",
    frozenset({"card-910b-2"}),
    8,
    0,
    "any",
    _upto(8),
    _upto(8),
    "910b",
    source=f"{_910}/factory.go (an accelerator-type containing card takes the card handler)",
)
MODULE_910B_8: Final = Hardware(
    "Atlas 800T A2 (910B x8)",
    frozenset({"module-910b-8"}),
    8,
    0,
    "any",
    _upto(8),
    _upto(8),
    "910b",
    source=f"{_910}/factory.go (module910bx8: base handler, max 8, no topology); {_DOC} (no affinity)",
)
MODULE_910B_16: Final = Hardware(
    "Atlas 900 A2 PoD / 200T A2 Box16 (910B x16)",
    frozenset({"module-910b-16"}),
    16,
    8,
    "ring",
    _upto(16, skip=(9, 11, 13, 15)),
    _upto(16, skip=(9, 11, 13, 15)),
    "910b",
    source=f"{_910}/ascend910/ascend910b/module910bx16/frame.go, ascend910b/base.go; {_DOC}",
)
A3_16: Final = Hardware(
    "Atlas 800T/800I A3 (x16, HiAM pairs)",
    frozenset({"module-a3-16"}),
    16,
    2,
    "pairs",
    frozenset({1, *range(2, 17, 2)}),
    frozenset(range(2, 17, 2)),
    "910b",
    source=f"{_910}/ascend910/ascend910a3/module910a3x16/frame.go, ascend910a3/base.go; {_DOC}",
)
A3_8: Final = Hardware(
    "A3 x8 (HiAM pairs)",
    frozenset({"module-a3-8", "module-a3-8-super-pod"}),
    16,
    2,
    "pairs",
    frozenset({1, 2, 4, 6, 8}),
    frozenset({2, 4, 6, 8}),
    "910b",
    # chip2-node8 takes the module910a3x16 handler, whose MaxNodeNPUNum is 16.
    source=f"{_910}/factory.go (chip2-node8 takes the module910a3x16 handler)",
)
A3_SUPERPOD_16: Final = Hardware(
    "Atlas 900 A3 SuperPoD (x16)",
    frozenset({"module-a3-16-super-pod"}),
    16,
    2,
    "pairs",
    frozenset({1, *range(2, 17, 2)}),
    frozenset(range(2, 17, 2)),
    "910b",
    source=f"{_910}/ascend910/ascend910a3/superpod/frame.go; {_DOC}",
)
A3_SUPERPOD_8: Final = Hardware(
    "A200T A3 Box8 SuperPoD (x8)",
    frozenset({"module-a3-8-super-pod"}),
    8,
    2,
    "pairs",
    frozenset({1, 2, 4, 6, 8}),
    frozenset({2, 4, 6, 8}),
    "910b",
    source=f"{_910}/ascend910/ascend910a3/superpod/frame.go (A3x8SchedulerName)",
)
MESH_4P_8: Final = Hardware(
    "Atlas 350 (8, four-NPU meshes)",
    frozenset(),
    8,
    4,
    "mesh",
    _upto(8),
    _upto(8),
    "",
    source=f"{_910}/policy/chip4nodex/utils.go, job.go; {_DOC}",
)
MESH_4P_16: Final = Hardware(
    "Atlas 350 (16, four-NPU meshes)",
    frozenset(),
    16,
    4,
    "mesh",
    _upto(16),
    _upto(16),
    "",
    source=f"{_910}/policy/chip4nodex/utils.go, job.go; {_DOC}",
)
PCIE_8: Final = Hardware(
    "Atlas 350 PCIe (8, no interconnect)",
    frozenset(),
    8,
    0,
    "any",
    _upto(8),
    _upto(8),
    "",
    source=f"{_910}/factory.go (1p-8: base handler, max 8); {_DOC}",
)
PCIE_16: Final = Hardware(
    "Atlas 350 PCIe (16, no interconnect)",
    frozenset(),
    16,
    0,
    "any",
    _upto(16),
    _upto(16),
    "",
    source=f"{_910}/factory.go (1p-16: base handler, max 16); {_DOC}",
)
SUPERPOD_850: Final = Hardware(
    "Atlas 850 SuperPoD server",
    frozenset(),
    8,
    0,
    "any",
    frozenset({1, 2, 4, 8}),
    frozenset({8}),
    "",
    source=f"{_910}/policy/chip8node8sp/frame.go; {_DOC} (distributed: 8 only)",
)
SUPERPOD_950: Final = Hardware(
    "Atlas 950 SuperPoD",
    frozenset(),
    8,
    0,
    "any",
    _upto(8),
    frozenset({8}),
    "",
    source=f"{_910}/policy/chip8node8ra64sp/job.go; {_DOC} (distributed: 8 only)",
)
SOFT_SHARE: Final = Hardware(
    "soft-shared NPU (chip1-softShareDev)",
    frozenset(),
    0,
    100,
    "ring",
    _upto(100),
    _upto(100),
    "",
    # The request is a percentage of one chip's AI cores; the device plugin offers 100 per chip
    # (shareDevCount=100), so a pod's share must fit in one chip.
    source=(
        f"{_910}/policy/chip1softsharedev/job.go; docs/en/scheduling/usage/virtual_instance/"
        "virtual_instance_with_vcann_rt/01_soft_allocation_scheduling_inference.md"
    ),
)

#: Every ``huawei.com/schedule_policy`` value the plugin knows (common/util/constants.go, "value
#: of schedule_policy annotation") -> the handler it selects (factory.go policy910HandlerMap).
#: ``multilevel`` is MindCluster's multi-level network scheduling: no per-node rule of its own,
#: so Fleet places it by the nodes' own hardware.
#:
#: **Which hardware a policy selects** (read in the plugin at 22bb3d9): none by label. factory.go
#: ``get910CardHandlerName`` returns the policy's handler before it reads any ``accelerator-type``,
#: and no handler compares a node's ``accelerator-type`` with the policy: the base handler
#: (``internal/npu/base/frame.go`` ``CheckNodeNPUByTask``, ``JudgeNodeAndTaskNPU``), ``chip4nodex``
#: (``policy/chip4nodex/frame.go``, ``job.go``) and the 910/910B/A3 handlers read only the node's
#: device annotation of the resource the pod asks for (``plugin/plugin.go`` ``GetAnnoName``: the
#: pod's own ``huawei.com/Ascend910`` or ``huawei.com/npu``) and refuse a node offering more NPUs than
#: their ``MaxNodeNPUNum`` (``base/node.go`` ``GetUsableTopFromNode``). So a policy selects its
#: handler's *rules* (sizes, groups) on every node that offers the pod's resource and at most
#: :attr:`Hardware.node_npus` NPUs: ``chip1-node2`` is the card handler (``card910x2``, at most 8) on
#: any such node, ``card-910b-2`` included; ``chip4-node8`` applies the 4-NPU mesh rules on Atlas 350
#: 4P nodes and also on 910 ``module`` and 910B ``module-910b-8`` nodes; ``chip8-node8`` applies the
#: 910B x8 rules (any 1 to 8 NPUs, no ring) on ``module-910b-8`` and also on 910 ``module``,
#: ``half`` and card nodes. A pod's own ``nodeSelector`` still narrows the nodes (kube-scheduler's
#: predicate). Fleet reads a node's allocatable NPUs where the plugin reads its idle ones: a node
#: larger than the handler's maximum is never counted on (the plugin takes it only once enough of
#: it is busy).
SCHEDULE_POLICIES: Final[dict[str, Hardware | None]] = {
    "module-a3-16": A3_16,
    "chip1-node2": CARD_910,
    "chip4-node4": HALF_910,
    "chip8-node8": MODULE_910B_8,
    "chip8-node16": MODULE_910B_16,
    "chip2-node16": A3_16,
    "chip2-node16-sp": A3_SUPERPOD_16,
    "chip2-node8": A3_8,
    "chip2-node8-sp": A3_SUPERPOD_8,
    "chip4-node8": MESH_4P_8,
    "chip4-node16": MESH_4P_16,
    "chip1-node8": PCIE_8,
    "chip1-node16": PCIE_16,
    "chip8-node8-sp": SUPERPOD_850,
    "chip8-node8-ra64-sp": SUPERPOD_950,
    "chip1-softShareDev": SOFT_SHARE,
    "multilevel": None,
}

#: Node hardware by ``accelerator-type`` (what a node's own rules are when the job names none).
BY_ACCELERATOR_TYPE: Final[dict[str, Hardware]] = {
    t: hw
    for hw in (MODULE_910, HALF_910, MODULE_910B_8, MODULE_910B_16, A3_16, A3_SUPERPOD_16, A3_SUPERPOD_8)
    for t in hw.accelerator_types
} | {"card": CARD_910, "card-910b-2": CARD_910B}

#: The 910 and 910B node types, for a job that says only ``ring-controller.atlas``.
FAMILY_TYPES: Final[dict[str, frozenset[str]]] = {
    "ascend-910": frozenset(t for t, hw in BY_ACCELERATOR_TYPE.items() if hw.family == "910"),
    "ascend-910b": frozenset(t for t, hw in BY_ACCELERATOR_TYPE.items() if hw.family == "910b"),
}


def node_hardware(labels: Mapping[str, str]) -> Hardware | None:
    """A node's own hardware, from its labels: soft share when opened to it, else by
    ``accelerator-type`` (a type containing ``card`` is a card, as factory.go reads it)."""
    if labels.get(SOFT_SHARE_NODE_LABEL) == "true":
        return SOFT_SHARE
    accel = labels.get(ACCELERATOR_TYPE_LABEL)
    if accel is None:
        return None
    found = BY_ACCELERATOR_TYPE.get(accel)
    if found is None and "card" in accel:
        return CARD_910
    return found


def device_ids(annotation: str | None) -> tuple[int, ...]:
    """The device ids of a pod's ``huawei.com/Ascend910`` annotation (``Ascend910-0,...``)."""
    out = []
    for part in (annotation or "").split(","):
        tail = part.strip().rpartition("-")[2]
        if tail.isdigit():
            out.append(int(tail))
    return tuple(out)
