"""GpuTuiApp: the live screen. It owns the cluster model and the plugin-log stream.

Data flows one way: watch event -> model -> Change (counted, not rendered) ->
one coalesced refresh at most every REFRESH_INTERVAL -> keyed table deltas.
Widgets never call the API.
"""
from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path
from typing import Awaitable, Callable, Iterable, TypeVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Input, Static

from gputui.kube import gpu
from gputui.kube.config import Connection, ConnectError, check
from gputui.kube.model import EVENTS, PODS, STATE, Change, ClusterModel
from gputui.kube.watch import ABSENT, LIVE, SYNCING

from . import render
from .commands import GpuCommands
from .panes import node_columns, node_row, pod_columns, pod_row
from .sanitize import clean
from .screens import HelpScreen, NodeDetails, NodeDetailsScreen, TextScreen
from .table import KeyedTable
from .stack import StackActions
from .verify import VerifyActions, VerifySettings
from .widgets import ClusterHeader, FilterBar, Pane, PluginLog

W = TypeVar("W", bound=Widget)

ALL_PARTS = frozenset({"header", "nodes", "pods", "plugin"})
REFRESH_INTERVAL = 0.1  # at most ten refreshes a second, however fast events come
MAX_REFRESH_INTERVAL = 1.0
WATCH_OK = (LIVE, ABSENT)  # absent: a kind this cluster does not serve (no CRD), nothing wrong
NODE_PARTS = frozenset({"header", "nodes"})
NODE_SLICE_SECONDS = 0.005  # node summaries are computed for at most this long between two yields to the loop
POD_ROWS_SECONDS = 0.005  # GPU-pod rows are brought up to date for at most this long per refresh; the rest next time
FILL_SECONDS, FILL_PAUSE = 0.015, 0.02  # the pods table filled from scratch: longer slices, one soon after the other
AGE_INTERVAL = 5.0  # ages tick on their own; a cell is redrawn only when its text changes
NARROW_WIDTH = 100
PLUGIN_LOG_TAIL = 50

Connector = Callable[[str | None], Awaitable[Connection]]


def _node_facts(summary: gpu.NodeSummary) -> tuple:
    """What a node row shows, to tell a recomputed summary that changed nothing visible."""
    node, facts = summary.node, summary.facts
    usage = tuple((name, u.capacity, u.allocatable, u.allocated) for name, u in summary.usage.items())
    return (node.ready, node.unschedulable, usage, tuple(p.code for p in summary.problems), facts.product, facts.memory_mib)


def _row_facts(entry: gpu.GpuPod) -> tuple:
    """What a GPU-pod row shows: most pod events (annotations, heartbeats) change none of it."""
    pod = entry.pod
    return (pod.node, pod.status, pod.ready, pod.total, pod.restarts, pod.deleted is None, entry.reason, tuple(entry.gpu.items()))


