"""The fleet endpoint: the kube-compatible API users and admins talk to (kinds, handlers, auth)."""

from fleet.endpoint.auth import TokenFileError
from fleet.endpoint.process import run_api
from fleet.endpoint.registry import served_kinds

__all__ = [
    "TokenFileError",
    "run_api",
    "served_kinds",
]
