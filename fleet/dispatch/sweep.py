"""A walk over large Redis hashes a bounded slice at a time, so a long one (the dispatcher's
reconcile over every stored job, :meth:`fleet.dispatch.dispatcher.Dispatcher.reconcile`) runs
between scheduling cycles instead of before the first.

Each source is a cursor step (``HSCAN`` under it: :meth:`fleet.state.Objects.scan`,
:meth:`queues.Ledger.scan`), walked in order, one after the other. ``HSCAN``'s ``COUNT`` is a
hint: a step may return more, so what a step returned beyond the slice is kept for the next
slice and a slice never holds more than its size. The guarantees are ``HSCAN``'s: an entry held
from the walk's start to its end is returned at least once (maybe twice); one added or removed
meanwhile may or may not be.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["Step", "Sweep"]

T = TypeVar("T")

#: One cursor step: (cursor, count) -> (next cursor, 0 at the end; the entries found).
Step = Callable[[int, int], tuple[int, Sequence[T]]]


class Sweep(Generic[T]):
    """Named sources walked one after the other, at most ``size`` entries a slice."""

    def __init__(self, sources: Sequence[tuple[str, Step[T]]], size: int) -> None:
        if size < 1:
            raise ValueError("a slice holds at least one entry")
        self.size = size
        self._sources = deque(sources)
        self._cursor = 0
        self._started = False  # whether the current source's first step was taken
        self._buffer: deque[T] = deque()
        #: Entries handed out so far, over all sources.
        self.taken = 0

    @property
    def done(self) -> bool:
        return not self._sources

    def take(self) -> tuple[str, list[T]]:
        """The next slice: the name of its source and at most ``size`` entries, all of that
        source (an empty list when the source ended on a step that found nothing). Call only
        while not :attr:`done`."""
        if not self._sources:
            raise LookupError("the sweep is done")
        name, step = self._sources[0]
        while len(self._buffer) < self.size and not (self._started and self._cursor == 0):
            self._cursor, found = step(self._cursor, self.size)
            self._started = True
            self._buffer.extend(found)
        out = [self._buffer.popleft() for _ in range(min(self.size, len(self._buffer)))]
        if not self._buffer and self._started and self._cursor == 0:
            self._sources.popleft()  # this source is walked: the next slice starts the next
            self._started = False
        self.taken += len(out)
        return name, out
