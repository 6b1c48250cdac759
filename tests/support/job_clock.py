"""When each fleet job reached each state, as a test sees it: a thread that reads every fleet
job every ``every`` seconds while a run goes on.

    with JobClock(objects) as clock:
        ...submit, wait...
    clock.first("team-a/j1", "Running")   # epoch seconds, or None
    clock.member("team-a/j1", attempt=1)  # the member attempt 1 was placed on

Good enough for latencies of a second and more (the resolution is ``every``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from fleet.jobs import current_state
from fleet.state import Objects
from tests.support.kinds import FLEET_ASCENDJOB

__all__ = ["JobClock"]


class JobClock:
    def __init__(self, objects: Objects, every: float = 0.1) -> None:
        self.objects = objects
        self.every = every
        self._lock = threading.Lock()
        self._first: dict[tuple[str, str], float] = {}
        self._members: dict[tuple[str, int], str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="job-clock", daemon=True)

    def __enter__(self) -> JobClock:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # Redis busy or restarting: the next sample catches up
                self.sample()
            self._stop.wait(self.every)

    def sample(self) -> None:
        now = time.time()
        items, _ = self.objects.list(FLEET_ASCENDJOB)
        with self._lock:
            for obj in items:
                key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
                state = current_state(obj)
                if state is not None:
                    self._first.setdefault((key, state), now)
                status: dict[str, Any] = obj.get("status") or {}
                cluster, attempt = status.get("cluster"), status.get("attempt")
                if cluster and isinstance(attempt, int):
                    self._members.setdefault((key, attempt), str(cluster))

    def first(self, key: str, state: str) -> float | None:
        """When ``key`` was first seen in ``state`` (epoch seconds)."""
        with self._lock:
            return self._first.get((key, state))

    def member(self, key: str, *, attempt: int) -> str | None:
        """The member attempt ``attempt`` of ``key`` was placed on, if it was seen."""
        with self._lock:
            return self._members.get((key, attempt))
