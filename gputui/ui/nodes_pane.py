"""The Nodes pane: a widget that owns its columns, its rows (panes.node_row, rebuilt through a RowCache when
what a row reads changes) and the node summaries they are made of, gathered in time slices between yields to
the loop. The refresh scheduler (refresh.py) says when: it calls gather() and show(model, context).
"""
from __future__ import annotations

import asyncio
import time
from typing import Callable

from rich.text import Text
from textual.app import ComposeResult

from gputui.kube import gpu
from gputui.kube.model import NODES, PODS, ClusterModel
from gputui.kube.watch import ABSENT, LIVE
from gputui.sanitize import clean

from . import render
from .panes import node_columns, node_row, widths
from .seam import ViewContext
from .table import KeyedTable, RowCache
from .widgets import Pane

WATCH_OK = (LIVE, ABSENT)  # absent: a kind this cluster does not serve (no CRD), nothing wrong
NODE_SLICE_SECONDS = 0.005  # node summaries are computed for at most this long between two yields to the loop

Cells = tuple[Text, ...]


def allocation_basis(model: ClusterModel) -> tuple[str | None, Text | None]:
    """render.allocation_basis, and `?` while pods are read in some namespaces only: a node's
    allocated would count only theirs, and its free would be a confident wrong number.
    `allocation unknown: pods in 2 namespaces: ml, research; cluster-wide forbidden`."""
    mark, basis = render.allocation_basis(model.states, time.monotonic())
    pods = model.scope(PODS)
    if mark is None and pods.partial:
        return render.UNKNOWN_MARK, render.text(f"allocation unknown: {pods.words()}", style=render.BAD_STYLE, limit=300)
    return mark, basis


def table_status(model: ClusterModel | None, kind: str, table: KeyedTable, basis: Text | None = None, elsewhere: int = 0) -> list[str]:
    """A table pane's status line, its parts: what its counts rest on, its watch when not live, its filter
    (and, for the pods, the matches outside the pane's scope: `elsewhere`)."""
    parts = []
    if basis is not None:
        parts.append(basis.plain)
    if model is not None:
        state = model.states.get(kind)
        if state is not None and state.phase not in WATCH_OK:
            parts.append(state.describe())
    if table.filter_text:
        if table.row_count == 0 and (table.wanted_count or elsewhere):
            noun = "node" if kind == NODES else "pod"
            where = " here" if elsewhere else ""
            parts.append(f"no {noun} matches '{clean(table.filter_text, 40)}'{where}")
        else:
            parts.append(f"filter: {clean(table.filter_text, 40)}")
        if elsewhere:
            more = "" if table.row_count == 0 else " more"
            nodes = "another node" if elsewhere == 1 else "other nodes"
            parts.append(f"{elsewhere}{more} match{'es' if elsewhere == 1 else ''} on {nodes}: press a")
    return parts


class NodesPane(Pane):
    """Every node, GPU nodes first: a ModelView (seam.py) drawn from the summaries last gathered."""

    def __init__(self, mark_row: Callable[[str, Cells], Cells], *, id: str = "nodes") -> None:  # id: Textual's word
        super().__init__("Nodes", id=id)
        self._mark_row = mark_row  # a node marked for verification (`space`) shows it in its row
        self.narrow = False
        self.widths: dict[str, int] = widths(node_columns(False))
        self._cells: RowCache[str] = RowCache(node_row)  # a row built again when node_row's inputs differ
        self.summaries: list[gpu.NodeSummary] = []  # as last gathered, GPU nodes first, then by name
        self.generation = -1  # the model's summary_generation when the summaries were last gathered in slices

    def compose(self) -> ComposeResult:
        yield KeyedTable(id="nodes-table")

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#nodes-table", KeyedTable)

    def set_layout(self, narrow: bool, width: int) -> None:
        columns = node_columns(narrow, width)
        self.narrow, self.widths = narrow, widths(columns)
        self.table.set_columns(columns)
        self.rebuild_rows()

    def rebuild_rows(self) -> None:
        """Every row built again when next shown (a new layout or theme)."""
        self._cells.clear()

    def forget(self) -> None:
        """Another cluster comes: no row of this one is kept, and its summaries are gathered afresh."""
        self.rebuild_rows()
        self.generation = -1
        self.table.show([])

    def gather_now(self, model: ClusterModel) -> None:
        self.summaries = model.node_summaries()

    async def gather(self, model: ClusterModel, still: Callable[[], bool]) -> bool:
        """Node summaries in slices, yielding to keys and watches in between: with thousands of nodes changing
        at once, their GPU accounting takes a while. False: given up (still() said the model is gone)."""
        self.generation = model.summary_generation  # a summary dropped from here on: gathered again
        summaries = []
        slice_started = time.perf_counter()
        for name in list(model.nodes.records):
            if time.perf_counter() - slice_started > NODE_SLICE_SECONDS:
                await asyncio.sleep(0)
                if not still():
                    return False
                slice_started = time.perf_counter()
            summary = model.summary(name)
            if summary is not None:
                summaries.append(summary)
        summaries.sort(key=lambda s: (not s.gpu_node, s.name))
        self.summaries = summaries
        return True

    def show(self, model: ClusterModel | None, context: ViewContext) -> None:
        if model is None:
            return
        mark, basis = allocation_basis(model)
        narrow, cache = self.narrow, self._cells
        rows = [(s.name, self._mark_row(s.name, cache.cells(s.name, s, narrow, mark, self.widths))) for s in self.summaries]
        cache.keep({name for name, _ in rows})
        table = self.table
        table.show(rows)
        self.set_status(" · ".join(table_status(model, NODES, table, basis)))
