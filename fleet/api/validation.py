"""Spec validation of the stored kinds, as the serving core's ``validate`` hooks.

The serving core runs a kind's hook after its own metadata checks and answers 422 Invalid with
every cause at once. AscendJob delegates to its workload adapter (each
:class:`fleet.workloads.FieldError` is one cause, field path and all); PropagationPolicy to
:class:`fleet.policy.PropagationPolicy`, whose strict model refuses unknown fields, so a misspelt
toleration is an error rather than a silent default.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from fleet.apiserver.errors import Cause
from fleet.apiserver.resources import Obj
from fleet.policy import PropagationPolicy
from fleet.workloads import UnknownKind, adapter_for

__all__ = ["field_path", "pydantic_causes", "validate_job", "validate_policy"]


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
    """The workload adapter's verdict on a job (every rule it breaks, one cause each)."""
    try:
        adapter = adapter_for(obj)
    except UnknownKind as error:
        return [Cause("kind", str(error), "FieldValueNotSupported")]
    return [Cause(e.path, e.message) for e in adapter.validate(obj)]


def validate_policy(obj: Obj) -> list[Cause]:
    try:
        PropagationPolicy.model_validate(obj)
    except ValidationError as error:
        return pydantic_causes(error)
    return []
