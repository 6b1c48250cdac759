"""Errors the fleet endpoint adds to the serving core's: Redis away, and Invalid built from causes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import redis

from fleet.apiserver import ApiError, Cause, Invalid, Obj, ResourceType

__all__ = ["ServiceUnavailable", "invalid", "redis_unavailable"]


class ServiceUnavailable(ApiError):
    """503: the fleet's Redis cannot be reached right now; the client should retry."""

    code: ClassVar[int] = 503
    reason: ClassVar[str] = "ServiceUnavailable"


def invalid(rt: ResourceType, obj: Obj, causes: Sequence[Cause]) -> Invalid:
    """The 422 of ``obj`` with ``causes``, worded as the serving core words its own (kubectl prints
    ``The <Kind> "<name>" is invalid:`` and one ``* field: message`` line per cause)."""
    meta: Any = obj.get("metadata") or {}
    name = str(meta.get("name") or meta.get("generateName") or "") if isinstance(meta, dict) else ""
    detail = ", ".join(f"{c.field}: {c.message}" for c in causes)
    summary = f"[{detail}]" if len(causes) > 1 else detail
    return Invalid(
        f'{rt.qualified_kind} "{name}" is invalid: {summary}',
        causes=list(causes),
        details={"name": name, "group": rt.group, "kind": rt.kind},
    )


@contextlib.contextmanager
def redis_unavailable() -> Iterator[None]:
    """Turn a lost Redis connection into 503 (a bug, any other Redis error, stays a 500)."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as error:
        raise ServiceUnavailable(
            f"the fleet's state store is unavailable ({type(error).__name__}); retry"
        ) from None
