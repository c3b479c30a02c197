"""Regression: a terminal resized across the 80-column layout switch with rows present.

KeyedTable.set_columns once re-added rows built for the old columns to the new
ones and the app died with 'More values provided than there are columns'."""
from __future__ import annotations

import pytest

from gputui.ui.panes import node_columns, pod_columns
from gputui.ui.stack import StackScreen
from tests.ui.ui_helpers import (
    app_on,
    screen_text,
    show_all_pods,
    start_cluster,
    wait_for,
)
from tests.ui.ui_scenario import gpu_cluster


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster(gpu_cluster(crash_loop=False), run_controllers=False)


def column_keys(columns) -> tuple[str, ...]:
    return tuple(c.key for c in columns)


async def test_resize_across_the_narrow_layout_and_back(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.nodes_table.row_count == 5, what="the nodes")
        await show_all_pods(pilot, 6)
        app.pods_table.focus()
        app.pods_table.move_cursor(row=app.pods_table.row_index("research/notebook-alice-0"))
        for width, height, narrow in ((80, 24, True), (120, 40, False), (80, 24, True), (120, 40, False)):
            await pilot.resize_terminal(width, height)
            wanted = (column_keys(node_columns(narrow)), column_keys(pod_columns(narrow)))
            await wait_for(pilot, lambda wanted=wanted: (app.nodes_table.column_keys, app.pods_table.column_keys) == wanted,
                           what=f"the {'narrow' if narrow else 'wide'} columns")
            await wait_for(pilot, lambda: app.nodes_table.row_count == 5 and app.pods_table.row_count == 6,
                           what=f"rows again at {width}x{height}")
            # Every row has one cell per column (the bug: rows of the old layout in the new one).
            for table in (app.nodes_table, app.pods_table):
                assert all(len(table.get_row(key)) == len(table.column_keys) for key in table.shown_keys)
            assert "a100-1" in screen_text(app)
            await wait_for(pilot, lambda: "research/notebook-alice-0" in app.pods_table.visible_keys(),
                           what=f"the cursor's row in view at {width}x{height}")
        assert app.pods_table.cursor_key == "research/notebook-alice-0"

        await pilot.press("s")  # the Stack screen switches its own layout at 120 columns
        await wait_for(pilot, lambda: isinstance(app.screen, StackScreen) and app.screen.table.row_count == 4, what="the matrix")
        for width, height in ((80, 24), (130, 40), (80, 24)):
            await pilot.resize_terminal(width, height)
            await pilot.pause(0.1)
            table = app.screen.table
            assert table.row_count == 4
            assert all(len(table.get_row(key)) == len(table.column_keys) for key in table.shown_keys)
        await pilot.press("escape")
        await pilot.resize_terminal(120, 40)
        await wait_for(pilot, lambda: app.nodes_table.column_keys == column_keys(node_columns(False)), what="wide again")
        assert app.nodes_table.row_count == 5
