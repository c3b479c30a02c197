"""The GPU stack in the app: the Stack screen (`s`: nodes × components), a component's logs
full screen, and the Local screen (`g`: this host's GPUs through NVML).

Screens render the model the app holds; they never call the API: the log screen shows
what kube/logs.py's LogFollower streams (as the plugin pane does). The
app calls `show(model, context)` (seam.py) on the top screen after each coalesced refresh.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from gputui.kube import nvml, stack, stuck
from gputui.kube.gpu import NodeSummary
from gputui.kube.logs import LogFollower, LogSource

from . import render
from gputui.sanitize import clean
from .screens import TextScreen
from .stack_render import (FINDINGS_KEY, LEGEND, MATRIX_WIDE_AT, cell_detail, component_line, fit_summary, local_text, matrix_columns,
                           matrix_row, stack_summary)
from .seam import ViewContext, host
from .table import KeyedTable
from .widgets import PluginLog

if TYPE_CHECKING:
    from textual.widget import AwaitMount

    from gputui.kube.client import Client
    from gputui.kube.config import Connection
    from gputui.kube.model import ClusterModel

COMPONENT_LOG_TAIL = 50
LOCAL_INTERVAL = 2.0  # seconds between NVML snapshots while the Local screen is shown


class StackScreen(Screen[None]):
    """Which stack the cluster runs, its ClusterPolicy and verdicts, and the component matrix.
    Arrows choose a cell; `l` or enter opens that component's logs (open_logs(node, component): the app's).
    The summary takes at most half the screen; what it cannot hold is counted, and `f` shows it whole."""

    BINDINGS = [
        Binding("escape,q", "back", "Back"),
        Binding("l", "logs", "Logs"),
        Binding(FINDINGS_KEY, "findings", "All findings", tooltip="GPU stack: the summary above the matrix whole (↑ ↓ PgUp PgDn)"),
    ]

    def __init__(self, open_logs: Callable[[str, str], None]) -> None:
        super().__init__()
        self._open_logs = open_logs
        self._model: ClusterModel | None = None  # as last shown
        self._wide: bool | None = None
        self._cells: dict[str, tuple[NodeSummary, tuple[Text, ...]]] = {}  # node -> (summary, cells)
        self._summary: Text | None = None  # whole
        self._fitted: tuple[Text, int, int] | None = None  # (summary, width, height) as last shown

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#stack-table", KeyedTable)

    def compose(self) -> ComposeResult:
        yield Static(id="stack-summary")
        yield Static(Text(LEGEND, style=render.DIM_STYLE), id="stack-legend")
        yield KeyedTable(id="stack-table")
        yield Static(id="stack-cell")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "GPU stack"
        table = self.table
        table.cursor_type = "cell"
        self._layout(self.app.size.width)
        table.focus()
        if table.row_count:
            table.move_cursor(row=0, column=1)

    def on_resize(self, event: Any) -> None:
        self._layout(event.size.width)
        self._show_summary()

    def on_screen_resume(self) -> None:
        host(self).show_now(self)  # back from a log screen: the app refreshed only the top screen

    def _layout(self, width: int) -> None:
        wide = width >= MATRIX_WIDE_AT
        if wide == self._wide:
            return
        self._wide = wide
        self.query_one("#stack-legend").display = not wide
        self.table.set_columns(matrix_columns(wide))
        self._cells.clear()
        host(self).show_now(self)

    def show(self, model: ClusterModel | None, context: ViewContext) -> None:
        self._model = model
        if model is None or self._wide is None:
            return
        wide = self._wide
        rows = []
        failing = []
        stuck_plumbing = []
        for summary in model.node_summaries():
            stuck_plumbing += [(summary.name, p) for p in summary.problems if p.code in stuck.CODES]
            if not summary.components:
                continue
            cached = self._cells.get(summary.name)
            cells = cached[1] if cached is not None and cached[0] is summary else matrix_row(summary, wide)
            self._cells[summary.name] = (summary, cells)
            rows.append((summary.name, cells))
            failing += [(summary.name, c) for c, s in summary.components.items() if s.state in stack.FAILING_STATES]
        if len(self._cells) > len(rows):
            shown = {name for name, _ in rows}
            for name in [n for n in self._cells if n not in shown]:
                del self._cells[name]
        self.table.show(rows)
        text = stack_summary(model.stack(), model.cluster_policy_state(), model.cluster_problems(), failing, stuck_plumbing, context.now)
        if not model.stack_known:
            text.append("\n")
            text.append_text(render.text(_unknown_reason(model), style=render.WARN_STYLE, limit=300))
        elif not rows:
            text.append("\nno GPU node runs any part of the stack", style=render.DIM_STYLE)
        self._summary = text
        self._show_summary()
        self._show_cell()

    def _show_summary(self) -> None:
        """The summary in half the screen (less its footer), wrapped here so that what is cut is known and counted."""
        if self._summary is None:
            return
        width, height = self.app.size
        shown = (self._summary, width - 2, max(3, (height - 1) // 2))  # the padding; the rows #stack-summary may take
        if shown == self._fitted:
            return
        self._fitted = shown
        summary = self.query_one("#stack-summary", Static)
        summary.styles.max_height = shown[2]
        summary.update(fit_summary(*shown))

    @property
    def text(self) -> str:
        """What the screen says above and below the matrix, as plain text (tests)."""
        parts = [self._summary.plain if self._summary else ""]
        parts.append(str(self.query_one("#stack-cell", Static).render()))
        return "\n".join(parts)

    def chosen(self) -> tuple[str, str] | None:
        """(node, component) under the cursor; None on the node column or an empty table."""
        table = self.table
        node = table.cursor_key
        column = table.cursor_column
        if node is None or column < 1 or column > len(stack.COMPONENTS):
            return None
        return node, stack.COMPONENTS[column - 1]

    def _show_cell(self) -> None:
        chosen = self.chosen()
        line = Text("← → choose a component · l or enter: its logs", style=render.DIM_STYLE)
        if chosen is not None:
            model = self._model
            line = cell_detail(chosen[0], model.components(chosen[0]).get(chosen[1]) if model else None)
        self.query_one("#stack-cell", Static).update(line)

    @on(DataTable.CellHighlighted, "#stack-table")
    def _cell_moved(self) -> None:
        self._show_cell()

    @on(DataTable.CellSelected, "#stack-table")
    def _cell_chosen(self, event: DataTable.CellSelected) -> None:
        event.stop()
        self.action_logs()

    def action_logs(self) -> None:
        chosen = self.chosen()
        if chosen is None:
            self.notify("choose a component's cell first (← →)", markup=False)
            return
        node, component = chosen
        model = self._model
        state = model.components(node).get(component) if model else None
        if state is None or state.pod is None:
            why = state.describe() if state is not None else "unknown"
            self.notify(f"no {component} pod on {clean(node, 63)}: {clean(why, 200)}", markup=False)
            return
        self._open_logs(node, component)

    def action_findings(self) -> None:
        if self._summary is not None:
            self.app.push_screen(TextScreen("GPU stack", self._summary))

    def action_back(self) -> None:
        self.app.pop_screen()


def _unknown_reason(model: ClusterModel) -> str:
    states = [f"{kind}: {model.states[kind].describe()}" for kind in ("pods", "daemonsets") if kind in model.states]
    return "component states unknown until pods and DaemonSets are read (" + "; ".join(states) + ")"


class ComponentLogScreen(Screen[None]):
    """One component's pod log on one node, full screen: the last lines, then followed; a
    crash-looping container's previous instance first; onto the next instance when it restarts.
    api: the connection's, that the log is read through (None: not connected, no log)."""

    BINDINGS = [Binding("escape,q", "back", "Back")]

    def __init__(self, node: str, component: str, api: Client | None) -> None:
        super().__init__()
        self.node = node
        self.component = component
        self._api = api
        self._model: ClusterModel | None = None  # as last shown
        self._follower: LogFollower | None = None

    @property
    def log_view(self) -> PluginLog:
        return self.query_one("#component-log", PluginLog)

    def compose(self) -> ComposeResult:
        yield Static(id="component-info")
        yield PluginLog(id="component-log")
        yield Footer()

    def on_mount(self) -> None:
        self.title = f"{self.component} logs · {clean(self.node, 63)}"
        host(self).show_now(self)
        self.log_view.focus()
        self._follow()

    def _state(self) -> stack.ComponentState | None:
        model = self._model
        return model.components(self.node).get(self.component) if model is not None else None

    def show(self, model: ClusterModel | None, context: ViewContext) -> None:
        self._model = model
        state = self._state()
        info = render.text(self.node, style="bold", limit=63)
        info.append(" · ")
        if state is None:
            info.append(f"{self.component}: unknown", style=render.DIM_STYLE)
        else:
            info.append_text(component_line(state))
            if state.container:
                info.append(" · container ", style=render.DIM_STYLE)
                info.append_text(render.text(state.container, limit=63))
        self.query_one("#component-info", Static).update(info)
        if self._follower is not None:
            self._follower.changed()

    def _source(self) -> LogSource | None:
        state = self._state()
        if state is None or state.pod is None:
            return None
        namespace, pod = state.pod.split("/", 1)
        return LogSource(namespace, pod, state.container, restarts=state.restarts, crash_looping=state.state == stack.CRASH_LOOPING)

    @work(exclusive=True, group="component-log")
    async def _follow(self) -> None:
        if self._api is None:
            return
        log = self.log_view
        self._follower = LogFollower(self._api, self._source, tail=COMPONENT_LOG_TAIL, absent=f"no {self.component} pod on this node")
        async for line in self._follower.lines():
            log.show(line)

    def action_back(self) -> None:
        self.app.pop_screen()


