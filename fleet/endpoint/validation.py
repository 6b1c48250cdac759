"""Spec validation of the stored kinds, as the serving core's ``validate`` hooks.

The serving core runs a kind's hook after its own metadata checks and answers 422 Invalid with
every cause at once. A job delegates to its kind's workload adapter (each
:class:`fleet.workloads.FieldError` is one cause, field path and all); PropagationPolicy to
:class:`fleet.policy.PropagationPolicy`, whose strict model refuses unknown fields, so a misspelt
toleration is an error rather than a silent default (the kind's schema, which knows the same
fields, has found and dealt with them first, as ``fieldValidation`` says:
:mod:`fleet.apiserver.fields`). PriorityClass follows kube-apiserver's
``ValidatePriorityClass`` (``pkg/apis/scheduling/validation/validation.go``); its checks against
the stored object and the other classes are in :mod:`fleet.endpoint.priority_classes`.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from fleet.apiserver import Cause, Obj, invalid, required
from fleet.endpoint.warning_headers import warn
from fleet.jobs import (
    HIGHEST_USER_DEFINABLE_PRIORITY,
    PREEMPTION_POLICIES,
    SYSTEM_PRIORITY_CLASS_PREFIX,
    SYSTEM_PRIORITY_CLASSES,
)
from fleet.policy import PropagationPolicy, ignored_fields, why_ignored
from fleet.workloads import UnknownKind, adapter_for, fleet_label_errors

__all__ = [
    "field_path",
    "forbidden",
    "immutable",
    "pydantic_causes",
    "validate_job",
    "validate_policy",
    "validate_priority_class",
]

_INT32 = (-(2**31), 2**31 - 1)


def field_path(loc: tuple[int | str, ...]) -> str:
    """A pydantic location as a Kubernetes field path: ``spec.resourceSelectors[0].kind``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def pydantic_causes(error: ValidationError) -> list[Cause]:
    causes: list[Cause] = []
    for item in error.errors():
        field = field_path(tuple(item["loc"]))
        message = str(item["msg"]).removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            causes.append(Cause(field, f'unknown field "{field.rsplit(".", 1)[-1]}"', "FieldValueInvalid"))
        elif item["type"] == "missing":
            causes.append(Cause(field, "Required value", "FieldValueRequired"))
        else:
            shown: Any = item.get("input")
            value = f'"{shown}"' if isinstance(shown, str) else repr(shown)
            if isinstance(shown, dict | list):
                value = type(shown).__name__
            causes.append(Cause(field, f"Invalid value: {value}: {message}", "FieldValueInvalid"))
    return causes


def validate_job(obj: Obj) -> list[Cause]:
    """The workload adapter's verdict on a job (every rule it breaks, one cause each), and, for a
    field it found nothing wrong with, whether the labels Fleet derives from the job's name and
    namespace are valid (:func:`fleet.workloads.base.fleet_label_errors`)."""
    try:
        adapter = adapter_for(obj)
    except UnknownKind as error:
        return [Cause("kind", str(error), "FieldValueNotSupported")]
    errors = adapter.validate(obj)
    flagged = {e.path for e in errors}
    errors += [e for e in fleet_label_errors(obj) if e.path not in flagged]
    if not errors:
        # How Fleet reads what MindCluster leaves open (fleet.placement.npu): kubectl Warnings.
        for text in adapter.demand(obj).hardware.warnings:
            warn(text)
    return [Cause(e.path, e.message, e.reason) for e in errors]


def validate_policy(obj: Obj) -> list[Cause]:
    """A (Cluster)PropagationPolicy of either group: refused for a field in neither ACK One's nor
    Karmada's schema or a value Fleet cannot honour; a Karmada field Fleet does not act on is
    accepted with a Warning naming it and why (:func:`fleet.policy.ignored_fields`)."""
    try:
        policy = PropagationPolicy.model_validate(obj)
    except ValidationError as error:
        return pydantic_causes(error)
    for path in ignored_fields(policy):
        warn(f"{path}: accepted but not acted on by Fleet ({why_ignored(path)})")
    return []


def forbidden(field: str, detail: str) -> Cause:
    """``field.Forbidden`` as Kubernetes words it: ``<field>: Forbidden: <detail>``."""
    return Cause(field, f"Forbidden: {detail}", "FieldValueForbidden")


def immutable(field: str, value: Any) -> Cause:
    """``ValidateImmutableField``'s error: ``<field>: Invalid value: <value>: field is immutable``."""
    return invalid(field, value, "field is immutable")


def _system_class_error(name: str, value: Any, global_default: bool) -> str | None:
    """Why ``name`` may not be used (``IsKnownSystemPriorityClass``), or None."""
    known = SYSTEM_PRIORITY_CLASSES.get(name)
    if known is None:
        return f"{name} is not a known system priority class"
    if value != known:
        return f"value of {name} PriorityClass must be {known}"
    if global_default:
        return f"globalDefault of {name} PriorityClass must be false"
    return None


def validate_priority_class(obj: Obj) -> list[Cause]:
    """A PriorityClass as kube-apiserver validates one (``ValidatePriorityClass``): ``value`` an
    int32, required; a name with the ``system-`` prefix only for the two system classes, exactly
    as Kubernetes defines them; other classes at most ``HighestUserDefinablePriority``
    (1000000000); ``preemptionPolicy`` ``PreemptLowerPriority`` or ``Never``; ``globalDefault`` a
    boolean and ``description`` a string (what decoding the typed object checks)."""
    causes: list[Cause] = []
    value = obj.get("value")
    number: int | None = None
    if value is None:
        causes.append(required("value"))
    elif not isinstance(value, int) or isinstance(value, bool):
        causes.append(invalid("value", value, "must be an integer"))
    elif not _INT32[0] <= value <= _INT32[1]:
        causes.append(invalid("value", value, "must be a 32-bit integer"))
    else:
        number = value
    global_default = obj.get("globalDefault")
    if global_default is not None and not isinstance(global_default, bool):
        causes.append(invalid("globalDefault", global_default, "must be a boolean"))
    description = obj.get("description")
    if description is not None and not isinstance(description, str):
        causes.append(invalid("description", description, "must be a string"))
    name = (obj.get("metadata") or {}).get("name")
    if isinstance(name, str) and name.startswith(SYSTEM_PRIORITY_CLASS_PREFIX):
        why = _system_class_error(name, value, global_default is True)
        if why is not None:
            causes.append(
                forbidden(
                    "metadata.name",
                    f"priority class names with '{SYSTEM_PRIORITY_CLASS_PREFIX}' prefix are reserved "
                    f"for system use only. error: {why}",
                )
            )
    elif number is not None and number > HIGHEST_USER_DEFINABLE_PRIORITY:
        limit = HIGHEST_USER_DEFINABLE_PRIORITY
        causes.append(forbidden("value", f"maximum allowed value of a user defined priority is {limit}"))
    if "preemptionPolicy" in obj and obj["preemptionPolicy"] is not None:
        policy = obj["preemptionPolicy"]
        if policy == "":
            causes.append(required("preemptionPolicy"))
        elif policy not in PREEMPTION_POLICIES:
            supported = ", ".join(f'"{p}"' for p in PREEMPTION_POLICIES)
            shown = f'"{policy}"' if isinstance(policy, str) else repr(policy)
            causes.append(
                Cause(
                    "preemptionPolicy",
                    f"Unsupported value: {shown}: supported values: {supported}",
                    "FieldValueNotSupported",
                )
            )
    return causes
