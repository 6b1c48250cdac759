"""Test helpers for the quota engine: tree documents and an independent invariant checker."""

from __future__ import annotations

from typing import Any

from queues import ElasticQuotaTree, Ledger, load
from queues.quantity import MAX_JOBS
from queues.tree import IMPLICIT_ROOT


def tree_doc(root: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1beta1",
        "kind": "ElasticQuotaTree",
        "metadata": {"name": "elasticquotatree", "namespace": "kube-system"},
        "spec": {"root": root},
    }


def make_tree(root: dict[str, Any]) -> ElasticQuotaTree:
    tree, _ = load(tree_doc(root))
    return tree


def assert_invariants(ledger: Ledger, lowered: dict[tuple[str, str], int] | None = None) -> None:
    """DESIGN.md invariants 1 and 2, computed from the job records without the engine's code.

    1. no node uses more than a max it names (max-jobs included), except where a tree applied
    lowered that max below what was in use (issue 33, req. 4, as Kubernetes' ResourceQuota):
    ``lowered`` holds those (node, resource) with the use seen then, and there use may only fall
    until it is within the max again (the dict is updated: the checks see a run of steps);
    2. every counter equals the sum over the admitted jobs (pending counts, over the pending jobs
    that could ever be admitted and are not parked out of line, and queues likewise), and no job
    is both pending and admitted.
    """
    tree = ledger.tree()
    ancestors: dict[str, list[str]] = {IMPLICIT_ROOT: [IMPLICIT_ROOT]}
    limits: dict[str, dict[str, int]] = {}
    if tree is not None:
        parents: dict[str, str | None] = {}
        for _, parent, node in tree.walk():
            parents[node.name] = parent.rsplit("/", 1)[-1] if parent else None
            limits[node.name] = {r: a for r in node.max if (a := node.limit(r)) is not None}
        ancestors = {}
        for name, parent_name in parents.items():
            chain, up = [name], parent_name
            while up is not None:
                chain.append(up)
                up = parents[up]
            ancestors[name] = chain
    admitted = ledger.records()
    parked = ledger.parked()
    pending = {job: r for job, r in ledger.pending.records().items() if job not in parked}
    assert not set(admitted) & set(pending), "a job is both pending and admitted"
    assert set(parked) <= set(ledger.pending.records()), "a parked job that is not pending"
    expected: dict[str, dict[str, int]] = {name: {} for name in ancestors}
    waiting: dict[str, int] = {}
    for record in admitted.values():
        for name in ancestors[record.leaf]:
            for resource, amount in {**record.request, MAX_JOBS: 1}.items():
                if amount:
                    expected[name][resource] = expected[name].get(resource, 0) + amount
    for record in pending.values():
        asked = {**record.request, MAX_JOBS: 1}
        if any(a > limits.get(n, {}).get(r, a) for n in ancestors[record.leaf] for r, a in asked.items()):
            continue  # can never be admitted (above a max): waits, but is not counted as pending
        for name in ancestors[record.leaf]:
            waiting[name] = waiting.get(name, 0) + 1
    usages = ledger.usages(ancestors)
    for name in ancestors:
        assert usages[name] == expected[name], f"invariant 2 broken at {name}"
        for resource, limit in limits.get(name, {}).items():
            used = usages[name].get(resource, 0)
            allowed = (lowered or {}).get((name, resource), limit)
            assert used <= max(limit, allowed), f"invariant 1 broken at {name}: {resource} {used} > {limit}"
            if lowered is not None:
                if used > limit:
                    lowered[(name, resource)] = used
                else:
                    lowered.pop((name, resource), None)
    assert {n: c for n, c in ledger.pending_counts().items() if c} == waiting
    if tree is not None:
        assert set(ledger.nodes()) == set(ancestors)
    queued: dict[str, list[str]] = {}
    for job, record in sorted(pending.items(), key=lambda item: (-item[1].priority, item[1].seq)):
        queued.setdefault(record.leaf, []).append(job)
    for leaf in ancestors:
        assert ledger.pending.peek(leaf, 10**6) == queued.get(leaf, [])
    assert ledger.rebuild() == []


