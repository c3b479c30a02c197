"""KeyedTable: a DataTable that is brought up to date, never rebuilt.

`show(rows)` takes the complete wanted content (row key -> cells, in order)
and applies only the difference: stale rows removed, changed cells updated one
by one, new rows added, rows re-ordered only when the order changed; the
cursor stays on the same row and the scroll position stays put. It looks at
every row; `update_rows(changed)` gives new cells for some of the rows wanted,
the rows and their order the same, and looks at those only (an event storm
on a big table): rows out of view get their new cells when they scroll into
view, since any cell update makes DataTable draw every row in view again. A
filter (`/`) hides rows whose full values do not contain it, without asking the
model: a `Cell` carries the whole value its text was cut from (`fit`). Cells are
`rich.text.Text`, never markup strings.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, Generic, Mapping, Sequence, TypeVar

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

Cells = tuple[Text, ...]
K = TypeVar("K")
ELLIPSIS = "…"
REBUILD_AT = 64  # more stale rows than this, and over half the table: start afresh


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    label: str
    width: int | None = None  # None: as wide as the content (every pane's columns have a width: a row
    # drawn before Textual measured the others would keep the old widths)


class RowCache(Generic[K]):
    """Each row's cells, built again only when what the row builder is given differs from last time.

    The builder's arguments are the row's inputs, compared as a value (a recomputed summary or pod
    record equal to the last one builds nothing): whatever a row reads, a column added later
    included, decides when it is rebuilt, with no list of fields kept apart from the builder."""

    def __init__(self, build: Callable[..., Cells]) -> None:
        self.build = build
        self._rows: dict[K, tuple[tuple[object, ...], Cells]] = {}

    def cells(self, key: K, *inputs: object) -> Cells:
        cached = self._rows.get(key)
        if cached is not None and cached[0] == inputs:  # element by element, identity first
            return cached[1]
        cells = self.build(*inputs)
        self._rows[key] = (inputs, cells)
        return cells

    def keep(self, keys: Collection[K]) -> None:
        """Forget the rows not among keys."""
        if len(self._rows) > len(keys):
            for key in [k for k in self._rows if k not in keys]:
                del self._rows[key]

    def forget(self, key: K) -> None:
        self._rows.pop(key, None)

    def clear(self) -> None:
        self._rows.clear()


class KeyedTable(DataTable):
    DEFAULT_CSS = """
    KeyedTable { height: 1fr; }
    """
    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
    ]

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=False)
        self._wanted: list[tuple[str, Cells]] = []
        self._wanted_at: dict[str, int] = {}  # key -> its index in _wanted
        self._shown: dict[str, Cells] = {}
        self._order: list[str] = []
        self._position: dict[str, int] = {}  # key -> its index in _order
        self._deferred: dict[str, Cells] = {}  # rows out of view: cells to show once in view
        self._columns: tuple[Column, ...] = ()
        self._rank: dict[str, int] = {}
        self._cursor_after_layout: str | None = None  # the cursor's row across set_columns
        self._renders_stale = False  # rows or cells changed since the render caches were last dropped
        self.filter_text = ""

    def _drop_stale_renders(self) -> None:
        """After a change, drop what DataTable's render caches hold: they are keyed by its count
        of updates, which every change moves on (and each cell update redraws every row in view),
        so nothing in them is read again. Kept, they fill to their bounds (1,000 rows, 10,000
        cells, 1,000 lines: fifteen frames of a tall pane) under churn, and the cyclic GC goes
        over those tens of thousands of dead segments and styles at each full collection."""
        if self._renders_stale:
            self._renders_stale = False
            self.notify_style_update()  # DataTable's public way to drop its render caches (and redraw)

    # -- columns ---------------------------------------------------------
    def set_columns(self, columns: Sequence[Column]) -> None:
        """Change the columns (a layout change: the rows are laid out again once)."""
        columns = tuple(columns)
        if columns == self._columns:
            return
        cursor_key = self.cursor_key
        self._columns = columns
        self._wanted = []  # rows were built for the old columns; the owner shows new ones
        self._wanted_at = {}
        self._cursor_after_layout = cursor_key or self._cursor_after_layout
        # Forgotten before clear(): it scrolls to the top, and rows coming into view would get cells
        # built for the old columns.
        self._deferred.clear()
        self._shown.clear()
        self._set_order([])
        self.clear(columns=True)
        for column in columns:
            self.add_column(column.label, key=column.key, width=column.width)
        self._apply(cursor_key)

    @property
    def column_keys(self) -> tuple[str, ...]:
        return tuple(c.key for c in self._columns)

    # -- rows ------------------------------------------------------------
    @property
    def cursor_key(self) -> str | None:
        if not self._order or self.cursor_row < 0 or self.cursor_row >= len(self._order):
            return None
        return self._order[self.cursor_row]

    @property
    def wanted_count(self) -> int:
        """Rows the owner gave, the filter not applied."""
        return len(self._wanted)

    def wants(self, key: str) -> bool:
        """The owner gave this row (shown, or hidden by the filter)."""
        return key in self._wanted_at

    @property
    def shown_keys(self) -> list[str]:
        """Keys of the rows on screen, in order (the filter applied)."""
        return list(self._order)

    def visible_keys(self) -> list[str]:
        """Keys of the rows in view now (every row is one line high)."""
        first, last = self._view_range()
        return self._order[first:last]

    def _view_range(self) -> tuple[int, int]:
        first = int(self.scroll_y)
        return first, first + self.scrollable_content_region.height

    def row_index(self, key: str) -> int:
        return self._position[key]

    def show(self, rows: Sequence[tuple[str, Cells]]) -> None:
        """Make the table show these rows (cells in column order), changing only what differs."""
        self._wanted = list(rows)
        self._wanted_at = {key: i for i, (key, _) in enumerate(self._wanted)}
        cursor_key = self.cursor_key or self._cursor_after_layout
        self._cursor_after_layout = None
        self._apply(cursor_key)

    def update_rows(self, changed: Mapping[str, Cells]) -> None:
        """New cells for rows already wanted, in the same order; keys not wanted are ignored.
        Only these rows are looked at (a row the filter now hides or shows: all of them)."""
        needle = self.filter_text.casefold()
        refilter = False
        for key, cells in changed.items():
            at = self._wanted_at.get(key)
            if at is None:
                continue
            if needle and matches(self._wanted[at][1], needle) != matches(cells, needle):
                refilter = True
            self._wanted[at] = (key, cells)
        if refilter:
            self._apply(self.cursor_key)
            return
        first, last = self._view_range()
        with self.app.batch_update():
            for key, cells in changed.items():
                if key not in self._shown or key not in self._wanted_at:
                    continue
                if first <= self._position[key] < last:
                    self._deferred.pop(key, None)
                    self._update_row(key, cells)
                else:
                    self._deferred[key] = cells
            self._drop_stale_renders()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._show_deferred()

    def on_resize(self, event: events.Resize) -> None:
        if self.cursor_key is not None:
            self.move_cursor(row=self.cursor_row)  # a smaller terminal must not leave the cursor out of view
        self._show_deferred()

    def _show_deferred(self) -> None:
        """Rows that came into view get the cells they were given meanwhile."""
        if not self._deferred:
            return
        first, last = self._view_range()
        for key in self._order[first:last]:
            cells = self._deferred.pop(key, None)
            if cells is not None:
                self._update_row(key, cells)
        self._drop_stale_renders()

    def set_filter(self, text: str) -> None:
        self.filter_text = text
        self._apply(self.cursor_key)

    def _visible(self) -> list[tuple[str, Cells]]:
        needle = self.filter_text.casefold()
        if not needle:
            return self._wanted
        return [(key, cells) for key, cells in self._wanted if matches(cells, needle)]

    def _apply(self, cursor_key: str | None) -> None:
        if not self._columns:
            return
        self._deferred.clear()  # every row is compared with what it should show below
        visible = self._visible()
        wanted_keys = {key for key, _ in visible}
        stale = [k for k in self._shown if k not in wanted_keys]
        with self.app.batch_update():
            if len(stale) > max(REBUILD_AT, len(self._shown) // 2):
                # A new view (narrowed to a node, filtered), not an update: removing
                # rows one by one costs O(rows) each in DataTable.
                self._renders_stale = True
                self.clear()
                self._shown.clear()
                self._set_order([])
                stale = []
            for key in stale:
                self.remove_row(key)
                del self._shown[key]
                self._renders_stale = True
            added = False
            for key, cells in visible:
                if key not in self._shown:
                    self.add_row(*cells, key=key)
                    self._shown[key] = cells
                    added = True
                    self._renders_stale = True
                else:
                    self._update_row(key, cells)
            order = [key for key, _ in visible]
            if added or order != self._order:
                if order != self._current_order():
                    self._rank = {key: i for i, key in enumerate(order)}
                    self._sort_by_rank()
                    self._renders_stale = True
                self._set_order(order)
            self._keep_cursor_on(cursor_key)
            self._drop_stale_renders()

    def _set_order(self, order: list[str]) -> None:
        self._order = order
        self._position = {key: i for i, key in enumerate(order)}

    def _update_row(self, key: str, cells: Cells) -> None:
        """Update the cells of a shown row that differ (a row is never re-added for a change).
        _shown keeps the very cell objects the table holds: _sort_by_rank finds rows by them."""
        old = self._shown[key]
        if old is cells or old == cells:
            return
        row_key = RowKey(key)
        held = []
        for column, before, after in zip(self._columns, old, cells, strict=False):
            if before == after:
                held.append(before)
                continue
            column_key = ColumnKey(column.key)
            grow = cell_len(after.plain) > self.columns[column_key].content_width
            self.update_cell(row_key, column_key, after, update_width=grow)
            self._renders_stale = True
            held.append(after)
        self._shown[key] = tuple(held)

    def _current_order(self) -> list[str]:
        return [row.key.value for row in self.ordered_rows]  # type: ignore[misc]  # Textual's RowKey.value is Optional; our rows always have keys

    def _sort_by_rank(self) -> None:
        # DataTable sorts on cell values, not row keys; the first cell of each
        # row is an object we made and still hold, so its id leads to its key.
        first = self._columns[0].key
        rank_of_cell = {id(cells[0]): self._rank.get(key, len(self._rank)) for key, cells in self._shown.items()}
        self.sort(first, key=lambda cell: rank_of_cell.get(id(cell), len(rank_of_cell)))

    def _keep_cursor_on(self, key: str | None) -> None:
        if key is None or key not in self._shown:
            return
        index = self._position[key]
        if index != self.cursor_row:
            self.move_cursor(row=index, animate=False, scroll=False)


class Cell(Text):
    """A cell's Text cut to its column, with the whole value it was cut from: the filter reads `full`."""

    __slots__ = ("full",)

    def __init__(self, text: str = "", style: str = "", *, full: str | None = None) -> None:
        super().__init__(text, style=style, end="")
        self.full = text if full is None else full


def fit(value: str, width: int, style: str = "", *, full: str | None = None) -> Cell:
    """Already-clean text cut to `width` terminal cells (wide characters count two) with `…`;
    the cell keeps `full` (by default the value itself) for the filter."""
    cell = Cell(value, style, full=value if full is None else full)
    if cell_len(value) > width:
        cell.truncate(max(1, width), overflow="ellipsis")
    return cell


def haystack(cell: Text) -> str:
    """What the filter looks in: the whole value of a cut cell, else its text."""
    full = getattr(cell, "full", None)
    return full if full is not None else cell.plain


def matches(cells: Cells, needle: str) -> bool:
    """A row the filter shows: `needle` (casefolded) in one of its cells' whole values."""
    return any(needle in haystack(c).casefold() for c in cells)
