"""What "ready" means for ``fleet up``, one check per part, each saying what it still waits for.

``fleet up`` writes the ``fleet`` context only once every check passes, so that the first
``kubectl --kubeconfig fleet.kubeconfig get --raw /readyz`` a user (or a script) can make already
answers ``ok`` and a job submitted then is dispatched: Redis answers, the dispatcher holds its
lease, a worker listens on the propagation queue, the syncer has probed every member and found it
Ready, and the fleet API answers its own ``/readyz``. A check returns ``None`` when ready, or
a short phrase that ``fleet up`` prints if the wait runs out.
"""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence

import redis
from rq import Queue, Worker

from fleet.state import DEFAULT_DISPATCH_KEYS, PROPAGATE_QUEUE, DispatchKeys, read_health

__all__ = [
    "Check",
    "api_ready",
    "dispatcher_leads",
    "members_probed",
    "pending",
    "redis_answers",
    "worker_listens",
]

#: None when ready, else what is awaited.
Check = Callable[[], str | None]


def redis_answers(client: redis.Redis) -> Check:
    def check() -> str | None:
        try:
            client.ping()
        except redis.RedisError as error:
            return f"Redis does not answer ({error})"
        return None

    return check


def dispatcher_leads(client: redis.Redis, keys: DispatchKeys = DEFAULT_DISPATCH_KEYS) -> Check:
    def check() -> str | None:
        return None if client.exists(keys.lease) else "the dispatcher has not taken its lease"

    return check


def worker_listens(client: redis.Redis, keys: DispatchKeys = DEFAULT_DISPATCH_KEYS) -> Check:
    queue = Queue(keys.queue(PROPAGATE_QUEUE), connection=client)

    def check() -> str | None:
        if Worker.count(connection=client, queue=queue) > 0:
            return None
        return f"no worker listens on the {queue.name} queue"

    return check


def members_probed(
    client: redis.Redis, members: Sequence[str], keys: DispatchKeys = DEFAULT_DISPATCH_KEYS
) -> Check:
    """The syncer has probed every member and found it Ready (its health hash says so)."""

    def check() -> str | None:
        health = read_health(client, keys, members)
        waiting = [m for m in members if m not in health or health[m].ready is not True]
        if not waiting:
            return None
        return "the syncer has not found " + ", ".join(waiting) + " Ready"

    return check


def api_ready(url: str, token: str | None, *, context: ssl.SSLContext | None = None) -> Check:
    """The fleet API answers ``GET /readyz`` with 200 (through HTTPS with ``context``, as kubectl asks)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    def check() -> str | None:
        request = urllib.request.Request(f"{url}/readyz", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=2.0, context=context) as response:
                if response.status == 200:
                    return None
                return f"the fleet API's /readyz answers {response.status}"
        except urllib.error.HTTPError as error:
            return f"the fleet API's /readyz answers {error.code}"
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            return f"the fleet API does not answer ({reason})"

    return check


def pending(checks: Sequence[Check]) -> list[str]:
    """What the checks still wait for (empty when all are ready)."""
    out = []
    for check in checks:
        try:
            waiting = check()
        except redis.RedisError as error:
            waiting = f"Redis does not answer ({error})"
        if waiting is not None:
            out.append(waiting)
    return out
