"""The leader lease: one holder at a time, takeover after expiry, and a fence that moves on."""

from __future__ import annotations

import time

import redis

from fleet.dispatch.keys import DEFAULT_DISPATCH_KEYS
from fleet.dispatch.lease import Lease


def test_only_one_holder_at_a_time(redis_client: redis.Redis) -> None:
    a = Lease(redis_client, DEFAULT_DISPATCH_KEYS.lease, "a", ttl=5)
    b = Lease(redis_client, DEFAULT_DISPATCH_KEYS.lease, "b", ttl=5)
    assert a.acquire()
    assert not b.acquire()
    assert a.held and not b.held
    assert a.current_holder() == "a"
    assert redis_client.get(DEFAULT_DISPATCH_KEYS.lease) == a.token.encode()  # type: ignore[union-attr]


def test_release_lets_the_next_holder_in_with_a_larger_token(redis_client: redis.Redis) -> None:
    a = Lease(redis_client, DEFAULT_DISPATCH_KEYS.lease, "a", ttl=5)
    b = Lease(redis_client, DEFAULT_DISPATCH_KEYS.lease, "b", ttl=5)
    assert a.acquire()
    first = int(a.token or 0)
    a.release()
    assert not a.held
    assert b.acquire()
    assert int(b.token or 0) > first


def test_an_expired_holder_loses_the_lease_and_cannot_renew(redis_client: redis.Redis) -> None:
    a = Lease(redis_client, DEFAULT_DISPATCH_KEYS.lease, "a", ttl=0.2)
    b = Lease(redis_client, DEFAULT_DISPATCH_KEYS.lease, "b", ttl=5)
    assert a.acquire()
    deadline = time.monotonic() + 5
    while not b.acquire():
        assert time.monotonic() < deadline, "the lease never expired"
        time.sleep(0.05)
    assert not a.renew()
    assert a.fence is None
    assert b.fence == (DEFAULT_DISPATCH_KEYS.lease, b.token)
    # The old holder's release does not free the new holder's lease.
    a.token = "1"
    a.release()
    assert b.renew()
