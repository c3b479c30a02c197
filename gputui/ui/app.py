"""GpuTuiApp: the live screen. It owns the connection, the cluster model, key routing and the
ViewContext (seam.py) that every pane and screen is given with the model.

Here: MainScreen (the header and panes the app builds), connecting (and switching context), the
colours, and the app's actions and message handlers, each a one-line route to a part the app holds
(ARCHITECTURE.md lists them): the coalesced refresh (refresh.py), verification (verify/), the idle
figures (idle.py), the bad GPUs' notes (health.py), the stack's screens (stack.py), the terminal
watch (session.py), the way around a fleet (fleet_navigation.py), the filter (table_filter.py), a
row's details (row_details.py), the selected node (node_selection.py) and the main screen's layout
(main_layout.py). Widgets never call the API.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Awaitable, Callable, Sequence, TypeVar, overload

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.filter import LineFilter
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Input

from gputui.kube import gpu, kueue
from gputui.kube.config import Connection, ConnectError, check
from gputui.kube.fleet import Fleet
from gputui.kube.idle import IdleSettings
from gputui.kube.model import ClusterModel
from gputui.kube.usage import UsageFeed, UsageSettings
from gputui.kube.watches import namespaces_to_try
from gputui.last_resort import last_resort_line

from . import keys, render
from .capacity import CapacityScreen
from .colour import ReadableMonochrome, few_colours, readable, use_sixteen_colours
from .commands import GpuCommands
from .fleet_navigation import FleetNavigation
from .health import BadGpuNotes, HealthScreen
from .idle import IdleFigures, IdleScreen
from .header import About, ClusterHeader
from .node_selection import NodeSelection
from .main_layout import MainLayout
from .nodes_pane import NodesPane
from .pods_pane import PodsPane
from .plugin_pane import PluginPane
from .queues import QueuesScreen
from .usage import UsageScreen
from .refresh import AGE_INTERVAL, RefreshScheduler
from .row_details import RowDetails
from gputui.sanitize import clean
from .screens import HelpScreen
from .seam import ModelView, ViewContext
from .session import TerminalWatch
from .table import KeyedTable
from .table_filter import TableFilter
from .stack import StackViews
from .verify import VerifyFlow, VerifySettings
from .widgets import FilterBar, PluginLog

W = TypeVar("W", bound=Widget)


Connector = Callable[[str | None], Awaitable[Connection]]


def stylesheet() -> Path:
    """styles/gputui.tcss from a source checkout, or gputui/styles/ in an installed wheel."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "styles" / "gputui.tcss", package.parent / "styles" / "gputui.tcss"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError("gputui's stylesheet (styles/gputui.tcss) is missing from this installation")


class MainScreen(Screen[None]):
    """Header, the three panes, the filter bar and the footer. Its keys act on the app."""

    ESCAPE_TO_MINIMIZE = False  # esc goes to app.back, which minimises and gives focus back to the pane `l` left

    BINDINGS = keys.bindings(keys.MAIN_KEYS)

    def __init__(self, ready: Callable[[], None], parts: tuple[ClusterHeader, NodesPane, PodsPane, PluginPane, FilterBar],
                 *, id: str | None = None) -> None:  # id: Textual's word
        super().__init__(id=id)
        self._ready = ready  # the app's: the panes exist, connect
        self._parts = parts  # the app's: it hands them the model

    def compose(self) -> ComposeResult:
        yield from self._parts
        yield Footer()

    def on_mount(self) -> None:
        self._ready()


