"""The Fleet screen: a row per cluster (kubeconfig context), the fleet's GPUs on top.

It renders `gputui.kube.fleet` and never fetches: once a second it takes the rows whose
cluster changed (the fleet coalesces watch events per cluster) and the rows whose words
age (`retry in 8 s`, `2m ago`), and updates only the cells that changed.
`enter` opens the cluster's main screen; `esc` there comes back. Rows from Prometheus say so, and
how old their data is (`from Prometheus, 40s old`); the line under the table says what they lack.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from gputui.kube import duration
from gputui.kube import fleet as f
from gputui.kube.fleet_prometheus import PrometheusFleet
from gputui.kube.gpu import GPU, Problem, Usage
from gputui.sanitize import clean

from . import render
from .table import Cells, Column, KeyedTable, fit
from .widgets import FilterBar

UNKNOWN_SYNCING, UNKNOWN_TROUBLE = "…", "?"
SORTS = ("context", "free", "problems", "pending")  # the first: kubeconfig order
SORTED_MARK = "↓"


def state_style(state: str) -> str:
    return render.OK_STYLE if state == f.LIVE else "" if state == f.SUMMARY else render.WARN_STYLE


NARROW_WIDTHS = {"context": 14, "state": 12, "gpu": 9, "free": 4, "problems": 19, "pending": 7}
SHORT_STATE_AT = 20  # a narrower STATE column has the state's word only: the line under the table says the rest
WIDE_WIDTHS = {"context": 16, "state": 24, "version": 7, "gpu": 9, "free": 4, "problems": 24, "pending": 7, "stack": 13}
STACK_WORDS = {"gpu-operator": "operator", "device-plugin": "plugin", "none": "none"}
TITLES = {"context": "CONTEXT", "state": "STATE", "version": "VERSION", "gpu": "GPU", "free": "FREE",
          "problems": "PROBLEMS", "pending": "PENDING", "stack": "STACK"}


def fleet_columns(width: int, sort: str = SORTS[0]) -> list[Column]:
    """Every column fits: the context column takes what the others leave (each cell has 2 of padding).
    The column the rows are ordered by (`o`) is marked `↓`; none in kubeconfig order."""
    widths = dict(NARROW_WIDTHS if width < 110 else WIDE_WIDTHS)
    titles = {key: TITLES[key] + (SORTED_MARK if key == sort != SORTS[0] else "") for key in widths}
    widths = {key: max(w, len(titles[key])) for key, w in widths.items()}
    room = width - 2 - 2 * len(widths) - sum(w for key, w in widths.items() if key != "context")
    widths["context"] = max(10, min(40, room))
    return [Column(key, titles[key], w) for key, w in widths.items()]


def main_resource(totals: dict[str, Usage]) -> tuple[str, Usage] | None:
    if GPU in totals:
        return GPU, totals[GPU]
    return next(iter(totals.items()), None)


def retry(row: f.ClusterRow, now: float, words: str = ", retry in") -> str:
    """`, retry in 8 s`; once that time has come, the try is under way (a hanging server can take long)."""
    if row.retry_at is None:
        return ""
    left = row.retry_at - now
    return ", trying again now" if left < 0.5 else f"{words} {round(left)} s"


def state_cell(row: f.ClusterRow, now: float, wall: float, short: bool = False) -> Text:
    """The state in a few words (`unreachable, retry 8 s`); `detail_line` says why."""
    if row.state in f.TROUBLE:
        return Text(row.state + ("" if short else retry(row, now, ", retry")), style=render.BAD_STYLE, end="")
    if row.state == f.SUMMARY and row.updated is not None:
        return Text(f"summary {duration.age(row.updated, wall)}" + ("" if short else " ago"), end="")
    if row.state == f.PROMETHEUS and row.updated is not None:
        age = duration.age(row.updated, wall)
        return Text(f"prom {age}" if short else f"from Prometheus, {age} old", end="")
    return Text(row.state, style=state_style(row.state), end="")


def detail_line(row: f.ClusterRow | None, now: float, wall: float | None = None) -> Text:
    """The cursor row's state in full: `lab: unreachable: cannot reach https://…: connection refused, retry in 8 s`."""
    if row is None:
        return Text("", end="")
    if row.state == f.PROMETHEUS:
        words = f"{row.context}: from Prometheus" + (f", {duration.age(row.updated, wall or time.time())} old" if row.updated else "")
        if row.worst is not None:
            word, _ = render.verdict_word(Problem(row.worst[0], "", row.worst_subject))
            words += f" · worst: {word} on {row.worst[1]}"
        return Text(clean(words + f" · not known from there: {', '.join(row.without)}", 400), end="")
    if row.partial and row.state not in f.TROUBLE:
        return Text(clean(f"{row.context}: {row.partial}: allocated and free unknown", 400), style=render.WARN_STYLE, end="")
    if row.state in f.TROUBLE or row.detail:
        return Text(clean(f"{row.context}: {row.state}: {row.detail}{retry(row, now)}", 400),
                    style=render.BAD_STYLE if row.state in f.TROUBLE else render.WARN_STYLE, end="")
    words = f"{row.context}: {row.state}"
    if row.worst is not None:  # in full, first: the row's cell may cut it
        word, _ = render.verdict_word(Problem(row.worst[0], "", row.worst_subject))
        words += f" · worst: {word} on {row.worst[1]}"
    if row.server_version:
        words += f" · server {row.server_version}"
    if row.stack:
        words += f" · {row.stack}" + (f", ClusterPolicy {row.policy}" if row.policy else "")
    if row.lacks:
        how = "summarised: no DCGM reads" if row.state == f.SUMMARY else "an exporter not read yet, or failing"
        words += f" · {', '.join(row.lacks)} not known on every node ({how})"
    return Text(clean(words, 400), end="")


