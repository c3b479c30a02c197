"""Ending background tasks without losing the caller's own cancellation.

The usual `task.cancel(); try: await task except CancelledError: pass` cannot tell the task's
cancellation from the caller's: when the caller is itself cancelled while it waits (a fleet member
stopped while it closes its model), the caller's CancelledError is swallowed and it runs on, and
whoever cancelled it waits for good. `cancel_and_wait` waits with `asyncio.wait`, which raises only
the caller's own cancellation and leaves the tasks' outcomes to read.
"""
from __future__ import annotations

import asyncio
from typing import Iterable


async def cancel_and_wait(tasks: Iterable[asyncio.Task | None]) -> list[BaseException]:
    """Cancel the tasks and wait until each has ended; the errors they ended with, other than their
    cancellation. Raises CancelledError only when the caller itself is cancelled meanwhile."""
    running = [task for task in tasks if task is not None]
    for task in running:
        task.cancel()
    if running:
        await asyncio.wait(running)
    return [error for task in running if not task.cancelled() and (error := task.exception()) is not None]
