"""Health on the main screen: XIDs read in the background reach the Nodes pane and the header
without opening node details; a health monitor's condition is named in the VERDICT cell."""
from __future__ import annotations

import pytest

from gputui.sim.scenarios import stacks
from tests.ui.ui_helpers import app_on, screen_text, start_cluster, wait_for


@pytest.fixture(scope="module")
def cluster():
    objects = stacks.xid_injected()
    for obj in objects:
        if obj["kind"] == "Node" and obj["metadata"]["name"] == "gpu-2":
            obj["status"]["conditions"].append({
                "type": "GpuMemWatch", "status": "True", "reason": "GpuMemWatchIsNotHealthy",
                "message": "ErrorCode:DCGM_FR_VOLATILE_DBE_DETECTED",
            })
    yield from start_cluster(objects)


def row(text: str, node: str) -> str:
    return next(line for line in text.splitlines() if f" {node} " in line and ("Ready" in line or "Cordoned" in line))


async def test_xids_and_conditions_on_the_main_screen_without_details(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.model is not None and app.nodes_table.row_count >= 3, what="nodes")
        await wait_for(pilot, lambda: "XID errors" in row(screen_text(app), "gpu-1"), what="gpu-1's XID verdict", timeout=15)
        await wait_for(pilot, lambda: "XID errors" in row(screen_text(app), "gpu-2"), what="gpu-2's XID verdict", timeout=15)
        assert not app.model.metrics.wanted  # no details screen asked for metrics
        text = screen_text(app)
        assert "✗ XID errors" in row(text, "gpu-1")
        assert "✗ XID errors, GpuMemWatch" in row(text, "gpu-2")  # worst first, the condition named
        await wait_for(pilot, lambda: "✗ XID: 2 nodes" in screen_text(app), what="the header's XID count")
        text = screen_text(app)
        assert "✗ health: 1 node" in text and "DCGM 2/2 read" in text


async def test_the_alarms_lead_the_header_whole_at_every_width(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "✗ XID: 2 nodes" in screen_text(app), what="the header's XID count", timeout=15)
        for width, height in ((80, 24), (120, 40), (80, 24)):  # packed again after each resize
            await pilot.resize_terminal(width, height)
            await wait_for(pilot, lambda width=width: app.size.width == width and app.main_layout.laid_out == (width < 100, width), what="the new layout")
            await pilot.pause(0.2)
            first_line = screen_text(app).splitlines()[0]
            assert first_line.lstrip().startswith("✗ XID: 2 nodes"), first_line
            assert "✗ health: 1 node" in first_line and len(first_line.rstrip()) <= width
