"""Every log view's keys (keys.LOG_KEYS): `w` wraps long lines and unwraps them, ← → scroll half the
width, home / end jump to the first / last line. Lines stay text: brackets are not markup."""
from __future__ import annotations

from textual.app import App, ComposeResult

from gputui.ui import keys
from gputui.ui.app import GpuTuiApp, MainScreen
from gputui.ui.widgets import PluginLog

LONG = "".join(f"{i:03d}[b]x" for i in range(40))  # 200 characters, brackets that must stay brackets


class LogApp(App[None]):
    CSS = "PluginLog { height: 8; width: 60; }"

    def compose(self) -> ComposeResult:
        yield PluginLog(id="log")


async def check_log_keys(pilot, log: PluginLog) -> None:
    """The keys on a focused log whose last line is LONG (shared by each view's test)."""
    log.focus()
    await pilot.pause()
    width = log.scrollable_content_region.width
    assert LONG in log.lines and log.max_scroll_x > 0
    await pilot.press("right")
    assert log.scroll_x == width // 2
    await pilot.press("right", "left", "left")
    assert log.scroll_x == 0
    rows = len(log.lines)
    await pilot.press("w")
    wrapped_rows = -(-len(LONG) // width)
    assert LONG not in log.lines and "".join(log.lines[-wrapped_rows:]) == LONG  # wrapped at the width
    assert len(log.lines) > rows and max(len(line) for line in log.lines) <= width and log.max_scroll_x == 0
    assert log.is_vertical_scroll_end  # still following
    await pilot.press("w")
    assert LONG in log.lines and len(log.lines) == rows
    await pilot.press("home")
    assert log.scroll_offset == (0, 0)
    await pilot.press("end")
    assert log.is_vertical_scroll_end


async def test_a_long_line_wraps_with_w_scrolls_half_a_width_and_home_end_jump():
    app = LogApp()
    async with app.run_test(size=(80, 20)) as pilot:
        log = app.query_one(PluginLog)
        log.add_lines([f"line {i}" for i in range(30)] + [LONG])
        await check_log_keys(pilot, log)


async def test_wrapped_lines_are_wrapped_again_at_a_new_width_and_new_lines_wrap_too():
    app = LogApp()
    async with app.run_test(size=(80, 20)) as pilot:
        log = app.query_one(PluginLog)
        log.add_lines([LONG])
        log.focus()
        await pilot.press("w")
        before = len(log.lines)
        log.styles.width = 30
        await pilot.pause()
        assert len(log.lines) > before and max(len(line) for line in log.lines) <= log.scrollable_content_region.width
        log.add_lines(["short", LONG])
        await pilot.pause()
        assert "short" in log.lines and LONG not in log.lines
        await pilot.press("w")
        assert list(log.lines) == [LONG, "short", LONG]


def test_the_help_names_the_log_keys():
    lines = {what: shown for shown, what in keys.help_lines(App(), [*GpuTuiApp.BINDINGS, *MainScreen.BINDINGS, *keys.bindings(keys.LOG_KEYS)])}
    assert lines["logs: half a screen sideways"] == "←  →"
    assert lines["logs: wrap long lines / one row each (w again)"] == "w"
