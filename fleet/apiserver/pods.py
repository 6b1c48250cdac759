"""Pod templates as a member's API server validates them, with Kubernetes' rules and wording.

A job kind that embeds pod templates (AscendJob's ``replicaSpecs.*.template``, the Kubeflow
kinds') is stored by a member as a custom resource, then its controller creates the pods. What
either step refuses is refused here, at submission, so that a job Fleet accepted is never one no
member can run. :func:`validate_pod_template` checks, each failure one
:class:`~fleet.apiserver.errors.Cause` naming its field:

* **Types**, as the CRD's structural schema checks them: every field of the pod spec whose type
  the Kubernetes API declares (``integer``, ``boolean``, ``string``, lists, maps, objects) holds a
  value of that type: no ``"2222"`` or ``true`` where an integer is due, no ``1`` where a string is
  (``env[].value``). The types are read from the official ``kubernetes`` client's models
  (``openapi_types`` / ``attribute_map``), not restated here; quantities are ``int-or-string``
  (``x-kubernetes-int-or-string``: a whole number or a quantity string, never a float). Fields
  the API does not know are left alone (the API server prunes them).
* **Template metadata**: labels and annotations by :mod:`fleet.apiserver.validation`.
* **Containers** (``validateContainers`` / ``validateInitContainers`` in
  ``pkg/apis/core/validation/validation.go``): a name that is a DNS-1123 label, unique among the
  pod's containers and init containers; an image; ports as ``validateContainerPorts`` wants them
  (a valid IANA port name, unique in the container; ``containerPort`` 1-65535; ``hostPort``
  1-65535 when set; protocol TCP, UDP or SCTP when set).
* **Resources** (``ValidateResourceRequirements`` with ``validateContainerResourceName`` and
  ``ValidateResourceQuantityValue``; the helpers of ``pkg/apis/core/helper/helpers.go``): a
  resource name that is standard for containers (``cpu``, ``memory``, ``ephemeral-storage``,
  ``hugepages-*``) or fully qualified, a non-native one an extended resource name; quantities
  that parse and are not negative; an integer resource (every extended resource, so
  ``huawei.com/Ascend910``) a whole number (``MilliValue() % 1000 == 0``: ``1500m`` is refused);
  a request at most its limit, and for a resource that cannot be overcommitted (extended
  resources, hugepages) equal to it, with a limit required when a request is given; hugepages
  only with cpu or memory.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from typing import Any, Final

from fleet.apiserver.errors import Cause
from fleet.apiserver.store import Memory, content_digest
from fleet.apiserver.validation import (
    dns1123_label,
    duplicate,
    invalid,
    not_supported,
    qualified_name,
    required,
    validate_annotations,
    validate_labels,
)
from queues import QuantityError, parse_exact

__all__ = [
    "QUANTITY_FIELDS",
    "check_types",
    "client_fields",
    "is_extended_resource",
    "validate_container_ports",
    "validate_pod_spec",
    "validate_pod_template",
    "validate_resource_requirements",
]

#: Fields of the Kubernetes types Fleet embeds (a pod template, an autoscaling metric) that hold
#: quantities (``resource.Quantity`` or a ``ResourceList``): the client's models type them as
#: plain strings.
QUANTITY_FIELDS: Final = frozenset(
    {
        ("V1ResourceRequirements", "limits"),
        ("V1ResourceRequirements", "requests"),
        ("V1VolumeResourceRequirements", "limits"),
        ("V1VolumeResourceRequirements", "requests"),
        ("V1PodSpec", "overhead"),
        ("V1EmptyDirVolumeSource", "sizeLimit"),
        ("V1ResourceFieldSelector", "divisor"),
        ("V2MetricTarget", "averageValue"),
        ("V2MetricTarget", "value"),
    }
)

_LIST = re.compile(r"^List\[(.+)\]$")
_DICT = re.compile(r"^Dict\[str, (.+)\]$")
_QUANTITY: Final = "quantity"
#: ``resource.ErrFormatWrong``, as the API server words an unparsable quantity.
_QUANTITY_FORMAT: Final = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)

# pkg/apis/core/helper/helpers.go
_STANDARD_CONTAINER_RESOURCES: Final = frozenset({"cpu", "memory", "ephemeral-storage"})
_STANDARD_RESOURCES: Final = frozenset(
    {
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "storage",
        "requests.storage",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_INTEGER_RESOURCES: Final = frozenset(
    {
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_HUGEPAGES: Final = "hugepages-"
_PORT_PROTOCOLS: Final = ["SCTP", "TCP", "UDP"]
_PORT_NAME = re.compile(r"[-a-z0-9]+")

# --- types ----------------------------------------------------------------------------------------


@functools.cache
def client_fields(model: str) -> dict[str, str]:
    """The JSON fields of a client model and their types (``int``, ``List[V1EnvVar]``, ...)."""
    from kubernetes.client import models  # here: the client's models take a third of a second

    cls = getattr(models, model)
    types: dict[str, str] = cls.openapi_types
    names: dict[str, str] = cls.attribute_map
    out: dict[str, str] = {}
    for attr, declared in types.items():
        name = names[attr]
        kind = declared
        if (model, name) in QUANTITY_FIELDS:
            kind = f"Dict[str, {_QUANTITY}]" if declared.startswith("Dict[") else _QUANTITY
        out[name] = kind
    return out


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, Mapping) else type(value).__name__


def _shown(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool) else _json_type(value)


@functools.cache
def _shape(kind: str) -> tuple[str, Any]:
    """``kind`` parsed once: ``("list"|"dict", inner kind)``, ``("model", fields)`` or
    ``("scalar", kind)``."""
    if match := _LIST.match(kind):
        return "list", match.group(1)
    if match := _DICT.match(kind):
        return "dict", match.group(1)
    if kind in ("int", "bool", "str", "datetime", "float", _QUANTITY, "object"):
        return "scalar", kind
    return "model", client_fields(kind)


#: The scalar kinds whose values pass on their exact Python type alone (the common case).
_EXACT: Final = {"str": str, "datetime": str, "int": int, "bool": bool, "float": float}


def _scalar_cause(value: Any, kind: str) -> tuple[Any, str] | None:
    """What is wrong with a scalar ``kind``'s ``value`` (the value shown, the message), if anything:
    the one statement of the scalar rules, for :func:`_types_ok` and :func:`check_types`."""
    if kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else (_shown(value), "must be of type integer")
    if kind == "bool":
        return None if isinstance(value, bool) else (_shown(value), "must be of type boolean")
    if kind in ("str", "datetime"):
        return None if isinstance(value, str) else (_shown(value), "must be of type string")
    if kind == "float":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return None if ok else (_shown(value), "must be of type number")
    if kind == _QUANTITY:
        if isinstance(value, bool) or not isinstance(value, int | str):
            return _shown(value), "must be of type integer or string (a quantity)"
        try:
            parse_exact(value)
        except QuantityError:
            return value, _QUANTITY_FORMAT
    return None  # "object": anything


def _types_ok(value: Any, kind: str) -> bool:
    """Whether :func:`check_types` would find nothing, without making a path for every field it
    passes: the common case (every stored job is checked again when its demand is computed) pays
    for no strings; a value that fails is checked again by :func:`check_types` for its causes.
    (``type(...) is dict`` first: parsed JSON is plain dicts, and an ABC check costs more.)"""
    if value is None:
        return True
    shape, inner = _shape(kind)
    if shape == "model":
        if type(value) is not dict and not isinstance(value, Mapping):
            return False
        for name, item in value.items():
            if item is not None and name in inner and not _types_ok(item, inner[name]):
                return False
        return True
    if shape == "list":
        return type(value) is list and all(_types_ok(item, inner) for item in value)
    if shape == "dict":
        if type(value) is not dict and not isinstance(value, Mapping):
            return False
        return all(_types_ok(item, inner) for item in value.values())
    return type(value) is _EXACT.get(kind) or _scalar_cause(value, kind) is None


def check_types(value: Any, kind: str, path: str) -> list[Cause]:
    """Every place under ``value`` where the JSON type differs from ``kind``'s (a client model name
    such as ``V1PodSpec``, or ``int``, ``str``, ``bool``, ``List[...]``, ``Dict[str, ...]``).
    ``null`` is accepted everywhere (the API server drops it), unknown fields are not looked at."""
    if value is None or _types_ok(value, kind):
        return []
    shape, inner = _shape(kind)
    if shape == "scalar":
        cause = _scalar_cause(value, kind)
        return [] if cause is None else [invalid(path, *cause)]
    if shape == "list":
        if not isinstance(value, list):
            return [invalid(path, _shown(value), "must be of type array")]
        return [c for i, item in enumerate(value) for c in check_types(item, inner, f"{path}[{i}]")]
    if not isinstance(value, Mapping):
        return [invalid(path, _shown(value), "must be of type object")]
    if shape == "dict":
        return [c for k, item in value.items() for c in check_types(item, inner, f"{path}[{k}]")]
    return [
        c
        for name, item in value.items()
        if isinstance(name, str) and name in inner
        for c in check_types(item, inner[name], f"{path}.{name}")
    ]


# --- resources ------------------------------------------------------------------------------------


def _native(name: str) -> bool:
    """``IsNativeResource``: unprefixed, or in a ``kubernetes.io/`` namespace."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    """``IsExtendedResourceName``: not native, not ``requests.``-prefixed, and a qualified name
    once prefixed with ``requests.`` (``huawei.com/Ascend910``, ``nvidia.com/gpu``)."""
    if _native(name) or name.startswith("requests."):
        return False
    return qualified_name(f"requests.{name}") is None


def _overcommit_allowed(name: str) -> bool:
    """``IsOvercommitAllowed``: native and not hugepages."""
    return _native(name) and not name.startswith(_HUGEPAGES)


def _container_resource_name(name: str) -> str | None:
    """``validateContainerResourceName`` (and ``validateResourceName`` it starts with)."""
    if why := qualified_name(name):
        return why
    errs = []
    if "/" not in name:
        quota_hugepages = name.startswith((_HUGEPAGES, f"requests.{_HUGEPAGES}"))
        if name not in _STANDARD_RESOURCES and not quota_hugepages:
            errs.append("must be a standard resource type or fully qualified")
        if name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith(_HUGEPAGES):
            errs.append("must be a standard resource for containers")
    elif not _native(name) and not is_extended_resource(name):
        errs.append("doesn't follow extended resource name standard")
    return "; ".join(errs) or None


def _quantities(values: Any, path: str, causes: list[Cause]) -> dict[str, Any]:
    """The parsed quantities of a resource list (names and values checked; bad ones dropped)."""
    if not isinstance(values, Mapping):
        return {}
    out: dict[str, Any] = {}
    for name, raw in values.items():
        field = f"{path}[{name}]"
        if why := _container_resource_name(str(name)):
            causes.append(invalid(field, name, why))
            continue
        if isinstance(raw, bool | float):
            continue  # reported with the types
        try:
            amount = parse_exact(raw)
        except QuantityError:
            continue  # reported with the types
        if amount < 0:
            causes.append(invalid(field, raw, "must be greater than or equal to 0"))
            continue
        integer = name in _INTEGER_RESOURCES or is_extended_resource(str(name))
        if integer and math.ceil(amount * 1000) % 1000 != 0:  # MilliValue() % 1000
            causes.append(invalid(field, raw, "must be an integer"))
            continue
        out[str(name)] = (amount, raw)
    return out


def validate_resource_requirements(resources: Any, path: str) -> list[Cause]:
    """A container's ``resources`` as ``ValidateResourceRequirements`` judges them."""
    if not isinstance(resources, Mapping):
        return []
    causes: list[Cause] = []
    limits = _quantities(resources.get("limits"), f"{path}.limits", causes)
    requests = _quantities(resources.get("requests"), f"{path}.requests", causes)
    given = resources.get("limits")
    given_limits = {str(n) for n in given} if isinstance(given, Mapping) else set()
    for name, (amount, raw) in requests.items():
        field = f"{path}.requests[{name}]"
        if name in given_limits and name not in limits:
            continue  # the limit itself is wrong, and said so
        if name in limits:
            limit, limit_raw = limits[name]
            if amount != limit and not _overcommit_allowed(name):
                causes.append(invalid(field, raw, f"must be equal to {name} limit of {limit_raw}"))
            elif amount > limit:
                detail = f"must be less than or equal to {name} limit of {limit_raw}"
                causes.append(invalid(field, raw, detail))
        elif not _overcommit_allowed(name):
            causes.append(
                required(f"{path}.limits[{name}]", "Limit must be set for non overcommitable resources")
            )
    names = {*limits, *requests}
    if any(n.startswith(_HUGEPAGES) for n in names) and not names & {"cpu", "memory"}:
        causes.append(Cause(path, "Forbidden: HugePages require cpu or memory", "FieldValueForbidden"))
    return causes


