"""Typed failures of member calls, and the one rule that says which failures are worth retrying.

Callers decide by type, never by parsing messages: a transient failure that outlived its retries
is :class:`MemberUnavailable` (the dispatcher keeps the job and tries later or elsewhere); a
permanent answer is :class:`MemberRefused` with the HTTP code and the Kubernetes ``Status``
reason (a worker releases the reservation and excludes the member); :class:`NotFound` and
:class:`Conflict` are refusals callers routinely branch on (absent copy, existing copy to adopt).

What a failure may say to others is decided here too. ``str()`` of these errors is for the role's
own log: it keeps the client's words, which name the member's host and port (urllib3's
``HTTPConnectionPool(host=..., port=...)``), and a member's own message may name addresses too.
Everything written where other people read it (a MemberCluster's Ready condition, a job's
conditions and Events) goes through :func:`safe_message`, which says what happened (connection
refused, timed out, 503 ServiceUnavailable, refused 422 Invalid: the member's reason) with every
address, URL, token and file path taken out by :func:`redact`.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
from collections.abc import Iterator, Mapping
from typing import Any, Final

import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

__all__ = [
    "MESSAGE_LIMIT",
    "TRANSIENT_STATUS",
    "Conflict",
    "MemberError",
    "MemberRefused",
    "MemberUnavailable",
    "NotFound",
    "classify",
    "is_timeout",
    "is_transient",
    "redact",
    "retry_after",
    "safe_message",
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

    def __init__(
        self,
        member: str,
        operation: str,
        detail: str,
        status: int | None = None,
        *,
        summary: str | None = None,
        timed_out: bool = False,
    ) -> None:
        super().__init__(member, operation, f"unavailable: {detail}")
        self.detail = detail
        self.status = status
        #: The member did not answer in time (it may still apply the request): see ``is_timeout``.
        self.timed_out = timed_out
        #: What went wrong without where: for messages others read (see :func:`safe_message`).
        self.summary = summary if summary is not None else redact(detail)


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


def is_timeout(exc: BaseException) -> bool:
    """True when no answer came in time (connecting or reading): the member is slow, or the
    network to it is; a request that timed out may still have been applied."""
    if isinstance(exc, MemberUnavailable):
        return exc.timed_out
    if isinstance(exc, ApiException):
        return False
    return _network_summary(exc) in ("timed out", "timed out waiting for an answer", "connection timed out")


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


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it wraps: urllib3's ``reason``, ``__cause__``, ``__context__``, nested args."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        nested = [getattr(current, "reason", None), current.__cause__, current.__context__, *current.args]
        todo.extend(e for e in nested if isinstance(e, BaseException))


#: The network failures told apart, most specific first: (types, what to say).
_NETWORK_KINDS: Final[tuple[tuple[tuple[type[BaseException], ...], str], ...]] = (
    ((urllib3.exceptions.NameResolutionError, socket.gaierror), "name resolution failed"),
    ((ConnectionRefusedError,), "connection refused"),
    (
        (ConnectionResetError, ConnectionAbortedError, BrokenPipeError, http.client.RemoteDisconnected),
        "connection closed by the member",
    ),
    ((ssl.SSLCertVerificationError,), "TLS certificate verification failed"),
    ((ssl.SSLError, urllib3.exceptions.SSLError), "TLS handshake failed"),
    ((urllib3.exceptions.ReadTimeoutError,), "timed out waiting for an answer"),
    ((urllib3.exceptions.NewConnectionError,), "could not connect"),
    ((urllib3.exceptions.ConnectTimeoutError,), "connection timed out"),
    ((TimeoutError, socket.timeout, urllib3.exceptions.TimeoutError), "timed out"),
    ((urllib3.exceptions.ProtocolError,), "connection broken"),
)

#: The same, recognised in text only (what the client kept of a TLS failure is a string).
_NETWORK_WORDS: Final = (
    ("certificate verify failed", "TLS certificate verification failed"),
    ("CERTIFICATE_VERIFY_FAILED", "TLS certificate verification failed"),
    ("SSL", "TLS handshake failed"),
    ("Connection refused", "connection refused"),
    ("Name or service not known", "name resolution failed"),
    ("Temporary failure in name resolution", "name resolution failed"),
    ("timed out", "timed out"),
    ("Connection reset", "connection closed by the member"),
)


def _network_summary(exc: BaseException) -> str:
    """What a failure without an answer was (``connection refused``, ``timed out``...), no address."""
    chain = list(_chain(exc))
    for kinds, summary in _NETWORK_KINDS:
        if any(isinstance(e, kinds) for e in chain):
            return summary
    text = " ".join(str(e) for e in chain)
    for words, summary in _NETWORK_WORDS:
        if words in text:
            return summary
    return f"network error ({type(exc).__name__})"


_ADDRESS: Final = "<address>"

#: Addresses, credentials and file paths in free text, each with its replacement; in order.
_REDACTIONS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    # URLs of any scheme (with their user:password@, host, port, path and query).
    (re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>()\[\]{},;]+"), _ADDRESS),
    # urllib3's HTTPConnectionPool(host='10.0.0.1', port=6443)
    (re.compile(r"\bhost=(['\"]).*?\1"), f"host={_ADDRESS}"),
    (re.compile(r"\bport=\d+"), "port=<port>"),
    # Credentials: authorization schemes, then key=value / key: value with a secret-sounding key.
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+"), r"\1 <redacted>"),
    (
        re.compile(
            r"(?i)\b([\w-]*(?:token|password|passwd|secret|api[_-]?key|credential)s?)"
            r"(['\"]?\s*[:=]\s*['\"]?)[^\s'\",;&)]+"
        ),
        r"\1\2<redacted>",
    ),
    # IPv6 in brackets, IPv4, each with an optional port.
    (re.compile(r"\[(?=[0-9A-Fa-f.%]*:[0-9A-Fa-f.%]*:)[0-9A-Fa-f:.%]+\](?::\d{1,5})?"), _ADDRESS),
    (re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?(?!\w|\.\d)"), _ADDRESS),
    # host:port: a name with a letter in it, then two to five digits (an image's "python:3.11"
    # is not one).
    (
        re.compile(
            r"(?<![\w.-])(?=[\w.-]*[A-Za-z])[A-Za-z0-9][A-Za-z0-9-]*(?:\.[A-Za-z0-9-]+)*"
            r":\d{2,5}(?!\w|\.\d)"
        ),
        _ADDRESS,
    ),
    # Absolute file paths (a kubeconfig, a token or certificate file), not API paths.
    (
        re.compile(
            r"(?<![\w:/.~-])~?/(?!(?:apis?|readyz|livez|healthz|openapi|version)\b)"
            r"[\w.@%+~-]+(?:/[\w.@%+~-]+)+/?"
        ),
        "<path>",
    ),
)

#: A message others read stays short: a 422's causes can be long, a client's text longer.
MESSAGE_LIMIT: Final = 1024


def redact(text: str) -> str:
    """``text`` without addresses (URLs, host:port, IPs), credentials or file paths."""
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    return text


def safe_message(exc: BaseException) -> str:
    """What a failed member call (or any failure about a member) may say where others read it.

    The one way such a failure becomes the message of a MemberCluster's condition, a job's
    condition or an Event: the operation and what happened, never the member's address or a
    credential. The member's name is not included (callers say it their way); the full detail
    stays in ``str(exc)``, for the role's own log.
    """
    if isinstance(exc, MemberRefused):
        text = f"{exc.operation}: refused {exc.code} {redact(exc.reason)}: {redact(exc.message)}"
    elif isinstance(exc, MemberUnavailable):
        text = f"{exc.operation}: unavailable: {exc.summary}"
    elif isinstance(exc, MemberError):
        text = f"{exc.operation}: {redact(str(exc).split(': ', 2)[-1])}"
    elif isinstance(exc, _NETWORK_ERRORS):
        text = f"unavailable: {_network_summary(exc)}"
    else:
        text = f"{type(exc).__name__}: {redact(str(exc))}" if str(exc) else type(exc).__name__
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."


def classify(member: str, operation: str, exc: BaseException) -> MemberError:
    """The typed error for a failed call (after retries, when ``exc`` was transient)."""
    if not isinstance(exc, ApiException):
        return MemberUnavailable(
            member,
            operation,
            _describe_network(exc),
            summary=_network_summary(exc),
            timed_out=is_timeout(exc),
        )
    status = exc.status if isinstance(exc.status, int) else 0
    body = _status_body(exc)
    reason = str(body.get("reason") or exc.reason or "")
    message = str(body.get("message") or exc.reason or "")
    if is_transient(exc):
        if not status:  # the client's words for a TLS failure, with the host in them
            return MemberUnavailable(member, operation, message, summary=_network_summary(exc))
        detail = f"{status} {reason}: {message}"
        return MemberUnavailable(member, operation, detail, status, summary=redact(detail))
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
