"""Members whose calls keep timing out: *degraded*, a mark every role reads, kept in Redis.

A member can pass its health probe (``/readyz`` answers from the API server's memory) while its
requests time out (a slow etcd, an overloaded API server, a saturated link). The syncer's probe
then calls it Ready, yet every create sent there holds a worker for its timeout. Workers see it
first: a member's circuit breaker (:mod:`fleet.members.guard`) that opens on timeouts marks the
member degraded here; the next call to it that succeeds clears the mark.

The mark is one field of its own hash (:attr:`fleet.state.dispatch_keys.DispatchKeys.degraded`), apart
from the syncer's health record, as JSON: ``since`` (when it turned degraded, kept while it
stays so, whatever process renews it), ``until`` (the dispatcher avoids the member while
``until`` is ahead: each new opening pushes it :data:`HOLD_SECONDS` on; once it lapses the
dispatcher may send work there again, the fleet's own half-open trial), ``reason``.

What follows from a mark:

* the dispatcher places nothing new on the member while the mark holds (as for NotReady);
* a worker's breaker for the member opens on reading the mark, so its calls fail at once rather
  than each waiting out a timeout (:func:`adopt`);
* a pending create for the member (the job ``Admitted`` there, no copy yet) is deferred rather
  than sent, and once the member has been degraded longer than the job's
  ``tolerationSeconds`` the job is handed back and placed elsewhere, as a NotReady member's jobs
  are (:mod:`fleet.dispatch.tasks`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import redis

from fleet.members import BreakerState, BreakerTransition
from fleet.state import DispatchKeys
from queues import lua_script

__all__ = ["HOLD_SECONDS", "Degraded", "Marks", "active", "clear", "mark", "read"]

log = logging.getLogger("fleet.dispatch.degraded")

#: How long after its last timeout-opening a degraded member is avoided by the dispatcher.
HOLD_SECONDS: Final = 20.0
#: How long a worker trusts what it read of the marks.
_READ_EVERY: Final = 0.5


@dataclass(frozen=True)
class Degraded:
    member: str
    since: float
    until: float
    reason: str

    def holds(self, now: float) -> bool:
        """Whether the dispatcher still avoids the member."""
        return self.until > now


def mark(
    client: redis.Redis,
    keys: DispatchKeys,
    member: str,
    *,
    reason: str,
    failures: int,
    hold: float = HOLD_SECONDS,
) -> float:
    """Mark ``member`` degraded (or renew its mark); returns since when it is."""
    now = round(time.time(), 3)  # what Lua prints back (14 digits) and stores are the same number
    script = lua_script(client, "fleet.dispatch", "degraded_mark")
    since = script(keys=[keys.degraded], args=[member, repr(now), repr(hold), reason, failures])
    return float(since.decode() if isinstance(since, bytes) else since)


def clear(client: redis.Redis, keys: DispatchKeys, member: str) -> bool:
    return bool(client.hdel(keys.degraded, member))


def _parse(member: bytes | str, raw: bytes | str) -> Degraded | None:
    name = member.decode() if isinstance(member, bytes) else str(member)
    try:
        data = json.loads(raw)
        return Degraded(name, float(data["since"]), float(data["until"]), str(data.get("reason") or ""))
    except (ValueError, TypeError, KeyError):
        return None


def read(client: redis.Redis, keys: DispatchKeys) -> dict[str, Degraded]:
    """Every member's mark (those that hold and those that lapsed but were not cleared)."""
    out = {}
    for member, raw in client.hgetall(keys.degraded).items():
        parsed = _parse(member, raw)
        if parsed is not None:
            out[parsed.member] = parsed
    return out


def active(client: redis.Redis, keys: DispatchKeys, now: float | None = None) -> frozenset[str]:
    """The members the dispatcher avoids now for being degraded."""
    now = time.time() if now is None else now
    return frozenset(m for m, d in read(client, keys).items() if d.holds(now))


class Marks:
    """One process's view of the marks, and the listener its members' breakers report to."""

    def __init__(self, client: redis.Redis, keys: DispatchKeys) -> None:
        self.client = client
        self.keys = keys
        self._lock = threading.Lock()
        self._read_at = -_READ_EVERY
        self._marks: dict[str, Degraded] = {}

    def current(self, *, fresh: bool = False) -> Mapping[str, Degraded]:
        with self._lock:
            if not fresh and time.monotonic() - self._read_at < _READ_EVERY:
                return self._marks
        marks = read(self.client, self.keys)
        with self._lock:
            self._marks, self._read_at = marks, time.monotonic()
        return marks

    def get(self, member: str, *, fresh: bool = False) -> Degraded | None:
        return self.current(fresh=fresh).get(member)

    def on_transition(self, change: BreakerTransition) -> None:
        """A breaker's listener: an opening on timeouts marks the member, a closing clears it."""
        try:
            if change.after is BreakerState.OPEN and change.timed_out and not change.tripped:
                since = mark(
                    self.client,
                    self.keys,
                    change.member,
                    reason=f"{change.failures} calls in a row timed out",
                    failures=change.failures,
                )
                log.warning(
                    "event=member_degraded member=%s since=%.3f failures=%d",
                    change.member,
                    since,
                    change.failures,
                )
            elif change.after is BreakerState.CLOSED and change.before is not BreakerState.CLOSED:
                if clear(self.client, self.keys, change.member):
                    log.warning("event=member_recovered member=%s", change.member)
            else:
                return
        except redis.RedisError as exc:  # the next transition writes again
            log.warning("event=degraded_not_written member=%s error=%s", change.member, exc)
            return
        with self._lock:
            self._read_at = -_READ_EVERY  # read again on next use


def adopt(marks: Mapping[str, Degraded], breakers: Mapping[str, Any], now: float | None = None) -> None:
    """Open this process's breaker of every member marked degraded, and keep it open while the
    mark holds: its calls fail at once, no trial call goes there meanwhile (once the mark lapses,
    the breaker's reset timeout lets one through, and the dispatcher may send work there again:
    the fleet's own half-open state)."""
    now = time.time() if now is None else now
    for member, mark_ in marks.items():
        breaker = breakers.get(member)
        if breaker is not None and mark_.holds(now) and breaker.state is not BreakerState.OPEN:
            breaker.trip(timed_out=True)
