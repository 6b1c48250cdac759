"""Each member's capacity view in Redis: written from the dispatcher's capacity feed, read by the
MemberCluster kind.

The feed (:class:`fleet.placement.feeder.CapacityFeeder`) keeps every member's capacity current
from its node and pod watches, in the dispatcher process (leader and standbys alike: each holds
the same live picture). :class:`CapacityPublisher` writes the view of it
(:func:`fleet.placement.view.capacity_view`) to the capacity hash
(:attr:`fleet.state.dispatch_keys.DispatchKeys.capacity`, member -> JSON) at most once per
``interval`` per member whose summary changed, and every member again after
``refresh_seconds``, so a view never lags the feed by more than ``interval`` and its
``observedTime`` says how fresh it is. A member not listed yet has no view (its capacity is
unknown, not zero). Readers go through :func:`fleet.state.member_capacity.parse_capacity`;
nobody else spells the record. With the view goes the member's record node by node
(:func:`fleet.placement.dump_nodes`, in the hash
:attr:`~fleet.state.dispatch_keys.DispatchKeys.capacity_nodes`), which the API explains jobs with.
"""

from __future__ import annotations

import json
import logging
import threading
import time

import redis

from fleet import fastjson
from fleet.placement import Placer, capacity_view, dump_nodes
from fleet.state import CAPACITY_OBSERVED, DispatchKeys

__all__ = ["CapacityPublisher"]

log = logging.getLogger("fleet.dispatch.capacity_publisher")


class CapacityPublisher:
    """Writes the feed's capacity views to Redis from its own thread (see the module docstring).

    ``lock`` is the feed's lock: a view is taken under it, the write made after it is released.
    """

    def __init__(
        self,
        placer: Placer,
        lock: threading.RLock,
        client: redis.Redis,
        keys: DispatchKeys,
        *,
        interval: float = 1.0,
        refresh_seconds: float = 30.0,
    ) -> None:
        self._placer = placer
        self._lock = lock
        self._client = client
        self._keys = keys
        self._interval = interval
        self._refresh = refresh_seconds
        self._published: dict[str, tuple[int, float]] = {}  # member -> (version, when)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="capacity-publisher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def publish(self, now: float | None = None) -> int:
        """Write the views that changed (or are due again); returns how many were written."""
        now = time.time() if now is None else now
        views: dict[str, str] = {}
        nodes: dict[str, bytes] = {}
        with self._lock:
            for cap in self._placer.members():
                if not cap.listed:
                    continue
                last = self._published.get(cap.name)
                if last is not None and last[0] == cap.version and now - last[1] < self._refresh:
                    continue
                record = {CAPACITY_OBSERVED: round(now, 3), **capacity_view(cap)}
                views[cap.name] = json.dumps(record, separators=(",", ":"))
                detail = {CAPACITY_OBSERVED: round(now, 3), **dump_nodes(cap)}
                nodes[cap.name] = fastjson.dumps(detail)
                self._published[cap.name] = (cap.version, now)
        if views:
            with self._client.pipeline(transaction=False) as pipe:
                for member, view in views.items():
                    pipe.hset(self._keys.capacity, member, view)
                    pipe.hset(self._keys.capacity_nodes, member, nodes[member])
                pipe.execute()
        return len(views)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.publish()
            except redis.RedisError as exc:  # Redis away: written again once it is back
                self._published.clear()
                log.warning("event=capacity_not_published error=%s", exc)