# --- containers -----------------------------------------------------------------------------------


def _port_name(name: str) -> list[str]:
    """``IsValidPortName`` (an IANA service name)."""
    errs = []
    if len(name) > 15:
        errs.append("must be no more than 15 bytes")
    if not _PORT_NAME.fullmatch(name):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", name):
        errs.append("must contain at least one letter (a-z)")
    if "--" in name:
        errs.append("must not contain consecutive hyphens")
    if name.startswith("-") or name.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def validate_container_ports(ports: Any, path: str) -> list[Cause]:
    """``validateContainerPorts``: one container's ``ports``."""
    if not isinstance(ports, list):
        return []
    causes: list[Cause] = []
    names: set[str] = set()
    for i, port in enumerate(ports):
        if not isinstance(port, Mapping):
            continue
        field = f"{path}[{i}]"
        name = port.get("name")
        if isinstance(name, str) and name:
            if errs := _port_name(name):
                causes += [invalid(f"{field}.name", name, msg) for msg in errs]
            elif name in names:
                causes.append(duplicate(f"{field}.name", name))
            else:
                names.add(name)
        number = port.get("containerPort")
        if not number:
            causes.append(required(f"{field}.containerPort"))
        elif isinstance(number, int) and not 1 <= number <= 65535:
            causes.append(invalid(f"{field}.containerPort", number, "must be between 1 and 65535, inclusive"))
        host = port.get("hostPort")
        if isinstance(host, int) and host and not 1 <= host <= 65535:
            causes.append(invalid(f"{field}.hostPort", host, "must be between 1 and 65535, inclusive"))
        protocol = port.get("protocol")
        if isinstance(protocol, str) and protocol and protocol not in _PORT_PROTOCOLS:
            causes.append(not_supported(f"{field}.protocol", protocol, _PORT_PROTOCOLS))
    return causes


