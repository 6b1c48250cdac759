"""The one error of :mod:`fleet.state` beyond the API errors (NotFound, Conflict, ...) it raises."""

from __future__ import annotations

__all__ = ["Fenced"]


class Fenced(Exception):
    """The fence token is no longer current (the writer lost its lease); nothing was written."""
