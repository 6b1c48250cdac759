"""What a scheduling cycle reads of the queues: the heads of each request class, and running jobs.

A leaf's queue can hold thousands of jobs, and under contention most of them would be refused
for the same reason as the one before them. The ledger therefore also keeps each leaf's pending
jobs by *request class* (what a job asks of the resources the tree limits, ``Keys.classes``):
all jobs of a class get the same quota answer at the same moment, so a cycle reads the first few
jobs of each class (:meth:`queues.Ledger.class_heads`, one script run for every leaf) instead of
walking down queues, and a refused class is not read again until something that could change
its answer happened (:mod:`queues.planner`). The leaf's own order (priority, then submission)
is the merge of its class heads.

Running jobs (:meth:`queues.Ledger.running_jobs`) are what preemption chooses victims from: per
leaf, with priority, request and admission number (higher: admitted more recently).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from queues.quantity import MAX_JOBS
from queues.records import SEQ_WIDTH, text

__all__ = ["CLOCK_SEQ", "ClassHeads", "Head", "HeadCache", "RunningJob", "class_request", "parse_heads"]

#: Submission sequences at or above this are clock readings in microseconds (``next_seq`` in
#: ``queues/lua/common.lua``); older ones were a plain counter.
CLOCK_SEQ: Final = 10**15


@dataclass(frozen=True, order=True)
class Head:
    """A pending job as its queue orders it: higher priority first, then earlier submission."""

    #: ``-priority`` first, so that ``min`` over heads is the leaf's head.
    score: int
    seq: int
    job: str = field(compare=False)

    @property
    def priority(self) -> int:
        return -self.score

    @property
    def submitted(self) -> float | None:
        """When the job was queued (epoch seconds, the Redis server's clock), from its sequence;
        None for a job queued before sequences were clock readings."""
        return self.seq / 1e6 if self.seq >= CLOCK_SEQ else None


@dataclass(frozen=True)
class ClassHeads:
    leaf: str
    #: The class as the ledger names it (``huawei.com/Ascend910=8``, ``-`` for none).
    cls: str
    #: How many jobs of the class wait.
    pending: int
    #: Its first jobs, head first.
    heads: tuple[Head, ...]

    @property
    def request(self) -> dict[str, int]:
        """What every job of the class asks of the governed resources."""
        return class_request(self.cls)


@dataclass(frozen=True)
class RunningJob:
    job: str
    leaf: str
    priority: int
    #: Admission number: a job admitted later has a higher one.
    admission: int
    request: dict[str, int]


def class_request(cls: str) -> dict[str, int]:
    """``huawei.com/Ascend910=8,cpu=4000`` -> ``{"huawei.com/Ascend910": 8, "cpu": 4000}``."""
    if cls in ("", "-"):
        return {}
    out: dict[str, int] = {}
    for part in cls.split(","):
        resource, _, amount = part.rpartition("=")
        if resource and resource != MAX_JOBS:
            out[resource] = int(amount)
    return out


def parse_heads(reply: Any) -> dict[str, list[ClassHeads]]:
    """The reply of ``heads.lua``: leaf -> its classes, each with its first jobs."""
    out: dict[str, list[ClassHeads]] = {}
    for entry in reply:
        leaf = text(entry[0])
        classes: list[ClassHeads] = []
        for row in entry[1:]:
            cls, pending = text(row[0]), int(row[1])
            heads = []
            for i in range(2, len(row), 2):
                member = text(row[i])
                heads.append(Head(int(float(text(row[i + 1]))), int(member[:SEQ_WIDTH]), member[SEQ_WIDTH:]))
            classes.append(ClassHeads(leaf, cls, pending, tuple(heads)))
        out[leaf] = classes
    return out


class HeadCache:
    """The class heads of each leaf kept from one cycle to the next, and read again only for the
    leaves whose queue changed since (their version in :attr:`Snapshot.queue_versions` moved).

    A saturated tree refuses most heads most cycles; reading every class of every leaf with
    waiting jobs each cycle made a cycle's cost follow the backlog, not the changes. Heads are
    read after the versions, so what is kept is never older than the version it is kept
    under: at worst a leaf is read once more than needed. A leaf without a version is always
    read."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[int, list[ClassHeads]]] = {}
        #: Leaves read, over the cache's life (the cost the cache saves is the difference).
        self.reads = 0

    def heads(
        self,
        leaves: Sequence[str],
        versions: Mapping[str, int],
        fetch: Callable[[Sequence[str]], Mapping[str, list[ClassHeads]]],
    ) -> dict[str, list[ClassHeads]]:
        """``leaves``' class heads; ``fetch(stale)`` reads those of the leaves not known at their
        version in ``versions``."""
        stale = [
            leaf
            for leaf in leaves
            if not versions.get(leaf) or self._known.get(leaf, (None,))[0] != versions[leaf]
        ]
        if stale:
            self.reads += len(stale)
            got = fetch(stale)
            for leaf in stale:
                self._known[leaf] = (versions.get(leaf, 0), got.get(leaf, []))
        return {leaf: self._known[leaf][1] for leaf in leaves}

    def clear(self) -> None:
        self._known.clear()


def leaf_head(classes: Mapping[str, ClassHeads] | list[ClassHeads]) -> Head | None:
    """The first job of a leaf: the least of its class heads."""
    values = classes.values() if isinstance(classes, Mapping) else classes
    heads = [c.heads[0] for c in values if c.heads]
    return min(heads) if heads else None
