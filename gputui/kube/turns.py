"""Long runs of work in the event loop that the UI shares (a big list, every node's summary) give the
loop a turn every few milliseconds: timed, not counted, since a count of objects is too many big nodes
and too few small pods. Used as

    turns = Turns()
    for item in items:
        handle(item)
        if turns.due():
            await turns.take()
"""
from __future__ import annotations

import asyncio
import time

TURN_AFTER = 0.004  # seconds of work between two turns given to the loop: ten clusters syncing at once stay responsive


class Turns:
    __slots__ = ("_until",)

    def __init__(self) -> None:
        self._until = time.perf_counter() + TURN_AFTER

    def due(self) -> bool:
        return time.perf_counter() >= self._until

    async def take(self) -> None:
        await asyncio.sleep(0)
        self._until = time.perf_counter() + TURN_AFTER
