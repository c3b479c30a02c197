"""Runs that give the loop its turns share the time between two of the UI's turns: with several runs
at once (ten clusters syncing), each runs for its share of TURN_AFTER, not for TURN_AFTER each."""
from __future__ import annotations

import asyncio
import time

from gputui.kube import turns as t


async def taken(runs: list[t.Turns]) -> tuple[float, float]:
    """Every run takes a turn at once; (before, after) those turns, so that each run, gone on in
    between with L to run, has `before + L <= run._until <= after + L` whatever the machine's load."""
    before = time.perf_counter()
    await asyncio.gather(*(run.take() for run in runs))
    return before, time.perf_counter()


async def test_one_run_alone_runs_for_the_whole_time():
    await asyncio.sleep(t.LATELY * 2)  # runs of earlier tests no longer count
    alone = t.Turns()
    before, after = await taken([alone])
    assert before + t.TURN_AFTER <= alone._until <= after + t.TURN_AFTER


async def test_four_runs_at_once_share_it_and_get_it_back_when_the_others_end():
    await asyncio.sleep(t.LATELY * 2)
    runs = [t.Turns() for _ in range(4)]
    before, after = await taken(runs)
    assert all(before + t.TURN_AFTER / 4 <= run._until <= after + t.TURN_AFTER / 4 for run in runs)

    await asyncio.sleep(t.LATELY * 2)  # the other three have ended
    before, after = await taken(runs[:1])
    assert before + t.TURN_AFTER <= runs[0]._until <= after + t.TURN_AFTER


async def test_many_runs_never_go_below_the_shortest():
    await asyncio.sleep(t.LATELY * 2)
    runs = [t.Turns() for _ in range(100)]  # TURN_AFTER / 100 would be shorter than a turn is worth
    before, after = await taken(runs)
    assert all(before + t.SHORTEST_RUN <= run._until <= after + t.SHORTEST_RUN for run in runs)
