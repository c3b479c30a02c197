"""The Queues screen (`u`): Kueue's ClusterQueues with their GPU quota, what is reserved of it, what is
free, pending and admitted Workloads; under the table the chosen queue's LocalQueues and its pending
GPU Workloads with why Kueue holds each back (gputui/kube/kueue.py).

The screen renders what the model holds; the app calls `show(model, context)` (seam.py) on the top
screen after each coalesced refresh. Renderers here are pure: records in, Text out.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from gputui.kube import kueue
from gputui.sanitize import clean

from . import render
from .seam import ViewContext, host
from .table import Cells, Column, KeyedTable, fit

if TYPE_CHECKING:
    from gputui.kube.model import ClusterModel

WIDE_AT = 120
_WIDTHS = {  # narrow, wide
    "name": (14, 22), "cohort": (9, 14), "quota": (12, 22), "used": (6, 12), "free": (6, 12), "pending": (7, 8), "admitted": (8, 9),
}
_TITLES = {"name": "CLUSTERQUEUE", "cohort": "COHORT", "quota": "GPU QUOTA", "used": "USED", "free": "FREE", "pending": "PENDING",
           "admitted": "ADMITTED"}
PENDING_SHOWN = 20  # pending Workloads listed for the chosen queue; the rest are counted


def columns(wide: bool) -> list[Column]:
    return [Column(key, _TITLES[key], widths[1 if wide else 0]) for key, widths in _WIDTHS.items()]


def _figure(value: int | None) -> str:
    return render.UNKNOWN_MARK if value is None else str(value)


def queue_row(q: kueue.ClusterQueue, wide: bool) -> Cells:
    """One ClusterQueue's cells; several GPU resources are listed in each cell in the same order."""
    w = {key: widths[1 if wide else 0] for key, widths in _WIDTHS.items()}
    name = clean(q.name, 253)
    if q.quota:
        quota = ", ".join(f"{render.short_resource(clean(r, 80))} {n}" for r, n in q.quota.items())
        used = ", ".join(_figure(None if q.used is None else q.used.get(r, 0)) for r in q.quota)
        free = ", ".join(_figure(q.free(r)) for r in q.quota)
        exhausted = q.used is not None and all(q.free(r) == 0 for r in q.quota)
        quota_cells: Cells = (fit(quota, w["quota"]), fit(used, w["used"]), fit(free, w["free"], render.WARN_STYLE if exhausted else ""))
    else:
        quota_cells = (fit("none", w["quota"], render.DIM_STYLE), *(fit("-", w[key], render.DIM_STYLE) for key in ("used", "free")))
    pending_style = render.WARN_STYLE if q.pending else ""
    return (
        fit(name, w["name"], "bold" if q.active is None or q.active.status else render.BAD_STYLE),
        fit(clean(q.cohort, 253) or "-", w["cohort"], "" if q.cohort else render.DIM_STYLE),
        *quota_cells,
        fit(_figure(q.pending), w["pending"], pending_style),
        fit(_figure(q.admitted), w["admitted"]),
    )


def summary_text(view: kueue.Kueue, state: str | None) -> Text:
    """The lines above the table: the counts, or what keeps Kueue's objects unknown."""
    if state == kueue.NOT_INSTALLED:
        return Text(kueue.NOT_INSTALLED, style=render.DIM_STYLE, end="")
    if state is not None:  # no count from part of the objects
        return render.text(f"Kueue not fully known: {state}", style=render.WARN_STYLE, limit=400)
    pending = view.pending()
    out = Text(end="")
    out.append(f"{len(view.cluster_queues)} ClusterQueue{'s' * (len(view.cluster_queues) != 1)}", style="bold")
    out.append(f" · {len(view.local_queues)} LocalQueue{'s' * (len(view.local_queues) != 1)} · ", style=render.DIM_STYLE)
    out.append(f"{len(pending)} GPU Workload{'s' * (len(pending) != 1)} pending", style=render.WARN_STYLE if pending else render.DIM_STYLE)
    out.append("\nUSED: quota reserved by admitted Workloads · FREE: nominal quota not reserved", style=render.DIM_STYLE)
    return out


