"""API errors as Kubernetes reports them: one exception per ``Status`` reason.

Handlers and stores raise these; the app renders each as a ``Status`` object with the HTTP code,
so the official client's ``ApiException`` and kubectl's messages read exactly as against a real
API server. ``Invalid`` carries field causes (422), which kubectl prints one per line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Cause",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "MethodNotAllowed",
    "NotFound",
    "RequestEntityTooLarge",
    "Timeout",
    "Unauthorized",
    "UnsupportedMediaType",
    "status_object",
]


@dataclass(frozen=True)
class Cause:
    """One field-level cause (``details.causes[]``): ``reason`` is a kube CauseType."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"

    def to_dict(self) -> dict[str, str]:
        """As a ``StatusCause``; a cause about no field (``ResourceVersionTooLarge``) has none."""
        if not self.field:
            return {"reason": self.reason, "message": self.message}
        return {"reason": self.reason, "message": self.message, "field": self.field}


class ApiError(Exception):
    """An error the API answers with a ``Status``; subclasses fix ``code`` and ``reason``."""

    code: ClassVar[int] = 500
    reason: ClassVar[str] = "InternalError"

    def __init__(
        self,
        message: str,
        *,
        causes: list[Cause] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.causes = list(causes or [])
        self.details = dict(details or {})

    def to_status(self) -> dict[str, Any]:
        return status_object(self.code, self.reason, self.message, causes=self.causes, details=self.details)


class BadRequest(ApiError):
    code = 400
    reason = "BadRequest"


class Unauthorized(ApiError):
    code = 401
    reason = "Unauthorized"


class Forbidden(ApiError):
    code = 403
    reason = "Forbidden"


class NotFound(ApiError):
    code = 404
    reason = "NotFound"


class MethodNotAllowed(ApiError):
    code = 405
    reason = "MethodNotAllowed"


class AlreadyExists(ApiError):
    code = 409
    reason = "AlreadyExists"


class Conflict(ApiError):
    code = 409
    reason = "Conflict"


class Gone(ApiError):
    code = 410
    reason = "Expired"


class RequestEntityTooLarge(ApiError):
    code = 413
    reason = "RequestEntityTooLarge"


class UnsupportedMediaType(ApiError):
    code = 415
    reason = "UnsupportedMediaType"


class Invalid(ApiError):
    code = 422
    reason = "Invalid"


class Timeout(ApiError):
    """504: the server could not answer in time (``StatusReasonTimeout``); the client may retry."""

    code = 504
    reason = "Timeout"


def status_object(
    code: int,
    reason: str,
    message: str,
    *,
    causes: list[Cause] | None = None,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``meta.k8s.io/v1`` ``Status``; ``Success`` for 2xx codes, ``Failure`` otherwise."""
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if 200 <= code < 300 else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    merged = dict(details or {})
    if causes:
        merged["causes"] = [cause.to_dict() for cause in causes]
    if merged:
        status["details"] = merged
    return status
