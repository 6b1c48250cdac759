"""The Ascend and AscendJob vocabulary: one home for names that several parts of Fleet share.

The member simulator's scheduler, Fleet's gang placement and the workload adapter all speak of
the same labels, resource names, condition types and reasons. They come from the MindCluster
documents in ``shared/seeds`` and are defined here once.

Per-pod NPU sizes: the Ascend device plugin and its volcano plugin only hand a pod NPU counts that
match the node's module topology. :data:`ALLOWED_NPUS` holds those sizes per ``accelerator-type``
for a job of one pod (``single``) and for a distributed job of several pods (``distributed``,
where MindCluster asks each pod to take whole modules). A node type not listed is unrestricted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ACCELERATOR_LABEL",
    "ACCELERATOR_TYPE_LABEL",
    "ALLOWED_NPUS",
    "ASCENDJOB_GROUP",
    "ASCENDJOB_KIND",
    "ASCENDJOB_PLURAL",
    "ASCENDJOB_VERSION",
    "CONDITION_TYPES",
    "FRAMEWORK_LABEL",
    "HOSTNAME_LABEL",
    "HOST_ARCH_LABEL",
    "JOB_NAME_LABEL",
    "NPU_RESOURCE",
    "REPLICA_INDEX_LABEL",
    "REPLICA_TYPE_LABEL",
    "SCHEDULE_POLICY_ANNOTATION",
    "AllowedSizes",
    "Condition",
    "Reason",
    "SchedulePolicy",
    "allowed_npus_per_pod",
    "parse_schedule_policy",
]

ASCENDJOB_GROUP: Final = "mindxdl.gitee.com"
ASCENDJOB_VERSION: Final = "v1"
ASCENDJOB_KIND: Final = "AscendJob"
ASCENDJOB_PLURAL: Final = "ascendjobs"

#: The extended resource an Ascend 910 NPU is requested as.
NPU_RESOURCE: Final = "huawei.com/Ascend910"

# Node labels set by the Ascend device plugin / node labeller.
ACCELERATOR_LABEL: Final = "accelerator"  # e.g. huawei-Ascend910
HOST_ARCH_LABEL: Final = "host-arch"  # huawei-arm or huawei-x86
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


CONDITION_TYPES: Final = (
    Condition.CREATED,
    Condition.RUNNING,
    Condition.RESTARTING,
    Condition.SUCCEEDED,
    Condition.FAILED,
)


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


@dataclass(frozen=True)
class AllowedSizes:
    """NPUs one pod may take on one node of an accelerator type."""

    single: frozenset[int]
    distributed: frozenset[int]

    def for_job(self, pods: int) -> frozenset[int]:
        return self.single if pods <= 1 else self.distributed


def _sizes(single: range | tuple[int, ...], distributed: tuple[int, ...]) -> AllowedSizes:
    return AllowedSizes(frozenset(single), frozenset(distributed))


#: Per-pod NPU counts by node ``accelerator-type``.
ALLOWED_NPUS: Final[dict[str, AllowedSizes]] = {
    "module": _sizes((1, 2, 4, 8), (8,)),  # Atlas 800 training server, 910 x8
    "half": _sizes((1, 2, 4), (4,)),  # 910 x4
    "card": _sizes((1, 2), (1, 2)),  # Atlas 300T training cards
    "module-910b-8": _sizes(range(1, 9), (8,)),  # Atlas 800T A2
    "module-910b-16": _sizes((1, 2, 4, 8, 16), (16,)),  # Atlas 900 A2 PoD
    "card-910b-2": _sizes((1, 2), (1, 2)),  # Atlas 300T A2 cards, two per node
}


def allowed_npus_per_pod(accelerator_type: str | None, pods_in_job: int) -> frozenset[int] | None:
    """The NPU counts a pod may take on a node of this type, or ``None`` when unrestricted."""
    if accelerator_type is None or accelerator_type not in ALLOWED_NPUS:
        return None
    return ALLOWED_NPUS[accelerator_type].for_job(pods_in_job)


@dataclass(frozen=True)
class SchedulePolicy:
    """``huawei.com/schedule_policy: chip<C>-node<N>``: nodes of N NPUs built from C-NPU chips.

    Fleet reads it as a hardware shape: a pod of such a job may only land on a node whose NPU
    capacity is ``node_npus``, and takes a multiple of ``chip_npus`` NPUs there.
    """

    chip_npus: int
    node_npus: int

    def admits(self, node_npu_capacity: int, pod_npus: int) -> bool:
        return node_npu_capacity == self.node_npus and pod_npus % self.chip_npus == 0


_POLICY = re.compile(r"^chip(\d+)-node(\d+)$")


def parse_schedule_policy(value: str | None) -> SchedulePolicy | None:
    """Parse the annotation; ``None`` when absent. Raises ``ValueError`` when malformed."""
    if value is None or value == "":
        return None
    match = _POLICY.match(value)
    if not match or int(match.group(1)) == 0 or int(match.group(2)) == 0:
        raise ValueError(f"{SCHEDULE_POLICY_ANNOTATION} {value!r} is not of the form chip<C>-node<N>")
    return SchedulePolicy(int(match.group(1)), int(match.group(2)))
