"""A job's verdict (its demand, or the rules it breaks), remembered by the content its rules read.

A submission asks its kind's rules three times: the API's validation, the hardware warnings of
that validation, and the queueing's demand (:func:`fleet.jobs.submit.prepare`); the dispatcher
asks again each time it derives a waiting job's demand. Each asking parsed the whole job into the
kind's models and built its demand: about a tenth of the API's CPU per submission, measured with
py-spy on ``bench.submit_bench``.

The verdict is a function of what the rules read: ``apiVersion``, ``kind``, ``spec`` and
metadata's ``name``, ``namespace``, ``labels`` and ``annotations`` (never the status, the
server's metadata or ``managedFields``, which the API adds between the askings). So
:func:`remembered` keeps the last :data:`VERDICT_MEMORY` verdicts of a kind's ``_check`` under
those fields' :func:`~fleet.apiserver.content_digest` (which keeps apart every type the rules
tell apart, and names no value of another type: judged each time then), as
:mod:`fleet.apiserver.pods` remembers pod templates. A :class:`~fleet.placement.Demand` is
frozen, so one answer serves every asker; each gets its own list of errors.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

from fleet.apiserver import Memory, content_digest
from fleet.placement import Demand, DemandError
from fleet.workloads.base import FieldError

__all__ = ["VERDICT_MEMORY", "Verdict", "demand_verdict", "remembered"]

#: How many verdicts are kept, across the kinds (a few MB at most).
VERDICT_MEMORY: Final = 1024

#: A job's demand (None when a rule failed) and the rules it breaks.
Verdict = tuple[Demand | None, list[FieldError]]

A = TypeVar("A")

_verdicts: Memory[tuple[type, bytes], tuple[Demand | None, tuple[FieldError, ...]]] = Memory(VERDICT_MEMORY)


def _key(obj: Mapping[str, Any]) -> bytes | None:
    meta = obj.get("metadata")
    read = (
        obj.get("apiVersion"),
        obj.get("kind"),
        obj.get("spec"),
        *(
            (meta.get("name"), meta.get("namespace"), meta.get("labels"), meta.get("annotations"))
            if isinstance(meta, Mapping)
            else (meta,)
        ),
    )
    return content_digest(read)


def remembered(check: Callable[[A, Mapping[str, Any]], Verdict]) -> Callable[[A, Mapping[str, Any]], Verdict]:
    """``check`` (an adapter's method giving a job's :data:`Verdict`), answering again from
    memory for a job whose rules read the same content (see the module docstring)."""

    @functools.wraps(check)
    def remembering(adapter: A, obj: Mapping[str, Any]) -> Verdict:
        digest = _key(obj)
        if digest is None:
            return check(adapter, obj)
        key = (type(adapter), digest)
        known = _verdicts.get(key)
        if known is not None:
            return known[0], list(known[1])
        demand, errors = check(adapter, obj)
        _verdicts.put(key, (demand, tuple(errors)))
        return demand, errors

    return remembering


def demand_verdict(read: Callable[[Mapping[str, Any]], Demand], obj: Mapping[str, Any]) -> Verdict:
    """The verdict of a job every other rule passed: the demand ``read`` makes of it, or the
    field the reading refused."""
    try:
        return read(obj), []
    except DemandError as exc:
        return None, [FieldError(exc.path, exc.message)]