def row_cells(row: f.ClusterRow, columns: list[Column], now: float, wall: float) -> Cells:
    unknown = UNKNOWN_TROUBLE if row.state in f.TROUBLE or row.partial else UNKNOWN_SYNCING
    widths = {c.key: c.width or 0 for c in columns}
    main = main_resource(row.totals) if row.totals is not None else None
    values: dict[str, Text] = {
        "context": Text(clean(row.context, 253), style="bold", end=""),
        "state": state_cell(row, now, wall, short=widths.get("state", 0) < SHORT_STATE_AT),
        "version": Text(clean(row.server_version or "-", 20), end=""),
    }
    if row.totals is None:
        values["gpu"] = Text(unknown, style=render.mark_style(unknown), end="")
        values["free"] = Text(unknown, style=render.mark_style(unknown), end="")
    elif main is None:
        values["gpu"], values["free"] = Text("-", style=render.DIM_STYLE, end=""), Text("-", style=render.DIM_STYLE, end="")
    else:
        name, usage = main
        text = f"{usage.allocated}/{usage.allocatable}" + ("" if name == GPU else f" {render.short_resource(name)}")
        more = len(row.totals) - 1
        values["gpu"] = Text(text + (f" +{more}" if more else ""), end="")
        values["free"] = render.free_cell(usage)
    if row.problem_nodes is None or row.gpu_nodes is None:
        values["problems"] = Text(unknown, end="")
    elif row.problem_nodes == 0 and row.unknown_nodes:
        known = row.gpu_nodes - row.unknown_nodes
        values["problems"] = Text(f"{render.SYNCING_MARK} {known}/{row.gpu_nodes} ok, {'/'.join(row.lacks)} …", style=render.WARN_STYLE, end="")
    elif row.problem_nodes == 0:
        values["problems"] = Text(f"✓ {row.gpu_nodes} ok", style=render.OK_STYLE, end="")
    else:
        worst = ""
        if row.worst is not None:
            word, _ = render.verdict_word(Problem(row.worst[0], "", row.worst_subject), short=True)  # `MIG stuck 42m`
            worst = f" {word} {clean(row.worst[1], 63)}"
            if row.worst_subject and len(f"✗ {row.problem_nodes}/{row.gpu_nodes}{worst}") > widths.get("problems", 0):
                worst = f" {word}"  # the age rather than the node, which the detail line names
        values["problems"] = Text(f"✗ {row.problem_nodes}/{row.gpu_nodes}{worst}", style=render.BAD_STYLE, end="")
    if row.pending is None:
        values["pending"] = Text(unknown, end="")
    elif row.pending == 0:
        values["pending"] = Text("0", style=render.DIM_STYLE, end="")
    else:
        wait = f" {duration.age(wall - row.longest_wait, wall)}" if row.longest_wait is not None else ""
        values["pending"] = Text(f"{row.pending}{wait}", style=render.WARN_STYLE, end="")
    stack = ("?" if row.state == f.PROMETHEUS else "…") if row.stack is None else " ".join(STACK_WORDS.get(word, word.strip("()")) for word in row.stack.split())
    policy_bad = row.policy is not None and row.policy != "ready"
    if policy_bad:
        stack = f"✗ {clean(row.policy or '', 20)}"  # the ClusterPolicy's state (notReady): only the operator has one
    values["stack"] = Text(stack, style=render.BAD_STYLE if policy_bad else "", end="")
    return tuple(fit(values[c.key].plain, c.width or 20, str(values[c.key].style or ""), full=values[c.key].plain)
                 if c.key == "context" else _cut(values[c.key], c.width or 20) for c in columns)


