"""A watch callback for tests: keeps every event and lets the test wait for the ones it expects."""

from __future__ import annotations

import threading
from collections.abc import Callable

from fleet.members import SYNC, WatchEvent


class Recorder:
    """A watch callback that keeps every event and lets the test wait for some."""

    def __init__(self, fail: Callable[[WatchEvent], bool] | None = None) -> None:
        self.events: list[WatchEvent] = []
        self._fail = fail
        self._changed = threading.Condition()

    def __call__(self, event: WatchEvent) -> None:
        if self._fail is not None and self._fail(event):
            raise RuntimeError("consumer failed")
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    def wait(self, predicate: Callable[[list[WatchEvent]], bool], timeout: float = 5.0) -> list[WatchEvent]:
        with self._changed:
            if not self._changed.wait_for(lambda: predicate(self.events), timeout):
                raise AssertionError(
                    f"timed out; events so far: {[(e.type, event_name(e)) for e in self.events]}"
                )
            return list(self.events)

    def changes(self) -> list[tuple[str, str]]:
        """(type, name) of every event but SYNC."""
        with self._changed:
            return [(e.type, event_name(e)) for e in self.events if e.type != SYNC]

    def syncs(self) -> list[WatchEvent]:
        with self._changed:
            return [e for e in self.events if e.type == SYNC]


def event_name(event: WatchEvent) -> str:
    return event.object["metadata"]["name"] if event.object else ""
