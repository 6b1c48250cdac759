"""The fleet endpoint: the kube-compatible API users and admins talk to (kinds, handlers, auth)."""
from fleet.api.auth import TokenFileError
from fleet.api.process import run_api

__all__ = [
    "TokenFileError",
    "run_api",
]