def _cut(text: Text, width: int) -> Text:
    if text.cell_len > width:
        text.truncate(width, overflow="ellipsis")
    return text


def sort_key(sort: str) -> Callable[[f.ClusterRow], Any]:
    def free(row: f.ClusterRow) -> int:
        main = main_resource(row.totals) if row.totals else None
        return -(main[1].free if main else -1)
    keys = {
        "context": lambda row: 0,
        "free": free,
        "problems": lambda row: -(row.problem_nodes if row.problem_nodes is not None else -1) - 1000 * (row.state in f.TROUBLE),
        "pending": lambda row: -(row.pending if row.pending is not None else -1),
    }
    return keys[sort]


def fleet_line(rows: list[f.ClusterRow], width: int, source: PrometheusFleet | None = None) -> Text:
    """The fleet's GPUs added up by resource and by model, over the clusters whose figures are known."""
    known = [row for row in rows if row.totals is not None]
    by_resource: dict[str, Usage] = {}
    by_model: dict[str, Usage] = {}
    for row in known:
        for name, usage in (row.totals or {}).items():
            by_resource.setdefault(name, Usage()).add(usage)
        for product, usage in row.by_model.items():
            by_model.setdefault(product, Usage()).add(usage)
    out = Text(f"fleet · {len(rows)} clusters", style="bold", end="")
    if len(known) < len(rows):
        out.append(f" ({len(rows) - len(known)} not counted: not read yet or unreachable)", style=render.WARN_STYLE)
    if source is not None:
        if source.error:
            out.append(f" · Prometheus: {clean(source.error, 200)}, next try in {round(source.interval)} s", style=render.WARN_STYLE)
        elif source.asked is None:
            out.append(f" · asking Prometheus {clean(source.where, 80)}…", style=render.DIM_STYLE)
        else:
            out.append(f" · from Prometheus {clean(source.where, 80)} every {round(source.interval)} s", style=render.DIM_STYLE)
    parts = [Text(f"{render.short_resource(name)} {u.allocated}/{u.allocatable} ({u.free} free)", end="")
             for name, u in by_resource.items()]
    parts += [Text(f"{clean(product.removeprefix('NVIDIA-'), 40)} {u.allocated}/{u.allocatable}", style=render.DIM_STYLE, end="")
              for product, u in by_model.items()]
    return Text("\n", end="").join(render.at_most([out, *render.pack(parts, width)], 3, width))


