"""The main screen's filter (`/`): TableFilter narrows the focused table, the Nodes or the GPU pods pane's,
to the rows whose cells hold what is typed; enter keeps the filter, esc clears it.

The table does the matching (table.py's KeyedTable.set_filter, on full values); here is the filter bar,
which table it filters, and what follows a change: the other panes follow the Nodes pane's visible cursor.
The Fleet screen has a filter of its own (fleet.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .table import KeyedTable
from .widgets import FilterBar

if TYPE_CHECKING:
    from textual.widget import Widget


class FilterHost(Protocol):
    """The app, as the filter needs it."""

    @property
    def focused(self) -> Widget | None: ...
    @property
    def nodes_table(self) -> KeyedTable: ...
    def follow_node_cursor(self) -> None:
        """The other panes follow the Nodes pane's visible cursor."""
    def refresh_now(self, *parts: str) -> None:
        """These parts of the screen redrawn now."""


class TableFilter:
    """The app's: the filter bar (`bar`, which the main screen shows) and the table it filters."""

    def __init__(self, host: FilterHost) -> None:
        self._host = host
        self.bar = FilterBar(placeholder="filter (enter keeps, esc clears)", id="filter")
        self._target: KeyedTable | None = None  # the table the bar filters: the one focused when `/` was pressed

    def open(self) -> None:
        """`/`: the bar, holding the focused table's filter (the Nodes table's when no table is focused)."""
        focused = self._host.focused
        table = focused if isinstance(focused, KeyedTable) else self._host.nodes_table
        self._target = table
        bar = self.bar
        bar.value = table.filter_text
        bar.add_class("-active")
        bar.focus()

    def changed(self, text: str) -> None:
        """The bar's text changed: the table filtered on it, and the panes follow."""
        target = self._target
        if target is not None:
            target.set_filter(text)
            self._host.follow_node_cursor()
            self._host.refresh_now("nodes", "pods")

    def close(self) -> None:
        """Enter in the bar: the filter kept, the bar hidden, the table focused again."""
        self.bar.remove_class("-active")
        (self._target or self._host.nodes_table).focus()

    def escape_bar(self) -> bool:
        """Esc while the bar is open: the filter cleared and the bar closed. False: the bar was not open."""
        if not self.bar.has_class("-active"):
            return False
        self.bar.value = ""
        self.close()
        return True

    def escape_table(self) -> bool:
        """Esc on a filtered table: its filter cleared, the cursor staying on its row. False: no filter there."""
        focused = self._host.focused
        if not isinstance(focused, KeyedTable) or not focused.filter_text:
            return False
        focused.set_filter("")
        self._host.follow_node_cursor()
        self._host.refresh_now("nodes", "pods")
        return True
