"""A job as the ledger records it: the record format, request checks, and the ledger's errors.

A record is one tab-separated string (leaf, score = -priority, submission sequence, then resource
and amount pairs) kept in the ``pending`` or the ``admitted`` hash. ``queues/lua/common.lua``
writes and reads it in Redis; :func:`decode_record` is its only reader in Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from queues.quantity import MAX_JOBS, UNLIMITED
from queues.validation import is_resource_name

__all__ = [
    "SEQ_WIDTH",
    "InvalidRequest",
    "JobRecord",
    "JobState",
    "LedgerError",
    "check_job",
    "decode_record",
    "request_args",
    "score_of",
    "text",
]

#: Digits of the submission sequence that prefixes each queue member.
SEQ_WIDTH = 16
#: Priorities beyond this lose exactness as sorted-set scores (doubles).
_PRIORITY_LIMIT = 2**53


class JobState(StrEnum):
    PENDING = "pending"
    ADMITTED = "admitted"
    ABSENT = "absent"


class LedgerError(RuntimeError):
    """A request the ledger cannot carry out (unknown job or node); nothing was changed."""


class InvalidRequest(ValueError):
    """A job request that is not a map of resource names to non-negative integers."""


@dataclass(frozen=True)
class JobRecord:
    """What the ledger knows of a job: where it is queued or charged, and what it asks for."""

    job: str
    leaf: str
    priority: int
    seq: int
    request: dict[str, int] = field(default_factory=dict)


def text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def decode_record(job: str, raw: bytes | str) -> JobRecord:
    parts = text(raw).split("\t")
    pairs = parts[3:]
    request = {pairs[i]: int(pairs[i + 1]) for i in range(0, len(pairs), 2)}
    return JobRecord(job, parts[0], -int(parts[1]), int(parts[2]), request)


def request_args(request: Mapping[str, int]) -> list[str]:
    """A request as flat ``resource, amount`` script arguments; raises :class:`InvalidRequest`."""
    args: list[str] = []
    for resource, amount in sorted(request.items()):
        if not isinstance(resource, str) or not is_resource_name(resource):
            raise InvalidRequest(f"request: {resource!r} is not a valid resource name")
        if resource == MAX_JOBS:
            raise InvalidRequest(f"request.{MAX_JOBS}: counted by the ledger (1 per job), not requested")
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise InvalidRequest(f"request.{resource}: {amount!r} is not an integer in canonical units")
        if not 0 <= amount < UNLIMITED:
            raise InvalidRequest(f"request.{resource}: {amount} is outside 0..2**53-1")
        args += [resource, str(amount)]
    return args


def check_job(job: str) -> None:
    if not isinstance(job, str) or not job:
        raise InvalidRequest(f"job: {job!r} must be a non-empty string")


def score_of(priority: int) -> str:
    if isinstance(priority, bool) or not isinstance(priority, int) or abs(priority) >= _PRIORITY_LIMIT:
        raise InvalidRequest(f"priority: {priority!r} must be an integer below 2**53 in magnitude")
    return str(-priority)