def stylesheet() -> Path:
    """styles/gputui.tcss from a source checkout, or gputui/styles/ in an installed wheel."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "styles" / "gputui.tcss", package.parent / "styles" / "gputui.tcss"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError("gputui's stylesheet (styles/gputui.tcss) is missing from this installation")


class MainScreen(Screen[None]):
    """Header, the three panes, the filter bar and the footer. Its keys act on the app."""

    BINDINGS = [
        Binding("slash", "app.filter", "Filter"),
        Binding("a", "app.toggle_all_pods", "All/node pods"),
        Binding("l", "app.logs_full", "Logs"),
        Binding("escape", "app.back", "Back", show=False),
        Binding("v", "app.verify", "Verify", show=False),
        Binding("V", "app.verify_all", "Verify all", show=False),
        Binding("s", "app.stack", "Stack"),
        Binding("g", "app.local_gpus", "Local GPUs", show=False),
        Binding("space", "app.mark_node", "Mark", show=False),
    ]

    def compose(self) -> ComposeResult:
        yield ClusterHeader(id="header")
        with Pane("Nodes", id="nodes"):
            yield KeyedTable(id="nodes-table")
        with Pane("GPU pods", id="pods"):
            yield KeyedTable(id="pods-table")
        with Pane("Device plugin", id="plugin"):
            yield Static(id="plugin-info")
            yield PluginLog(id="plugin-log")
        yield FilterBar(placeholder="filter (enter keeps, esc clears)", id="filter")
        yield Footer()

    def on_mount(self) -> None:
        self.app.main_screen_ready()  # type: ignore[attr-defined]


class GpuTuiApp(StackActions, VerifyActions, App[None]):
    CSS_PATH = str(stylesheet())
    TITLE = "gputui"
    COMMANDS = App.COMMANDS | {GpuCommands}
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("ctrl+p", "command_palette", "Palette", show=False),
    ]

    def __init__(
        self,
        connector: Connector,
        *,
        context: str | None = None,
        contexts: Callable[[], list[str]] = lambda: [],
        resources: gpu.GpuResources = gpu.GpuResources(),
        clock: Callable[[], float] = time.time,
        model_options: dict | None = None,
        verify: VerifySettings = VerifySettings(),
    ) -> None:
        super().__init__()
        self.connector = connector
        self.context = context
        self.list_contexts = contexts
        self.resources = resources
        self.clock = clock
        self.model_options = model_options or {}
        self.verify_settings = verify
        self.marked_nodes: set[str] = set()  # space in the Nodes pane: `v` verifies these
        self.conn: Connection | None = None
        self.error: str | None = None  # why the app could not start, for the command line
        self.model: ClusterModel | None = None
        self.server_version = ""
        self.namespace: str | None = None  # None: all namespaces
        self.selected_node: str | None = None
        self.pods_all_nodes = True
        self._unsubscribe: Callable[[], None] | None = None
        self._flush_timer = None
        self._changes = 0
        self.refreshes = 0  # coalesced refreshes done (tests and the benchmark read it)
        self._node_cells: dict[str, tuple[gpu.NodeSummary, tuple, tuple]] = {}  # name -> (summary, facts, cells)
        # GPU pods shown or showable: key -> (GpuPod, age text, cells); None in
        # _stale_pods means every pod must be looked at again.
        self._pod_view: dict[tuple[str, str], tuple[gpu.GpuPod, str, tuple]] = {}
        self._stale_pods: set[tuple[str, str]] | None = None
        self._pods_filling = False  # rebuilding every row (start, layout, relist): slices follow each other soon
        self._pods_scope: tuple | None = None  # (all nodes?, node, namespace) of the rows the pods table was given
        self._nodes_generation = -1  # the model's summary_generation when node summaries were last gathered
        self._plugin_identity: tuple[str, str, int] | None = None
        self._plugin_changed = asyncio.Event()
        self._plugin_info: Text | None = None
        self._filter_target: KeyedTable | None = None
        self._narrow: bool | None = None
        self._main_ready = False
        self._stale: set[str] = set()
        self._refresh_cost = 0.0  # seconds the last coalesced refresh took
        self._gathering = False  # node summaries being gathered (see _gather_nodes)
        self._freeze_when_filled = False  # the model has synced: freeze the tables' rows once they are filled

    # -- layout ------------------------------------------------------------------
    def get_default_screen(self) -> Screen:
        return MainScreen(id="main")

    def _main(self, selector: str, expect_type: type[W] = Widget) -> W:  # type: ignore[assignment]
        """A widget of the main screen, whichever screen is on top."""
        return self.screen_stack[0].query_one(selector, expect_type)

    @property
    def nodes_table(self) -> KeyedTable:
        return self._main("#nodes-table", KeyedTable)

    @property
    def pods_table(self) -> KeyedTable:
        return self._main("#pods-table", KeyedTable)

    @property
    def plugin_log(self) -> PluginLog:
        return self._main("#plugin-log", PluginLog)

    def main_screen_ready(self) -> None:
        """The panes exist: start connecting."""
        self._main_ready = True
        self.nodes_table.focus()
        self._apply_layout(self.size.width)
        self._main("#header", ClusterHeader).update(Text("connecting…", style="dim"))
        self.set_interval(AGE_INTERVAL, self._age_tick)
        self._connect()

    def _age_tick(self) -> None:
        if self._stale_pods is not None:
            self._stale_pods.update(self._pod_view)  # their ages: looked at like any change, a slice at a time
        self._request("pods", "plugin")

    def on_resize(self, event) -> None:  # noqa: ANN001
        if not self._main_ready or not self.screen_stack:
            return
        self._apply_layout(event.size.width)
        self._refresh_views(("header",))

    def _apply_layout(self, width: int) -> None:
        narrow = width < NARROW_WIDTH
        if narrow == self._narrow:
            return
        self._narrow = narrow
        self.screen_stack[0].set_class(narrow, "-narrow")
        self.nodes_table.set_columns(node_columns(narrow))
        self.pods_table.set_columns(pod_columns(narrow))
        self._node_cells.clear()
        self._stale_pods = None
        self._refresh_views()

    # -- connecting and the change feed -------------------------------------------------
    @work(exclusive=True, group="connect")
    async def _connect(self) -> None:
        switching = self.model is not None
        await self._disconnect()
        try:
            self.conn = await self.connector(self.context)
        except ConnectError as error:
            if switching:  # the palette's context switch: say why, stay
                self.notify(clean(str(error), 300), severity="error", markup=False)
                return
            self.error = str(error)  # printed on stderr once the terminal is back
            self.exit(return_code=2)
            return
        self.context = self.conn.context
        self.model = ClusterModel(self.conn.api, resources=self.resources, **self.model_options)
        self._unsubscribe = self.model.subscribe(self._on_change)
        await self.model.start()
        self._when_synced(self.model)
        self.check_leftovers()
        self._refresh_views()
        self._ask_version(self.conn)

    @work(exclusive=True, group="synced")
    async def _when_synced(self, model: ClusterModel) -> None:
        # Waiting for the first lists is what lets the model move its records out of the
        # cyclic GC's way (gc.freeze); the tables' rows follow once they are filled.
        await model.wait_synced()
        self._freeze_when_filled = True

    @work(exclusive=True, group="version")
    async def _ask_version(self, conn: Connection) -> None:
        try:
            self.server_version = await check(conn)
        except ConnectError as error:
            self.server_version = ""
            self.notify(clean(str(error)), severity="warning", markup=False)
        self._refresh_views()

    async def _disconnect(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self.model is not None:
            await self.model.stop()
            self.model = None
        if self.conn is not None:
            await self.conn.close()
            self.conn = None

    def _on_change(self, change: Change) -> None:
        """Called by the model once per applied event: note what is stale, refresh later."""
        self._changes += 1
        if change.kind == PODS:
            self._note_stale_pod(change.key)
            if self.model is not None and self.model.summary_generation == self._nodes_generation:
                self._request("pods", "plugin")  # no node summary changed: the nodes stay as they are
                return
        elif change.kind == EVENTS:
            if change.key is None:
                self._note_stale_pod(None)
            elif change.key[0] == "Pod":  # (kind, namespace, name): a pending pod's reason
                self._note_stale_pod(change.key[1:])
            self._request("pods")
            return
        self._request(*ALL_PARTS)

    def _note_stale_pod(self, key: object) -> None:
        if key is None:
            self._stale_pods = None  # all of them
        elif self._stale_pods is not None:
            self._stale_pods.add(key)  # type: ignore[arg-type]

    def _request(self, *parts: str, soon: bool = False) -> None:
        """Mark parts of the screen stale; one refresh within REFRESH_INTERVAL redraws them.
        Under an event storm the interval stretches so that refreshing takes at most
        a quarter of the loop's time, whatever the cluster's size. soon: a table being
        filled goes on after FILL_PAUSE."""
        self._stale.update(parts)
        if self._flush_timer is None:
            delay = FILL_PAUSE if soon else min(MAX_REFRESH_INTERVAL, max(REFRESH_INTERVAL, 3 * self._refresh_cost))
            self._flush_timer = self.set_timer(delay, self._flush)

    def _flush(self) -> None:
        self._flush_timer = None
        started = time.perf_counter()
        parts, self._stale = self._stale, set()
        node_parts = parts & NODE_PARTS
        self._refresh_views(parts - node_parts)
        self._refresh_cost = time.perf_counter() - started
        self._freeze_if_filled()
        if node_parts:
            if self._gathering:
                self._stale |= node_parts  # the gathering under way is followed by another
            else:
                self._gathering = True
                self._gather_nodes(node_parts)

    @work(group="nodes")
    async def _gather_nodes(self, parts: frozenset[str] | set[str]) -> None:
        """Node summaries in slices, yielding to keys and watches in between: with
        thousands of nodes changing at once, their GPU accounting takes a while."""
        try:
            model = self.model
            if model is None:
                return
            self._nodes_generation = model.summary_generation  # a summary dropped from here on: gathered again
            summaries = []
            slice_started = time.perf_counter()
            for name in list(model.nodes.records):
                if time.perf_counter() - slice_started > NODE_SLICE_SECONDS:
                    await asyncio.sleep(0)
                    if self.model is not model:
                        return
                    slice_started = time.perf_counter()
                summary = model.summary(name)
                if summary is not None:
                    summaries.append(summary)
            summaries.sort(key=lambda s: (not s.gpu_node, s.name))
            tick = time.perf_counter()
            self._refresh_views(parts, summaries=summaries)
            self._refresh_cost = max(self._refresh_cost, time.perf_counter() - tick)
        finally:
            self._gathering = False
            if self._stale & NODE_PARTS:
                self._request()
            self._freeze_if_filled()

    def _freeze_if_filled(self) -> None:
        """Once, when the tables first show the synced cluster: keep what they hold (tens of
        thousands of cells on a big cluster) out of the cyclic GC's way, as the model does
        with its records. Scanned, a full collection stalls the app for 100-200 ms, and
        under an event storm CPython starts one every second or two."""
        model = self.model
        if not self._freeze_when_filled or model is None or self._gathering or self._pods_filling:
            return
        if self._stale_pods is None or self._nodes_generation != model.summary_generation:
            return
        self._freeze_when_filled = False
        gc.collect()
        gc.freeze()

    async def action_quit(self) -> None:
        self._main_ready = False
        await self.stop_verifications()  # their pods are deleted over the connection closed next
        await self._disconnect()
        self.exit()

    async def on_unmount(self) -> None:
        self._main_ready = False
        await self.stop_verifications()
        await self._disconnect()

    # -- rendering ---------------------------------------------------------------------
    def _refresh_views(self, parts: Iterable[str] = ALL_PARTS, summaries: list[gpu.NodeSummary] | None = None) -> None:
        """Redraw the given parts and every stale one, now (summaries: already gathered)."""
        if not self._main_ready or not self.is_running or not self.screen_stack:
            return  # not mounted yet, or shutting down (workers may still run while the screens close)
        parts = self._stale.union(parts)
        self._stale.clear()
        self.refreshes += 1
        model = self.model
        now = self.clock()
        with self.batch_update():
            if model is None:
                self._refresh_header(None)
                return
            if "nodes" in parts or "header" in parts:
                if summaries is None:
                    summaries = model.node_summaries()
                self._refresh_header(gpu.totals(summaries))
                if "nodes" in parts:
                    self._refresh_nodes(summaries)
            if "pods" in parts:
                self._refresh_pods(model, now)
            if "plugin" in parts:
                self._refresh_plugin(model, now)
            refresh_screen = getattr(self.screen, "refresh_from_model", None)  # details, stack, component logs
            if refresh_screen is not None:
                refresh_screen()

    def _refresh_header(self, totals_by_resource: dict[str, gpu.Usage] | None) -> None:
        """Context, server, watch states, then the cluster's GPU totals; two lines at 80 columns."""
        header = self._main("#header", ClusterHeader)
        narrow = bool(self._narrow)
        first = [Text("gputui", style="bold", end="")]
        first.append(Text("context ", style="dim", end="") + render.text(self.context or "in-cluster", limit=60))
        if self.server_version:
            first.append(Text("server ", style="dim", end="") + render.text(self.server_version, limit=30))
        if self.namespace:
            first.append(Text("namespace ", style="dim", end="") + render.text(self.namespace, limit=63))
        model = self.model
        if model is None:
            first.append(Text("connecting…", style="dim", end=""))
            totals: list[Text] = []
        else:
            first.append(self._watch_states(model))
            totals = render.totals_parts(totals_by_resource or {}, compact=narrow)
        width = max(20, self.size.width - 2)
        if narrow:
            lines = render.pack(first + totals, width)
        else:
            lines = render.pack(first, width, sep="  ") + render.pack(totals, width)
        if len(lines) > 2:
            lines = lines[:2]
            lines[1].append(" …", style="dim")
        content = Text("\n", end="").join(lines)
        if content != header.shown:
            header.shown = content
            header.update(content)

    @staticmethod
    def _watch_states(model: ClusterModel) -> Text:
        """`watches live`, or the watches that are not: `pods retrying in 4 s: connection refused`."""
        troubled = [(kind, state) for kind, state in model.states.items() if state.phase not in WATCH_OK]
        out = Text("watches ", style="dim", end="")
        if not troubled:
            out.append("live", style=render.OK_STYLE)
            return out
        parts = []
        for kind, state in troubled:
            style = render.WARN_STYLE if state.phase == SYNCING else render.BAD_STYLE
            parts.append(Text(f"{kind} ", end="") + render.text(state.describe(), style=style, limit=80))
        return out + render.joined(parts)

    def _refresh_nodes(self, summaries: list[gpu.NodeSummary]) -> None:
        narrow = bool(self._narrow)
        cache = self._node_cells
        rows = []
        for summary in summaries:
            cached = cache.get(summary.name)
            if cached is not None and cached[0] is summary:
                cells = cached[2]
            else:
                facts = _node_facts(summary)
                cells = cached[2] if cached is not None and cached[1] == facts else node_row(summary, narrow)
                cache[summary.name] = (summary, facts, cells)
            rows.append((summary.name, self.with_mark(summary.name, cells)))
        if len(cache) > len(rows):
            names = {name for name, _ in rows}
            for name in [n for n in cache if n not in names]:
                del cache[name]
        self.nodes_table.show(rows)
        pane = self._main("#nodes", Pane)
        pane.set_status(self._pane_status("nodes", self.nodes_table))

    def _refresh_pods(self, model: ClusterModel, now: float) -> None:
        """Bring the GPU-pod rows up to date. Only stale pods are looked at again, the rows on
        screen first, for at most POD_ROWS_SECONDS (the rest next time: an event storm never
        blocks the loop, and what is shown stays current; a table filled from scratch goes
        on soon); a row is rebuilt only when what it shows changed, and the table is given
        only those rows unless the set of rows changed."""
        view = self._pod_view
        stale = self._stale_pods
        self._stale_pods = set()
        records = model.pods.records
        regroup = stale is None  # the rows shown are other pods, or in another order
        if stale is None:
            view.clear()
            stale = set(records)
            self._pods_filling = True
        narrow = bool(self._narrow)
        changed: dict[tuple[str, str], tuple] = {}
        deadline = time.perf_counter() + (FILL_SECONDS if self._pods_filling else POD_ROWS_SECONDS)
        ordered = self._visible_first(stale)
        for n, key in enumerate(ordered):
            if n % 16 == 0 and n and time.perf_counter() > deadline:
                self._stale_pods.update(ordered[n:])
                self._request("pods", soon=self._pods_filling)
                break
            pod = records.get(key)
            events = model.events_for("Pod", *key) if pod is not None and pod.node is None else ()
            entry = gpu.gpu_pod(pod, self.resources, events) if pod is not None else None
            shown = view.get(key)
            if entry is None:
                if shown is not None:
                    del view[key]
                    regroup = True
                continue
            if shown is None or shown[0].pod.node != entry.pod.node:
                regroup = True  # a new row, or one that moves in or out of a node's view
            age_text = render.age(entry.pod.created, now)
            if shown is not None and shown[1] == age_text and _row_facts(shown[0]) == _row_facts(entry):
                view[key] = (entry, age_text, shown[2])  # changed, but nothing the row shows
            else:
                changed[key] = cells = pod_row(entry, age_text, narrow)
                view[key] = (entry, age_text, cells)
        else:
            self._pods_filling = False
        node = None if self.pods_all_nodes else self.selected_node
        scope = (self.pods_all_nodes, node, self.namespace)
        if regroup or scope != self._pods_scope:
            self._pods_scope = scope
            self.pods_table.show(self._pod_rows(model, node))
        elif changed:
            self.pods_table.update_rows({f"{key[0]}/{key[1]}": cells for key, cells in changed.items()})
        where = "all nodes" if self.pods_all_nodes else f"node {clean(self.selected_node or '-', 60)}"
        title = f"GPU pods · {where}"
        if self.namespace:
            title += f" · ns {clean(self.namespace, 63)}"
        pane = self._main("#pods", Pane)
        pane.set_title(title)
        pane.set_status(self._pane_status(PODS, self.pods_table))

    def _visible_first(self, keys: set[tuple[str, str]]) -> list[tuple[str, str]]:
        """The pods' keys, those of the rows on screen first."""
        on_screen = [key for key in (tuple(row.split("/", 1)) for row in self.pods_table.visible_keys()) if key in keys]
        if not on_screen:
            return list(keys)
        first = set(on_screen)
        return on_screen + [key for key in keys if key not in first]  # type: ignore[misc]

    def _pod_rows(self, model: ClusterModel, node: str | None) -> list[tuple[str, tuple]]:
        """The pods table's rows, by namespace and name: every GPU pod, or the selected node's."""
        if node is None and not self.pods_all_nodes:
            return []
        view = self._pod_view
        keys = view.keys() if node is None else [key for key in model.pods.by_node.get(node, ()) if key in view]
        return [
            (f"{key[0]}/{key[1]}", view[key][2])
            for key in sorted(keys)
            if self.namespace is None or key[0] == self.namespace
        ]

    def _pane_status(self, kind: str, table: KeyedTable) -> str:
        parts = []
        if self.model is not None:
            state = self.model.states.get(kind)
            if state is not None and state.phase not in WATCH_OK:
                parts.append(state.describe())
        if table.filter_text:
            parts.append(f"filter: {clean(table.filter_text, 40)}")
        return " · ".join(parts)

    def _refresh_plugin(self, model: ClusterModel, now: float) -> None:
        pane = self._main("#plugin", Pane)
        node = self.selected_node
        pod = model.plugin_pod(node) if node else None
        identity = (pod.uid, pod.name, pod.restarts) if pod else None
        if identity != self._plugin_identity:
            self._plugin_identity = identity
            self._plugin_changed.set()
        pane.set_title(f"Device plugin · {clean(node, 60)}" if node else "Device plugin")
        if pod is None:
            known = model.pods_known
            message = "no device-plugin pod on this node" if known else model.states[PODS].describe() if PODS in model.states else "pods are not watched"
            self._show_plugin_info(Text(message if node else "no node selected", style="dim"))
            pane.set_status("")
            return
        line = render.pod_name(pod)
        line.append("  ")
        ready = gpu.pod_is_ready(pod)
        line.append("ready" if ready else "not ready", style=render.OK_STYLE if ready else render.BAD_STYLE)
        line.append(f"  restarts {pod.restarts}", style=render.BAD_STYLE if gpu.crash_looping(pod) else "")
        line.append(f"  age {render.age(pod.created, now)}", style="dim")
        container = gpu.plugin_container(pod)
        if container and len(pod.containers) > 1:
            line.append("  container ", style="dim")
            line.append_text(render.text(container, limit=60))
        self._show_plugin_info(line)
        pane.set_status(render.clean(pod.status, 40) if not ready else "")

    def _show_plugin_info(self, line: Text) -> None:
        # Only when it changed: an update lays the whole screen out again, every table redrawn.
        if self._plugin_info != line:
            self._plugin_info = line
            self._main("#plugin-info", Static).update(line)

    # -- the device-plugin log stream -------------------------------------------------------
    @work(exclusive=True, group="plugin-log")
    async def _follow_plugin_logs(self, node: str) -> None:
        """Stream the node's plugin logs: last lines, then follow; onto the next instance
        when the container restarts or the pod is replaced. Cancelled when the node changes."""
        if not self._main_ready or not self.is_running:
            return  # started just as the app quits: its screens may be gone already
        log = self.plugin_log
        log.clear()
        streamed: tuple[str, str, int] | None = None
        while True:
            model = self.model
            pod = model.plugin_pod(node) if model is not None else None
            if pod is None:
                streamed = None
                await self._wait_plugin_change(timeout=None)
                continue
            identity = (pod.uid, pod.name, pod.restarts)
            if streamed is not None:
                if identity == streamed:
                    await self._wait_plugin_change(timeout=5.0)
                    continue
                what = "container restarted" if identity[0] == streamed[0] else "new plugin pod"
                log.add_note(f"{what}: {clean(pod.name, 80)}, restarts {pod.restarts}")
            container = gpu.plugin_container(pod)
            streamed = identity
            try:
                await self._stream_into(log, pod.namespace, pod.name, container)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001  (shown in place; the rest of the app goes on)
                log.add_note(f"log stream failed: {clean(str(error), 200)}")
                await self._wait_plugin_change(timeout=5.0)

    async def _stream_into(self, log: PluginLog, namespace: str, pod: str, container: str | None) -> None:
        from gputui.kube.logs import stream_logs  # noqa: PLC0415

        assert self.conn is not None
        async for line in stream_logs(self.conn.api, namespace, pod, container, tail=PLUGIN_LOG_TAIL, follow=True):
            log.queue(line)
        log.flush()

    async def _wait_plugin_change(self, timeout: float | None) -> None:
        self._plugin_changed.clear()
        try:
            await asyncio.wait_for(self._plugin_changed.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    # -- selection and keys -------------------------------------------------------------------
    @on(DataTable.RowHighlighted, "#nodes-table")
    def _node_highlighted(self, event: DataTable.RowHighlighted) -> None:
        name = event.row_key.value
        if name is None or name == self.selected_node:
            return
        first_selection = self.selected_node is None
        self.selected_node = name
        if not first_selection:
            self.pods_all_nodes = False  # choosing a node narrows the pods to it
        self._plugin_identity = None
        self._plugin_info = None
        self._follow_plugin_logs(name)
        # The cursor moves now; the narrowed pods and the plugin pane follow within
        # REFRESH_INTERVAL, once however fast the keys come.
        self._request("pods", "plugin")

    @on(DataTable.RowSelected, "#nodes-table")
    def _node_chosen(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value:
            self.show_node(event.row_key.value)

    @on(DataTable.RowSelected, "#pods-table")
    def _pod_chosen(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value or ""
        namespace, _, name = key.partition("/")
        model = self.model
        pod = model.pod(namespace, name) if model else None
        if pod is None:
            return
        shown = self._pod_view.get(pod.key)
        body = Text(end="")
        body.append_text(render.pod_name(pod))
        body.append("\n")
        body.append_text(render.pod_status(pod))
        if shown is not None and shown[0].reason:
            body.append("\n\n")
            body.append_text(render.text(shown[0].reason, limit=10_000))
        for event_record in model.events_for("Pod", namespace, name)[:10]:
            body.append("\n")
            body.append_text(render.event_line(event_record, self.clock()))
        self.push_screen(TextScreen("GPU pod", body))

    def show_node(self, name: str) -> None:
        self.push_screen(NodeDetailsScreen(name, self.node_details, self.clock, on_show=lambda: self.want_node_metrics(name)))

    def node_details(self, name: str) -> NodeDetails | None:
        model = self.model
        summary = model.summary(name) if model else None
        if model is None or summary is None:
            return None
        pods = [(pod, self.resources.of(pod.requests)) for pod in model.pods_on_node(name) if not pod.finished]
        return NodeDetails(summary, pods, model.events_for("Node", "", name)[:20], model.node_metrics(name), model.metrics.series)

    def jump_to_node(self, name: str) -> None:
        table = self.nodes_table
        if name in table.shown_keys:
            table.move_cursor(row=table.row_index(name))
            table.focus()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_toggle_all_pods(self) -> None:
        self.pods_all_nodes = not self.pods_all_nodes
        self._refresh_views(("pods",))

    def action_logs_full(self) -> None:
        if self.screen.maximized is not None:
            self.screen.minimize()
        else:
            self.screen.maximize(self.plugin_log)
            self.plugin_log.focus()

    def action_back(self) -> None:
        bar = self._main(FilterBar)
        if bar.has_class("-active"):
            bar.value = ""  # esc in the filter clears it
            self._close_filter()
            return
        if self.screen.maximized is not None:
            self.screen.minimize()
            return
        focused = self.focused
        if isinstance(focused, KeyedTable) and focused.filter_text:
            focused.set_filter("")
            self._refresh_views(("nodes", "pods"))

    def toggle_pane(self, pane_id: str) -> None:
        pane = self._main(f"#{pane_id}")
        pane.set_class(not pane.has_class("-hidden"), "-hidden")

    def set_namespace(self, namespace: str | None) -> None:
        self.namespace = namespace
        self._refresh_views(("header", "pods"))

    def switch_context(self, context: str) -> None:
        if self.verifications_running():  # reconnecting closes the connection their pods' deletion needs
            self.notify("a verification is running: cancel it (esc) before switching context", severity="warning", markup=False)
            return
        self.context = context
        self.selected_node = None
        self.server_version = ""
        self._node_cells.clear()
        self._stale_pods = None
        self._nodes_generation = -1
        self.nodes_table.show([])
        self.pods_table.show([])
        self.plugin_log.clear()
        self._connect()

    # -- filtering --------------------------------------------------------------------------
    def action_filter(self) -> None:
        focused = self.focused
        table = focused if isinstance(focused, KeyedTable) else self.nodes_table
        self._filter_target = table
        bar = self._main(FilterBar)
        bar.value = table.filter_text
        bar.add_class("-active")
        bar.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        target = self._filter_target
        if target is not None:
            target.set_filter(event.value)
            self._refresh_views(("nodes", "pods"))

    @on(Input.Submitted, "#filter")
    def _filter_kept(self) -> None:
        self._close_filter()

    def _close_filter(self) -> None:
        bar = self._main(FilterBar)
        bar.remove_class("-active")
        (self._filter_target or self.nodes_table).focus()
