"""Cancelling a task and waiting for it to end, when one cancellation can be lost.

On Python 3.11, ``asyncio.wait_for`` returns the inner result instead of raising when the
cancellation of its caller lands in the step in which the inner awaitable completes
(python/cpython gh-86296; 3.12 rebuilt ``wait_for`` on ``asyncio.timeout``, GH-96764). redis-py
writes every asyncio command through ``wait_for`` whenever ``socket_timeout`` is set, and its
asyncio client sets it by default (``redis._defaults.DEFAULT_SOCKET_TIMEOUT``, 5 s, in 8.1), so
a task cancelled while one of its Redis commands is being written carries on as if nothing
happened. A watch's pending read cancelled at ``timeoutSeconds`` then went back to waiting for
the next change, and the watch of a quiet kind never ended (seen in CI: a watch of namespaces
past its timeout).

:func:`cancel_and_wait` cancels again while the task has not ended. Each repeat comes only after
``again_after`` seconds, so a task that honours the first cancellation gets that long for its
own clean-up before it is interrupted again.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

__all__ = ["AGAIN_AFTER_SECONDS", "cancel_and_wait"]

#: How long a cancelled task has to end before it is cancelled again.
AGAIN_AFTER_SECONDS: Final = 0.5


async def cancel_and_wait(task: asyncio.Future[Any], *, again_after: float = AGAIN_AFTER_SECONDS) -> None:
    """Cancel ``task`` and return once it has ended, cancelling it again each ``again_after``
    seconds while it runs on. It raises what the task raised if the task failed; a task that
    ended by cancellation, or whose cancellation was lost and that then returned, is fine.

    A caller cancelled meanwhile still waits for the task to end, then raises
    ``CancelledError``, as ``await task`` does: whoever closes what the task was using (an
    async generator it was advancing, say) must find it no longer running."""
    loop = asyncio.get_running_loop()
    interrupted = False
    while not task.done():
        task.cancel()
        deadline = loop.time() + again_after
        while not task.done() and (left := deadline - loop.time()) > 0:
            try:
                await asyncio.wait({task}, timeout=left)
            except asyncio.CancelledError:
                interrupted = True
    if interrupted:
        raise asyncio.CancelledError
    if not task.cancelled():
        task.result()
