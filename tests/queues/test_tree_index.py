"""A tree answers a submission's questions from an index kept on it, as its walk would.

:func:`queues.tree.priority_cap` and :meth:`queues.ElasticQuotaTree.leaf_for` read an index built
once per (frozen) tree instead of walking the tree each time. Here both are held to the rule
written as the walk, on random trees: a namespace bound twice or nowhere, names repeated,
caps valid, out of range and not numbers, labels naming leaves, inner nodes and nothing.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from queues.tree import (
    MAX_PRIORITY_ATTRIBUTE,
    QUOTA_LABEL,
    ElasticQuotaTree,
    PriorityCap,
    QuotaNode,
    QuotaNotAvailable,
    TreeSpec,
    UnboundJob,
    parse_max_priority,
    priority_cap,
)

NAMES = st.sampled_from(["a", "b", "c", "d", "e", "f"])
NAMESPACES = st.lists(st.sampled_from(["team-a", "team-b", "team-c"]), max_size=2, unique=True)
CAPS = st.one_of(st.none(), st.sampled_from(["100", "5000", " 7 ", "high", "2000000000", "-3"]))


@st.composite
def nodes(draw: Any, depth: int = 0) -> QuotaNode:
    cap = draw(CAPS)
    children = draw(st.lists(nodes(depth + 1), max_size=3)) if depth < 2 else []
    return QuotaNode(
        name=draw(NAMES),
        namespaces=tuple(draw(NAMESPACES)),
        children=tuple(children),
        attributes={} if cap is None else {MAX_PRIORITY_ATTRIBUTE: cap},
    )


def walked_cap(tree: ElasticQuotaTree, namespace: str, leaf: str) -> PriorityCap:
    """The rule as a walk: the lowest valid cap on the chains of ``leaf`` and of the nodes
    binding ``namespace``, the node nearest the root of equal ones."""
    best = PriorityCap()
    chains = [path for path, _, node in tree.walk() if node.name == leaf or namespace in node.namespaces]
    on_chains = {part for path in chains for part in path.split("/")}
    for _, _, node in tree.walk():
        raw = node.attributes.get(MAX_PRIORITY_ATTRIBUTE) if node.name in on_chains else None
        cap = parse_max_priority(raw) if raw is not None else None
        if cap is not None and cap < best.value:
            best = PriorityCap(cap, node.name)
    return best


def walked_leaf(tree: ElasticQuotaTree, namespace: str, labels: dict[str, str]) -> tuple[str, str]:
    """The rule as a walk: the node that binds ``namespace`` is the last in walk order that lists
    it; a quota label must name a leaf (the last so named) that is available in the namespace."""
    nodes: dict[str, QuotaNode] = {}
    bound = None
    for _, _, node in tree.walk():
        nodes[node.name] = node
        if namespace in node.namespaces:
            bound = node.name
    if bound is None:
        return "UnboundJob", f"namespace {namespace!r} is bound to no node of the ElasticQuotaTree"
    named = labels.get(QUOTA_LABEL)
    if named is None or named == bound:
        return "leaf", bound
    if named not in nodes or not nodes[named].is_leaf:
        return "UnboundJob", f"label {QUOTA_LABEL}={named!r} names no leaf of the ElasticQuotaTree"
    if not tree.available_in(named, namespace):
        return "QuotaNotAvailable", named
    return "leaf", named


def outcome(tree: ElasticQuotaTree, namespace: str, labels: dict[str, str]) -> tuple[str, str]:
    try:
        return "leaf", tree.leaf_for(namespace, labels)
    except QuotaNotAvailable as error:
        return "QuotaNotAvailable", error.node
    except UnboundJob as error:
        return "UnboundJob", str(error)


@settings(max_examples=200, deadline=None)
@given(nodes(), st.sampled_from(["team-a", "team-b", "team-c", "team-z"]), NAMES)
def test_the_index_answers_as_the_walk(root: QuotaNode, namespace: str, name: str) -> None:
    tree = ElasticQuotaTree(spec=TreeSpec(root=root))
    assert priority_cap(tree, namespace, name) == walked_cap(tree, namespace, name)
    assert tree.paths() == {node.name: path for path, _, node in tree.walk()}
    for labels in ({}, {QUOTA_LABEL: name}, {QUOTA_LABEL: "team-a"}):
        assert outcome(tree, namespace, labels) == walked_leaf(tree, namespace, labels)


def test_a_copy_of_a_tree_with_other_nodes_answers_for_its_own_nodes() -> None:
    """The index is kept beside the tree, not in it: a ``model_copy`` with another spec (the
    way a pydantic model is changed) is indexed anew."""
    tree = ElasticQuotaTree(
        spec=TreeSpec(root=QuotaNode(name="root", children=(QuotaNode(name="a", namespaces=("team-a",)),)))
    )
    assert tree.leaf_for("team-a") == "a"
    moved = tree.model_copy(
        update={
            "spec": TreeSpec(
                root=QuotaNode(name="root", children=(QuotaNode(name="b", namespaces=("team-a",)),))
            )
        }
    )
    assert moved.leaf_for("team-a") == "b"
    assert moved.paths() == {"root": "root", "b": "root/b"}
    assert tree.leaf_for("team-a") == "a"
