"""The API server's own rules, as apimachinery and ``pkg/apis/core/validation`` state them."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.apiserver import clone
from fleet.apiserver.pods import (
    check_types,
    is_extended_resource,
    validate_container_ports,
    validate_pod_template,
    validate_resource_requirements,
)
from fleet.apiserver.validation import (
    TOTAL_ANNOTATION_SIZE_LIMIT,
    dns1035_label,
    dns1123_label,
    dns1123_subdomain,
    label_value,
    qualified_name,
    validate_annotations,
    validate_labels,
    validate_metadata,
)

NPU = "huawei.com/Ascend910"


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("a" * 63, True),
        ("a" * 64, False),
        ("train-1", True),
        ("1-train", False),  # starts with a digit
        ("train-", False),
        ("train.v2", False),
        ("Train", False),
        ("train\n", False),  # Go's $ allows no trailing newline
        ("", False),
    ],
)
def test_dns1035_label(value: str, valid: bool) -> None:
    assert (dns1035_label(value) is None) is valid


def test_dns1123_names_say_why() -> None:
    assert dns1123_label("a.b") == "must not contain dots"
    assert dns1123_label("x" * 64) == "must be no more than 63 bytes"
    assert dns1123_subdomain("a." * 126 + "ab") == "must be no more than 253 bytes"
    assert dns1123_subdomain("ok.example.com") is None
    assert dns1123_subdomain("ok\n") is not None


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("framework", True),
        ("huawei.com/schedule_policy", True),
        ("mind-cluster/scaling-rule", True),
        ("k" * 63, True),
        ("k" * 64, False),
        ("/name", False),
        ("a/b/c", False),
        ("Example.com/name", False),  # the prefix is a lowercase DNS subdomain
        ("name-", False),
    ],
)
def test_qualified_name(key: str, valid: bool) -> None:
    assert (qualified_name(key) is None) is valid


def test_label_values_are_at_most_63_bytes_counted_as_go_counts_them() -> None:
    assert label_value("") is None
    assert label_value("v" * 63) is None
    assert label_value("v" * 64) == "must be no more than 63 bytes"
    assert label_value("null") is None
    assert label_value("a b") is not None


def test_labels_name_the_key_and_the_value() -> None:
    causes = validate_labels({"ok": "v", "bad key!": "v", "app": "x" * 64, "n": 1}, "metadata.labels")
    assert [(c.field, c.reason) for c in causes] == [
        ("metadata.labels", "FieldValueInvalid"),
        ("metadata.labels[app]", "FieldValueInvalid"),
        ("metadata.labels[n]", "FieldValueInvalid"),
    ]
    assert causes[2].message == "Invalid value: 1: must be a string"


def test_annotations_may_take_256_kib_of_keys_and_values_together() -> None:
    key = "example.com/blob"
    fits = {key: "x" * (TOTAL_ANNOTATION_SIZE_LIMIT - len(key))}
    assert validate_annotations(fits, "metadata.annotations") == []
    over = {key: "x" * (TOTAL_ANNOTATION_SIZE_LIMIT - len(key) + 1)}
    [cause] = validate_annotations(over, "metadata.annotations")
    assert (cause.field, cause.reason) == ("metadata.annotations", "FieldValueTooLong")
    assert cause.message == "Too long: may not be more than 262144 bytes"
    # Bytes, not characters: one "é" is two.
    wide = {key: "é" * ((TOTAL_ANNOTATION_SIZE_LIMIT - len(key)) // 2 + 1)}
    assert [c.reason for c in validate_annotations(wide, "metadata.annotations")] == ["FieldValueTooLong"]


def test_annotation_keys_are_qualified_names_in_any_case() -> None:
    assert validate_annotations({"Example.com/Key": "v"}, "a") == []
    [cause] = validate_annotations({"a/b/c": "v"}, "a")
    assert cause.field == "a" and cause.message.startswith('Invalid value: "a/b/c": a valid label key')


def test_metadata_checks_the_namespace_and_the_annotations() -> None:
    obj = {"metadata": {"name": "j", "namespace": "Team_A", "annotations": {"k": "x" * (1 << 19)}}}
    fields = [c.field for c in validate_metadata(obj, namespaced=True)]
    assert fields == ["metadata.namespace", "metadata.annotations"]


# --- pod templates --------------------------------------------------------------------------------


def test_types_are_the_kubernetes_api_types() -> None:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": "30",
        "hostNetwork": "true",
        "nodeSelector": {"zone": 1},
        "containers": [
            {
                "name": "ascend",
                "image": "i",
                "args": "train.py",
                "env": [{"name": "A", "value": 1}, {"name": "B", "value": None}],
                "ports": [{"containerPort": True}],
                "livenessProbe": {"httpGet": {"port": "http"}},  # int-or-string
                "resources": {"limits": {NPU: 2.0, "cpu": "1"}},
                "unknownField": {"whatever": 1},  # pruned by the API server, not judged
            }
        ],
    }
    causes = check_types(spec, "V1PodSpec", "spec")
    assert [(c.field, c.message) for c in causes] == [
        ("spec.terminationGracePeriodSeconds", 'Invalid value: "30": must be of type integer'),
        ("spec.hostNetwork", 'Invalid value: "true": must be of type boolean'),
        ("spec.nodeSelector[zone]", "Invalid value: 1: must be of type string"),
        ("spec.containers[0].args", 'Invalid value: "train.py": must be of type array'),
        ("spec.containers[0].env[0].value", "Invalid value: 1: must be of type string"),
        ("spec.containers[0].ports[0].containerPort", "Invalid value: True: must be of type integer"),
        (
            f"spec.containers[0].resources.limits[{NPU}]",
            "Invalid value: 2.0: must be of type integer or string (a quantity)",
        ),
    ]


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({"limits": {NPU: 8}}, []),
        ({"limits": {NPU: "8"}, "requests": {NPU: "8"}}, []),
        ({"limits": {"cpu": "2"}, "requests": {"cpu": "500m"}}, []),  # cpu may be overcommitted
        ({"limits": {NPU: "1500m"}}, [(f"r.limits[{NPU}]", 'Invalid value: "1500m": must be an integer')]),
        (
            {"limits": {NPU: "-1"}},
            [(f"r.limits[{NPU}]", 'Invalid value: "-1": must be greater than or equal to 0')],
        ),
        (
            {"limits": {NPU: 2}, "requests": {NPU: 1}},
            [(f"r.requests[{NPU}]", f"Invalid value: 1: must be equal to {NPU} limit of 2")],
        ),
        (
            {"requests": {NPU: 1}},
            [(f"r.limits[{NPU}]", "Required value: Limit must be set for non overcommitable resources")],
        ),
        (
            {"limits": {"memory": "1Gi"}, "requests": {"memory": "2Gi"}},
            [
                (
                    "r.requests[memory]",
                    'Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi',
                )
            ],
        ),
        (
            {"limits": {"hugepages-2Mi": "2Mi"}},
            [("r", "Forbidden: HugePages require cpu or memory")],
        ),
        (
            {"limits": {"example.com/a/b": 1}},
            [("r.limits[example.com/a/b]", None)],
        ),
    ],
)
def test_resource_requirements(resources: dict[str, Any], expected: list[tuple[str, str | None]]) -> None:
    causes = validate_resource_requirements(resources, "r")
    assert [c.field for c in causes] == [field for field, _ in expected]
    for cause, (_, message) in zip(causes, expected, strict=True):
        assert message is None or cause.message == message


def test_extended_resources_are_the_non_native_qualified_names() -> None:
    assert is_extended_resource(NPU) and is_extended_resource("nvidia.com/gpu")
    assert not is_extended_resource("cpu")
    assert not is_extended_resource("kubernetes.io/something")
    assert not is_extended_resource("requests.example.com/x")


def test_container_ports() -> None:
    ports = [
        {"containerPort": 2222, "name": "ascendjob-port"},
        {"containerPort": 2223, "name": "ascendjob-port"},
        {"containerPort": 0, "name": "Bad_Name"},
        {"containerPort": 80, "hostPort": 70000, "protocol": "HTTP"},
    ]
    assert [(c.field, c.reason) for c in validate_container_ports(ports, "p")] == [
        ("p[1].name", "FieldValueDuplicate"),
        ("p[2].name", "FieldValueInvalid"),
        ("p[2].containerPort", "FieldValueRequired"),
        ("p[3].hostPort", "FieldValueInvalid"),
        ("p[3].protocol", "FieldValueNotSupported"),
    ]


def test_pod_template_metadata_and_containers() -> None:
    template = {
        "metadata": {"labels": {"app": "x" * 64}, "annotations": {"k": "v"}},
        "spec": {"initContainers": [{"name": "init", "image": "i"}], "containers": [{"name": "init"}]},
    }
    assert [(c.field, c.reason) for c in validate_pod_template(template, "t")] == [
        ("t.metadata.labels[app]", "FieldValueInvalid"),
        ("t.spec.containers[0].name", "FieldValueDuplicate"),
        ("t.spec.containers[0].image", "FieldValueRequired"),
    ]
    assert [c.field for c in validate_pod_template({"spec": {}}, "t")] == ["t.spec.containers"]


_GOOD_SPEC: dict[str, Any] = {
    "terminationGracePeriodSeconds": 30,
    "hostNetwork": True,
    "nodeSelector": {"zone": "a"},
    "containers": [
        {
            "name": "ascend",
            "image": "i",
            "args": ["train.py"],
            "env": [{"name": "A", "value": "1"}],
            "ports": [{"containerPort": 2222}],
            "livenessProbe": {"httpGet": {"port": "http"}},
            "resources": {"limits": {NPU: 2, "cpu": "1"}},
        }
    ],
}


@pytest.mark.parametrize(
    ("where", "bad"),
    [
        (("terminationGracePeriodSeconds",), "30"),
        (("hostNetwork",), "true"),
        (("nodeSelector", "zone"), 1),
        (("containers", 0, "args"), "train.py"),
        (("containers", 0, "env", 0, "value"), 1),
        (("containers", 0, "ports", 0, "containerPort"), True),
        (("containers", 0, "resources", "limits", NPU), 2.0),
        (("containers", 0, "resources", "limits", "cpu"), "one"),
        (("containers",), {"name": "ascend"}),
    ],
)
def test_one_wrong_type_anywhere_is_found(where: tuple[str | int, ...], bad: Any) -> None:
    """The check passes a well-typed spec without building a path per field (the cost of every
    stored job's demand), so each wrong value alone must still be found, where it is."""
    assert check_types(_GOOD_SPEC, "V1PodSpec", "spec") == []
    spec = clone(_GOOD_SPEC)
    node: Any = spec
    for step in where[:-1]:
        node = node[step]
    node[where[-1]] = bad
    causes = check_types(spec, "V1PodSpec", "spec")
    assert len(causes) == 1, causes
    path = "spec" + "".join(
        f"[{s}]"
        if isinstance(s, int) or (where[0] == "nodeSelector" and s == "zone") or s in (NPU, "cpu")
        else f".{s}"
        for s in where
    )
    assert causes[0].field == path


@pytest.mark.parametrize(
    ("where", "bad"),
    [
        (("terminationGracePeriodSeconds",), "30"),
        (("hostNetwork",), 1),  # marshal and the judge tell 1 from True
        (("containers", 0, "args"), ("train.py",)),  # and a tuple from a list
        (("containers", 0, "ports", 0, "containerPort"), True),
        (("containers", 0, "image"), ""),
    ],
)
def test_a_remembered_verdict_is_never_given_to_a_template_that_differs(
    where: tuple[str | int, ...], bad: Any
) -> None:
    """A template's verdict is remembered by its content (the dispatcher judges every stored job's
    templates again): the same template gets the same verdict, however often it is judged and
    whatever the caller does with the list it got; one that differs in a single value, or only
    in its Python type, is judged afresh."""
    good = {"metadata": {"labels": {"app": "a"}}, "spec": _GOOD_SPEC}
    assert validate_pod_template(clone(good), "t") == []
    assert validate_pod_template(clone(good), "t") == []
    spec = clone(_GOOD_SPEC)
    node: Any = spec
    for step in where[:-1]:
        node = node[step]
    node[where[-1]] = bad
    first = validate_pod_template({"metadata": {"labels": {"app": "a"}}, "spec": spec}, "t")
    assert len(first) == 1, first
    first.clear()  # the caller's list is its own
    again = validate_pod_template({"metadata": {"labels": {"app": "a"}}, "spec": spec}, "t")
    assert len(again) == 1 and again[0].field.startswith("t.spec."), again
    assert validate_pod_template(clone(good), "u") == [] and validate_pod_template(clone(good), "t") == []


def test_the_remembered_verdicts_are_bounded() -> None:
    from fleet.apiserver import pods

    for i in range(pods.TEMPLATE_MEMORY + 50):
        template = {"metadata": {"labels": {"n": str(i)}}, "spec": _GOOD_SPEC}
        assert validate_pod_template(template, "t") == []
    assert len(pods._verdicts) == pods.TEMPLATE_MEMORY
