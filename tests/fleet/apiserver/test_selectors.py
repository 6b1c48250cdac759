"""Label and field selectors in Kubernetes syntax."""

from __future__ import annotations

import pytest

from fleet.apiserver import BadRequest
from fleet.apiserver.selectors import FieldSelector, LabelSelector

LABELS = {"app": "web", "tier": "front", "accelerator-type": "card-910b-2"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("app!=db", True),
        ("missing!=x", True),
        ("app in (web, db)", True),
        ("app in (db)", False),
        ("app notin (db,cache)", True),
        ("missing notin (db)", True),
        ("tier", True),
        ("!tier", False),
        ("!missing", True),
        ("app=web,tier=front,accelerator-type in (card-910b-2,module-910b-8)", True),
        ("app=web,tier=back", False),
        ("", True),
    ],
)
def test_label_selector(selector: str, expected: bool) -> None:
    assert LabelSelector.parse(selector).matches(LABELS) is expected


@pytest.mark.parametrize("selector", ["app in ()", "a b c", "app=we b", "=x", "app in (a"])
def test_bad_label_selector_is_a_bad_request_naming_the_parameter(selector: str) -> None:
    with pytest.raises(BadRequest, match="labelSelector"):
        LabelSelector.parse(selector)


def test_field_selector() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running"},
    }
    supported = ("metadata.name", "metadata.namespace", "spec.nodeName", "status.phase")
    assert FieldSelector.parse("spec.nodeName=n1,status.phase!=Succeeded", supported).matches(pod)
    assert not FieldSelector.parse("spec.nodeName==n2", supported).matches(pod)
    unbound = {"metadata": {"name": "q"}, "spec": {}}
    assert FieldSelector.parse("spec.nodeName=", supported).matches(unbound)  # missing reads as ""
    with pytest.raises(BadRequest, match=r'field label not supported: "spec\.image"'):
        FieldSelector.parse("spec.image=x", supported)
    with pytest.raises(BadRequest, match="has no operator"):
        FieldSelector.parse("spec.nodeName", supported)
