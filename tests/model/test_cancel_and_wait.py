"""Stopping background tasks keeps the caller's own cancellation (the fleet's hang on stop)."""
from __future__ import annotations

import asyncio

import pytest

from gputui.kube.tasks import cancel_and_wait, set_within

pytestmark = pytest.mark.asyncio


async def slow_to_end(ended: asyncio.Event) -> None:
    """A task whose cleanup takes a few turns after it is cancelled, like a reflector closing its stream."""
    try:
        await asyncio.Event().wait()
    finally:
        for _ in range(5):
            await asyncio.sleep(0)
        ended.set()


async def test_a_caller_cancelled_while_it_waits_is_cancelled_and_goes_no_further():
    ended, after = asyncio.Event(), []
    task = asyncio.create_task(slow_to_end(ended))
    await asyncio.sleep(0)  # it runs, and waits

    async def closing() -> None:
        await cancel_and_wait([task])
        after.append("ran on")  # the swallowed cancellation: the caller carries on as if nothing happened

    caller = asyncio.create_task(closing())
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # the caller now waits for the task to end
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert after == [] and caller.cancelled()
    await asyncio.wait_for(ended.wait(), 5)  # the task itself still ended


async def test_the_tasks_errors_are_given_back_and_their_cancellation_is_not_one():
    async def fails() -> None:
        raise ValueError("boom")

    failed = asyncio.create_task(fails())
    await asyncio.sleep(0)
    errors = await cancel_and_wait([failed, asyncio.create_task(asyncio.sleep(60)), None])
    assert [str(error) for error in errors] == ["boom"]
    assert await cancel_and_wait([]) == []


async def test_a_loop_woken_as_it_is_stopped_ends():
    """The DCGM poller's loop woke by the pods' first list in the very turn the app stopped it: with
    3.11's wait_for the wake-up won, the cancellation was lost, and the stop waited for good."""
    woken, turns = asyncio.Event(), []

    async def wakes_and_waits() -> None:
        while True:
            turns.append(await set_within(woken, 30))
            woken.clear()

    task = asyncio.create_task(wakes_and_waits())
    for _ in range(3):
        await asyncio.sleep(0)  # it waits
    woken.set()
    task.cancel()  # the same turn: the wake-up's and the stop's
    done, _ = await asyncio.wait([task], timeout=5)
    assert done == {task} and task.cancelled(), f"the loop ran on after its stop: {turns}"


async def test_set_within_says_whether_the_event_came():
    event = asyncio.Event()
    assert await set_within(event, 0.01) is False
    event.set()
    assert await set_within(event, 0.01) is True and await set_within(event, None) is True