def over_max(ledger: Ledger) -> dict[tuple[str, str], int]:
    """(node, resource) -> use, where use is above the node's max (a tree lowered it)."""
    tree = ledger.tree()
    if tree is None:
        return {}
    usages = ledger.usages([node.name for _, _, node in tree.walk()])
    out = {}
    for _, _, node in tree.walk():
        for resource in node.max:
            limit = node.limit(resource)
            used = usages.get(node.name, {}).get(resource, 0)
            if limit is not None and used > limit:
                out[(node.name, resource)] = used
    return out


def pending_wants(ledger: Ledger) -> dict[str, dict[str, int]]:
    """Per node, what its subtree's pending jobs ask for in all (those that could ever be
    admitted), computed from the job records and the tree, not from the ledger's counters."""
    tree = ledger.tree()
    if tree is None:
        return {}
    parents = {child.name: node.name for _, _, node in tree.walk() for child in node.children}
    limits = {
        node.name: {r: a for r in node.max if (a := node.limit(r)) is not None} for _, _, node in tree.walk()
    }
    governed = {r for _, _, node in tree.walk() for r in (*node.max, *node.min)}
    out: dict[str, dict[str, int]] = {}
    parked = ledger.parked()
    for job, record in ledger.pending.records().items():
        if job in parked:
            continue
        chain = [record.leaf]
        while chain[-1] in parents:
            chain.append(parents[chain[-1]])
        asked = {**record.request, MAX_JOBS: 1}
        if any(a > limits[n].get(r, a) for n in chain for r, a in asked.items()):
            continue
        for name in chain:
            for resource, amount in record.request.items():
                if amount > 0 and resource in governed:
                    out.setdefault(name, {})[resource] = out.get(name, {}).get(resource, 0) + amount
    return out


def expected_refusal(
    tree: ElasticQuotaTree | None,
    usages: dict[str, dict[str, int]],
    pending: dict[str, int],
    leaf: str,
    request: dict[str, int],
    *,
    wants: dict[str, dict[str, int]] | None = None,
) -> str | None:
    """What DESIGN.md says about admitting ``request`` on ``leaf`` now: None, "max" or "min".

    Written straight from the rules (walking siblings), independently of the Lua, which keeps
    running sums instead; the stateful test compares the two on every decision.
    """
    if tree is None:
        return None
    nodes = {node.name: node for _, _, node in tree.walk()}
    parent = {child.name: node.name for node in nodes.values() for child in node.children}
    chain = [leaf]
    while chain[-1] in parent:
        chain.append(parent[chain[-1]])
    asked = {r: a for r, a in {**request, MAX_JOBS: 1}.items() if a > 0}

    def used(name: str, resource: str) -> int:
        return usages.get(name, {}).get(resource, 0)

    def could_take(name: str, resource: str) -> int:
        """What a subtree's waiting jobs could use of ``resource`` now: its leaves' asks, each
        node capped by the room its max leaves, nothing under a node at its max-jobs. A node
        that became an inner node by a tree change while jobs were queued on it still has
        them: its own asks count beside its children's."""
        node = nodes[name]
        jobs = node.limit(MAX_JOBS)
        if jobs is not None and used(name, MAX_JOBS) >= jobs:
            return 0
        subtree = (wants or {}).get(name, {}).get(resource, 0)  # the whole subtree's asks
        own = subtree - sum((wants or {}).get(child.name, {}).get(resource, 0) for child in node.children)
        asks = own + sum(could_take(child.name, resource) for child in node.children)
        limit = node.limit(resource)
        if limit is not None:
            asks = min(asks, limit - used(name, resource))
        return max(asks, 0)

    for name in chain:
        for resource, amount in asked.items():
            limit = nodes[name].limit(resource)
            if limit is not None and used(name, resource) + amount > limit:
                return "max"
    for i, name in enumerate(chain[:-1]):
        for resource, amount in asked.items():
            if used(name, resource) + amount <= nodes[name].min.get(resource, 0):
                continue  # within its own guarantee
            owed = 0
            for sibling in nodes[chain[i + 1]].children:
                guarantee = sibling.min.get(resource, 0)
                if (
                    sibling.name != name
                    and pending.get(sibling.name, 0)
                    and used(sibling.name, resource) < guarantee
                ):
                    # What its waiting jobs could use, up to its unused guarantee.
                    owed += min(guarantee - used(sibling.name, resource), could_take(sibling.name, resource))
            rooms = [
                limit - used(up, resource) - amount
                for up in chain[i + 1 :]
                if (limit := nodes[up].limit(resource)) is not None
            ]
            if owed and rooms and min(rooms) < owed:
                return "min"
    return None
