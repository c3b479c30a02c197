"""The one token bucket of exporter reads (kube/metrics.py's ReadBudget): the app's background reads and
`gputui report` take their reads from it."""
from __future__ import annotations

from gputui.kube.metrics import ReadBudget


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_the_rate():
    clock = Clock()
    budget = ReadBudget(per_minute=60, burst=3, clock=clock)  # a read a second, 3 at once
    for _ in range(3):
        assert budget.wait() == 0
        budget.take()
    assert budget.wait() == 1.0  # the fourth waits for a token
    clock.now += 0.5
    assert budget.wait() == 0.5
    clock.now += 0.5
    assert budget.wait() == 0
    budget.take()
    clock.now += 3600  # a quiet hour fills the bucket to its burst, no more
    for _ in range(3):
        assert budget.wait() == 0
        budget.take()
    assert budget.wait() > 0


def test_the_burst_is_never_more_than_a_minute_of_reads():
    clock = Clock()
    budget = ReadBudget(per_minute=2, burst=8, clock=clock)
    budget.take()
    budget.take()
    assert budget.wait() == 30.0
