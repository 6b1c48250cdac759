"""Object-metadata validation every kind gets, with Kubernetes' rules and wording.

Each check returns :class:`~fleet.apiserver.errors.Cause` items naming the field, so a request
with several faults hears about all of them in one ``Invalid`` (422) answer.

The string rules are apimachinery's, as ``k8s.io/apimachinery/pkg/util/validation`` and
``pkg/api/validate/content`` (``kube.go``, ``dns.go``, ``errors.go``) define them: the same
regular expressions, matched against the whole value (Go's ``^...$`` has no trailing-newline
allowance, hence ``fullmatch``), lengths counted in bytes as Go's ``len`` counts them, and the
same messages. Metadata follows ``ValidateObjectMetaAccessor`` in
``k8s.io/apimachinery/pkg/api/validation/objectmeta.go``: the name by the kind's rule, the
namespace a DNS-1123 label, labels by ``ValidateLabels``, annotations by ``ValidateAnnotations``
(keys qualified names, case-insensitively; keys and values together at most
:data:`TOTAL_ANNOTATION_SIZE_LIMIT` bytes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from fleet.apiserver.errors import Cause

__all__ = [
    "DNS1035_LABEL_MAX_LENGTH",
    "LABEL_VALUE_MAX_LENGTH",
    "TOTAL_ANNOTATION_SIZE_LIMIT",
    "dns1035_label",
    "dns1123_label",
    "dns1123_subdomain",
    "duplicate",
    "invalid",
    "label_value",
    "not_supported",
    "qualified_name",
    "required",
    "too_long",
    "validate_annotations",
    "validate_labels",
    "validate_metadata",
]

#: ``DNS1123LabelMaxLength`` / ``DNS1035LabelMaxLength`` / ``LabelValueMaxLength``: 63.
DNS1035_LABEL_MAX_LENGTH: Final = 63
LABEL_VALUE_MAX_LENGTH: Final = 63
_DNS1123_LABEL_MAX_LENGTH: Final = 63
_DNS1123_SUBDOMAIN_MAX_LENGTH: Final = 253
_QUALIFIED_NAME_MAX_LENGTH: Final = 63
#: ``TotalAnnotationSizeLimitB`` (objectmeta.go): 256 KiB of keys and values together.
TOTAL_ANNOTATION_SIZE_LIMIT: Final = 256 * (1 << 10)

_DNS1123_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT: Final = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1035_LABEL_FMT: Final = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT: Final = "(" + _QUALIFIED_NAME_FMT + ")?"

_DNS1123_LABEL = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL = re.compile(_DNS1035_LABEL_FMT)
_QUALIFIED_NAME = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE = re.compile(_LABEL_VALUE_FMT)

_DNS1123_LABEL_MSG: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_MSG: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1035_LABEL_MSG: Final = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character"
)
_QUALIFIED_NAME_MSG: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_LABEL_VALUE_MSG: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)


def required(field: str, detail: str = "") -> Cause:
    """``field.Required``: ``<field>: Required value[: <detail>]``."""
    return Cause(field, f"Required value: {detail}" if detail else "Required value", "FieldValueRequired")


def invalid(field: str, value: Any, detail: str) -> Cause:
    """``field.Invalid``: ``<field>: Invalid value: <value>: <detail>``."""
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    return Cause(field, f"Invalid value: {shown}: {detail}", "FieldValueInvalid")


def duplicate(field: str, value: Any) -> Cause:
    """``field.Duplicate``: ``<field>: Duplicate value: <value>``."""
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    return Cause(field, f"Duplicate value: {shown}", "FieldValueDuplicate")


def not_supported(field: str, value: Any, supported: list[str]) -> Cause:
    """``field.NotSupported``: ``<field>: Unsupported value: <value>: supported values: ...``."""
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    listed = ", ".join(f'"{s}"' for s in supported)
    return Cause(field, f"Unsupported value: {shown}: supported values: {listed}", "FieldValueNotSupported")


def too_long(field: str, limit: int) -> Cause:
    """``field.TooLong`` without the value (as ``ValidateAnnotations`` reports the total size)."""
    return Cause(field, f"Too long: may not be more than {limit} bytes", "FieldValueTooLong")


def _max_len(length: int) -> str:
    return f"must be no more than {length} bytes"


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    """``RegexError``: the rule, its examples and the regular expression used."""
    shown = "".join(f"{' or ' if i else ''}'{e}', " for i, e in enumerate(examples))
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def _size(value: str) -> int:
    """Go's ``len``: bytes of the UTF-8 encoding."""
    return len(value.encode("utf-8", "surrogatepass"))


def _errors(errs: list[str]) -> str | None:
    return "; ".join(errs) if errs else None