Snapshotter = Callable[[], nvml.LocalSnapshot]


class LocalScreen(Screen[None]):
    """This host's GPUs (NVML), sampled every LOCAL_INTERVAL in a thread while the screen is shown;
    without NVML, the one line saying why."""

    BINDINGS = [Binding("escape,q", "back", "Back")]

    def __init__(self, snapshot: Snapshotter = nvml.local_snapshot, interval: float = LOCAL_INTERVAL) -> None:
        super().__init__()
        self._snapshot = snapshot
        self._interval = interval
        self._shown: Text | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="local"):
            yield Static(Text("reading NVML…", style=render.DIM_STYLE), id="local-body")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "Local GPUs"
        self._sample()
        self.set_interval(self._interval, self._sample)

    @work(thread=True, exclusive=True, group="local-gpus")
    def _sample(self) -> None:
        snapshot = self._snapshot()  # never raises
        self.app.call_from_thread(self._show, local_text(snapshot))

    def _show(self, body: Text) -> None:
        if body != self._shown:
            self._shown = body
            self.query_one("#local-body", Static).update(body)

    @property
    def text(self) -> str:
        return self._shown.plain if self._shown is not None else ""

    def action_back(self) -> None:
        self.app.pop_screen()


class StackHost(Protocol):
    """The app, as the GPU stack's screens need it."""

    @property
    def screen(self) -> Screen[object]: ...
    @property
    def conn(self) -> Connection | None: ...
    def push_screen(self, screen: Screen[None]) -> AwaitMount: ...


class StackViews:
    """The app's: `s` the Stack screen and a component's logs, `g` the Local screen."""

    def __init__(self, host: StackHost) -> None:
        self._host = host

    def open(self) -> None:
        if not isinstance(self._host.screen, StackScreen):
            self._host.push_screen(StackScreen(self.open_component_logs))

    def open_component_logs(self, node: str, component: str) -> None:
        conn = self._host.conn
        self._host.push_screen(ComponentLogScreen(node, component, conn.api if conn is not None else None))

    def open_local(self) -> None:
        if not isinstance(self._host.screen, LocalScreen):
            self._host.push_screen(LocalScreen())
