"""KeyedTable on its own: update_rows changes only the rows it is given, keeps the order,
the cursor and the filter right; rows keep their order after cells were replaced."""
from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult

from gputui.ui.table import Column, KeyedTable


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield KeyedTable(id="table")


def row(name: str, state: str) -> tuple[Text, Text]:
    return Text(name), Text(state)


def cells_of(table: KeyedTable, key: str) -> list[str]:
    return [cell.plain for cell in table.get_row(key)]


async def test_update_rows_touches_only_the_given_rows():
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(KeyedTable)
        table.set_columns([Column("name", "NAME"), Column("state", "STATE")])
        table.show([(f"p{i}", row(f"p{i}", "ok")) for i in range(8)])
        table.move_cursor(row=5)
        await pilot.pause()
        untouched = table.get_row("p1")[1]

        table.update_rows({"p3": row("p3", "restarting"), "p6": row("p6", "failed"), "gone": row("gone", "x")})
        await pilot.pause()
        assert cells_of(table, "p3") == ["p3", "restarting"] and cells_of(table, "p6") == ["p6", "failed"]
        assert table.get_row("p1")[1] is untouched  # not given: not looked at
        assert table.shown_keys == [f"p{i}" for i in range(8)] and table.row_count == 8  # "gone" is not a row
        assert table.cursor_key == "p5"

        # With a filter on, a row the change lets in (or out) is shown (or hidden).
        table.set_filter("fail")
        assert table.shown_keys == ["p6"]
        table.update_rows({"p2": row("p2", "failed"), "p6": row("p6", "ok")})
        assert table.shown_keys == ["p2"]
        table.set_filter("")
        assert table.shown_keys == [f"p{i}" for i in range(8)] and cells_of(table, "p2") == ["p2", "failed"]


async def test_rows_keep_their_order_after_their_cells_were_replaced():
    # Rows are ordered through their first cell; a changed row got new cell objects
    # whose first equalled the old one, and new rows then sorted in the wrong place.
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(KeyedTable)
        table.set_columns([Column("name", "NAME"), Column("state", "STATE")])
        table.show([("b", row("b", "ok")), ("d", row("d", "ok"))])
        table.show([("b", row("b", "changed")), ("d", row("d", "changed"))])  # new objects, same first cell
        table.update_rows({"d": row("d", "again")})
        table.show([("a", row("a", "new")), ("b", row("b", "changed")), ("c", row("c", "new")), ("d", row("d", "again"))])
        await pilot.pause()
        assert [r.key.value for r in table.ordered_rows] == ["a", "b", "c", "d"] == table.shown_keys


async def test_rows_out_of_view_get_their_cells_when_scrolled_to():
    app = TableApp()
    async with app.run_test(size=(40, 8)) as pilot:  # a few rows in view of 50
        table = app.query_one(KeyedTable)
        table.set_columns([Column("name", "NAME"), Column("state", "STATE")])
        table.show([(f"p{i:02}", row(f"p{i:02}", "ok")) for i in range(50)])
        await pilot.pause()
        assert "p00" in table.visible_keys() and "p40" not in table.visible_keys()

        table.update_rows({"p01": row("p01", "new"), "p40": row("p40", "new")})
        assert cells_of(table, "p01") == ["p01", "new"]
        assert cells_of(table, "p40") == ["p40", "ok"]  # out of view: not drawn again for it yet
        table.move_cursor(row=table.row_index("p40"))  # scrolls it into view
        await pilot.pause()
        assert "p40" in table.visible_keys() and cells_of(table, "p40") == ["p40", "new"]

        table.update_rows({"p02": row("p02", "later")})  # out of view now; a full show() settles it too
        table.show([(f"p{i:02}", row(f"p{i:02}", "later" if i == 2 else "ok")) for i in range(50)])
        assert cells_of(table, "p02") == ["p02", "later"] and cells_of(table, "p40") == ["p40", "ok"]


async def test_new_columns_while_rows_wait_out_of_view_drop_those_rows_cells_and_keep_the_cursor_in_view():
    # A resize to 80 columns changes the pods table's columns; clearing it scrolled it to the top,
    # and the rows waiting there for their new cells were drawn into columns that were gone (KeyError).
    app = TableApp()
    async with app.run_test(size=(40, 8)) as pilot:
        table = app.query_one(KeyedTable)
        table.set_columns([Column("name", "NAME"), Column("state", "STATE"), Column("age", "AGE")])
        table.show([(f"p{i:02}", (*row(f"p{i:02}", "ok"), Text("1m"))) for i in range(50)])
        table.move_cursor(row=40)
        await pilot.pause()
        assert table.scroll_y > 0 and "p01" not in table.visible_keys()
        table.update_rows({"p01": (*row("p01", "new"), Text("2m"))})  # above the view: waits

        table.set_columns([Column("name", "NAME"), Column("state", "STATE")])
        table.show([(f"p{i:02}", row(f"p{i:02}", "later")) for i in range(50)])
        await pilot.pause()
        assert cells_of(table, "p01") == ["p01", "later"] and table.cursor_key == "p40"
        assert "p40" in table.visible_keys()  # the cursor's row is still in view
