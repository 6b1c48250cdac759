"""Simulated member clusters: Kube API servers with Ascend nodes, an ascend-operator, a gang scheduler.

Fleet's members are Kubernetes clusters; these machines run none, so ``fleet sim`` brings its
own, in the spirit of KWOK: no kubelet and no containers, but the objects a real cluster would
show, served by the kube-compatible core in :mod:`fleet.apiserver` so that the official
``kubernetes`` client and the real ``kubectl`` work against each member unchanged.

Design, module by module:

``topology``
    The pydantic model of what to simulate (members, node pools with Ascend labels, allocatable
    NPUs/cpu/memory/pods and taints; the simulation knobs) and the Node objects a pool
    registers. ``config/topology.yaml`` is the default.
``predicates``
    Node and Pod dicts parsed once into plain values, and the per-node rules in
    kube-scheduler's order and words: Ready, cordon, taints/tolerations, nodeSelector and
    required node affinity, the NPU counts and node types MindCluster's plugin handler allows
    the pod (by its ``huawei.com/schedule_policy``, its selected or its node's
    ``accelerator-type``), resources against allocatable minus what bound pods use, required pod
    anti-affinity.
``devices``
    The plugin's NPU id choice, written on its own: HCCS rings, 910B x16 splits, A3 HiAM pairs,
    4P meshes, soft-share units; free ids as a bit mask per node. The scheduler binds a pod only
    where it gets ids, and the operator writes them on the pod (``huawei.com/Ascend910``).
``scheduler``
    :func:`~fleet.sim.scheduler.schedule`, a pure function: nodes, bound pods and a job's pods
    in; a binding of the whole gang (or ``minAvailable`` of it) or the nearest miss explained.
    Exact (a depth-first search pruned by node and pod symmetries), fast on 100-node members.
    It is independent of ``fleet.placement`` on purpose, so a property test can compare them.
``jobs``
    AscendJob rules over plain dicts: minimal validation, the pods of each replica type
    (``<job>-<type>-<index>``, ``job-name`` and replica labels, ownerReferences), conditions
    shaped as the MindCluster docs show (the last one is the state), ``replicaStatuses``.
``operator``
    One in-process controller per member, on the server's loop, over the member's store:
    creates pods, schedules gangs (``Created``/``PodGroupPending`` until they fit), runs them
    (``Running``, then ``Succeeded`` after the topology's or the job's duration, or a failure
    with the exit code its ``sim.fleet.io/exit-code`` annotation gives), applies
    injected failures (``Restarting`` until ``backoffLimit``, then ``Failed``), records Events,
    and frees nodes when a job is deleted.
``faults``, ``control``, ``member``
    Fault state and the ASGI middleware that applies it (503, latency); the control endpoint on
    its own port (faults and ``/metrics``); one member's store, listener (closable and
    reopenable on the same port), operator and faults.
``simulator``, ``kubeconfig``
    All members in one process and event loop, a kubeconfig with a context per member (the
    control URL in a cluster ``extensions`` entry, so ``fleet sim fault`` finds it), clean stop
    on SIGTERM/Ctrl-C.
"""

from fleet.sim.faults import FAULTS
from fleet.sim.jobs import DURATION_ANNOTATION, EXIT_CODE_ANNOTATION
from fleet.sim.kinds import member_registry
from fleet.sim.kubeconfig import (
    CONTROL_EXTENSION,
    KubeconfigError,
    build_kubeconfig,
    control_endpoint,
    write_atomically,
)
from fleet.sim.scheduler import Cluster, Schedule, schedule, schedule_pods
from fleet.sim.simulator import run as run_simulator
from fleet.sim.topology import (
    DEFAULT_TOPOLOGY,
    Member,
    NodePool,
    Simulation,
    Topology,
    TopologyError,
    load_topology,
)

__all__ = [
    "CONTROL_EXTENSION",
    "DEFAULT_TOPOLOGY",
    "DURATION_ANNOTATION",
    "EXIT_CODE_ANNOTATION",
    "FAULTS",
    "Cluster",
    "KubeconfigError",
    "Member",
    "NodePool",
    "Schedule",
    "Simulation",
    "Topology",
    "TopologyError",
    "build_kubeconfig",
    "control_endpoint",
    "load_topology",
    "member_registry",
    "run_simulator",
    "schedule",
    "schedule_pods",
    "write_atomically",
]
