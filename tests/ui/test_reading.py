"""Finding and reading (issues 10 and 11): the filter on full values, the panes following the visible
cursor, long and wide strings kept in their column, NO_COLOR and 16 colours, keys, empty states, the
header while the connection is down."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.command import CommandPalette

from gputui.kube import gpu
from gputui.kube.watch import RETRYING, ResourceState
from gputui.ui.colour import ReadableMonochrome
from gputui.ui.panes import node_columns, other_cell, pod_columns
from gputui.ui.header import watch_states
from gputui.ui.screens import HelpScreen, NodeDetailsScreen
from gputui.ui.table import fit, haystack
from gputui.ui.verify.confirm import ConfirmVerifyScreen
from tests.ui.ui_helpers import (
    app_on,
    screen_text,
    show_all_pods,
    start_cluster,
    wait_for,
)
from tests.ui.ui_scenario import gpu_cluster

NODES = ["a100-1", "a100-2", "h100-mig-1", "t4-shared-1", "cpu-1"]
LONG = ("n" * 62 + ".") * 4  # 252 characters: with the names below, node names of 253 and more
# a long prefix, and one of wide characters (no DNS name has them, but labels and events do: measured as cells)


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster(gpu_cluster(crash_loop=False))


async def started(app, pilot):
    await wait_for(pilot, lambda: app.nodes_table.row_count == len(NODES), what="the nodes")
    await show_all_pods(pilot, 6)


def status_of(app, pane: str) -> str:
    return str(app._main(f"#{pane}").border_subtitle or "")


async def test_filter_reads_full_values_and_the_panes_follow_the_visible_cursor(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        # The model column shows `A100 80G`; the filter reads the whole GFD product.
        assert "SXM4" not in app.nodes_table.get_row("a100-1")[-1].plain
        await pilot.press("slash", *"sxm4")
        assert app._main("#filter").display  # the filter line shows while typing
        await wait_for(pilot, lambda: app.nodes_table.shown_keys == ["a100-1", "a100-2"], what="filtered on the model")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.nodes_table.row_count == len(NODES), what="unfiltered")

        # The bug: the cursor on a100-2 (cordoned), a filter hides it; v acted on the hidden row.
        await pilot.press("j")
        await wait_for(pilot, lambda: app.selected_node == "a100-2", what="a100-2 selected")
        await pilot.press("slash", *"mig", "enter")
        await wait_for(pilot, lambda: app.nodes_table.shown_keys == ["h100-mig-1"], what="filtered")
        await wait_for(pilot, lambda: app.selected_node == "h100-mig-1", what="the selection to follow the cursor")
        await wait_for(pilot, lambda: "Device plugin · h100-mig-1" in screen_text(app), what="the plugin pane to follow")
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmVerifyScreen), what="the confirmation")
        assert [plan.node for plan in app.screen.plans] == ["h100-mig-1"]
        await pilot.press("n")
        await pilot.pause(0.1)

        # Verdict words: a100-2's are `! cordoned`-like words, matched whole.
        await pilot.press("slash", *"zzz")
        await wait_for(pilot, lambda: "no node matches 'zzz'" in status_of(app, "nodes"), what="no match said in the pane")
        assert app.selected_node is None
        assert "no node selected" in screen_text(app)
        await pilot.press("escape")  # clears the filter
        await wait_for(pilot, lambda: app.nodes_table.row_count == len(NODES), what="unfiltered")
        await pilot.press("slash", *"unhealthy")  # a100-2's verdict, in words
        await wait_for(pilot, lambda: app.nodes_table.shown_keys == ["a100-2"], what="filtered on the verdict words")
        await pilot.press("enter")
        await pilot.press("escape")  # clearing the filter keeps the selected row
        await wait_for(pilot, lambda: app.nodes_table.row_count == len(NODES), what="unfiltered")
        assert app.nodes_table.cursor_key == "a100-2" and app.selected_node == "a100-2"


async def test_keys_focus_quit_palette_footer_and_help(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(app, pilot)
        assert "v Verify" in screen_text(app) and "Fleet" not in screen_text(app)  # esc's way back only in a fleet
        await pilot.press("tab")
        assert app.focused is app.pods_table
        await pilot.press("l")
        assert app.screen.maximized is not None
        await pilot.press("escape")
        assert app.screen.maximized is None and app.focused is app.pods_table  # back to the pane it left

        await pilot.press("colon")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="the palette")
        await pilot.press("escape")
        await pilot.pause(0.1)

        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        scroll = app.screen.query_one("VerticalScroll")
        assert scroll.max_scroll_y > 0  # taller than 24 lines
        await pilot.press("pagedown")
        await pilot.pause(0.1)
        assert scroll.scroll_y > 0
        await pilot.press("escape")

        await pilot.press("ctrl+c")
        await pilot.pause(0.2)
    assert app.return_code == 0


async def test_empty_states(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(app, pilot)
        app.jump_to_node("cpu-1")
        await wait_for(pilot, lambda: app.selected_node == "cpu-1", what="cpu-1")
        await pilot.press("a")  # from all nodes to cpu-1's: the pending pod still shows first, and the pane says the rest
        await wait_for(pilot, lambda: "no GPU pods on this node" in status_of(app, "pods"), what="the empty pods pane said")
        assert app.pods_table.shown_keys == ["ml-training/llm-pretrain-0"]
        await pilot.press("enter")
        assert isinstance(app.screen, NodeDetailsScreen)
        assert "no GPU pods on this node" in app.screen.text and "no events" in app.screen.text


async def test_no_color_problem_words_keep_normal_contrast(cluster, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = app_on(cluster)
    assert any(isinstance(f, ReadableMonochrome) for f in app.get_line_filters())
    dark = Color.parse("#262626")
    normal = Style(color="#e0e0e0")
    [bad] = ReadableMonochrome("#e0e0e0").apply([Segment("✗ not ready", Style.parse("bold red"))], dark)
    [plain] = ReadableMonochrome("#e0e0e0").apply([Segment("Ready", normal)], dark)

    def contrast(style: Style) -> float:
        return abs(Color.from_rich_color(style.color).brightness - dark.brightness)

    assert bad.style.bold and contrast(bad.style) >= contrast(plain.style) - 1e-6


def test_long_and_wide_strings_stay_in_their_column():
    for value in ("日本語のノード名" * 5, "🚀" * 40, "x" * 253):
        cell = fit(value, 20)
        assert cell.cell_len <= 20 and cell.plain.endswith("…") and haystack(cell) == value
    for width in (100, 120, 200):  # every column fits: no horizontal scrolling
        for columns in (node_columns(False, width), pod_columns(False, width)):
            assert sum(c.width + 2 for c in columns) + 3 <= width
    for columns in (node_columns(True, 80), pod_columns(True, 80)):
        assert sum(c.width + 2 for c in columns) + 3 <= 80


def test_many_mig_profiles_are_summarised():
    usage = {f"nvidia.com/mig-{p}": gpu.Usage(capacity=7, allocatable=7, allocated=1) for p in ("1g.10gb", "2g.20gb", "3g.40gb")}
    cell = other_cell(SimpleNamespace(usage=usage), 18, None)
    assert cell.plain == "mig 3/21 +2 more"
    assert "mig-3g.40gb 1/7" in haystack(cell)


async def test_a_253_character_node_name_does_not_push_the_columns_off_screen():
    objects = gpu_cluster(node_name_prefix=LONG, crash_loop=False)
    cluster = start_cluster(objects)
    sim = next(cluster)
    try:
        for size in ((120, 40), (80, 24)):
            app = app_on(sim)
            async with app.run_test(size=size) as pilot:
                await wait_for(pilot, lambda app=app: app.nodes_table.row_count == 5, what="the nodes")
                await show_all_pods(pilot, 6)
                await pilot.pause(0.3)
                text = screen_text(app)
                lines = text.splitlines()
                assert max(len(line) for line in lines) <= size[0]
                header = next(line for line in lines if "NODE" in line and "STATUS" in line)
                assert "VERDICT" in header and "MIG" in header
                row = next(line for line in lines if line.startswith("│ nnn"))
                assert "…" in row and "Ready" in row  # the name is cut, the other columns stay
                pods_header = next(line for line in lines if "NAMESPACE/POD" in line)
                assert "REASON" in pods_header
                assert app.nodes_table.virtual_size.width <= app.nodes_table.size.width  # no horizontal scrolling
                assert app.pods_table.virtual_size.width <= app.pods_table.size.width
    finally:
        next(cluster, None)


class _Model:
    """A model whose watches all fail alike (the connection is down)."""

    def __init__(self, states):
        self.states = states

    def unreadable(self):
        return []

    def partial_scopes(self):
        return []  # every kind read cluster-wide

    def all_running(self):
        return True


def test_header_says_a_lost_connection_once():
    import time

    states = {}
    for n, kind in enumerate(("nodes", "pods", "events", "daemonsets")):
        state = ResourceState(kind, phase=RETRYING, error="connection refused", synced=True)
        state.retry_at = time.monotonic() + 3.4 + n
        states[kind] = state
    text = watch_states(_Model(states)).plain
    assert text.count("connection refused") == 1, text
    assert "reconnecting: connection refused, next try in 3 s" in text


def test_an_inactivity_timeout_is_said_in_words():
    state = ResourceState("pods", phase=RETRYING, error="timed out", synced=True, inactivity_timeout=90.0)
    assert "no events on the pods watch for 90 s" in state.describe()
    assert "timed out" not in state.describe()


def test_header_says_a_rejected_credential_as_it_is_not_reconnecting():
    import time

    states = {}
    for kind in ("nodes", "pods"):
        state = ResourceState(kind, phase=RETRYING, error="unauthorized (401): credentials rejected", synced=True)
        state.retry_at = time.monotonic() + 5.4
        states[kind] = state
    text = watch_states(_Model(states)).plain
    assert "unauthorized (401): credentials rejected, next try in 5 s" in text and "reconnecting" not in text, text
