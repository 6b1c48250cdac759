"""The dispatcher's leader lease: one leader at a time, and a fencing token for its writes.

A lease is a Redis key (``lua/lease_*.lua`` keep it) whose value is the holder's fencing token and
whose TTL is the lease time. Acquiring takes a new token from a counter (``<key>:seq``) and sets
the key only if it is absent; renewing extends the TTL only while the key still holds the holder's
own token. A leader that stalls past its TTL loses the key to the next one, whose token is larger;
every write the old leader then makes carries its stale token, and the scripts that check the
fence (the quota ledger's and the fleet state's) refuse it. So two leaders never both decide, even
when one of them does not yet know it lost: the fence, not the clock, is what guarantees it.

The lease is short (:data:`LEASE_SECONDS`, 3 s) so that a leader that dies without releasing it
(SIGKILL, its node lost) stops admissions for about that long: a standby polls every
:data:`STANDBY_POLL_SECONDS` and takes the key once it expires. A leader renews it from its own
thread every third of the TTL (:class:`Renewer`) as well as at every round, so a long round (a
reconcile of many jobs) does not lose it; a leader that cannot renew for ``0.8 * ttl`` stops
acting by its own clock (:attr:`Lease.held`), and any write it still makes is refused by the fence.
A clean stop releases the key at once.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Final

import redis

from queues import lua_script

__all__ = ["LEASE_SECONDS", "STANDBY_POLL_SECONDS", "Lease", "Renewer"]

#: The leader lease's default TTL: how long admissions stop when a leader dies uncleanly.
LEASE_SECONDS: Final = 3.0
#: How often a standby tries to take the lease (at most; a TTL under 3 s polls at TTL/6).
STANDBY_POLL_SECONDS: Final = 0.5

log = logging.getLogger("fleet.dispatch.lease")


@dataclass
class Lease:
    """``key`` must share the hash tag of the keys whose writes check the fence."""

    client: redis.Redis
    key: str
    holder: str
    ttl: float = LEASE_SECONDS
    token: str | None = None
    _renewed: float = 0.0
    #: Held across each call, so that a renewal with an old token that fails (from the
    #: :class:`Renewer`) cannot clear a token taken meanwhile.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self._acquire = lua_script(self.client, "fleet.dispatch", "lease_acquire")
        self._renew = lua_script(self.client, "fleet.dispatch", "lease_renew")
        self._release = lua_script(self.client, "fleet.dispatch", "lease_release")

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
        with self._lock:
            return self._acquire_free()

    def _acquire_free(self) -> bool:
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
        with self._lock:
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
        with self._lock:
            if self.token is not None:
                self._release(keys=[self.key], args=[self.token])
                log.info("event=lease_released holder=%s token=%s", self.holder, self.token)
            self.token = None

    def forfeit(self) -> None:
        """Stop leading without touching the key (another holder has it: the fence said so)."""
        with self._lock:
            self.token = None


class Renewer:
    """Renews ``lease`` every third of its TTL from a daemon thread while it is held, so that
    the lease does not depend on how long the holder's rounds take (``with Renewer(lease):``)."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-renewer", daemon=True)

    def __enter__(self) -> Renewer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.lease.ttl)

    def _run(self) -> None:
        while not self._stop.wait(self.lease.ttl / 3):
            if self.lease.token is None:
                continue
            try:
                self.lease.renew()
            except redis.RedisError as error:  # the next one, or the round's own, may succeed
                log.warning("event=lease_renew_failed holder=%s error=%r", self.lease.holder, error)
