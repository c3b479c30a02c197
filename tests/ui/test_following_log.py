"""Logs follow their end through a resize: a pane made smaller (the verification's verdict growing
under it, a smaller terminal) kept its scroll offset, and the last lines fell out of view."""
from __future__ import annotations

from textual.app import App, ComposeResult

from gputui.ui.widgets import PluginLog


class LogApp(App[None]):
    CSS = "PluginLog { height: 6; }"

    def compose(self) -> ComposeResult:
        yield PluginLog(id="log")


async def filled(app: LogApp, pilot) -> PluginLog:
    log = app.query_one(PluginLog)
    log.add_lines([f"line {i}" for i in range(20)])
    await pilot.pause()
    return log


async def test_a_log_made_smaller_still_shows_its_last_line_and_follows_new_ones():
    app = LogApp()
    async with app.run_test(size=(40, 12)) as pilot:
        log = await filled(app, pilot)
        log.styles.height = 3
        await pilot.pause()
        assert log.is_vertical_scroll_end and log.scroll_y == log.max_scroll_y > 0
        log.add_lines(["a new line"])
        await pilot.pause()
        assert log.is_vertical_scroll_end


async def test_a_log_scrolled_back_by_the_reader_stays_where_it_was():
    app = LogApp()
    async with app.run_test(size=(40, 12)) as pilot:
        log = await filled(app, pilot)
        log.scroll_to(y=2, animate=False)
        await pilot.pause()
        log.styles.height = 3
        await pilot.pause()
        assert log.scroll_y == 2