def _containers(spec: Mapping[str, Any], path: str) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[str] = set()
    containers = spec.get("containers")
    if not containers:
        causes.append(required(f"{path}.containers"))
    for key in ("initContainers", "containers"):
        items = spec.get(key)
        for i, container in enumerate(items if isinstance(items, list) else []):
            if not isinstance(container, Mapping):
                continue
            field = f"{path}.{key}[{i}]"
            name = container.get("name")
            if not name:
                causes.append(required(f"{field}.name"))
            elif isinstance(name, str):
                if why := dns1123_label(name):
                    causes.append(invalid(f"{field}.name", name, why))
                elif name in seen:
                    causes.append(duplicate(f"{field}.name", name))
                seen.add(name)
            if not container.get("image"):
                causes.append(required(f"{field}.image"))
            causes += validate_container_ports(container.get("ports"), f"{field}.ports")
            causes += validate_resource_requirements(container.get("resources"), f"{field}.resources")
    return causes


def validate_pod_spec(spec: Any, path: str) -> list[Cause]:
    """A pod spec: its types (:func:`check_types` against ``V1PodSpec``), then its containers."""
    if spec is None:
        return [required(path)]
    if not isinstance(spec, Mapping):
        return [invalid(path, _shown(spec), "must be of type object")]
    return check_types(spec, "V1PodSpec", path) + _containers(spec, path)


