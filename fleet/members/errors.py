"""Typed failures of member calls, and the one rule that says which failures are worth retrying.

Callers decide by type, never by parsing messages: a transient failure that outlived its retries
is :class:`MemberUnavailable` (the dispatcher keeps the job and tries later or elsewhere); a
permanent answer is :class:`MemberRefused` with the HTTP code and the Kubernetes ``Status``
reason (a worker releases the reservation and excludes the member); :class:`NotFound` and
:class:`Conflict` are refusals callers routinely branch on (absent copy, existing copy to adopt).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

__all__ = [
    "TRANSIENT_STATUS",
    "Conflict",
    "MemberError",
    "MemberRefused",
    "MemberUnavailable",
    "NotFound",
    "classify",
    "is_transient",
    "retry_after",
]

#: HTTP codes that say "try again later": throttled, or the server (or a proxy) is in trouble.
TRANSIENT_STATUS: frozenset[int] = frozenset({429, 500, 502, 503, 504})


class MemberError(Exception):
    """A call to a member failed; ``member`` and ``operation`` say where."""

    def __init__(self, member: str, operation: str, message: str) -> None:
        super().__init__(f"member {member}: {operation}: {message}")
        self.member = member
        self.operation = operation


class MemberUnavailable(MemberError):
    """The member could not be reached or stayed in trouble through every retry.

    ``status`` is the last HTTP code when the member answered (429/5xx), ``None`` when it did not
    answer at all (connection refused or reset, timeout).
    """

    def __init__(self, member: str, operation: str, detail: str, status: int | None = None) -> None:
        super().__init__(member, operation, f"unavailable: {detail}")
        self.detail = detail
        self.status = status


class MemberRefused(MemberError):
    """The member answered with a permanent refusal (4xx): retrying the same request is pointless.

    ``code`` is the HTTP status, ``reason`` the Kubernetes ``Status.reason`` (``Invalid``,
    ``Forbidden``, ``AlreadyExists``...), ``message`` the server's words, ``causes`` the field
    causes of an ``Invalid`` answer as ``"field: message"``.
    """

    def __init__(
        self,
        member: str,
        operation: str,
        code: int,
        reason: str,
        message: str,
        *,
        causes: tuple[str, ...] = (),
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(member, operation, f"refused {code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.causes = causes
        self.details: Mapping[str, Any] = details or {}


class NotFound(MemberRefused):
    """404: the object (or its namespace, or its kind) does not exist in the member."""


class Conflict(MemberRefused):
    """409: ``AlreadyExists`` on create, ``Conflict`` on a stale resourceVersion."""


# Connection-level failures of the client's HTTP stack; anything here means "no usable answer".
_NETWORK_ERRORS: tuple[type[BaseException], ...] = (
    urllib3.exceptions.HTTPError,
    ConnectionError,
    TimeoutError,
    OSError,
)


def is_transient(exc: BaseException) -> bool:
    """True for failures that may go away by themselves: network trouble, 429 and 5xx."""
    if isinstance(exc, ApiException):
        status = exc.status if isinstance(exc.status, int) else 0
        # status 0: the client wraps TLS failures so; a handshake cut short is network trouble.
        return status == 0 or status in TRANSIENT_STATUS
    return isinstance(exc, _NETWORK_ERRORS)


def retry_after(exc: BaseException) -> float | None:
    """The server's ``Retry-After`` in seconds on a 429/503, if it sent one as a number."""
    if not isinstance(exc, ApiException) or not exc.headers:
        return None
    value = exc.headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if seconds >= 0 else None


def _status_body(exc: ApiException) -> Mapping[str, Any]:
    body: object = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if not isinstance(body, str) or not body:
        return {}
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _describe_network(exc: BaseException) -> str:
    # urllib3 nests the useful part (e.g. "Connection refused") in its message; keep it short.
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


def classify(member: str, operation: str, exc: BaseException) -> MemberError:
    """The typed error for a failed call (after retries, when ``exc`` was transient)."""
    if not isinstance(exc, ApiException):
        return MemberUnavailable(member, operation, _describe_network(exc))
    status = exc.status if isinstance(exc.status, int) else 0
    body = _status_body(exc)
    reason = str(body.get("reason") or exc.reason or "")
    message = str(body.get("message") or exc.reason or "")
    if is_transient(exc):
        detail = f"{status} {reason}: {message}" if status else message
        return MemberUnavailable(member, operation, detail, status or None)
    details = body.get("details")
    details = details if isinstance(details, dict) else {}
    causes = tuple(
        f"{cause.get('field', '')}: {cause.get('message', '')}"
        for cause in details.get("causes") or ()
        if isinstance(cause, dict)
    )
    kind: type[MemberRefused] = MemberRefused
    if status == 404:
        kind = NotFound
    elif status == 409:
        kind = Conflict
    return kind(member, operation, status, reason, message, causes=causes, details=details)
