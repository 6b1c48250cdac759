"""The fleet endpoint: the kube-compatible API users and admins talk to (kinds, handlers, auth)."""
from fleet.endpoint.auth import TokenFileError
from fleet.endpoint.process import run_api

__all__ = [
    "TokenFileError",
    "run_api",
]
