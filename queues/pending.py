"""Per-node pending queues: priority first, then submission order, O(log n) at the head.

Each node's queue is a sorted set scored ``-priority``; its members are the job id prefixed with a
16-digit submission sequence, so that equal scores sort by submission (Redis orders equal scores
by member). The job's record (leaf, score, sequence, request) sits in one hash beside the
admitted-job hash; the format is spelt in ``queues/lua/common.lua`` and decoded here only.
Queueing also counts the job in its leaf's and every ancestor's pending count, which is what the
min-guarantee check reads instead of walking queues.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import redis
from redis.commands.core import Script

from queues.keys import DEFAULT_KEYS, Keys
from queues.records import (
    SEQ_WIDTH,
    JobRecord,
    JobState,
    LedgerError,
    check_job,
    decode_record,
    request_args,
    score_of,
    text,
)
from queues.scripts import scripts_for

__all__ = ["PendingQueues", "QueuePolicy"]


class QueuePolicy(StrEnum):
    """How a queue treats a head it cannot admit (Kube Queue's two queue policies)."""

    BEST_EFFORT = "BestEffort"  #: skip it and try the jobs behind it
    STRICT = "Strict"  #: block the queue behind it


class PendingQueues:
    """The pending side of the ledger: queue a job, look at heads, read records."""

    def __init__(self, client: redis.Redis, keys: Keys = DEFAULT_KEYS) -> None:
        self.client = client
        self.keys = keys
        self._scripts = scripts_for(client, keys)

    def enqueue(
        self,
        job: str,
        leaf: str,
        request: Mapping[str, int],
        priority: int = 0,
        *,
        pipeline: redis.client.Pipeline | None = None,
    ) -> JobState | None:
        """Queue ``job`` on ``leaf``; idempotent. Returns the job's state before the call
        (ABSENT when it was queued now), or None when the call went into ``pipeline``."""
        script, keys, args = self.enqueue_call(job, leaf, request, priority)
        if pipeline is not None:
            script(keys=keys, args=args, client=pipeline)
            return None
        return self.enqueue_outcome(script(keys=keys, args=args))

    def enqueue_call(
        self, job: str, leaf: str, request: Mapping[str, int], priority: int = 0
    ) -> tuple[Script, list[str], list[str]]:
        """:meth:`enqueue` as (script, keys, args), not sent: for a caller that sends it with
        other scripts' runs in one round trip of its own; :meth:`enqueue_outcome` reads the reply."""
        check_job(job)
        args = [job, leaf, score_of(priority), *request_args(request)]
        return self._scripts.enqueue, [self.keys.meta], args

    @staticmethod
    def enqueue_outcome(reply: Any) -> JobState:
        """What an enqueue's reply says: the job's state before it (ABSENT: queued now), or
        ``LedgerError``."""
        if reply[0] == -1:
            raise LedgerError(text(reply[1]))
        return JobState.ABSENT if reply[0] == 1 else JobState(text(reply[1]))

    def peek(self, leaf: str, count: int = 1) -> list[str]:
        """The first ``count`` jobs of ``leaf``'s queue, head first."""
        members = self.client.zrange(self.keys.queue(leaf), 0, count - 1)
        return [text(m)[SEQ_WIDTH:] for m in members]

    def head(self, leaf: str) -> str | None:
        found = self.peek(leaf, 1)
        return found[0] if found else None

    def length(self, leaf: str) -> int:
        return int(self.client.zcard(self.keys.queue(leaf)))

    def record(self, job: str) -> JobRecord | None:
        raw = self.client.hget(self.keys.pending, job)
        return None if raw is None else decode_record(job, raw)

    def records(self) -> dict[str, JobRecord]:
        """Every pending job (a full scan: for tools and tests, not for the decision path)."""
        return {
            text(job): decode_record(text(job), raw)
            for job, raw in self.client.hscan_iter(self.keys.pending, count=1000)
        }
