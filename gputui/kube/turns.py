"""Long runs of work in the event loop that the UI shares (a big list, every node's summary) give the
loop a turn every few milliseconds: timed, not counted, since a count of objects is too many big nodes
and too few small pods. Used as

    turns = Turns()
    for item in items:
        handle(item)
        if turns.due():
            await turns.take()

A turn lets every other ready task run once before this one goes on: with ten clusters syncing at
once, the UI waits for each of their runs in between. So the runs share the time between two of
the UI's turns: each is as long as TURN_AFTER divided among the runs that took a turn lately.
"""
from __future__ import annotations

import asyncio
import time

TURN_AFTER = 0.004  # seconds of work between two of the loop's turns, all runs together
SHORTEST_RUN = 0.0005  # a run never shorter: a turn costs about 10 µs
LATELY = 0.05  # a run that took a turn this recently shares the time

_last_turn: dict[int, float] = {}  # per run (its id), when it last took a turn


class Turns:
    __slots__ = ("_until",)

    def __init__(self) -> None:
        self._until = time.perf_counter() + TURN_AFTER

    def due(self) -> bool:
        return time.perf_counter() >= self._until

    async def take(self) -> None:
        me = id(self)
        _last_turn[me] = time.perf_counter()
        try:
            await asyncio.sleep(0)
        finally:
            now = time.perf_counter()
            for run, at in list(_last_turn.items()):
                if now - at > LATELY:
                    del _last_turn[run]
            _last_turn[me] = now
        self._until = now + max(SHORTEST_RUN, TURN_AFTER / len(_last_turn))
