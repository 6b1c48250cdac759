"""The leader lease: one holder at a time, takeover after expiry, and a fence that moves on."""

from __future__ import annotations

import time

import redis

from fleet.dispatch.lease import Lease, Renewer
from fleet.state.dispatch_keys import DEFAULT_DISPATCH_KEYS


def test_only_one_holder_at_a_time(redis_client: redis.Redis) -> None:
    a = Lease(redis_client, DEFAULT_DISPATCH_KEYS.lease, "a", ttl=5)
    b = Lease(redis_client, DEFAULT_DISPATCH_KEYS.lease, "b", ttl=5)
    assert a.acquire()
    assert not b.acquire()
    assert a.held and not b.held
    assert redis_client.get(DEFAULT_DISPATCH_KEYS.lease + ":holder") == b"a"
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


def test_the_renewer_keeps_a_lease_past_its_ttl_without_rounds(redis_client: redis.Redis) -> None:
    a = Lease(redis_client, DEFAULT_DISPATCH_KEYS.lease, "a", ttl=0.6)
    b = Lease(redis_client, DEFAULT_DISPATCH_KEYS.lease, "b", ttl=5)
    assert a.acquire()
    with Renewer(a):
        time.sleep(1.5)  # more than twice the TTL with no renewal of the holder's own
        assert a.held
        assert not b.acquire()
    deadline = time.monotonic() + 5
    while not b.acquire():  # renewal stopped: it lapses
        assert time.monotonic() < deadline, "the lease never expired"
        time.sleep(0.05)


def test_a_failed_renewal_with_an_old_token_does_not_clear_a_new_one(redis_client: redis.Redis) -> None:
    a = Lease(redis_client, DEFAULT_DISPATCH_KEYS.lease, "a", ttl=5)
    assert a.acquire()
    a.forfeit()
    assert a.token is None and not a.held
    assert not a.acquire()  # the key is still there: forfeiting does not touch it
    redis_client.delete(DEFAULT_DISPATCH_KEYS.lease)
    assert a.acquire()
    assert a.renew() and a.held
