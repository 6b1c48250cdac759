"""A member's health: the one record the syncer writes and every reader reads.

The syncer probes each member (:meth:`fleet.members.Member.probe`) and keeps the result in the
health hash (:attr:`fleet.state.dispatch_keys.DispatchKeys.health`, member -> JSON of a
:class:`MemberHealth`). The record is the state decisions are taken on, not a report of them:

* ``ready`` and ``since`` say whether the member is Ready and since when (epoch seconds). A
  cluster failover happens when a member has been NotReady longer than a job's toleration, so
  ``since`` is what its clock counts from.
* ``failures`` and ``successes`` count the probes in a row that failed or succeeded: the
  thresholds that turn a member NotReady or Ready again count them.

So a syncer that starts (after a crash, or taking a member over from another) continues from the
record rather than from nothing: a member that was NotReady stays NotReady since the same
moment, and failures counted before the restart still count (:meth:`MemberHealth.after_probe`
is the one transition rule). The dispatcher (what not to send work to), the MemberCluster kind
of the API and ``fleet up``'s readiness check read the record through :func:`parse` and
:func:`read_health`; nobody else spells its fields. The JSON keys are the field names below.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import redis

from fleet.state.dispatch_keys import DispatchKeys

__all__ = ["MemberHealth", "health_items", "parse", "read_health", "write_health"]

#: The Python type each field takes from JSON (an int is accepted for a float).
_TYPES: Final[dict[str, tuple[type, ...]]] = {
    "ready": (bool, type(None)),
    "since": (int, float),
    "failures": (int,),
    "successes": (int,),
    "error": (str, type(None)),
    "probed": (int, float),
    "latency": (int, float),
}


@dataclass(frozen=True)
class MemberHealth:
    """One member's health as the syncer last probed it (see the module docstring)."""

    #: ``None`` until the first probe.
    ready: bool | None = None
    #: When ``ready`` last changed (epoch seconds; 0 before the first probe).
    since: float = 0.0
    #: Probes in a row that failed (0 after a success).
    failures: int = 0
    #: Probes in a row that succeeded (0 after a failure).
    successes: int = 0
    #: What the last failed probe said (no address in it); ``None`` after a success.
    error: str | None = None
    #: When the last probe ended (epoch seconds; 0: never probed).
    probed: float = 0.0
    #: How long the last probe took (seconds).
    latency: float = 0.0

    @property
    def not_ready(self) -> bool:
        """Probed and found NotReady (a member not probed yet is not NotReady: it is unknown)."""
        return self.ready is False

    def not_ready_for(self, now: float) -> float | None:
        """Seconds the member has been NotReady at ``now``; ``None`` when it is not."""
        return max(0.0, now - self.since) if self.ready is False else None

    def after_probe(
        self,
        *,
        healthy: bool,
        error: str | None,
        latency: float,
        now: float,
        failure_threshold: int,
        success_threshold: int,
    ) -> tuple[MemberHealth, bool]:
        """The record after one more probe, and whether readiness turned.

        The first probe decides at once; after that a member turns NotReady after
        ``failure_threshold`` failures in a row and Ready after ``success_threshold``
        successes. ``since`` moves only when readiness turns.
        """
        if healthy:
            successes, failures = self.successes + 1, 0
            turned = self.ready is not True and (self.ready is None or successes >= success_threshold)
            ready = True if turned else self.ready
            error = None
        else:
            failures, successes = self.failures + 1, 0
            turned = self.ready is not False and (self.ready is None or failures >= failure_threshold)
            ready = False if turned else self.ready
        since = now if turned else self.since
        record = MemberHealth(ready, since, failures, successes, error, now, round(latency, 4))
        return record, turned

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), separators=(",", ":"))


def parse(raw: bytes | str | None) -> MemberHealth | None:
    """A record as the hash holds it; ``None`` when absent or unreadable (a field of the wrong
    type is left at its default, an unknown one ignored)."""
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    values: dict[str, Any] = {}
    for name, types in _TYPES.items():
        value = data.get(name)
        if name in data and isinstance(value, types) and not (isinstance(value, bool) and bool not in types):
            values[name] = value
    return MemberHealth(**values)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def health_items(raw: Mapping[bytes | str, bytes | str]) -> dict[str, MemberHealth]:
    """The records of an ``HGETALL`` of the hash (unreadable ones left out)."""
    out: dict[str, MemberHealth] = {}
    for member, value in raw.items():
        record = parse(value)
        if record is not None:
            out[_text(member)] = record
    return out


def read_health(
    client: redis.Redis, keys: DispatchKeys, members: Iterable[str] | None = None
) -> dict[str, MemberHealth]:
    """The records of ``members`` (every member's when ``None``); a member without one is absent."""
    if members is None:
        return health_items(client.hgetall(keys.health))
    names = list(members)
    if not names:
        return {}
    values = client.hmget(keys.health, names)
    return {
        name: record
        for name, value in zip(names, values, strict=True)
        if (record := parse(value)) is not None
    }


def write_health(client: redis.Redis, keys: DispatchKeys, member: str, record: MemberHealth) -> None:
    client.hset(keys.health, member, record.to_json())