def details_text(view: kueue.Kueue, name: str | None) -> Text:
    """The chosen ClusterQueue: its state, borrowing limits and LocalQueues."""
    q = next((q for q in view.cluster_queues if q.name == name), None)
    if q is None:
        return Text("no ClusterQueue" if not view.cluster_queues else "", style=render.DIM_STYLE, end="")
    out = render.text(q.name, style="bold", limit=253)
    if q.active is not None:
        out.append(" · ")
        out.append_text(render.text(("active: " if q.active.status else "inactive: ") + (q.active.message or q.active.reason),
                                    style="" if q.active.status else render.BAD_STYLE, limit=300))
    for resource, n in q.quota.items():
        limit = q.borrowing_limit.get(resource)
        out.append(f"\n  {render.short_resource(clean(resource, 80))}: quota {n}")
        borrowing = f", borrowing limit {limit}" if limit is not None else (", no borrowing limit" if q.cohort else "")
        out.append(borrowing, style=render.DIM_STYLE)
        out.append(f", used {_figure(None if q.used is None else q.used.get(resource, 0))}, free {_figure(q.free(resource))}")
    locals_ = view.local_queues_of(q.name)
    out.append("\nLocalQueues: ", style=render.DIM_STYLE)
    if not locals_:
        out.append("none" if view.local_queues_known else "unknown (not read)", style=render.DIM_STYLE)
    out.append_text(render.joined([render.text(f"{lq.namespace}/{lq.name} (pending {_figure(lq.pending)}, admitted {_figure(lq.admitted)})",
                                               limit=300) for lq in locals_], sep=", "))
    count = (len(view.pending(q.name)) or "none") if view.workloads_known else "unknown (Workloads not read)"
    out.append(f"\nPending GPU Workloads: {count}", style=render.DIM_STYLE)
    return out


def pending_rows(view: kueue.Kueue, name: str | None, now: float) -> list[tuple[Text, Text, Text, Text]]:
    """The chosen ClusterQueue's pending GPU Workloads, oldest first: name, GPUs, age, and why Kueue holds it
    (at most PENDING_SHOWN, then a `+N more` row)."""
    pending = view.pending(name) if name is not None else []
    rows = [(render.text(f"{w.namespace}/{w.name}", limit=200), render.gpu_counts(w.gpu),
             Text(render.age(w.created, now), style=render.DIM_STYLE), render.text(kueue.why(w), style=render.WARN_STYLE, limit=1000))
            for w in pending[:PENDING_SHOWN]]
    if len(pending) > PENDING_SHOWN:
        rows.append((Text(f"+{len(pending) - PENDING_SHOWN} more", style=render.DIM_STYLE), Text(), Text(), Text()))
    return rows


def _pending_table(rows: list[tuple[Text, Text, Text, Text]]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True, max_width=60)
    table.add_column(no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column(ratio=1)
    for row in rows:
        table.add_row(*row)
    return table


class QueuesScreen(Screen[None]):
    """Kueue's ClusterQueues, one row each; the cursor's queue in detail below."""

    BINDINGS = [Binding("escape,q,u", "back", "Back")]

    def __init__(self) -> None:
        super().__init__()
        self._wide: bool | None = None
        self._shown: tuple[Text, Text, list[tuple[Text, Text, Text, Text]]] | None = None

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#queues-table", KeyedTable)

    def compose(self) -> ComposeResult:
        yield Static(id="queues-summary")
        yield KeyedTable(id="queues-table")
        with VerticalScroll():
            yield Static(id="queues-details")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "Kueue queues"
        self._layout(self.app.size.width)
        self.table.focus()

    def on_resize(self, event: Any) -> None:
        self._layout(event.size.width)

    def _layout(self, width: int) -> None:
        wide = width >= WIDE_AT
        if wide != self._wide:
            self._wide = wide
            self.table.set_columns(columns(wide))
            host(self).show_now(self)

    def show(self, model: ClusterModel | None, context: ViewContext) -> None:
        if self._wide is None:
            return  # not laid out yet: on_mount does it, then comes here
        if model is None:
            self.query_one("#queues-summary", Static).update(Text("connecting…", style=render.DIM_STYLE))
            return
        view = model.kueue()
        self.table.show([(q.name, queue_row(q, self._wide)) for q in view.cluster_queues])
        chosen = self.table.cursor_key
        shown = (summary_text(view, model.kueue_state()), details_text(view, chosen), pending_rows(view, chosen, context.now))
        if shown != self._shown:  # no redraw when nothing changed
            self._shown = shown
            self.query_one("#queues-summary", Static).update(shown[0])
            details = shown[1].copy()
            details.end = "\n"
            self.query_one("#queues-details", Static).update(Group(details, Padding(_pending_table(shown[2]), (0, 0, 0, 2))))

    @on(DataTable.RowHighlighted, "#queues-table")
    def _queue_chosen(self) -> None:
        host(self).show_now(self)

    @property
    def text(self) -> str:
        """The summary and the details as plain text, a pending Workload a line (tests)."""
        if self._shown is None:
            return ""
        summary, details, rows = self._shown
        return "\n".join([summary.plain, details.plain, *("  " + "  ".join(cell.plain for cell in row) for row in rows)])

    def action_back(self) -> None:
        self.app.pop_screen()
