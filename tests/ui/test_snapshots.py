"""Snapshots of the main screen (120x40 and 80x24) and of node details, on a fixed scenario and clock.

Update them with `python -m pytest tests/ui/test_snapshots.py --snapshot-update` after a deliberate change.
"""
from __future__ import annotations

import pytest

from tests.ui.ui_helpers import app_on, screen_text, start_cluster, wait_for
from tests.ui.ui_scenario import gpu_cluster, plugin_pod_name

FIXED_LOG = [
    b"I0512 12:00:00.000000       1 main.go:317] Retreiving plugins.",
    b"I0512 12:00:00.000000       1 server.go:216] Starting GRPC server for 'nvidia.com/gpu'",
    b"I0512 12:00:00.000000       1 server.go:154] Registered device plugin for 'nvidia.com/gpu' with Kubelet",
]


@pytest.fixture(scope="module")
def cluster():
    # No crash-looping plugin: nothing in this cluster changes by itself.
    yield from start_cluster(gpu_cluster(crash_loop=False))


async def settled(pilot) -> None:
    app = pilot.app
    await wait_for(pilot, lambda: app.model is not None, what="the app to connect")
    await wait_for(pilot, lambda: app.nodes_table.row_count == 5, what="the nodes")
    # At start the pods pane shows the work held back (a pending pod) first, then the cursor node's GPU pods
    # (a100-1 has one), as the plugin pane shows a100-1's plugin.
    await wait_for(pilot, lambda: app.selected_node == "a100-1"
                   and app.pods_table.shown_keys == ["ml-training/llm-pretrain-0", "ml-training/finetune-a100-0"],
                   what="the pending pod and a100-1's GPU pods")
    await wait_for(pilot, lambda: "watches live" in screen_text(app) and app.server_version, what="live watches")
    await wait_for(pilot, lambda: plugin_pod_name("a100-1") in screen_text(app), what="plugin pod")
    await wait_for(pilot, lambda: any("Registered device plugin" in line for line in app.plugin_log.lines), what="plugin log")
    # The simulated kubelet stamps log lines with the time it wrote them: stop the
    # stream and show fixed lines, so the picture does not change from run to run.
    app.workers.cancel_group(app, "plugin-log")
    await pilot.pause()
    app.plugin_log.clear()
    app.plugin_log.add_lines(FIXED_LOG)
    await pilot.pause(0.3)


def test_main_screen_120x40(cluster, snap_compare):
    assert snap_compare(app_on(cluster), terminal_size=(120, 40), run_before=settled)


def test_main_screen_80x24(cluster, snap_compare):
    assert snap_compare(app_on(cluster), terminal_size=(80, 24), run_before=settled)


def test_node_details(cluster, snap_compare):
    async def open_details(pilot) -> None:
        await settled(pilot)
        pilot.app.jump_to_node("h100-mig-1")
        await pilot.press("enter")
        await pilot.pause(0.2)

    assert snap_compare(app_on(cluster), terminal_size=(120, 40), run_before=open_details)


def test_main_screen_80x24_no_color(cluster, snap_compare, monkeypatch):
    # NO_COLOR: the problem words stand out by weight and symbols, the cursor row and the focused pane
    # by reverse and a heavy border (gputui/ui/colour.py, the :nocolor rules of the stylesheet).
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(app_on(cluster), terminal_size=(80, 24), run_before=settled)
