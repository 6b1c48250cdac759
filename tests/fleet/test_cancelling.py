"""Cancelling a task whose first cancellation is lost (Python 3.11's ``wait_for``, gh-86296)."""

from __future__ import annotations

import asyncio
import sys

import pytest

from fleet.cancelling import cancel_and_wait


async def _lose_a_cancellation_then_wait_forever(inner: asyncio.Future[int], waited: asyncio.Event) -> int:
    """What a watch's read did: a Redis command sent through ``wait_for`` (redis-py's
    ``socket_timeout``), then a wait for a change that never comes."""
    await asyncio.wait_for(inner, 5)
    waited.set()
    await asyncio.Event().wait()
    return 0


def _racing_task() -> tuple[asyncio.Task[int], asyncio.Future[int], asyncio.Event]:
    loop = asyncio.get_running_loop()
    inner: asyncio.Future[int] = loop.create_future()
    waited = asyncio.Event()
    return asyncio.create_task(_lose_a_cancellation_then_wait_forever(inner, waited)), inner, waited


async def _cancel_in_the_step_the_inner_completes(
    task: asyncio.Task[int], inner: asyncio.Future[int]
) -> None:
    await asyncio.sleep(0)  # the task is inside wait_for now
    inner.set_result(1)
    task.cancel()  # lands in the same step: 3.11's wait_for returns 1 instead of raising


def test_a_task_that_lost_its_cancellation_is_cancelled_again_and_ends() -> None:
    async def main() -> None:
        task, inner, _ = _racing_task()
        await _cancel_in_the_step_the_inner_completes(task, inner)
        await asyncio.wait_for(cancel_and_wait(task, again_after=0.05), 2)
        assert task.cancelled()

    asyncio.run(main())


def test_one_plain_cancel_in_the_race_is_lost_before_python_3_12() -> None:
    """Why the helper exists: on 3.11 the same race with one plain cancel leaves the task
    running past ``wait_for``; from 3.12 (``wait_for`` on ``asyncio.timeout``) it ends."""

    async def main() -> None:
        task, inner, waited = _racing_task()
        await _cancel_in_the_step_the_inner_completes(task, inner)
        await asyncio.sleep(0.1)
        if sys.version_info < (3, 12):
            assert waited.is_set() and not task.done()  # carried on past wait_for, still waiting
        else:
            assert task.cancelled() and not waited.is_set()
        await cancel_and_wait(task)

    asyncio.run(main())


def test_a_task_that_honours_the_cancellation_is_cancelled_once() -> None:
    """A task's own clean-up is not interrupted while it takes less than ``again_after``."""
    cancels: list[int] = []

    async def cleans_up_slowly() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancels.append(1)
            await asyncio.sleep(0.2)
            raise

    async def main() -> None:
        task = asyncio.create_task(cleans_up_slowly())
        await asyncio.sleep(0)
        await cancel_and_wait(task, again_after=1.0)
        assert task.cancelled() and cancels == [1]

    asyncio.run(main())


def test_the_failure_of_a_task_that_failed_is_raised() -> None:
    async def fails_when_cancelled() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RuntimeError("clean-up failed") from None

    async def main() -> None:
        task = asyncio.create_task(fails_when_cancelled())
        await asyncio.sleep(0)
        with pytest.raises(RuntimeError, match="clean-up failed"):
            await cancel_and_wait(task)

    asyncio.run(main())


def test_a_caller_cancelled_meanwhile_still_waits_for_the_task_then_raises() -> None:
    """As ``await task`` does: the watch stream closes the generator the task was advancing
    right after, and a generator still running cannot be closed."""
    ended: list[str] = []

    async def cleans_up_slowly() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0.2)
            ended.append("task")

    async def main() -> None:
        task = asyncio.create_task(cleans_up_slowly())
        await asyncio.sleep(0)
        caller = asyncio.create_task(cancel_and_wait(task, again_after=1.0))
        await asyncio.sleep(0.05)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert ended == ["task"] and task.done()

    asyncio.run(main())
