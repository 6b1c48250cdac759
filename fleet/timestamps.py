"""Timestamps as Kubernetes writes them: RFC 3339 in UTC, to the second, with a ``Z``.

One home for the format, so that every object Fleet stores, every Event, every condition and
every status it mirrors reads the same way to kubectl and to the code that reads them back.
``metav1.Time`` marshals with Go's ``time.RFC3339`` after truncating to the second in UTC
(k8s.io/apimachinery ``pkg/apis/meta/v1/time.go``); that is :func:`rfc3339`.

A base module like :mod:`fleet.fastjson`: it imports nothing of Fleet, and every layer may
import it.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

__all__ = ["epoch_of", "now_rfc3339", "parse_rfc3339", "rfc3339", "rfc3339_micro"]

_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_MICRO_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


class _Stamp:
    """The current second's timestamp, formatted once per second."""

    second = 0
    text = ""


def now_rfc3339() -> str:
    """The current time, formatted once per second (every write stamps something, and strftime
    is not free)."""
    second = int(time.time())
    if _Stamp.second != second:
        _Stamp.text = rfc3339(second)
        _Stamp.second = second
    return _Stamp.text


def rfc3339(epoch: float) -> str:
    """Epoch seconds as a timestamp (truncated to the second, as ``metav1.Time``)."""
    return datetime.fromtimestamp(int(epoch), UTC).strftime(_FORMAT)


def parse_rfc3339(text: object) -> datetime | None:
    """A timestamp read back, in UTC (one without a zone is taken as UTC); ``None`` when absent or
    unreadable, for callers that show ``<unknown>`` or skip it."""
    if not isinstance(text, str) or not text:
        return None
    try:
        then = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return then if then.tzinfo is not None else then.replace(tzinfo=UTC)


def rfc3339_micro(epoch: float) -> str:
    """Epoch seconds as a timestamp to the microsecond, as ``metav1.MicroTime`` marshals (Go's
    ``2006-01-02T15:04:05.000000Z07:00``): for the times Fleet decides by (an exclusion's end, a
    backoff), where truncating to the second would move a short wait by up to a second."""
    return datetime.fromtimestamp(epoch, UTC).strftime(_MICRO_FORMAT)


def epoch_of(value: object) -> float | None:
    """A time Fleet wrote as a timestamp, or as epoch seconds (as an older Fleet did), in epoch
    seconds; ``None`` when absent or unreadable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    then = parse_rfc3339(value)
    return then.timestamp() if then is not None else None
