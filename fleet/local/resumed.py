"""What a ``fleet up`` found in Redis when it started: the state an earlier run left.

The embedded Redis keeps its data in ``.fleet/redis/`` across runs (and ``--redis`` names a Redis
that may hold anything), so the tree, the jobs and the policies of the last run come back. A
newcomer following a walkthrough that needs a clean fleet must be told, on start, that this
happened and how much came back, and how to start clean (``make up FRESH=1``, that is ``fleet up
--fresh``): :func:`resumed_state` counts it, :meth:`Resumed.describe` says it in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from fleet.kinds import ELASTIC_QUOTA_TREE, FLEET_JOB_KINDS, POLICY_KINDS
from fleet.state import DEFAULT_STATE_KEYS, Objects, kind_name

__all__ = ["Resumed", "resumed_state"]


@dataclass(frozen=True)
class Resumed:
    """How much state a run starts with (all zero: a clean fleet)."""

    jobs: int = 0
    tree_nodes: int = 0
    policies: int = 0

    @property
    def empty(self) -> bool:
        return not (self.jobs or self.tree_nodes or self.policies)

    def describe(self, fresh_hint: str) -> str:
        """One line for the start-up output: clean, or what was resumed and how to start clean."""
        if self.empty:
            return "state      clean: no jobs, no quota tree, no policies"
        parts = [
            _count(self.jobs, "job"),
            f"a quota tree of {_count(self.tree_nodes, 'node')}" if self.tree_nodes else "no quota tree",
            _count(self.policies, "propagation polic", "y", "ies"),
        ]
        return f"state      resumed from the last run: {', '.join(parts)} (start clean: {fresh_hint})"


def _count(n: int, stem: str, one: str = "", many: str = "s") -> str:
    return f"{n} {stem}{one if n == 1 else many}"


def _tree_nodes(node: Any) -> int:
    if not isinstance(node, dict):
        return 0
    return 1 + sum(_tree_nodes(child) for child in node.get("children") or [])


def resumed_state(client: redis.Redis) -> Resumed:
    """Count the jobs (every kind), the quota tree's nodes and the policies stored in ``client``
    (one HLEN a kind; the tree, one object, is read)."""
    objects = Objects(client)

    def stored(rt: Any) -> int:
        return int(client.hlen(DEFAULT_STATE_KEYS.objects(kind_name(rt.key))))

    trees, _ = objects.list(ELASTIC_QUOTA_TREE)
    nodes = sum(_tree_nodes((tree.get("spec") or {}).get("root")) for tree in trees)
    return Resumed(
        jobs=sum(stored(rt) for rt in FLEET_JOB_KINDS),
        tree_nodes=nodes,
        policies=sum(stored(rt) for rt in POLICY_KINDS),
    )
