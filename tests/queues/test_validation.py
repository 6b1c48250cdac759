"""ElasticQuotaTree loading and validation: the sample as written, and each rule's exact error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from queues.quantity import MAX_JOBS
from queues.tree import QUOTA_LABEL, ElasticQuotaTree, UnboundJob
from queues.validation import Severity, TreeInvalid, check, load, load_file

SAMPLE = Path(__file__).parents[2] / "config" / "samples" / "elasticquotatree.yaml"


def doc(root: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1beta1",
        "kind": "ElasticQuotaTree",
        "metadata": {"name": "elasticquotatree", "namespace": "kube-system"},
        "spec": {"root": root},
        **top,
    }


def root(*children: dict[str, Any], **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"name": "root", "min": {"cpu": 100}, "max": {"cpu": 100}}
    base.update(fields)
    if children:
        base["children"] = list(children)
    return base


def test_sample_loads_as_written_with_the_root_warning() -> None:
    tree, warnings = load_file(SAMPLE)
    root_node = tree.spec.root
    assert root_node.max == {
        "cpu": 999_900_000,
        "memory": 400_000 * 2**30,
        MAX_JOBS: 10_000_000_000,
        "nvidia.com/gpu": 100_000,
    }
    assert root_node.min == {"cpu": 9_999_000, "memory": 40 * 2**30}
    (child,) = root_node.children
    assert (child.name, child.namespaces, child.max[MAX_JOBS]) == ("child-2", ("default",), 1)
    assert [(w.severity, str(w)) for w in warnings] == [
        (
            Severity.WARNING,
            "root: max differs from min in cpu, kube-queue/max-jobs, memory, nvidia.com/gpu: "
            "the root's max should equal its min (accepted; the root's max is what limits)",
        )
    ]


def test_tree_round_trips_through_its_document() -> None:
    tree, _ = load_file(SAMPLE)
    again = ElasticQuotaTree.model_validate(tree.to_document())
    assert again == tree
    assert tree.to_document()["spec"]["root"]["max"]["memory"] == "400000Gi"


def test_root_with_max_equal_to_min_has_no_warning() -> None:
    _, problems = check(doc(root(max={"cpu": "100"}, min={"cpu": 100})))
    assert problems == []


INVALID: list[tuple[str, Any, list[str]]] = [
    (
        "min above max",
        doc(root({"name": "child-2", "min": {"cpu": 20}, "max": {"cpu": 10}}, min={"cpu": 20})),
        ["root/child-2: min.cpu 20 exceeds max.cpu 10"],
    ),
    (
        "duplicate name",
        doc(root({"name": "a", "children": [{"name": "b"}]}, {"name": "b"})),
        ["root/b: name 'b' is already used by root/a/b"],
    ),
    (
        "namespaces on an inner node",
        doc(root({"name": "a", "namespaces": ["ns"], "children": [{"name": "b"}]})),
        ["root/a: namespaces: only a leaf binds namespaces (this node has children)"],
    ),
    (
        "namespace bound twice",
        doc(root({"name": "a", "namespaces": ["ns"]}, {"name": "b", "namespaces": ["ns"]})),
        ["root/b: namespaces: 'ns' is already bound by root/a"],
    ),
    (
        "negative max",
        doc(root({"name": "a", "max": {"memory": "-1Gi"}})),
        ["root/a: max.memory -1Gi is negative"],
    ),
    (
        "negative min",
        doc(root({"name": "a", "min": {"cpu": "-500m"}})),
        ["root/a: min.cpu -500m is negative"],
    ),
    (
        "children's min above the parent's",
        doc(root({"name": "a", "min": {"cpu": 60}}, {"name": "b", "min": {"cpu": 50}})),
        ["root: children's min.cpu sum 110 exceeds min.cpu 100"],
    ),
    (
        "children's min in a resource the parent does not guarantee",
        doc(root({"name": "a", "min": {"huawei.com/Ascend910": 8}})),
        ["root: children's min.huawei.com/Ascend910 sum 8 exceeds min.huawei.com/Ascend910 0"],
    ),
    (
        "not a quantity",
        doc(root({"name": "a", "max": {"cpu": "ten"}})),
        ["root/a: max.cpu 'ten' is not a quantity"],
    ),
    (
        "unknown field",
        doc(root({"name": "a", "mxa": {"cpu": 1}})),
        ["root/a: mxa: unknown field"],
    ),
    (
        "node without a name",
        doc(root({"max": {"cpu": 1}})),
        ["root/children[0]: name: field required"],
    ),
    (
        "root not named root",
        doc(root(name="top")),
        ["top: name 'top': the root must be named 'root'"],
    ),
    (
        "name not a DNS label",
        doc(root({"name": "Team_A"})),
        ["root/Team_A: name 'Team_A' must be a DNS-1123 label (lowercase letters, digits, '-')"],
    ),
    (
        "queue names collide",
        doc(root({"name": "a-b"}, {"name": "a", "children": [{"name": "b"}]})),
        ["root/a/b: queue name 'root-a-b' is also the queue of root/a-b"],
    ),
    (
        "tree outside kube-system",
        doc(root(), metadata={"name": "t", "namespace": "team-a"}),
        [
            "ElasticQuotaTree: metadata.namespace 'team-a' must be 'kube-system' "
            "(an ElasticQuotaTree elsewhere has no effect)"
        ],
    ),
    (
        "wrong apiVersion",
        {**doc(root()), "apiVersion": "v1"},
        ["ElasticQuotaTree: apiVersion: input should be 'scheduling.sigs.k8s.io/v1beta1'"],
    ),
    (
        "invalid resource name",
        doc(root({"name": "a", "max": {"huawei com/npu": 1}})),
        ["root/a: max: 'huawei com/npu' is not a valid resource name"],
    ),
    (
        "invalid namespace",
        doc(root({"name": "a", "namespaces": ["Team A"]})),
        ["root/a: namespaces: 'Team A' is not a valid namespace name"],
    ),
    (
        "quantities not a map",
        doc(root({"name": "a", "max": [1, 2]})),
        ["root/a: max must be a map of resource to quantity"],
    ),
    (
        "not YAML mapping",
        "- just\n- a list\n",
        ["ElasticQuotaTree: the document must be a YAML mapping (an ElasticQuotaTree)"],
    ),
    (
        "several errors at once, all reported",
        doc(root({"name": "a", "min": {"cpu": 200}, "max": {"cpu": 10}})),
        ["root: children's min.cpu sum 200 exceeds min.cpu 100", "root/a: min.cpu 200 exceeds max.cpu 10"],
    ),
]


@pytest.mark.parametrize(
    ("source", "expected"), [(s, e) for _, s, e in INVALID], ids=[n for n, _, _ in INVALID]
)
def test_invalid_tree_gets_exact_errors(source: Any, expected: list[str]) -> None:
    with pytest.raises(TreeInvalid) as caught:
        load(source)
    assert [str(p) for p in caught.value.problems] == expected
    assert all(p.severity is Severity.ERROR for p in caught.value.problems)


def test_malformed_yaml_is_an_error_naming_the_document() -> None:
    _, problems = check("spec: {root: [unclosed\n")
    assert len(problems) == 1
    assert str(problems[0]).startswith("ElasticQuotaTree: not valid YAML: ")


def test_job_leaf_from_namespace_or_label() -> None:
    tree, _ = load(
        doc(
            root(
                {"name": "a", "namespaces": ["team-a"]},
                {"name": "b", "namespaces": ["team-b"], "children": []},
            )
        )
    )
    assert tree.leaf_for("team-a") == "a"
    assert tree.leaf_for("team-a", {QUOTA_LABEL: "b"}) == "b"
    with pytest.raises(UnboundJob, match=r"^namespace 'team-c' is bound to no node of the ElasticQuotaTree$"):
        tree.leaf_for("team-c")
    with pytest.raises(UnboundJob, match=r"names no leaf"):
        tree.leaf_for("team-a", {QUOTA_LABEL: "root"})