class GpuTuiApp(App[None]):
    CSS_PATH = str(stylesheet())
    TITLE = "gputui"
    COMMANDS = App.COMMANDS | {GpuCommands}
    show_tracebacks = False  # --debug: an unexpected error's traceback, as Textual prints it
    colour_system: str | None = None  # the terminal's, as Rich names them; None: asked of it (ui/colour.py)
    BINDINGS = [*keys.bindings(keys.APP_KEYS), keys.CTRL_C]  # ctrl+c as in k9s, from every screen and modal

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
        fleet: Fleet | None = None,
        namespaces: tuple[str, ...] = (),
        fallback_namespaces: tuple[str, ...] = (),
        idle: IdleSettings | None = None,
    ) -> None:
        """namespaces: -n, the GPU pods shown, and where to read pods when they cannot be listed
        cluster-wide; else the context's namespace, then fallback_namespaces (the config file's).
        idle: the idle GPUs' settings (the config file's [idle], --prometheus, --history); None: no
        Prometheus, the samples in memory."""
        super().__init__()
        self.fleet = fleet  # several clusters: the Fleet screen first, `enter` opens one here, `esc` goes back
        self.fleet_navigation = FleetNavigation(self)  # the Fleet screen, a cluster opened from it, `esc` back (fleet_navigation.py)
        self.dump_paths: tuple[str, ...] = ()  # --from: the dump's files (demo.dump_app); the header never says `live`
        self.dump_taken = ""  # --from: when it was taken, from its objects (quantities.dump_taken)
        # Under NO_COLOR, problem words keep the contrast of normal text at least (get_line_filters).
        self._readable_monochrome = ReadableMonochrome(self.current_theme.foreground or "#e0e0e0")
        render.PALETTE.start(monochrome=self.no_color)  # NO_COLOR: warnings bold, as problems: weight stands for colour
        self._first_theme = self.theme  # the terminal's own colours for verdicts until another theme is chosen
        self.connector = connector
        self.context = context
        self.list_contexts = contexts
        self.resources = resources
        self.clock = clock
        self.model_options = model_options or {}
        self.idle_settings = idle or IdleSettings(prometheus=None)
        self.scheduler = RefreshScheduler(self)  # what is stale, and when it is drawn (refresh.py)
        # the Usage screen's figures, idle under the threshold the report and the Idle view use
        self.usage_feed = UsageFeed(self.idle_settings.prometheus, on_update=self.request_refresh,
                                    settings=UsageSettings(threshold=self.idle_settings.threshold))
        self.verify = VerifyFlow(self, verify)  # marks, `v`, `V`, leftovers, and the pods deleted on the way out (verify/actions.py)
        self.conn: Connection | None = None
        self.error: str | None = None  # why the app could not start, for the command line
        self.model: ClusterModel | None = None
        self.server_version = ""
        self.namespaces: tuple[str, ...] = tuple(namespaces)  # the GPU pods shown; (): all namespaces
        self._namespaces_given = (tuple(namespaces), tuple(fallback_namespaces))
        self.selection = NodeSelection(self)  # the selected node, and the GPU pods pane's scope (node_selection.py)
        self._unsubscribe: Callable[[], None] | None = None
        self.stack = StackViews(self)  # the GPU stack's screens and this host's GPUs (stack.py)
        self.idle = IdleFigures(self, self.idle_settings)  # the pods' GPU use, kept fresh (idle.py)
        self.bad_gpu_notes = BadGpuNotes(self)  # the GPU pods pane's note of a pod on a bad GPU (health.py)
        self.cluster_header = ClusterHeader(self._about, lambda: self.nodes_pane.summaries, lambda: self.pods_pane.pending_words)
        self.nodes_pane: NodesPane = NodesPane(self.verify.with_mark)  # its columns, rows and summaries; the refresh says when to show
        self.pods_pane: PodsPane = PodsPane(self.request_refresh, self.pod_note, self.bad_gpu_notes.changed)  # its columns, rows and stale pods
        self.plugin_pane = PluginPane()  # the selected node's device plugin: its info line and log
        self.row_details = RowDetails(self)  # `enter`: a node's details, a GPU pod's popup (row_details.py)
        self.table_filter = TableFilter(self)  # `/`: the filter bar and the table it narrows (table_filter.py)
        self.main_layout = MainLayout(self)  # the width laid out for, panes hidden, the log full screen (main_layout.py)
        self._main_ready = False
        self.terminal = TerminalWatch(self)  # a hung-up terminal or a quit signal ends the app (session.py)

    def on_mount(self) -> None:
        self.terminal.start()

    # -- colours -------------------------------------------------------------------
    def get_line_filters(self) -> Sequence[LineFilter]:
        filters = super().get_line_filters()
        return readable(filters, self._readable_monochrome) if self.no_color else filters

    def watch_theme(self, theme: str) -> None:
        """The palette's theme switch reaches the verdicts and states: the theme's $success,
        $warning and $error (the terminal's own colours in the theme the app started with)."""
        if theme == self._first_theme:
            render.PALETTE.use_terminal_colours()
        else:
            colours = self.current_theme
            render.PALETTE.use_theme(colours.success, colours.warning, colours.error)
        if self._main_ready:
            self.redraw_all()  # every row, header and screen drawn again in the new colours

    # -- the main screen -------------------------------------------------------------
    def get_default_screen(self) -> Screen:
        parts = (self.cluster_header, self.nodes_pane, self.pods_pane, self.plugin_pane, self.table_filter.bar)
        return MainScreen(self.main_screen_ready, parts, id="main")

    @overload
    def _main(self, selector: str) -> Widget: ...
    @overload
    def _main(self, selector: str, expect_type: type[W]) -> W: ...
    def _main(self, selector: str, expect_type: type[Widget] = Widget) -> Widget:
        """A widget of the main screen, whichever screen is on top."""
        return self.main_screen.query_one(selector, expect_type)

    @property
    def main_screen(self) -> Screen[object]:
        """The main screen, whichever screen is on top."""
        return self.screen_stack[0]

    @property
    def nodes_table(self) -> KeyedTable:
        return self.nodes_pane.table

    @property
    def node_widths(self) -> dict[str, int]:
        """The Nodes pane's column widths (tests and benchmarks build rows as the pane does)."""
        return self.nodes_pane.widths

    @property
    def pods_table(self) -> KeyedTable:
        return self.pods_pane.table

    @property
    def pod_widths(self) -> dict[str, int]:
        """The GPU pods pane's column widths (tests and benchmarks build rows as the pane does)."""
        return self.pods_pane.widths

    @property
    def plugin_log(self) -> PluginLog:
        return self.plugin_pane.plugin_log

    # -- the seam (seam.py): what a screen is given to draw -----------------------------------
    def view_context(self, now: float | None = None) -> ViewContext:
        """What screens read besides the model, now (now: the clock's reading, when already taken)."""
        return ViewContext(now=self.clock() if now is None else now, width=self.size.width, selected_node=self.selected_node,
                           namespaces=self.namespaces, idle=self.idle.view, all_nodes=self.pods_all_nodes)

    def _about(self) -> About:
        """The connection, as the header says it."""
        acting_as = self.conn.impersonation.user if self.conn is not None else ""
        return About(self.context, acting_as, self.server_version, self.dump_paths, self.dump_taken)

    def show_now(self, view: ModelView) -> None:
        view.show(self.model, self.view_context())

    @property
    def drawing(self) -> bool:
        """The main screen is up and the app is not ending: a refresh may draw."""
        return self._main_ready and self.is_running and bool(self.screen_stack)

    def request_refresh(self, *parts: str, soon: bool = False) -> None:
        """For the app's parts: these parts of the screen redrawn at the next coalesced refresh (refresh.py)."""
        self.scheduler.request(*parts, soon=soon)

    def refresh_now(self, *parts: str) -> None:
        """For the app's parts: these parts of the screen redrawn now (refresh.py)."""
        self.scheduler.draw(parts)

    def redraw_all(self) -> None:
        """For the app's parts: every row built again, and every part drawn now (a new layout or theme)."""
        self.scheduler.rebuild_rows()
        self.scheduler.draw()

    def redraw_pod_rows(self) -> None:
        """For the app's parts: every GPU pod's row looked at again at the next coalesced refresh (refresh.py)."""
        self.scheduler.redraw_pod_rows()

    def main_screen_ready(self) -> None:
        """The panes exist: start connecting."""
        self._main_ready = True
        if few_colours(self):
            use_sixteen_colours(self)  # red stays red, focus in a calm colour (the accent would be bright red)
        self.nodes_table.focus()
        self.main_layout.apply(self.size.width)
        self.cluster_header.update(Text("connecting…", style="dim"))
        self.set_interval(AGE_INTERVAL, self.scheduler.age_tick)
        if self.fleet is not None:
            self.fleet_navigation.start()
        else:
            self._connect()

    def on_resize(self, event) -> None:  # noqa: ANN001
        self.main_layout.resized(event.size.width)

    # -- connecting ------------------------------------------------------------------------
    @work(exclusive=True, group="connect")
    async def _connect(self) -> None:
        switching = self.model is not None
        await self._disconnect()
        if self.fleet is not None and self.context is not None and self.fleet.has(self.context):
            self.cluster_header.update(Text(f"opening {clean(self.context or '', 80)}…", style="dim"))
            viewed = await self.fleet.view(self.context)
            assert viewed is not None  # no timeout: it waits
            self.conn, self.model = viewed
            self._attach_model()
            return
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
        for warning in self.conn.warnings:  # e.g. insecure-skip-tls-verify: said once, on connecting
            self.notify(clean(warning, 300), title="connection", severity="warning", timeout=15, markup=False)
        self.conn.on_later_warning(  # an OIDC id-token refreshed later in the session: said once too
            lambda warning: self.notify(clean(warning, 300), title="connection", severity="warning", timeout=15, markup=False))
        given, configured = self._namespaces_given
        self.model = ClusterModel(self.conn.api, resources=self.resources, namespaces=namespaces_to_try(given, self.conn.namespace, configured),
                                  **self.model_options)
        await self.model.start()
        self._attach_model()

    def _attach_model(self) -> None:
        """Show the connected model: subscribe, read exporters in the background, look for leftovers."""
        assert self.model is not None and self.conn is not None
        self._unsubscribe = self.model.subscribe(self.scheduler.on_change)
        if self.model.metrics.background_interval > 0:
            self.model.metrics.start_background()  # XIDs in the Nodes pane and the header, not only in details
        self._when_synced(self.model)
        self.idle.start()
        self.usage_feed.attach(self.conn.api)
        self.verify.check_leftovers()
        self.scheduler.draw()
        self._ask_version(self.conn)

    @work(exclusive=True, group="synced")
    async def _when_synced(self, model: ClusterModel) -> None:
        # Waiting for the first lists is what lets the model move its records out of the
        # cyclic GC's way (gc.freeze); the tables' rows follow once they are filled.
        await model.wait_synced()
        self.scheduler.freeze_when_filled()

    @work(exclusive=True, group="version")
    async def _ask_version(self, conn: Connection) -> None:
        try:
            self.server_version = await check(conn)
        except ConnectError as error:
            self.server_version = ""
            self.notify(clean(str(error)), severity="warning", markup=False)
        self.scheduler.draw()

    async def _disconnect(self) -> None:
        await self.idle.stop()
        await self.usage_feed.stop()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self.fleet is not None and self.conn is not None and self.fleet.has(self.conn.context):
            self.model = self.conn = None  # the fleet's: it keeps watching the cluster
            return
        if self.model is not None:
            await self.model.stop()
            self.model = None
        if self.conn is not None:
            await self.conn.close()
            self.conn = None

    def stop_drawing(self) -> None:
        """The app is ending: no refresh draws from here on (its screens may already be gone)."""
        self._main_ready = False

    async def action_quit(self) -> None:
        self.stop_drawing()
        await self.verify.stop()  # their pods are deleted over the connection closed next
        await self._disconnect()
        if self.fleet is not None:
            await self.fleet.stop()
        self.exit()

    async def on_unmount(self) -> None:
        """Every way out (`q`, a hangup, a signal, an error) passes here: Textual has cancelled the workers,
        and the verification workers' pods are deleted before the connection closes."""
        self.stop_drawing()
        try:
            await self.verify.stop()
            await self._disconnect()
            if self.fleet is not None:
                await self.fleet.stop()
        finally:
            self.terminal.cleaned_up()

    def _fatal_error(self) -> None:
        # Textual's end after an exception nothing caught: it would print the traceback with its locals
        # (a token among them, maybe). One line instead, printed once the terminal is back; the unmount
        # above still deletes the verification pods. The one private Textual hook gputui overrides: Textual 8
        # offers no public one for an unhandled exception (tests/ui/test_public_textual.py allows it alone).
        if self.show_tracebacks or self._exception is None:
            super()._fatal_error()
            return
        self.bell()
        self.error = last_resort_line(self._exception)
        self._close_messages_no_wait()

    # -- selection (node_selection.py) and keys -------------------------------------------------
    @property
    def selected_node(self) -> str | None:
        """The Nodes pane's cursor row, as the panes follow it."""
        return self.selection.node

    @property
    def pods_all_nodes(self) -> bool:
        """The GPU pods pane shows every node's pods (`a`), not the selected node's."""
        return self.selection.all_nodes

    @on(DataTable.RowHighlighted, "#nodes-table")
    def _node_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.selection.highlighted(event.row_key.value)

    def follow_node_cursor(self) -> None:
        """For the app's parts: the other panes follow the Nodes pane's visible cursor."""
        self.selection.follow_cursor()

    @on(DataTable.RowSelected, "#nodes-table")
    def _node_chosen(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value:
            self.row_details.show_node(event.row_key.value)

    @on(DataTable.RowSelected, "#pods-table")
    def _pod_chosen(self, event: DataTable.RowSelected) -> None:
        self.row_details.show_pod(event.row_key.value or "")

    def pod_note(self, entry: gpu.GpuPod) -> Text | None:
        """A GPU pod's row note: on a bad GPU (ui/health.py) first, else its GPU use (ui/idle.py)."""
        return self.bad_gpu_notes.note(entry) or self.idle.note(entry)

    def jump_to_node(self, name: str) -> None:
        self.selection.jump_to(name)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(keys.help_lines(self, [*self.BINDINGS, *self.main_screen.BINDINGS, *keys.bindings(keys.LOG_KEYS)])))

    async def action_interrupt(self) -> None:
        """ctrl+c: a running verification on top is cancelled (its pod deleted, the screen says so);
        anywhere else the app quits, as `q` does."""
        if not self.verify.interrupt():
            await self.action_quit()

    def action_mark_node(self) -> None:
        self.verify.mark()

    def action_verify(self) -> None:
        self.verify.verify_chosen()

    def action_verify_all(self) -> None:
        self.verify.verify_all()

    def action_stack(self) -> None:
        self.stack.open()

    def action_local_gpus(self) -> None:
        self.stack.open_local()

    def action_idle(self) -> None:
        self.push_screen(IdleScreen(self.idle_settings))

    def action_health(self) -> None:
        self.push_screen(HealthScreen())

    def action_capacity(self) -> None:
        self.push_screen(CapacityScreen())

    def action_usage(self) -> None:
        self.push_screen(UsageScreen(self.usage_feed))

    def action_queues(self) -> None:
        if self.model is not None and self.model.kueue_state() == kueue.NOT_INSTALLED:
            self.notify(kueue.NOT_INSTALLED, markup=False)
        elif not isinstance(self.screen, QueuesScreen):
            self.push_screen(QueuesScreen())

    def action_toggle_all_pods(self) -> None:
        self.selection.toggle_all_pods()

    def action_logs_full(self) -> None:
        self.main_layout.toggle_logs()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back_in_fleet":
            return self.fleet_navigation.in_fleet  # else esc's other binding, app.back, takes the key
        return True

    def action_back_in_fleet(self) -> None:
        self.action_back()

    def action_back(self) -> None:  # type: ignore[override]  # Textual's is async; a binding runs either kind
        if self.table_filter.escape_bar():  # esc in the filter clears it
            return
        if self.main_layout.escape_logs():  # the full-screen log back among the panes
            return
        if self.table_filter.escape_table():  # a filtered table's filter cleared
            return
        self.fleet_navigation.back()  # in a fleet's cluster: the Fleet screen

    def set_namespace(self, namespace: str | None) -> None:
        self.namespaces = (namespace,) if namespace else ()
        self.scheduler.draw(("header", "pods"))

    def verification_running(self) -> bool:
        """For the app's parts: verification pods run on the cluster shown (verify/actions.py)."""
        return self.verify.running()

    def switch_context(self, context: str) -> None:
        if self.verify.running():  # reconnecting closes the connection their pods' deletion needs
            self.notify("a verification is running: cancel it (esc) before switching context", severity="warning", markup=False)
            return
        self.context = context
        self.selection.forget()
        self.server_version = ""
        self.scheduler.forget_cluster()
        self.plugin_log.clear()
        self._connect()

    # -- filtering (table_filter.py) ------------------------------------------------------
    def action_filter(self) -> None:
        self.table_filter.open()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.table_filter.changed(event.value)

    @on(Input.Submitted, "#filter")
    def _filter_kept(self) -> None:
        self.table_filter.close()
