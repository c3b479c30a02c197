"""Ending background tasks without losing the caller's own cancellation.

The usual `task.cancel(); try: await task except CancelledError: pass` cannot tell the task's
cancellation from the caller's: when the caller is itself cancelled while it waits (a fleet member
stopped while it closes its model), the caller's CancelledError is swallowed and it runs on, and
whoever cancelled it waits for good. `cancel_and_wait` waits with `asyncio.wait`, which raises only
the caller's own cancellation and leaves the tasks' outcomes to read.

Python 3.11's `asyncio.wait_for` loses a cancellation the same way: when what it waits for ends in the
loop turn the caller is cancelled in, it returns the result and the caller runs on (fixed in 3.12, where
it is built on `asyncio.timeout`). A loop that waits for an event with a timeout then never ends, and
its stop() waits for good (a DCGM poller woken by the pods' first list as the app stopped). gputui
waits with `asyncio.timeout` instead, as `set_within` does, and a test keeps `wait_for` out.
"""
from __future__ import annotations

import asyncio
from typing import Iterable


async def set_within(event: asyncio.Event, seconds: float | None) -> bool:
    """Wait until the event is set or the seconds pass (None: no limit); whether it was set."""
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True


async def cancel_and_wait(tasks: Iterable[asyncio.Task | None]) -> list[BaseException]:
    """Cancel the tasks and wait until each has ended; the errors they ended with, other than their
    cancellation. Raises CancelledError only when the caller itself is cancelled meanwhile."""
    running = [task for task in tasks if task is not None]
    for task in running:
        task.cancel()
    if running:
        await asyncio.wait(running)
    return [error for task in running if not task.cancelled() and (error := task.exception()) is not None]
