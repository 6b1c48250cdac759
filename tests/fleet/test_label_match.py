"""One label-requirement rule, as ``k8s.io/apimachinery/pkg/labels`` matches, for every selector."""

from __future__ import annotations

import pytest

from fleet.apiserver.selectors import LabelSelector as QuerySelector
from fleet.label_match import requirement_matches
from fleet.placement.node_constraints import NodeSelectorRequirement
from fleet.policy import LabelRequirement

NODE = {"accelerator-type": "module-910b-8", "rack": "r7", "npu-count": "8"}


@pytest.mark.parametrize(
    ("key", "operator", "values", "expected"),
    [
        ("rack", "In", ("r6", "r7"), True),
        ("rack", "In", ("r6",), False),
        ("zone", "In", ("a",), False),  # absent: not in
        ("rack", "NotIn", ("r6",), True),
        ("rack", "NotIn", ("r7",), False),
        ("zone", "NotIn", ("a",), True),  # absent: matches NotIn, as in Kubernetes
        ("rack", "Exists", (), True),
        ("zone", "Exists", (), False),
        ("zone", "DoesNotExist", (), True),
        ("npu-count", "Gt", ("4",), True),
        ("npu-count", "Lt", ("4",), False),
        ("npu-count", "Gt", ("8",), False),
        ("rack", "Gt", ("4",), False),  # not an integer: no match
        ("zone", "Lt", ("4",), False),  # absent: no match
        ("rack", "Near", ("r7",), False),  # unknown operator: matches nothing
    ],
)
def test_a_requirement_matches_as_kubernetes_matches_it(
    key: str, operator: str, values: tuple[str, ...], expected: bool
) -> None:
    assert requirement_matches(NODE, key, operator, values) is expected


@pytest.mark.parametrize(
    ("query", "operator", "values"),
    [
        ("rack in (r6,r7)", "In", ("r6", "r7")),
        ("rack=r6", "In", ("r6",)),
        ("zone notin (a)", "NotIn", ("a",)),
        ("rack!=r7", "NotIn", ("r7",)),
        ("zone", "Exists", ()),
        ("!zone", "DoesNotExist", ()),
    ],
)
def test_every_selector_fleet_reads_agrees_with_the_one_rule(
    query: str, operator: str, values: tuple[str, ...]
) -> None:
    """kubectl's ``-l``, a PropagationPolicy's matchExpressions and a pod's node affinity decide
    alike on the same labels."""
    key = query.lstrip("!").split(" ")[0].split("=")[0].split("!")[0]
    expected = requirement_matches(NODE, key, operator, values)
    assert QuerySelector.parse(query).matches(NODE) is expected
    assert LabelRequirement(key=key, operator=operator, values=values).matches(NODE) is expected
    assert NodeSelectorRequirement(key, operator, values).matches(NODE) is expected
