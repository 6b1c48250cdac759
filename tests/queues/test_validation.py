"""ElasticQuotaTree loading and validation: the sample as written, and each rule's exact error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from queues.quantity import MAX_JOBS
from queues.tree import AVAILABLE_ATTRIBUTE, QUOTA_LABEL, ElasticQuotaTree, QuotaNotAvailable, UnboundJob
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
        ["root/Team_A: name 'Team_A' must be a DNS-1123 subdomain (lowercase letters, digits, '-', '.')"],
    ),
    (
        "both job-count keys, differing",
        doc(root({"name": "a", "max": {MAX_JOBS: 1, "koord-queue/max-jobs": 2}})),
        [
            "root/a: max.koord-queue/max-jobs and max.kube-queue/max-jobs are one limit "
            "(the job count) and must not differ"
        ],
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
        "available-in entry not a namespace name",
        doc(root({"name": "a", "namespaces": ["ns"], "attributes": {AVAILABLE_ATTRIBUTE: "ns,Team B"}})),
        [
            f"root/a: attributes.{AVAILABLE_ATTRIBUTE}: 'Team B' is not a namespace name "
            "(a comma-separated list of namespaces, or '*')"
        ],
    ),
    (
        "available-in with an empty entry",
        doc(root({"name": "a", "namespaces": ["ns"]}, attributes={AVAILABLE_ATTRIBUTE: "ns,,other"})),
        [
            f"root: attributes.{AVAILABLE_ATTRIBUTE}: '' is not a namespace name "
            "(a comma-separated list of namespaces, or '*')"
        ],
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


def two_teams(**attributes: dict[str, str]) -> ElasticQuotaTree:
    """root/{a (team-a), b (team-b)} and root/shared/{x (team-x), y (no namespace)}; each node's
    attributes from the keyword of its name."""

    def node(name: str, **fields: Any) -> dict[str, Any]:
        return {"name": name, **fields, **({"attributes": attributes[name]} if name in attributes else {})}

    tree, _ = load(
        doc(
            {
                **root(
                    node("a", namespaces=["team-a"]),
                    node("b", namespaces=["team-b"], children=[]),
                    node("shared", children=[node("x", namespaces=["team-x"]), node("y")]),
                ),
                **({"attributes": attributes["root"]} if "root" in attributes else {}),
            }
        )
    )
    return tree


def test_a_job_belongs_to_the_leaf_that_binds_its_namespace() -> None:
    tree = two_teams()
    assert tree.leaf_for("team-a") == "a"
    assert tree.leaf_for("team-a", {"other": "label"}) == "a"
    assert tree.leaf_for("team-a", {QUOTA_LABEL: "a"}) == "a"  # naming its own leaf changes nothing
    with pytest.raises(UnboundJob, match=r"^namespace 'team-c' is bound to no node of the ElasticQuotaTree$"):
        tree.leaf_for("team-c")


def test_a_quota_label_naming_another_teams_leaf_is_refused_naming_label_and_node() -> None:
    tree = two_teams()
    with pytest.raises(QuotaNotAvailable) as caught:
        tree.leaf_for("team-a", {QUOTA_LABEL: "b"})
    assert str(caught.value) == (
        f"label {QUOTA_LABEL}='b': quota node 'b' is not available in namespace 'team-a', whose jobs "
        f"belong to 'a' (a node is available in other namespaces only where the tree lists them in "
        f"its attribute {AVAILABLE_ATTRIBUTE})"
    )
    assert (caught.value.label, caught.value.node, caught.value.namespace) == (QUOTA_LABEL, "b", "team-a")
    with pytest.raises(QuotaNotAvailable):
        tree.leaf_for("team-a", {QUOTA_LABEL: "y"})  # a leaf that binds no namespace is no exception


@pytest.mark.parametrize("label", ["a", "b", "y", "root", "nope"])
def test_a_namespace_no_node_binds_is_refused_whatever_its_label(label: str) -> None:
    tree = two_teams(root={AVAILABLE_ATTRIBUTE: "*"}, b={AVAILABLE_ATTRIBUTE: "team-c"})
    with pytest.raises(UnboundJob, match=r"^namespace 'team-c' is bound to no node") as caught:
        tree.leaf_for("team-c", {QUOTA_LABEL: label})
    assert not isinstance(caught.value, QuotaNotAvailable)
    assert caught.value.label is None


@pytest.mark.parametrize("label", ["root", "shared", "nope", ""])
def test_a_quota_label_must_name_a_leaf(label: str) -> None:
    tree = two_teams(root={AVAILABLE_ATTRIBUTE: "*"})
    with pytest.raises(UnboundJob, match=rf"^label {QUOTA_LABEL}='{label}' names no leaf") as caught:
        tree.leaf_for("team-a", {QUOTA_LABEL: label})
    assert caught.value.label == QUOTA_LABEL


def test_the_tree_makes_a_leaf_available_in_the_namespaces_it_lists() -> None:
    tree = two_teams(b={AVAILABLE_ATTRIBUTE: "team-a, team-x"})
    assert tree.leaf_for("team-a", {QUOTA_LABEL: "b"}) == "b"
    assert tree.leaf_for("team-x", {QUOTA_LABEL: "b"}) == "b"
    assert tree.leaf_for("team-a") == "a"  # without the label, still its own leaf
    with pytest.raises(QuotaNotAvailable):
        tree.leaf_for("team-b", {QUOTA_LABEL: "a"})  # one way: b lists team-a, a lists nobody


def test_the_nearest_node_that_sets_the_attribute_decides() -> None:
    inherited = two_teams(shared={AVAILABLE_ATTRIBUTE: "team-a"})
    assert inherited.leaf_for("team-a", {QUOTA_LABEL: "y"}) == "y"
    assert inherited.leaf_for("team-a", {QUOTA_LABEL: "x"}) == "x"
    with pytest.raises(QuotaNotAvailable):
        inherited.leaf_for("team-a", {QUOTA_LABEL: "b"})  # not below shared
    closed = two_teams(shared={AVAILABLE_ATTRIBUTE: "team-a"}, y={AVAILABLE_ATTRIBUTE: ""})
    assert closed.leaf_for("team-a", {QUOTA_LABEL: "x"}) == "x"
    with pytest.raises(QuotaNotAvailable):
        closed.leaf_for("team-a", {QUOTA_LABEL: "y"})
    narrowed = two_teams(root={AVAILABLE_ATTRIBUTE: "*"}, b={AVAILABLE_ATTRIBUTE: "team-x"})
    assert narrowed.leaf_for("team-a", {QUOTA_LABEL: "y"}) == "y"
    assert narrowed.leaf_for("team-x", {QUOTA_LABEL: "b"}) == "b"
    with pytest.raises(QuotaNotAvailable):
        narrowed.leaf_for("team-a", {QUOTA_LABEL: "b"})


def test_any_namespace_means_every_namespace_the_tree_binds() -> None:
    tree = two_teams(y={AVAILABLE_ATTRIBUTE: "*"})
    for namespace in ("team-a", "team-b", "team-x"):
        assert tree.leaf_for(namespace, {QUOTA_LABEL: "y"}) == "y"
    with pytest.raises(UnboundJob, match="namespace 'team-c' is bound to no node"):
        tree.leaf_for("team-c", {QUOTA_LABEL: "y"})


def test_the_available_in_attribute_is_validated_and_kept() -> None:
    source = doc(
        root(
            {"name": "a", "namespaces": ["team-a"]},
            {"name": "b", "namespaces": ["team-b"], "attributes": {AVAILABLE_ATTRIBUTE: " team-a ,*,"}},
        )
    )
    tree, problems = check(source)
    assert tree is not None
    assert [str(p) for p in problems] == [
        f"root/b: attributes.{AVAILABLE_ATTRIBUTE}: '' is not a namespace name "
        "(a comma-separated list of namespaces, or '*')"
    ]
    good = doc(
        root(
            {"name": "a", "namespaces": ["team-a"], "attributes": {AVAILABLE_ATTRIBUTE: ""}},
            {"name": "b", "namespaces": ["team-b"], "attributes": {AVAILABLE_ATTRIBUTE: "team-a, *"}},
        )
    )
    tree, problems = load(good)
    assert problems == []
    assert ElasticQuotaTree.model_validate(tree.to_document()) == tree
    assert tree.to_document()["spec"]["root"]["children"][1]["attributes"] == {
        AVAILABLE_ATTRIBUTE: "team-a, *"
    }


def test_listing_a_namespace_no_node_binds_is_a_warning() -> None:
    source = doc(
        root(
            {"name": "a", "namespaces": ["team-a"]},
            {"name": "b", "namespaces": ["team-b"], "attributes": {AVAILABLE_ATTRIBUTE: "team-a,tema-c,*"}},
        )
    )
    tree, problems = load(source)
    assert [(p.severity, str(p)) for p in problems] == [
        (
            Severity.WARNING,
            f"root/b: attributes.{AVAILABLE_ATTRIBUTE}: namespace 'tema-c' is bound by no node, so its "
            "jobs are refused whatever this attribute says",
        )
    ]
    assert tree.leaf_for("team-a", {QUOTA_LABEL: "b"}) == "b"


KOORD_SAMPLE = SAMPLE.with_name("elasticquotatree-koord-queue.yaml")


def test_a_koord_queue_tree_loads_with_dotted_names_and_its_job_count() -> None:
    """koord-queue names nodes by their dotted path and counts jobs under its own key."""
    tree, problems = load_file(KOORD_SAMPLE)
    assert tree.paths()["root.algo.nlp"] == "root/root.algo/root.algo.nlp"
    assert tree.leaf_for("nlp") == "root.algo.nlp"
    nodes = {node.name: node for _, _, node in tree.walk()}
    assert nodes["root.algo.nlp"].limit(MAX_JOBS) == 1
    assert nodes["root.infer"].limit(MAX_JOBS) == 4
    assert [str(p) for p in problems] == [
        "root/root.algo/root.algo.nlp: attributes.preempt-policy: ignored (koord-queue's "
        "force-preemption switch; Fleet preempts by fleet.io/preemption)"
    ]
    assert all(p.severity is Severity.WARNING for p in problems)


def test_both_job_count_keys_agreeing_are_one_limit() -> None:
    tree, _ = load(doc(root({"name": "a", "max": {MAX_JOBS: 2, "koord-queue/max-jobs": "2"}})))
    assert tree.spec.root.children[0].max == {MAX_JOBS: 2}


def test_an_attribute_fleet_does_not_know_is_a_warning_naming_it() -> None:
    _, problems = check(doc(root({"name": "a", "attributes": {"team.example.com/owner": "ml"}})))
    assert [(str(p), p.severity) for p in problems] == [
        ("root/a: attributes.team.example.com/owner: ignored (not a key Fleet knows)", Severity.WARNING)
    ]


@pytest.mark.parametrize("name", ["root.", ".a", "root..a", "Root.a"])
def test_a_dotted_name_must_still_be_a_dns_subdomain(name: str) -> None:
    with pytest.raises(TreeInvalid, match="must be a DNS-1123 subdomain"):
        load(doc(root({"name": name})))


def test_a_priority_cap_is_an_integer_no_user_may_exceed() -> None:
    """``fleet.io/max-priority`` (issue 34): an integer up to 1,000,000,000, else an error naming
    the node and the attribute; the lowest cap of the job's leaf chain and its namespace's chain
    holds, so two teams sharing a leaf keep their own."""
    from queues import HIGHEST_USER_PRIORITY, MAX_PRIORITY_ATTRIBUTE, PriorityCap, priority_cap

    for bad in ("high", "2000000000", "1.5"):
        source = doc(root({"name": "a", "namespaces": ["a"], "attributes": {MAX_PRIORITY_ATTRIBUTE: bad}}))
        with pytest.raises(TreeInvalid) as caught:
            load(source)
        assert [str(p) for p in caught.value.problems] == [
            f"root/a: attributes.{MAX_PRIORITY_ATTRIBUTE}: {bad!r} is not an integer from -2147483648 to "
            "1000000000 (the highest priority a user may define; higher ones are the system's)"
        ]
    shared = {
        "name": "shared",
        "attributes": {"fleet.io/available-in-namespaces": "team-a,team-b", MAX_PRIORITY_ATTRIBUTE: "5000"},
    }
    tree, _ = load(
        doc(
            root(
                {"name": "a", "namespaces": ["team-a"], "attributes": {MAX_PRIORITY_ATTRIBUTE: "100"}},
                {"name": "b", "namespaces": ["team-b"], "attributes": {MAX_PRIORITY_ATTRIBUTE: "1000"}},
                {"name": "c", "namespaces": ["team-c"]},
                shared,
            )
        )
    )
    assert priority_cap(tree, "team-a", "shared") == PriorityCap(100, "a")
    assert priority_cap(tree, "team-b", "shared") == PriorityCap(1000, "b")
    assert priority_cap(tree, "team-c", "c") == PriorityCap(HIGHEST_USER_PRIORITY, "")
    assert priority_cap(tree, "team-b", "b") == PriorityCap(1000, "b")
    assert priority_cap(None, "team-a", "root") == PriorityCap(HIGHEST_USER_PRIORITY, "")
