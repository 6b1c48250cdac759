"""The event loop the asyncio roles (``fleet sim``, ``fleet api``) run on: uvloop.

uvloop is libuv under asyncio's interface: the same code, with socket writes, timers and task
switches done in C. The serving roles spend most of their time there (every watch event is a
socket write), so it is worth a dependency; the ASGI server picks httptools for HTTP parsing on
its own once it is installed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import uvloop

__all__ = ["run"]

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on a uvloop event loop."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)
