"""Object-metadata validation every kind gets, with Kubernetes' rules and wording.

Each check returns :class:`~fleet.apiserver.errors.Cause` items naming the field, so a request
with several faults hears about all of them in one ``Invalid`` (422) answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fleet.apiserver.errors import Cause

__all__ = [
    "dns1123_label",
    "dns1123_subdomain",
    "invalid",
    "required",
    "validate_labels",
    "validate_metadata",
]

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def required(field: str) -> Cause:
    return Cause(field, "Required value", "FieldValueRequired")


def invalid(field: str, value: Any, detail: str) -> Cause:
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    return Cause(field, f"Invalid value: {shown}: {detail}", "FieldValueInvalid")


def dns1123_label(value: str) -> str | None:
    """Why ``value`` is not a DNS-1123 label (namespace names, Node-less kinds), or ``None``."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _DNS1123_LABEL.match(value):
        return (
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
            "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
            "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        )
    return None


def dns1123_subdomain(value: str) -> str | None:
    """Why ``value`` is not a DNS-1123 subdomain (most object names), or ``None``."""
    if len(value) > 253:
        return "must be no more than 253 characters"
    if not _DNS1123_SUBDOMAIN.match(value):
        return (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
            "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
            "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        )
    return None


def _qualified_name(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if prefix and dns1123_subdomain(prefix):
        return f"prefix part {dns1123_subdomain(prefix)}"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character, at most 63 characters"
        )
    return None


def validate_labels(labels: Any, field: str) -> list[Cause]:
    if labels is None:
        return []
    if not isinstance(labels, Mapping):
        return [invalid(field, labels, "must be a map of string keys to string values")]
    causes: list[Cause] = []
    for key, value in labels.items():
        why = _qualified_name(str(key))
        if why:
            causes.append(invalid(field, key, why))
        if not isinstance(value, str):
            causes.append(invalid(f"{field}[{key}]", value, "must be a string"))
        elif len(value) > 63 or not _LABEL_VALUE.match(value):
            causes.append(
                invalid(
                    f"{field}[{key}]",
                    value,
                    "a valid label must be an empty string or consist of alphanumeric characters, '-', "
                    "'_' or '.', and must start and end with an alphanumeric character, at most 63",
                )
            )
    return causes


def validate_metadata(
    obj: Mapping[str, Any], *, namespaced: bool, name_rule: str = "subdomain"
) -> list[Cause]:
    """Name (DNS subdomain, or label when ``name_rule="label"``), namespace by scope, labels."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return [required("metadata")]
    causes: list[Cause] = []
    name = meta.get("name")
    if not name:
        causes.append(Cause("metadata.name", "name or generateName is required", "FieldValueRequired"))
    elif not isinstance(name, str):
        causes.append(invalid("metadata.name", name, "must be a string"))
    else:
        why = dns1123_label(name) if name_rule == "label" else dns1123_subdomain(name)
        if why:
            causes.append(invalid("metadata.name", name, why))
    namespace = meta.get("namespace")
    if namespaced and not namespace:
        causes.append(required("metadata.namespace"))
    elif not namespaced and namespace:
        causes.append(invalid("metadata.namespace", namespace, "not allowed on this type"))
    causes += validate_labels(meta.get("labels"), "metadata.labels")
    annotations = meta.get("annotations")
    if annotations is not None and (
        not isinstance(annotations, Mapping) or not all(isinstance(v, str) for v in annotations.values())
    ):
        causes.append(invalid("metadata.annotations", annotations, "must be a map of strings"))
    return causes
