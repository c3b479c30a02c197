"""Several nodes at once: a results table, row by row, updated at most every FLUSH_INTERVAL."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static
from textual.worker import Worker, WorkerState

from gputui.kube import health, verify as v

from .. import render
from gputui.sanitize import clean
from ..screens import TextScreen
from ..seam import ViewContext, host
from ..panes import clip
from ..table import Column, KeyedTable
from ..widgets import Pane
from .settings import FLUSH_INTERVAL, VERIFY_GROUP
from .words import STAGE_WORDS, _elapsed, _error_text, known_problems, verdict_text

if TYPE_CHECKING:
    from gputui.kube.model import ClusterModel

    from .settings import VerifySettings


RESULT_COLUMNS = [
    Column("node", "NODE"),
    Column("progress", "PROGRESS", 28),
    Column("time", "TIME", 7),
    Column("result", "RESULT", 11),
    Column("detail", "DETAIL"),
]


def result_columns(width: int) -> list[Column]:
    """The results table's columns for a terminal `width` wide: every one fits, the reason (DETAIL) keeps
    at least a third of the row; a node name or a reason longer than its column is cut with `…`."""
    room = width - 3 - 2 * 5  # the pane's borders and scrollbar, each cell's padding
    progress = 28 if width >= 120 else 14
    fixed = progress + 6 + 9
    node = max(10, min(63, (room - fixed) * 2 // 5))
    return [
        Column("node", "NODE", node),
        Column("progress", "PROGRESS", progress),
        Column("time", "TIME", 6),
        Column("result", "RESULT", 9),
        Column("detail", "DETAIL", max(12, room - fixed - node)),
    ]


class VerifyManyScreen(Screen[None]):
    """Several nodes at once (at most `concurrency` pods at a time) in a results table; enter shows a node's verdict."""

    DEFAULT_CSS = """
    VerifyManyScreen #many-head { height: auto; padding: 0 1; }
    VerifyManyScreen #many-results { height: 1fr; }
    """
    BINDINGS = [Binding("escape", "escape", "Cancel / back")]  # ctrl+c: the app's (cancels while running, else quits)

    def __init__(self, api: Any, plans: Sequence[v.Plan], settings: VerifySettings) -> None:
        super().__init__()
        self.api = api
        self.plans = list(plans)
        self.settings = settings
        self.latest: dict[str, v.Update] = {}
        self.verdicts: dict[str, v.Verdict] = {}
        self.created: set[str] = set()  # nodes whose pod may have existed (a deletion was started)
        self.finished = False
        self.error: str | None = None
        self.cancelling = False
        self._dirty = True
        self._worker: Worker | None = None
        self._widths: dict[str, int] | None = None  # the columns' widths, once mounted
        self._model: ClusterModel | None = None  # as last shown (a ModelView, seam.py)
        self.known: dict[str, Text | None] = {}  # per node, its known XIDs and health conditions as of its verdict

    def compose(self) -> ComposeResult:
        yield Static(id="many-head")
        with Pane("Results", id="many-results"):
            yield KeyedTable(id="many-table")
        yield Footer()

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#many-table", KeyedTable)

    def on_mount(self) -> None:
        self.title = f"verify {len(self.plans)} nodes"
        host(self).show_now(self)
        self._widths = {c.key: c.width or 20 for c in result_columns(self.app.size.width)}
        self.table.set_columns(result_columns(self.app.size.width))
        self._flush()
        self.set_interval(FLUSH_INTERVAL, self._flush)
        self.table.focus()
        self._worker = self._run()

    @work(group=VERIFY_GROUP, exit_on_error=False)
    async def _run(self) -> None:
        try:
            await v.run_plans(self.api, self.plans, self.settings.options, self._take_update, self.settings.concurrency)
        finally:
            self.finished = True
            self._dirty = True

    @property
    def running(self) -> bool:
        return not self.finished

    def _take_update(self, update: v.Update) -> None:
        self.latest[update.node] = update
        if update.stage == v.DELETING:
            self.created.add(update.node)
        if update.verdict is not None:
            self.verdicts[update.node] = update.verdict
            self.known[update.node] = self._known_problems(update.node)
        self._dirty = True

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker is self._worker and event.state == WorkerState.ERROR:
            self.error = _error_text(event.worker.error) if event.worker.error else "unknown error"
            self._dirty = True

    def _flush(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        self.table.show([(plan.node, self._row(plan)) for plan in self.plans])
        self.query_one("#many-head", Static).update(self._head())

    def _row(self, plan: v.Plan) -> tuple[Text, ...]:
        update = self.latest.get(plan.node)
        verdict = self.verdicts.get(plan.node)
        node = render.text(plan.node, limit=63)
        if verdict is not None:
            if verdict.passed:
                result = Text("PASS", style=f"bold {render.OK_STYLE}", end="")
            elif verdict.code == v.CANCELLED:
                result = Text("CANCELLED", style=render.WARN_STYLE, end="")
            else:
                result = Text("FAIL", style=render.BAD_STYLE, end="")
            fate = "NOT DELETED" if verdict.leftover else ("pod deleted" if plan.node in self.created else "no pod created")
            progress = Text(fate, style=render.BAD_STYLE if verdict.leftover else "dim", end="")
            detail = render.text(verdict.reason, limit=300)
            if (known := self.known.get(plan.node)) is not None:
                detail = known + Text(" · ", end="") + detail  # first, where the column does not cut it; enter shows the whole
            elapsed = Text(_elapsed(verdict.elapsed), end="")
        elif update is not None:
            words = STAGE_WORDS.get(update.stage, update.stage) + (f" ({update.status})" if update.status else "")
            progress = render.text(words, limit=60)
            result = Text("…", style="dim", end="")
            detail = Text("", end="")
            elapsed = Text(_elapsed(update.elapsed), end="")
        else:
            progress = Text("queued" if not self.finished else "not started", style="dim", end="")
            result, detail, elapsed = Text("", end=""), Text("", end=""), Text("", end="")
        w = self._widths or {c.key: c.width or 20 for c in result_columns(120)}
        return (clip(node, w["node"]), clip(progress, w["progress"]), clip(elapsed, w["time"]), clip(result, w["result"]),
                clip(detail, w["detail"]))

    def _head(self) -> Text:
        passed = sum(vd.passed for vd in self.verdicts.values())
        failed = len(self.verdicts) - passed
        out = Text(end="")
        out.append(f"Verify {len(self.plans)} nodes", style="bold")
        out.append(f", {self.settings.concurrency} at a time", style="dim")
        out.append(f"  {passed} passed", style=render.OK_STYLE if passed else "dim")
        out.append(f"  {failed} not passed", style=render.BAD_STYLE if failed else "dim")
        running = sum(1 for node, u in self.latest.items() if node not in self.verdicts)
        if running:
            out.append(f"  {running} running")
        out.append("\n")
        if self.error:
            out.append_text(render.text(f"stopped unexpectedly: {self.error}", style=render.BAD_STYLE, limit=500))
            out.append("\n")
        if not self.finished:
            out.append("cancelling: deleting the pods" if self.cancelling else "esc cancels (the pods are deleted)", style="dim")
            return out
        leftovers = [vd.leftover for vd in self.verdicts.values() if vd.leftover]
        if leftovers:
            out.append("could not confirm deletion of: ", style=render.BAD_STYLE)
            out.append_text(render.text(", ".join(leftovers), limit=2000))
            out.append(" (delete them by hand)", style=render.BAD_STYLE)
        else:
            out.append("✓ every verification pod was deleted", style=render.OK_STYLE)
        out.append("  · enter: a node's verdict · esc back", style="dim")
        return out

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        node = event.row_key.value
        verdict = self.verdicts.get(node or "")
        if verdict is None:
            return
        plan = next(p for p in self.plans if p.node == node)
        body = verdict_text(verdict, dict(plan.node_labels), pod_created=verdict.node in self.created,
                            known=known_problems(self._bad_gpus(verdict.node), self._now()))
        self.app.push_screen(TextScreen(f"verdict · {clean(verdict.node, 63)}", body))

    def show(self, model: ClusterModel | None, context: ViewContext) -> None:
        self._model = model  # what is known of the nodes' GPUs (XIDs, health conditions), read as verdicts come

    def _bad_gpus(self, node: str) -> list[health.BadGpu]:
        model = self._model
        return model.bad_gpus(node) if model is not None else []

    def _now(self) -> float:
        model = self._model
        return model.clock() if model is not None else 0.0

    def _known_problems(self, node: str) -> Text | None:
        """`known: GPU 1 XID 79 (…), 3m ago`, before the row's detail, as the one-node screen says it under its verdict."""
        return known_problems(self._bad_gpus(node), self._now(), lead="known: ")

    def cancel(self) -> None:
        if not self.finished and self._worker is not None and not self.cancelling:
            self.cancelling = True
            self._dirty = True
            self._worker.cancel()

    def action_escape(self) -> None:
        if not self.finished:
            self.cancel()
        else:
            self.app.pop_screen()