class FleetScreen(Screen[None]):
    """Every cluster of the fleet; `enter` opens one, `/` filters, `o` changes the order."""

    BINDINGS = [
        Binding("enter", "open", "Open"),
        Binding("slash", "filter", "Filter"),
        Binding("o", "sort", "Order"),
        Binding("escape", "clear_filter", "Clear", show=False),
    ]

    def __init__(self, fleet: f.Fleet, open_cluster: Callable[[str], None]) -> None:
        super().__init__()
        self.fleet = fleet
        self.open_cluster = open_cluster
        self.sort = SORTS[0]
        self._columns: list[Column] = []
        self._cells: dict[str, Cells] = {}
        self._order: list[str] = []
        self._rows: dict[str, f.ClusterRow] = {}

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#fleet-table", KeyedTable)

    def compose(self) -> ComposeResult:
        yield Static(id="fleet-summary")
        yield KeyedTable(id="fleet-table")
        yield Static(id="fleet-detail")
        yield FilterBar(placeholder="filter clusters (enter keeps, esc clears)", id="fleet-filter")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "Fleet"
        self.fleet.dirty.update(self.fleet.contexts)
        self._layout(self.app.size.width)
        self.set_interval(1.0, self.refresh_rows)
        self.table.focus()

    def on_screen_resume(self) -> None:
        self.fleet.dirty.update(self.fleet.contexts)
        self.refresh_rows()

    def on_resize(self, event: Any) -> None:
        self._layout(event.size.width)

    def _layout(self, width: int) -> None:
        columns = fleet_columns(width, self.sort)
        if [(c.key, c.label) for c in columns] != [(c.key, c.label) for c in self._columns]:
            self._columns = columns
            self.table.set_columns(columns)
            self._cells.clear()
            self._order = []
        self.refresh_rows()

    def refresh_rows(self) -> None:
        fleet = self.fleet
        fleet.take_dirty()  # every row is taken: a watched cluster's is its last figures, a Prometheus one's as kept
        now, wall = time.monotonic(), fleet.clock()
        rows = fleet.rows()
        changed: dict[str, Cells] = {}
        for row in rows:
            context = row.context
            cells = row_cells(row, self._columns, now, wall)
            if [c.plain for c in cells] != [c.plain for c in self._cells.get(context, ())]:
                changed[context] = cells
                self._cells[context] = cells
        ordered = sorted(rows, key=sort_key(self.sort))  # stable: kubeconfig order among equals
        order = [row.context for row in ordered]
        if order != self._order:
            self._order = order
            self.table.show([(context, self._cells[context]) for context in order])
        elif changed:
            self.table.update_rows(changed)
        self.query_one("#fleet-summary", Static).update(fleet_line(rows, self.app.size.width, fleet.prometheus))
        self._rows = {row.context: row for row in rows}
        self._show_detail()
        self.sub_title = f"order: {self.sort}" + (f" · filter: {clean(self.table.filter_text, 40)}" if self.table.filter_text else "")

    def _show_detail(self) -> None:
        key = self.table.cursor_key
        row = self._rows.get(key) if key is not None else None
        self.query_one("#fleet-detail", Static).update(detail_line(row, time.monotonic(), self.fleet.clock()))

    @on(DataTable.RowHighlighted, "#fleet-table")
    def _highlighted(self) -> None:
        self._show_detail()

    @on(DataTable.RowSelected, "#fleet-table")
    def _selected(self) -> None:
        self.action_open()

    def action_open(self) -> None:
        key = self.table.cursor_key
        if key is None:
            return
        context = self.fleet.context_for(key)
        if context is None:
            self.notify(clean(f"{key} is no kubeconfig context: name its context in the config file's [fleet.cluster_contexts]", 300),
                        severity="warning", markup=False)
            return
        self.open_cluster(context)

    def action_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self._layout(self.app.size.width)  # the ordering column's title is marked

    def action_filter(self) -> None:
        bar = self.query_one("#fleet-filter", FilterBar)
        bar.value = self.table.filter_text
        bar.add_class("-active")
        bar.focus()

    def action_clear_filter(self) -> None:
        bar = self.query_one("#fleet-filter", FilterBar)
        if bar.has_class("-active") or self.table.filter_text:
            bar.value = ""
            self.table.set_filter("")
            bar.remove_class("-active")
            self.table.focus()
            self.refresh_rows()

    @on(Input.Changed, "#fleet-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.table.set_filter(event.value)
        self.refresh_rows()

    @on(Input.Submitted, "#fleet-filter")
    def _filter_kept(self) -> None:
        self.query_one("#fleet-filter", FilterBar).remove_class("-active")
        self.table.focus()
