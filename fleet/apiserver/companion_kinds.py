"""ConfigMap, Secret and Service (core/v1): the objects a job references, served by the fleet
and by every simulated member.

Each is described once here, as kube-apiserver serves it: the Table columns of ``kubectl get``
(``pkg/printers/internalversion/printers.go``: ConfigMap NAME, DATA, AGE; Secret NAME, TYPE, DATA,
AGE; Service NAME, TYPE, CLUSTER-IP, EXTERNAL-IP, PORT(S), AGE, SELECTOR with ``-o wide``), the
strategic merge keys kubectl patches with, and the validation of ``pkg/apis/core/validation``
that a user meets first (key names, base64 data, ports). A Secret's ``stringData`` is folded
into ``data`` on every write, as kube-apiserver does, so no reader ever sees it again. No
validation message quotes a Secret's value.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any, Final

from fleet.apiserver.errors import Cause
from fleet.apiserver.patch import MergeRule
from fleet.apiserver.resources import Obj, PrinterColumn, ResourceType
from fleet.apiserver.tables import json_path, since
from fleet.apiserver.validation import invalid, required

__all__ = ["COMPANION_KINDS", "CONFIGMAP", "SECRET", "SERVICE"]

_AGE = PrinterColumn(
    "Age",
    "string",
    description="CreationTimestamp is a timestamp representing the server time when this object was created.",
)
_NAME = PrinterColumn("Name", "string", description="Name must be unique within a namespace.", format="name")
_METADATA_RULES: Final = {
    "metadata.finalizers": MergeRule(),
    "metadata.ownerReferences": MergeRule("uid"),
}
#: ``IsConfigMapKey``: what a key of ``data``, ``binaryData`` or ``stringData`` may be.
_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def _key_errors(field: str, keys: Any) -> list[Cause]:
    causes: list[Cause] = []
    for key in keys:
        if not isinstance(key, str) or len(key) > 253 or not _KEY.fullmatch(key) or key in (".", ".."):
            causes.append(
                invalid(
                    f"{field}[{key}]",
                    key,
                    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                )
            )
    return causes


def _map_of_strings(obj: Obj, field: str) -> tuple[dict[str, Any], list[Cause]]:
    value = obj.get(field)
    if value is None:
        return {}, []
    if not isinstance(value, dict):
        return {}, [Cause(field, "must be a map of strings", "FieldValueInvalid")]
    bad = [
        Cause(f"{field}[{k}]", "must be a string", "FieldValueInvalid")
        for k, v in value.items()
        if not isinstance(v, str)
    ]
    return value, bad + _key_errors(field, value)


def _base64_errors(field: str, values: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    for key, value in values.items():
        if not isinstance(value, str):
            continue
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            # Never the value: it may be a secret.
            causes.append(Cause(f"{field}[{key}]", "must be base64-encoded bytes", "FieldValueInvalid"))
    return causes


# --- ConfigMap ----------------------------------------------------------------------------------


def _validate_configmap(obj: Obj) -> list[Cause]:
    data, causes = _map_of_strings(obj, "data")
    binary, more = _map_of_strings(obj, "binaryData")
    causes += more + _base64_errors("binaryData", binary)
    for key in sorted(set(data) & set(binary)):
        causes.append(invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
    return causes


CONFIGMAP: Final = ResourceType(
    group="",
    version="v1",
    kind="ConfigMap",
    plural="configmaps",
    singular="configmap",
    namespaced=True,
    short_names=("cm",),
    printer_columns=(
        _NAME,
        PrinterColumn("Data", "string", description="Number of keys in the ConfigMap."),
        _AGE,
    ),
    validate=_validate_configmap,
    table_row=lambda obj: [
        obj["metadata"]["name"],
        len(obj.get("data") or {}) + len(obj.get("binaryData") or {}),
        since(obj["metadata"].get("creationTimestamp")),
    ],
    strategic=_METADATA_RULES,
    top_level=("data", "binaryData", "immutable"),
    description="ConfigMap holds configuration data for pods to consume.",
)


# --- Secret -------------------------------------------------------------------------------------


def _fold_string_data(obj: Obj) -> None:
    """kube-apiserver's conversion: ``stringData`` entries overwrite ``data`` (base64), and
    ``stringData`` itself is never stored; ``type`` defaults to ``Opaque``."""
    strings = obj.pop("stringData", None)
    if isinstance(strings, dict):
        data = obj.get("data")
        if not isinstance(data, dict):
            data = obj["data"] = {}
        for key, value in strings.items():
            if isinstance(value, str):
                data[key] = base64.b64encode(value.encode()).decode()
    if not obj.get("type"):
        obj["type"] = "Opaque"


def _validate_secret(obj: Obj) -> list[Cause]:
    data, causes = _map_of_strings(obj, "data")
    causes += _base64_errors("data", data)
    kind = obj.get("type")
    if not isinstance(kind, str):
        causes.append(Cause("type", "must be a string", "FieldValueInvalid"))
    size = sum(len(v) for v in data.values() if isinstance(v, str)) * 3 // 4
    if size > 1024 * 1024:
        causes.append(Cause("data", "Too long: must have at most 1048576 bytes", "FieldValueTooLong"))
    return causes


SECRET: Final = ResourceType(
    group="",
    version="v1",
    kind="Secret",
    plural="secrets",
    singular="secret",
    namespaced=True,
    printer_columns=(
        _NAME,
        PrinterColumn("Type", "string", description="The type of the Secret."),
        PrinterColumn("Data", "string", description="Number of keys in the Secret."),
        _AGE,
    ),
    validate=_validate_secret,
    table_row=lambda obj: [
        obj["metadata"]["name"],
        obj.get("type") or "Opaque",
        len(obj.get("data") or {}),
        since(obj["metadata"].get("creationTimestamp")),
    ],
    field_selectors=("type",),
    strategic=_METADATA_RULES,
    top_level=("data", "stringData", "type", "immutable"),
    prepare_create=_fold_string_data,
    prepare_update=_fold_string_data,
    description="Secret holds secret data of a certain type; Fleet never logs it nor puts it in Events.",
)


# --- Service ------------------------------------------------------------------------------------

_SERVICE_TYPES: Final = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")


def _cluster_ip(obj: Obj) -> str:
    """A stable address in 10.96.0.0/16 derived from the Service's namespace and name (there is
    no network here; kubectl shows one and clients resolve by name)."""
    meta = obj.get("metadata") or {}
    digest = hashlib.sha256(f"{meta.get('namespace')}/{meta.get('name')}".encode()).digest()
    return f"10.96.{digest[0]}.{max(1, digest[1])}"


def _default_service(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("type", "ClusterIP")
    if spec.get("type") in ("ClusterIP", "NodePort", "LoadBalancer") and not spec.get("clusterIP"):
        spec["clusterIP"] = _cluster_ip(obj)
    if spec.get("clusterIP"):
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    obj.setdefault("status", {"loadBalancer": {}})


def _validate_service(obj: Obj) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    causes: list[Cause] = []
    kind = spec.get("type", "ClusterIP")
    if kind not in _SERVICE_TYPES:
        supported = ", ".join(f'"{t}"' for t in _SERVICE_TYPES)
        causes.append(
            Cause(
                "spec.type",
                f'Unsupported value: "{kind}": supported values: {supported}',
                "FieldValueNotSupported",
            )
        )
    ports = spec.get("ports") or []
    if not isinstance(ports, list):
        return [*causes, Cause("spec.ports", "must be a list", "FieldValueInvalid")]
    if not ports and kind != "ExternalName" and spec.get("clusterIP") != "None":
        causes.append(required("spec.ports"))
    names = [p.get("name") for p in ports if isinstance(p, dict)]
    for i, port in enumerate(ports):
        field = f"spec.ports[{i}]"
        if not isinstance(port, dict):
            causes.append(Cause(field, "must be an object", "FieldValueInvalid"))
            continue
        number = port.get("port")
        if number is None:
            causes.append(required(f"{field}.port"))
        elif not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= 65535:
            causes.append(invalid(f"{field}.port", number, "must be between 1 and 65535, inclusive"))
        if len(ports) > 1 and not port.get("name"):
            causes.append(required(f"{field}.name"))
        elif port.get("name") and names.count(port.get("name")) > 1:
            causes.append(Cause(f"{field}.name", f'Duplicate value: "{port["name"]}"', "FieldValueDuplicate"))
        protocol = port.get("protocol", "TCP")
        if protocol not in ("TCP", "UDP", "SCTP"):
            causes.append(
                Cause(
                    f"{field}.protocol",
                    f'Unsupported value: "{protocol}": supported values: "SCTP", "TCP", "UDP"',
                    "FieldValueNotSupported",
                )
            )
    selector = spec.get("selector")
    if selector is not None and not (
        isinstance(selector, dict) and all(isinstance(v, str) for v in selector.values())
    ):
        causes.append(Cause("spec.selector", "must be a map of strings", "FieldValueInvalid"))
    return causes


def _ports(obj: Obj) -> str:
    shown = []
    for port in json_path(obj, ".spec.ports") or []:
        if isinstance(port, dict):
            node = f":{port['nodePort']}" if port.get("nodePort") else ""
            shown.append(f"{port.get('port')}{node}/{port.get('protocol', 'TCP')}")
    return ",".join(shown) or "<none>"


def _service_row(obj: Obj) -> list[Any]:
    spec = obj.get("spec") or {}
    selector = spec.get("selector") or {}
    return [
        obj["metadata"]["name"],
        spec.get("type", "ClusterIP"),
        spec.get("clusterIP") or "<none>",
        ",".join(spec.get("externalIPs") or []) or spec.get("externalName") or "<none>",
        _ports(obj),
        since(obj["metadata"].get("creationTimestamp")),
        ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>",
    ]


SERVICE: Final = ResourceType(
    group="",
    version="v1",
    kind="Service",
    plural="services",
    singular="service",
    namespaced=True,
    short_names=("svc",),
    printer_columns=(
        _NAME,
        PrinterColumn("Type", "string", description="The type of the service."),
        PrinterColumn("Cluster-IP", "string", description="The IP address of the service."),
        PrinterColumn("External-IP", "string", description="The external IP of the service."),
        PrinterColumn("Port(s)", "string", description="The ports of the service."),
        _AGE,
        PrinterColumn("Selector", "string", description="The selector of the service.", priority=1),
    ),
    has_status=True,
    validate=_validate_service,
    table_row=_service_row,
    strategic={**_METADATA_RULES, "spec.ports": MergeRule("port"), "spec.externalIPs": MergeRule()},
    prepare_create=_default_service,
    categories=("all",),
    description="Service is a named abstraction of software service (for example, mysql).",
)

#: The three kinds, in the order both registries list them.
COMPANION_KINDS: Final = (CONFIGMAP, SECRET, SERVICE)