def _dns1123_label_errors(value: str) -> list[str]:
    errs = []
    if _size(value) > _DNS1123_LABEL_MAX_LENGTH:
        errs.append(_max_len(_DNS1123_LABEL_MAX_LENGTH))
    if not _DNS1123_LABEL.fullmatch(value):
        if _DNS1123_SUBDOMAIN.fullmatch(value):
            errs.append("must not contain dots")
        else:
            errs.append(_regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def _dns1123_subdomain_errors(value: str) -> list[str]:
    errs = []
    if _size(value) > _DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(_max_len(_DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errs.append(_regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def dns1123_label(value: str) -> str | None:
    """Why ``value`` is not a DNS-1123 label (``IsDNS1123Label``: namespace names, container
    names), or ``None``."""
    return _errors(_dns1123_label_errors(value))


def dns1123_subdomain(value: str) -> str | None:
    """Why ``value`` is not a DNS-1123 subdomain (``IsDNS1123Subdomain``: most object names), or
    ``None``."""
    return _errors(_dns1123_subdomain_errors(value))


def dns1035_label(value: str) -> str | None:
    """Why ``value`` is not a DNS-1035 label (``IsDNS1035Label``: Service names, and so the names
    of the training-operator's jobs, ``NameIsDNS1035Label``), or ``None``."""
    errs = []
    if _size(value) > DNS1035_LABEL_MAX_LENGTH:
        errs.append(_max_len(DNS1035_LABEL_MAX_LENGTH))
    if not _DNS1035_LABEL.fullmatch(value):
        errs.append(_regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return _errors(errs)


def qualified_name(value: str) -> str | None:
    """Why ``value`` is not a qualified name (``IsQualifiedName`` / ``content.IsLabelKey``: label
    keys, annotation keys, resource names): an optional DNS-1123 subdomain prefix and ``/``, then
    a name of at most 63 alphanumerics, ``-``, ``_`` or ``.``; or ``None``."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += [f"prefix part {msg}" for msg in _dns1123_subdomain_errors(prefix)]
    else:
        example = _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        return (
            f"a valid label key {example} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        )
    if not name:
        errs.append("name part must be non-empty")
    elif _size(name) > _QUALIFIED_NAME_MAX_LENGTH:
        errs.append(f"name part {_max_len(_QUALIFIED_NAME_MAX_LENGTH)}")
    if not _QUALIFIED_NAME.fullmatch(name):
        example = _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        errs.append(f"name part {example}")
    return _errors(errs)


def label_value(value: str) -> str | None:
    """Why ``value`` is not a label value (``IsValidLabelValue``: empty, or at most 63
    alphanumerics, ``-``, ``_`` or ``.`` starting and ending with an alphanumeric), or ``None``."""
    errs = []
    if _size(value) > LABEL_VALUE_MAX_LENGTH:
        errs.append(_max_len(LABEL_VALUE_MAX_LENGTH))
    if not _LABEL_VALUE.fullmatch(value):
        errs.append(_regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return _errors(errs)


def validate_labels(labels: Any, field: str) -> list[Cause]:
    """``ValidateLabels`` (``apis/meta/v1/validation``): every key a qualified name, every value a
    string that is a valid label value. A bad value is reported at ``<field>[<key>]``."""
    if labels is None:
        return []
    if not isinstance(labels, Mapping):
        return [invalid(field, labels, "must be a map of string keys to string values")]
    causes: list[Cause] = []
    for key, value in labels.items():
        why = qualified_name(key) if isinstance(key, str) else "must be a string"
        if why:
            causes.append(invalid(field, key, why))
        if not isinstance(value, str):
            causes.append(invalid(f"{field}[{key}]", value, "must be a string"))
        elif why := label_value(value):
            causes.append(invalid(f"{field}[{key}]", value, why))
    return causes


def validate_annotations(annotations: Any, field: str) -> list[Cause]:
    """``ValidateAnnotations`` (objectmeta.go): every key a qualified name once lower-cased, every
    value a string, and the keys and values together at most 256 KiB (``TotalAnnotationSizeLimitB``,
    counted in bytes as ``ValidateAnnotationsSize`` counts them)."""
    if annotations is None:
        return []
    if not isinstance(annotations, Mapping):
        return [invalid(field, annotations, "must be a map of string keys to string values")]
    causes: list[Cause] = []
    total = 0
    for key, value in annotations.items():
        why = qualified_name(key.lower()) if isinstance(key, str) else "must be a string"
        if why:
            causes.append(invalid(field, key, why))
        if not isinstance(value, str):
            causes.append(invalid(f"{field}[{key}]", value, "must be a string"))
            continue
        total += _size(str(key)) + _size(value)
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        causes.append(too_long(field, TOTAL_ANNOTATION_SIZE_LIMIT))
    return causes


def validate_metadata(
    obj: Mapping[str, Any], *, namespaced: bool, name_rule: str = "subdomain"
) -> list[Cause]:
    """Name (DNS subdomain, or label when ``name_rule="label"``), namespace by scope (a DNS-1123
    label, ``ValidateNamespaceName``), labels, annotations."""
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
    elif namespaced:
        why = dns1123_label(namespace) if isinstance(namespace, str) else "must be a string"
        if why:
            causes.append(invalid("metadata.namespace", namespace, why))
    causes += validate_labels(meta.get("labels"), "metadata.labels")
    causes += validate_annotations(meta.get("annotations"), "metadata.annotations")
    return causes