#: How many pod templates' verdicts :func:`validate_pod_template` remembers (a few MB at most).
TEMPLATE_MEMORY: Final = 2048
_verdicts: Memory[tuple[str, bytes], tuple[Cause, ...]] = Memory(TEMPLATE_MEMORY)


def _template_key(template: Any, path: str) -> tuple[str, bytes] | None:
    """A template's content (:func:`~fleet.apiserver.store.content_digest`) and path; ``None``
    for content it cannot name (judged each time then)."""
    digest = content_digest(template)
    return None if digest is None else (path, digest)


def validate_pod_template(template: Any, path: str) -> list[Cause]:
    """A pod template (``<path>.metadata`` labels and annotations, ``<path>.spec``).

    The verdict is a function of the template's content and its path alone; every template is
    judged at least twice (by the API, and by the dispatcher when it derives the job's demand),
    and the jobs of a sweep or a pipeline repeat one template: the last
    :data:`TEMPLATE_MEMORY` verdicts are remembered by a hash of the template, which costs a few
    microseconds against the fraction of a millisecond of the type check."""
    key = _template_key(template, path)
    if key is not None and (known := _verdicts.get(key)) is not None:
        return list(known)
    causes = _judge_pod_template(template, path)
    if key is not None:
        _verdicts.put(key, tuple(causes))
    return causes


def _judge_pod_template(template: Any, path: str) -> list[Cause]:
    if template is None:
        return [required(path)]
    if not isinstance(template, Mapping):
        return [invalid(path, _shown(template), "must be of type object")]
    causes: list[Cause] = []
    meta = template.get("metadata")
    if isinstance(meta, Mapping):
        causes += validate_labels(meta.get("labels"), f"{path}.metadata.labels")
        causes += validate_annotations(meta.get("annotations"), f"{path}.metadata.annotations")
    elif meta is not None:
        causes.append(invalid(f"{path}.metadata", _shown(meta), "must be of type object"))
    return causes + validate_pod_spec(template.get("spec"), f"{path}.spec")
