"""Garbage-collector settings for Fleet's long-running processes.

Every role holds many long-lived objects: the simulator its stored objects, the dispatcher its
placement view of every member's nodes and pods, the syncer its caches of member jobs and pods, the
endpoint its watch caches; each one a tree of dicts the cyclic collector tracks. With CPython's
default thresholds (a young collection every 700 allocations, older ones as the heap grows) the
collector took about a third of the simulator's CPU at a few thousand jobs. These objects hold no
reference cycles, so collecting rarely costs nothing but a little cyclic garbage held a little
longer. Call :func:`tune` once start-up is done: what exists then (modules, configuration) is
frozen out of the collector's view.
"""

from __future__ import annotations

import gc
from typing import Final

__all__ = ["YOUNG_THRESHOLD", "tune"]

#: Allocations between young-generation collections (CPython's default is 700).
YOUNG_THRESHOLD: Final = 20_000


def tune() -> None:
    """Freeze what start-up made and collect the young generation every YOUNG_THRESHOLD allocations."""
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, 20, 50)
