"""The dispatcher's leader lease: one leader at a time, and a fencing token for its writes.

A lease is a Redis key whose value is the holder's fencing token and whose TTL is the lease
time. Acquiring takes a new token from a counter (``<key>:seq``) and sets the key only if it is
absent; renewing extends the TTL only while the key still holds the holder's own token. A leader
that stalls past its TTL loses the key to the next one, whose token is larger; every write the
old leader then makes carries its stale token, and the scripts that check the fence (the quota
ledger's and the fleet state's) refuse it. So two leaders never both decide, even when one of
them does not yet know it lost: the fence, not the clock, is what guarantees it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Final

import redis

__all__ = ["Lease"]

log = logging.getLogger("fleet.dispatch.lease")

_ACQUIRE: Final = """
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local token = redis.call('INCR', KEYS[1] .. ':seq')
redis.call('SET', KEYS[1], token, 'PX', ARGV[1])
redis.call('SET', KEYS[1] .. ':holder', ARGV[2], 'PX', ARGV[1])
return token
"""

_RENEW: Final = """
if redis.call('GET', KEYS[1]) ~= ARGV[2] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1] .. ':holder', ARGV[1])
return 1
"""

_RELEASE: Final = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[1] .. ':holder')
return 1
"""


@dataclass
class Lease:
    """``key`` must share the hash tag of the keys whose writes check the fence."""

    client: redis.Redis
    key: str
    holder: str
    ttl: float = 10.0
    token: str | None = None
    _renewed: float = 0.0

    def __post_init__(self) -> None:
        self._acquire = self.client.register_script(_ACQUIRE)
        self._renew = self.client.register_script(_RENEW)
        self._release = self.client.register_script(_RELEASE)

    @property
    def held(self) -> bool:
        """Whether this holder may still act, by its own clock (the fence is the real guard)."""
        return self.token is not None and time.monotonic() - self._renewed < self.ttl * 0.8

    @property
    def fence(self) -> tuple[str, str] | None:
        """``(key, token)`` for the fenced writes; None while not leading."""
        return None if self.token is None else (self.key, self.token)

    def acquire(self) -> bool:
        """Take the lease if it is free; True when this holder leads (already or now)."""
        if self.token is not None:
            return self.renew()
        started = time.monotonic()
        token = self._acquire(keys=[self.key], args=[int(self.ttl * 1000), self.holder])
        if token is None:
            return False
        self.token = str(int(token))
        self._renewed = started
        log.info("event=lease_acquired holder=%s token=%s", self.holder, self.token)
        return True

    def renew(self) -> bool:
        """Extend the lease; False (and not leading any more) when it was lost."""
        if self.token is None:
            return False
        started = time.monotonic()
        if self._renew(keys=[self.key], args=[int(self.ttl * 1000), self.token]):
            self._renewed = started
            return True
        log.warning("event=lease_lost holder=%s token=%s", self.holder, self.token)
        self.token = None
        return False

    def release(self) -> None:
        if self.token is not None:
            self._release(keys=[self.key], args=[self.token])
            log.info("event=lease_released holder=%s token=%s", self.holder, self.token)
        self.token = None

    def current_holder(self) -> str | None:
        raw = self.client.get(self.key + ":holder")
        return None if raw is None else raw.decode() if isinstance(raw, bytes) else str(raw)
