"""Gang placement: a job goes only where all of it can run at once.

Pipeline of one decision (:meth:`Placer.place`; the dispatcher decides a round's jobs with
:meth:`Placer.place_many`, their holds taken in one exchange with the store):

1. :mod:`~fleet.placement.demand`: the job's pods as the member scheduler will see them, per
   replica type (request, count, selector, affinity, tolerations, one-pod-per-node), with the
   gang size (``minAvailable``) and the Ascend schedule policy. Built by the workload adapter.
2. :mod:`~fleet.placement.capacity`: per member, a summary kept current from node and pod watch
   events that groups usable nodes into classes of interchangeable nodes, with holds of in-flight
   reservations laid over it.
3. :mod:`~fleet.placement.fit`: the exact node-level gang fit on one member (a max flow when every
   pod needs its own node, a count for one shape, a bounded search otherwise), and the choice
   among fitting members by pack or spread, cluster affinity and exclusions.
4. :mod:`~fleet.placement.reservations`: the chosen nodes' capacity is held (in memory or in
   Redis, atomically against the basis the decision saw) until the member's pods are bound or
   the hold expires, so two decisions from one stale snapshot never take the same NPUs.
5. :mod:`~fleet.placement.explain`: when no member fits, the nearest miss per member in words.

:mod:`~fleet.placement.snapshot` writes a summary as a record, node by node, and reads it back,
so that the fleet API explains a job with the same fit on the capacity the dispatcher sees.

Fleet's rule is per node: summed free capacity is never enough (sixteen nodes with one free NPU
do not run a job of two 8-NPU pods). The fit works on classes, so its cost follows the number of
distinct node kinds and occupancy levels, not the number of nodes; :class:`Placer` caches fits
per member capacity version, so members that did not change cost a lookup.

:class:`~fleet.placement.feeder.CapacityFeeder` (imported from its module: it brings the member
access layer) keeps the summaries current from node and pod watches and ends holds whose pods
are bound. A dispatcher may pin a member copy to the chosen placement
(``adapter.member_copy(..., pin=placement.nodes_by_replica_type())``) so that the member binds
exactly the held nodes.
"""

from typing import TYPE_CHECKING, Final

from fleet.lazy_face import lazy_face

if TYPE_CHECKING:
    from fleet.placement.capacity import MemberCapacity, NodeClass, job_pod_key
    from fleet.placement.demand import (
        Demand,
        DemandError,
        PodShape,
        ReplicaTemplate,
        build_demand,
        pod_requests,
    )
    from fleet.placement.explain import NEVER, explain_member, explain_members, never_fits, say_avoided
    from fleet.placement.feeder import CapacityFeeder
    from fleet.placement.fit import Placement, Strategy, choose, fit_member
    from fleet.placement.keys import MemberReservationKeys, ReservationKeys
    from fleet.placement.placer import Decision, Placer, PlaceRequest
    from fleet.placement.redis_store import RedisReservations
    from fleet.placement.reservations import MemoryReservations, Reservation, ReservationStore
    from fleet.placement.snapshot import NodesRecord, dump_nodes, load_nodes
    from fleet.placement.view import capacity_view

# The face is lazy (PEP 562): a name is imported from its module when first used, so that
# importing one name does not import the whole package (the CLI starts fast, issue 33).
_FACE: Final[dict[str, tuple[str, str]]] = {
    "MemberCapacity": ("fleet.placement.capacity", "MemberCapacity"),
    "NodeClass": ("fleet.placement.capacity", "NodeClass"),
    "job_pod_key": ("fleet.placement.capacity", "job_pod_key"),
    "Demand": ("fleet.placement.demand", "Demand"),
    "DemandError": ("fleet.placement.demand", "DemandError"),
    "PodShape": ("fleet.placement.demand", "PodShape"),
    "ReplicaTemplate": ("fleet.placement.demand", "ReplicaTemplate"),
    "build_demand": ("fleet.placement.demand", "build_demand"),
    "pod_requests": ("fleet.placement.demand", "pod_requests"),
    "NEVER": ("fleet.placement.explain", "NEVER"),
    "explain_member": ("fleet.placement.explain", "explain_member"),
    "explain_members": ("fleet.placement.explain", "explain_members"),
    "never_fits": ("fleet.placement.explain", "never_fits"),
    "say_avoided": ("fleet.placement.explain", "say_avoided"),
    "CapacityFeeder": ("fleet.placement.feeder", "CapacityFeeder"),
    "Placement": ("fleet.placement.fit", "Placement"),
    "Strategy": ("fleet.placement.fit", "Strategy"),
    "choose": ("fleet.placement.fit", "choose"),
    "fit_member": ("fleet.placement.fit", "fit_member"),
    "MemberReservationKeys": ("fleet.placement.keys", "MemberReservationKeys"),
    "ReservationKeys": ("fleet.placement.keys", "ReservationKeys"),
    "Decision": ("fleet.placement.placer", "Decision"),
    "Placer": ("fleet.placement.placer", "Placer"),
    "PlaceRequest": ("fleet.placement.placer", "PlaceRequest"),
    "RedisReservations": ("fleet.placement.redis_store", "RedisReservations"),
    "MemoryReservations": ("fleet.placement.reservations", "MemoryReservations"),
    "Reservation": ("fleet.placement.reservations", "Reservation"),
    "ReservationStore": ("fleet.placement.reservations", "ReservationStore"),
    "NodesRecord": ("fleet.placement.snapshot", "NodesRecord"),
    "dump_nodes": ("fleet.placement.snapshot", "dump_nodes"),
    "load_nodes": ("fleet.placement.snapshot", "load_nodes"),
    "capacity_view": ("fleet.placement.view", "capacity_view"),
}


lazy_face(__name__, _FACE)


__all__ = [
    "NEVER",
    "CapacityFeeder",
    "Decision",
    "Demand",
    "DemandError",
    "MemberCapacity",
    "MemberReservationKeys",
    "MemoryReservations",
    "NodeClass",
    "NodesRecord",
    "PlaceRequest",
    "Placement",
    "Placer",
    "PodShape",
    "RedisReservations",
    "ReplicaTemplate",
    "Reservation",
    "ReservationKeys",
    "ReservationStore",
    "Strategy",
    "build_demand",
    "capacity_view",
    "choose",
    "dump_nodes",
    "explain_member",
    "explain_members",
    "fit_member",
    "job_pod_key",
    "load_nodes",
    "never_fits",
    "pod_requests",
    "say_avoided",
]
