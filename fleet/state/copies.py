"""Where member copies may exist: the record the syncers check the members against.

Fleet acts on what the members really hold, not only on the events it saw (level, not edge).
For that it must know, per member, which copies it expects there: every attempt's copy is
recorded here (:attr:`~fleet.state.dispatch_keys.DispatchKeys.copies`) when the dispatcher sends
the attempt, in the same transaction as its in-flight mark, so no copy can exist that is not
recorded; an entry goes only once its copy is known gone (deleted and no longer listed, or found
absent by the member itself). A syncer compares each member's entries with what the member lists
(:mod:`fleet.dispatch.sync.audit`): an expected copy that is absent ends its attempt
(``CopyLost``); and while an entry names a job, the job's quota is not released even if its fleet
object is gone (a copy may still run).

Entries are members of one sorted set at score 0, ``member|job key|uid|attempt``, so one member's
are a lexicographic range: member names are DNS labels and uids UUIDs, neither holds a ``|``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from fleet.state.dispatch_keys import DispatchKeys

__all__ = ["Copies", "CopyEntry"]


@dataclass(frozen=True)
class CopyEntry:
    """One copy that may exist: job ``key``'s attempt ``attempt`` (uid ``uid``) on ``member``."""

    member: str
    key: str
    uid: str
    attempt: int

    def text(self) -> str:
        return f"{self.member}|{self.key}|{self.uid}|{self.attempt}"

    @classmethod
    def parse(cls, raw: bytes | str) -> CopyEntry | None:
        text = raw.decode() if isinstance(raw, bytes) else raw
        member, _, rest = text.partition("|")
        rest, _, attempt = rest.rpartition("|")
        key, _, uid = rest.rpartition("|")
        if not member or not key or not uid or not attempt.isdigit():
            return None
        return cls(member, key, uid, int(attempt))


class Copies:
    """The record of the copies that may exist (see the module docstring)."""

    def __init__(self, client: redis.Redis, keys: DispatchKeys) -> None:
        self.client = client
        self.key = keys.copies

    def expect(self, entries: Iterable[CopyEntry], *, pipeline: Any = None) -> None:
        """Record ``entries`` (into ``pipeline`` when given, the caller's transaction)."""
        members = {e.text(): 0 for e in entries}
        if members:
            (pipeline or self.client).zadd(self.key, members)

    def gone(self, entries: Iterable[CopyEntry]) -> None:
        """The copies of ``entries`` are known gone."""
        texts = [e.text() for e in entries]
        if texts:
            self.client.zrem(self.key, *texts)

    def on(self, member: str) -> list[CopyEntry]:
        """The copies expected on ``member``."""
        raw = self.client.zrangebylex(self.key, f"[{member}|", f"[{member}|\xff")
        return [entry for item in raw if (entry := CopyEntry.parse(item)) is not None]

    def jobs(self) -> list[str]:
        """The keys of the jobs with a copy that may exist anywhere (one walk of the record, which
        holds the placed jobs: not the queue)."""
        return sorted({entry.key for entry in self._all()})

    def recorded(self, entries: Sequence[CopyEntry]) -> list[bool]:
        """Whether each of ``entries`` is recorded (one round trip)."""
        if not entries:
            return []
        scores = self.client.zmscore(self.key, [e.text() for e in entries])
        return [score is not None for score in scores]

    def of_jobs(self, keys: Iterable[str]) -> dict[str, list[CopyEntry]]:
        """The entries naming each of ``keys`` (a walk of the whole record: for the rare job
        whose object is gone while the ledger still holds it)."""
        wanted = set(keys)
        found: dict[str, list[CopyEntry]] = {}
        if not wanted:
            return found
        for entry in self._all():
            if entry.key in wanted:
                found.setdefault(entry.key, []).append(entry)
        return found

    def _all(self) -> Iterator[CopyEntry]:
        for item, _ in self.client.zscan_iter(self.key, count=1000):
            entry = CopyEntry.parse(item)
            if entry is not None:
                yield entry
