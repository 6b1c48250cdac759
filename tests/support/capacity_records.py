"""Capacity and health records as the dispatch roles write them, for tests of the API's answers
(the ``explain`` subresource, the console) without members: the default topology's shape
(member-1 with 910B modules, member-2 with four card-910b-2 nodes, member-3 with 910 modules),
written through the dispatcher's own :class:`~fleet.dispatch.capacity_publisher.CapacityPublisher`."""

from __future__ import annotations

import threading

import redis

from fleet.dispatch.capacity_publisher import CapacityPublisher
from fleet.placement import MemberCapacity, Placer
from fleet.state import DEFAULT_DISPATCH_KEYS
from fleet.state.member_health import MemberHealth, write_health
from tests.fleet.placement.factory import node, pod

__all__ = ["MEMBERS", "publish"]

MEMBERS = ["member-1", "member-2", "member-3"]


def publish(client: redis.Redis, *, busy_card_nodes: int = 0, ready: bool = True) -> None:
    """Write the three members' capacity (``busy_card_nodes`` of member-2's four nodes full) and
    their health (every member Ready, or NotReady)."""
    placer = Placer()
    placer.add_member(MemberCapacity.from_lists("member-1", [node(f"m1-{i}", 8) for i in range(2)]))
    cards = [node(f"m2-{i}", 2, "card-910b-2") for i in range(4)]
    pods = [pod(f"busy-{i}", f"m2-{i}", 2) for i in range(busy_card_nodes)]
    placer.add_member(MemberCapacity.from_lists("member-2", cards, pods))
    placer.add_member(MemberCapacity.from_lists("member-3", [node("m3-0", 8, "module")]))
    CapacityPublisher(placer, threading.RLock(), client, DEFAULT_DISPATCH_KEYS).publish()
    for member in MEMBERS:
        write_health(client, DEFAULT_DISPATCH_KEYS, member, MemberHealth(ready=ready, since=1.0, probed=2.0))
