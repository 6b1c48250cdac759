"""The pydantic pieces the replica-spec kinds read their jobs with, and how their errors read.

The models read only the parts Fleet uses and allow any other field (``_Open``): users write
full pod templates and the member copy carries them unchanged. Errors come back as
:class:`~fleet.workloads.base.FieldError` with the JSON path of the field and a message in the
API server's words (``must be an integer, not a string ("2")``).
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from fleet.workloads.base import FieldError

__all__ = ["RESTART_POLICIES", "Int32", "Int64", "Open", "field_path", "pydantic_errors"]

Int32 = Annotated[StrictInt, Field(ge=-(2**31), le=2**31 - 1)]
Int64 = Annotated[StrictInt, Field(ge=-(2**63), le=2**63 - 1)]


class Open(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


RESTART_POLICIES: Final = frozenset({"Always", "OnFailure", "Never", "ExitCode"})

_PYDANTIC_MESSAGES = {
    "missing": "is required",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "string_type": "must be a string",
    "dict_type": "must be an object",
    "list_type": "must be a list",
    "model_type": "must be an object",
    "too_short": "must not be empty",
}


def field_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _json_shown(value: Any) -> str:
    """A wrongly typed input as the user wrote it: ``a string ("2")``, ``a boolean (true)``."""
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, str):
        return f'a string ("{value}")'
    if isinstance(value, float):
        return f"a number ({value})"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else repr(value)


def _pydantic_message(error: Any) -> str:
    kind = error["type"]
    if kind in ("int_type", "string_type") and "input" in error:
        expected = "an integer" if kind == "int_type" else "a string"
        return f"must be {expected}, not {_json_shown(error['input'])}"
    if kind == "greater_than_equal":
        return f"must be at least {error['ctx']['ge']}"
    if kind == "less_than_equal":
        return f"must be at most {error['ctx']['le']}"
    message: str = error["msg"]
    return _PYDANTIC_MESSAGES.get(kind, message[:1].lower() + message[1:])


def pydantic_errors(exc: ValidationError) -> list[FieldError]:
    return [FieldError(field_path(e["loc"]), _pydantic_message(e)) for e in exc.errors()]
