"""Keys declared once (ui/keys.py): the help is generated from the bindings, a screen's palette entry and
help line come from its key, and ctrl+c quits from every screen and modal."""
from __future__ import annotations

import pytest
from textual.app import App
from textual.binding import Binding
from textual.command import CommandPalette

from gputui.ui import keys
from gputui.ui.app import GpuTuiApp, MainScreen
from gputui.ui.capacity import CapacityScreen
from gputui.ui.screens import HelpScreen, NodeDetailsScreen, TextScreen
from tests.ui.ui_helpers import app_on, palette_titles, start_cluster, wait_for
from tests.ui.ui_scenario import gpu_cluster


def test_every_binding_with_words_is_a_help_line_and_one_added_the_plain_way_too():
    app = App()
    extra = Binding("h", "app.health", "Health", tooltip="health: every node's GPU health at a glance")
    lines = dict((what, shown) for shown, what in keys.help_lines(app, [*MainScreen.BINDINGS, *GpuTuiApp.BINDINGS, extra]))
    assert lines["health: every node's GPU health at a glance"] == "h"
    assert lines[keys.QUIT_HELP] == "q  ^c"  # one line, both keys
    assert lines[keys.PALETTE_HELP] == "^p  :"
    for key in (*keys.MAIN_KEYS, *keys.APP_KEYS):
        assert key.help in lines, key
    assert dict(keys.help_lines(app, [Binding("x", "app.x", "Something")]))  # a binding with a description only
    assert ("x", "Something") in keys.help_lines(app, [Binding("x", "app.x", "Something")])


def test_each_screen_key_has_a_help_line_and_its_palette_entry_says_the_same():
    screens = [key for key in keys.MAIN_KEYS if key.palette]
    assert {"app.stack", "app.local_gpus", "app.capacity", "app.idle", "app.queues"} <= {key.action for key in screens}
    for key in screens:
        assert key.help and key.action.removeprefix("app.") in {name.removeprefix("action_") for name in dir(GpuTuiApp)}


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster(gpu_cluster(crash_loop=False))


async def _main(app, pilot) -> None:
    await wait_for(pilot, lambda: app.nodes_table.row_count == 5 and app.selected_node, what="the nodes")


async def _help(app, pilot) -> None:
    await pilot.press("question_mark")
    await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")


async def _palette(app, pilot) -> None:
    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="the palette")


async def _pod_popup(app, pilot) -> None:
    await wait_for(pilot, lambda: "ml-training/llm-pretrain-0" in app.pods_table.shown_keys, what="the pending pod")
    app.pods_table.move_cursor(row=app.pods_table.row_index("ml-training/llm-pretrain-0"))
    app.pods_table.focus()
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, TextScreen), what="the popup")


async def _capacity(app, pilot) -> None:
    await pilot.press("c")
    await wait_for(pilot, lambda: isinstance(app.screen, CapacityScreen), what="capacity")


async def _details(app, pilot) -> None:
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, NodeDetailsScreen), what="node details")


async def _filter(app, pilot) -> None:
    await pilot.press("slash", "a")
    await wait_for(pilot, lambda: app.nodes_table.filter_text == "a", what="the filter typed")


@pytest.mark.parametrize("where", [_help, _palette, _pod_popup, _capacity, _details, _filter], ids=lambda f: f.__name__.strip("_"))
async def test_ctrl_c_quits_from_every_screen_and_modal(cluster, where):
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await _main(app, pilot)
        await where(app, pilot)
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: not app.is_running, what="the app to quit")
    assert app.return_code == 0


async def test_the_help_and_the_palette_offer_every_screen(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(120, 60)) as pilot:
        await _main(app, pilot)
        await _help(app, pilot)
        shown = [what for _, what in app.screen.lines]
        await pilot.press("escape")
        titles = palette_titles(app)
        for key in keys.MAIN_KEYS:
            assert key.help in shown, key.help
            if key.palette and key.action != "app.queues":  # Kueue is not installed here
                assert key.palette in titles
        assert "Queues (Kueue)" not in titles
