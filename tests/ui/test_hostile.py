"""Hostile strings (markup, ANSI, control characters, huge lines, invalid UTF-8) show literally, without errors."""
from __future__ import annotations

import pytest

from gputui.ui.screens import NodeDetailsScreen, TextScreen
from tests.ui.ui_helpers import (
    app_on,
    screen_text,
    show_all_pods,
    start_cluster,
    wait_for,
)
from tests.ui.ui_scenario import (
    HOSTILE,
    HOSTILE_LOG_LINES,
    PLUGIN_CONTAINER,
    PLUGIN_NS,
    hostile_cluster,
    plugin_pod_name,
)


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster(hostile_cluster())


async def test_hostile_text_renders_literally(cluster):
    for raw in HOSTILE_LOG_LINES:
        cluster.call(cluster.sim.logs.append, PLUGIN_NS, plugin_pod_name("a100-1"), PLUGIN_CONTAINER, raw)
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await show_all_pods(pilot, 6)
        await wait_for(pilot, lambda: any("bidi" in line for line in app.plugin_log.lines), what="the hostile log lines")
        await pilot.pause(0.2)
        text = screen_text(app)
        # A pod name with markup, shown as typed (cut to its column with `…`, whole for the filter).
        from gputui.ui.table import haystack
        names = [haystack(app.pods_table.get_row(key)[0]) for key in app.pods_table.shown_keys]
        assert any(name.endswith("/evil-[bold red]pwned[/]") for name in names), names
        assert "/evil-[bol…d]pwned[/]" in text  # literal brackets, cut in the middle
        assert "\x1b" not in text and "\x07" not in text

        lines = app.plugin_log.lines
        assert "[bold red]not markup[/] red" in lines
        assert "ctrl ^@^G^H done" in lines
        assert "bad utf-8 \ufffd\ufffd\ufffd end" in lines
        long_line = next(line for line in lines if line.startswith("yyyy"))
        assert len(long_line) < 5000 and long_line.endswith("[line cut: 1,048,576 bytes]")
        assert all("\x1b" not in line for line in lines)

        app.pods_table.focus()
        app.pods_table.move_cursor(row=app.pods_table.shown_keys.index("ml-training/pend-[link=http://x]click[/link]"))
        await pilot.press("enter")
        assert isinstance(app.screen, TextScreen)
        assert "[link=http://x]click[/link]" in app.screen.text
        await pilot.press("escape")

        app.jump_to_node("a100-2")  # its node event has markup and controls
        await pilot.press("enter")
        assert isinstance(app.screen, NodeDetailsScreen)
        assert "[i]node[/i] ^G^H\ufffd message" in app.screen.text
        await pilot.pause(0.1)
        assert "\x1b" not in screen_text(app)
        await pilot.press("escape", "q")
    assert app.return_code == 0


def test_hostile_scenario_really_is_hostile():
    assert "[" in HOSTILE["pod_name"] and "\x1b" in HOSTILE["label"] and len(HOSTILE["reason"]) > 4096
