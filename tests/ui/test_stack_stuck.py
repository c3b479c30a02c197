"""The GPU stack screen on the simulator's `stuck` scenario, in the app (issue 24): every stuck finding (mig-stuck,
driver-upgrade-stuck, left-cordoned, compute-domain-not-ready) listed above the matrix with how long it has been so."""
from __future__ import annotations

import time

import pytest

from gputui.sim.scenarios import stuck
from tests.ui.test_stack_ui import open_stack
from tests.ui.ui_helpers import app_on, screen_text, start_cluster, wait_for


@pytest.fixture(scope="module")
def stuck_cluster():
    # Static (no controllers): the states stay as the scenario wrote them, dated from now (the model judges by the wall clock).
    yield from start_cluster(stuck.build(), run_controllers=False)


async def test_the_stack_screen_lists_each_stuck_finding_with_its_age(stuck_cluster):
    app = app_on(stuck_cluster, clock=time.time)
    async with app.run_test(size=(160, 50)) as pilot:
        await open_stack(app, pilot)
        await wait_for(pilot, lambda: "nvs-1:" in screen_text(app), what="the last stuck finding")
        lines = [line.strip() for line in screen_text(app).splitlines()]
        assert any(line.startswith("✗ ComputeDomain ml/nvl-train NotReady since before gputui's first look, created 120m ago")
                   for line in lines)  # compute-domain-not-ready, with the nodes that did not join
        assert any("did not join: nvl-3" in line for line in lines)
        assert "✗ mig-1: the MIG manager failed to apply MIG config all-1g.10gb (nvidia.com/mig.config.state=failed) since " \
               "before gputui's first look" in lines  # mig-stuck: no age to judge before the first look, and it says so
        assert any(line.startswith("✗ mig-1: operands paused for a MIG change with none under way") for line in lines)
        assert "✗ up-1: the GPU driver upgrade is in wait-for-jobs-required (nvidia.com/gpu-driver-upgrade-state=" \
               "wait-for-jobs-required) for 120m" in lines  # driver-upgrade-stuck, aged from the controller's own start time
        assert any(line.startswith("✗ up-2: the GPU driver upgrade failed") for line in lines)
        assert ("! nvs-1: cordoned by NVSentinel for GpuMemWatch (GPU-fatal-error-ruleset), its health conditions healthy again: "
                "left cordoned for 120m") in lines


async def test_at_80x24_the_findings_that_do_not_fit_are_counted_and_f_lists_them_all(stuck_cluster):
    app = app_on(stuck_cluster, clock=time.time)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_stack(app, pilot)
        await wait_for(pilot, lambda: "up-2:" in app.screen.text, what="every stuck finding in the model")
        await pilot.pause()
        lines = [line.strip() for line in screen_text(app).splitlines()]
        assert "nvs-1:" not in screen_text(app)  # 80x24 cannot hold them all: the last are cut ...
        more = [line for line in lines if line.startswith("… ")]
        assert more == ["… 4 more not shown · f: every finding"]  # ... and say how many, and the key (mig-1's 2nd, nvs-1, up-1, up-2)
        assert lines.index(more[0]) < next(i for i, line in enumerate(lines) if line.startswith("NODE "))  # above the matrix
        await pilot.press("f")
        await wait_for(pilot, lambda: "! nvs-1: cordoned by NVSentinel" in screen_text(app), what="the whole list")
        await pilot.press("end")  # it scrolls, on to the last
        await wait_for(pilot, lambda: "up-2: the GPU driver upgrade failed" in screen_text(app), what="the list's end")
        await pilot.press("escape")
        await wait_for(pilot, lambda: "NODE " in screen_text(app), what="back on the matrix")
