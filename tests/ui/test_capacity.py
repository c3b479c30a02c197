"""The Capacity screen (`c`) on the fragmented scenario: the figures per resource, the stranded nodes named, `…`
while the pods are listed; a pending pod's reason follows the fit; snapshots at 80x24 and 120x40.

Update the snapshots with `python -m pytest tests/ui/test_capacity.py --snapshot-update` after a deliberate change.
"""
from __future__ import annotations

import re

import pytest

from gputui.sim.scenarios import fragmented
from gputui.ui.capacity import CapacityScreen
from gputui.ui.screens import TextScreen
from tests.ui.ui_helpers import (
    app_on,
    help_text,
    palette_titles,
    screen_text,
    start_cluster,
    wait_for,
)
from tests.ui.ui_scenario import NOW

GPU_ROW = ["gpu", "4", "3", "0", "0", "3", "8", "14"]  # N=1 2 4 8, LARGEST, FREE, STRANDED
STRANDED = [
    ["gpu", "h100-6", "8", "free", "NotReady"],
    ["h100-5", "4", "free", "cordoned"],
    ["h100-7", "2", "free", "taint", "example.com/reserved=team-a:NoSchedule"],
]


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster(fragmented.build(now=NOW), faults=True, speed=50)


async def open_capacity(pilot) -> CapacityScreen:
    app = pilot.app
    await wait_for(pilot, lambda: app.model is not None and app.model.fit() is not None and app.nodes_table.row_count == 9,
                   what="the nodes and pods listed")
    await pilot.press("c")
    screen = await wait_for(pilot, lambda: isinstance(app.screen, CapacityScreen) and app.screen, what="the Capacity screen")
    await wait_for(pilot, lambda: "STRANDED" in screen.text and "h100-7" in screen.text, what="the figures")
    await wait_for(pilot, lambda: "h100-7" in screen_text(app) and "Back" in screen_text(app), timeout=30,
                   what="the figures drawn")  # a loaded CI machine draws late
    await pilot.pause(0.1)
    return screen


def cells(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


async def test_figures_and_stranded_nodes(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_capacity(pilot)
        rows = cells(screen.text)
        assert GPU_ROW in rows
        assert ["mig-1g.10gb", "1", "1", "1", "0", "4", "4", "0"] in rows and ["mig-3g.40gb", "1", "1", "0", "0", "2", "2", "0"] in rows
        start = next(i for i, row in enumerate(rows) if row[:1] == ["gpu"] and "NotReady" in row)
        assert rows[start:start + 3] == STRANDED  # most free first, each with why; h100-4's nvidia.com/gpu taint strands nothing
        assert "h100-4" not in screen.text
        assert "14" in screen_text(app)  # what the terminal shows, not only the Text
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, CapacityScreen), what="back to the main screen")


async def test_the_key_is_in_the_help_and_the_palette(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.model is not None, what="the app to connect")
        assert re.search(r"\bc\s+capacity: nodes that could take a pod", await help_text(app, pilot))
        assert "Capacity" in palette_titles(app)


async def test_unknown_while_the_pods_are_listed(cluster):
    cluster.call(cluster.sim.faults.slow, "pods", 60.0)  # until cleared below: no race with a loaded machine
    try:
        app = app_on(cluster)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.model is not None and app.model.states["nodes"].synced, what="the nodes listed")
            assert not app.model.states["pods"].synced
            await pilot.press("c")
            screen = await wait_for(pilot, lambda: isinstance(app.screen, CapacityScreen) and app.screen, what="the Capacity screen")
            await wait_for(pilot, lambda: "not known until every pod is listed" in screen.text, what="the unknown figures")
            assert ["every", "resource", "…", "…", "…", "…", "…", "…", "…"] in cells(screen.text)
            assert not re.search(r"^gpu\s+\d", screen.text, re.M)  # no figure from the nodes alone
            cluster.call(cluster.sim.faults.clear, "pods")
            await wait_for(pilot, lambda: GPU_ROW in cells(screen.text), timeout=15, what="the figures once the pods are listed")
    finally:
        cluster.call(cluster.sim.faults.clear, "pods")


@pytest.fixture
def fresh_cluster():
    yield from start_cluster(fragmented.build(now=NOW), speed=50)


async def test_a_pending_pods_reason_follows_the_fit(fresh_cluster):
    """The gated pod is let go and bound to h100-1: the 4-GPU pod, unchanged itself, now reads 6 free, at most 2."""
    app = app_on(fresh_cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.model is not None and app.model.fit() is not None, what="the pods listed")
        await pilot.press("a")
        key = ("ml", "llm-train-4gpu")

        def reason() -> str:
            shown = app.pods_pane.view.get(key)
            return (shown[0].reason or "") if shown is not None else ""

        await wait_for(pilot, lambda: "8 free but at most 3 on any node" in reason(), what="the first fit line")

        def ungate(p: dict) -> None:
            p["spec"].pop("schedulingGates")

        fresh_cluster.call(fresh_cluster.sim.store.mutate, "pods", "ml", "queued-job-0", ungate)
        await wait_for(pilot, lambda: "6 free but at most 2 on any node: h100-2 2, h100-4 2, h100-1 1" in reason(),
                       what="the pending pod's reason to follow the fit")
        app.pods_table.move_cursor(row=app.pods_table.row_index("ml/llm-train-4gpu"))
        app.pods_table.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TextScreen), what="the whole reason")
        assert "needs 4 nvidia.com/gpu on one node; 6 free but at most 2 on any node" in app.screen.text


def test_capacity_screen_80x24(cluster, snap_compare):
    assert snap_compare(app_on(cluster), terminal_size=(80, 24), run_before=open_capacity)


def test_capacity_screen_120x40(cluster, snap_compare):
    assert snap_compare(app_on(cluster), terminal_size=(120, 40), run_before=open_capacity)
