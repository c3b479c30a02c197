"""Snapshots of every main screen (the main screen, node details, every GPU pod) at 120x40 and 80x24, and of
the main screen without colour (NO_COLOR) and in 16 colours (TERM=xterm), on a fixed scenario and clock;
and checks that in 16 colours no word is drawn in its own background, and without colour no warning is
fainter than normal text.

Update them with `python -m pytest tests/ui/test_snapshots.py --snapshot-update` after a deliberate change.
"""
from __future__ import annotations

import pytest
from textual.color import Color

from gputui.ui.screens import NodeDetailsScreen
from tests.ui.ui_helpers import app_on, in_sixteen_colours, screen_segments, screen_text, sixteen_colour_svg, start_cluster, wait_for
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


async def open_details(pilot) -> None:
    await settled(pilot)
    pilot.app.jump_to_node("a100-2")  # cordoned, its plugin missing, its GPUs not all healthy: conditions, taints, events
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, NodeDetailsScreen), what="node details")
    await pilot.pause(0.2)


async def all_pods(pilot) -> None:
    await settled(pilot)
    pilot.app.pods_table.focus()
    await pilot.press("a")
    await wait_for(pilot, lambda: pilot.app.pods_all_nodes and len(pilot.app.pods_table.shown_keys) == 6, what="every GPU pod")
    await pilot.pause(0.2)


def test_node_details_80x24(cluster, snap_compare):
    # The Resources table's columns as wide as their content; a condition's message under it, not wrapped anyhow.
    async def at_resources(pilot) -> None:
        await open_details(pilot)
        for _ in range(60):  # a line at a time, until the Resources table leads the page
            if "Resources" in screen_text(pilot.app).splitlines()[0]:
                break
            await pilot.press("down")
        await pilot.pause(0.2)
        assert "Resources" in screen_text(pilot.app).splitlines()[0]

    assert snap_compare(app_on(cluster), terminal_size=(80, 24), run_before=at_resources)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
def test_all_gpu_pods(cluster, snap_compare, size):
    assert snap_compare(app_on(cluster), terminal_size=size, run_before=all_pods)


def sixteen_colour_app(cluster):
    """The app as on a 16-colour terminal (TERM=xterm)."""
    app = app_on(cluster)
    app.colour_system = "standard"
    app.export_screenshot = lambda title=None, simplify=False: sixteen_colour_svg(app, title, simplify)
    return app


def test_main_screen_80x24_16_colours(cluster, snap_compare):
    assert snap_compare(sixteen_colour_app(cluster), terminal_size=(80, 24), run_before=settled)


def unreadable(segments) -> list[str]:
    """Text drawn in the colour of its own background."""
    out = []
    for text, style, _ in segments:
        if style is None or not text.strip() or style.color is None or style.bgcolor is None:
            continue
        if any("\u2500" <= ch <= "\u259f" for ch in text):  # borders, bars, scrollbars: drawing, not words
            continue
        fg, bg = (style.bgcolor, style.color) if style.reverse else (style.color, style.bgcolor)
        if fg.get_truecolor() == bg.get_truecolor():
            out.append(text)
    return out


async def test_every_main_screen_reads_in_16_colours(cluster):
    app = sixteen_colour_app(cluster)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        assert app.has_class("-ansi16")
        main = in_sixteen_colours(screen_segments(app))
        assert unreadable(main) == []
        live = [s for s in main if s.text.strip() == "live"]
        assert live and live[0].style.color.number == 2  # the terminal's green, not bright black on bright black
        crosses = [s for s in main if s.text.startswith("✗")]
        assert crosses and {s.style.color.number for s in crosses} <= {1, 9}  # red, not magenta
        await all_pods(pilot)
        assert unreadable(in_sixteen_colours(screen_segments(app))) == []
        await pilot.press("escape", "a")
        app.nodes_table.focus()
        await open_details(pilot)
        assert unreadable(in_sixteen_colours(screen_segments(app))) == []


async def test_warnings_keep_the_contrast_of_text_without_colour(cluster, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = app_on(cluster)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        normal = Color.parse(app.current_theme.foreground).monochrome.brightness
        warnings = [s for s in screen_segments(app) if s.text.strip().startswith(("Pending", "Cordoned", "0/5 nodes"))]
        assert len(warnings) >= 3
        for segment in warnings:
            assert Color.from_rich_color(segment.style.color).brightness >= normal - 0.01, segment
