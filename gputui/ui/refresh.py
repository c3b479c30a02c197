"""The coalesced refresh: how the live screen follows the cluster model.

Data flows one way: watch event -> model -> Change (counted, not rendered) ->
one coalesced refresh at most every REFRESH_INTERVAL -> keyed table deltas.
Widgets never call the API.

The Nodes pane (nodes_pane.py) gathers node summaries in time slices between yields to the
loop, the GPU pods pane (pods_pane.py) brings its rows up to date incrementally (only stale
pods, the rows on screen first); here is when: what is stale, the timer, the interval's
stretch under load, and ages that tick on their own every AGE_INTERVAL.
"""
from __future__ import annotations

import gc
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, TypeVar

from rich.text import Text
from textual import work
from textual.timer import Timer
from textual.widget import Widget

from gputui.kube import gpu
from gputui.kube.config import Connection
from gputui.kube.model import DRA_KINDS, EVENTS, KUEUE_KINDS, METRICS, NODES, PODS, ClusterModel
from gputui.kube.tables import Change, unreadable_line
from gputui.kube.watch import RETRYING, SYNCING
from gputui.kube.watches import scope_lines

from . import render
from .nodes_pane import WATCH_OK, NodesPane, allocation_basis
from .pods_pane import PodsPane, waiting  # noqa: F401  (waiting: tests/bench_soak.py imports it from here)
from .seam import ModelView, ViewContext
from .widgets import ClusterHeader

ALL_PARTS = frozenset({"header", "nodes", "pods", "plugin"})
HEALTH_INPUTS = frozenset({PODS, NODES, METRICS, *DRA_KINDS})  # what the bad GPUs, and the pods' notes of them, are made of
REFRESH_INTERVAL = 0.1  # at most ten refreshes a second, however fast events come
MAX_REFRESH_INTERVAL = 1.0
NODE_PARTS = frozenset({"header", "nodes"})
FILL_PAUSE = 0.02  # the pods table filled from scratch: one slice soon after the other (pods_pane.FILL_SECONDS)
AGE_INTERVAL = 5.0  # ages tick on their own; a cell is redrawn only when its text changes
W = TypeVar("W", bound=Widget)

if TYPE_CHECKING:
    from textual.app import App

    _AppBase = App[None]  # a part of GpuTuiApp: type-checked with Textual's App for a base
else:
    _AppBase = object


class CoalescedRefresh(_AppBase):
    """Mixed into GpuTuiApp: consumes the model's change feed (`_on_change`), notes what is
    stale and redraws it in one coalesced refresh (`_request`, `_flush_refresh`, `_refresh_views`):
    the header, the Nodes pane (nodes_pane.py: gathered, then `show(model, context)`), the GPU pods
    pane (pods_pane.py, `show(model, context)`), the device-plugin pane's info line (through
    `_refresh_plugin`, see plugin_pane.py) and the top screen through `show(model, context)` when
    it is a ModelView (seam.py).
    Uses the app's model, selection, namespace, layout and main-screen widgets."""

    # the app's, read here
    model: ClusterModel | None
    resources: gpu.GpuResources
    clock: Callable[[], float]
    context: str | None
    dump_paths: tuple[str, ...]
    dump_taken: str
    conn: Connection | None
    server_version: str
    namespaces: tuple[str, ...]  # the GPU pods shown (-n, the palette); () all
    _narrow: bool | None
    _main_ready: bool
    nodes_pane: NodesPane
    pods_pane: PodsPane
    health_input_changed: Callable[[], None]  # ui/health.py: the bad GPUs' inputs changed
    if TYPE_CHECKING:
        def _main(self, selector: str, expect_type: type[W]) -> W: ...
        def _refresh_plugin(self, model: ClusterModel, now: float) -> None: ...  # plugin_pane.py
        def view_context(self, now: float | None = None) -> ViewContext: ...  # app.py: what a screen reads besides the model
        def follow_node_cursor(self) -> None: ...  # app.py: the other panes follow the Nodes pane's visible cursor

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._flush_timer: Timer | None = None
        self._changes = 0
        self.refreshes = 0  # coalesced refreshes done (tests and the benchmark read it)
        self._stale: set[str] = set()
        self._refresh_cost = 0.0  # seconds the last coalesced refresh took
        self._gathering = False  # node summaries being gathered (see _gather_nodes)
        self._freeze_when_filled = False  # the model has synced: freeze the tables' rows once they are filled
        self._health: tuple[list[Text], list[Text]] = ([], [])  # the header's alarms and DCGM parts (render.health_parts)

    def rebuild_rows(self) -> None:
        """Every row built again at the next refresh (a new layout or theme)."""
        self.nodes_pane.rebuild_rows()
        self.pods_pane.rebuild_rows()

    def forget_cluster(self) -> None:
        """Another cluster comes: no row of this one is kept, and its node summaries are gathered afresh."""
        self.rebuild_rows()
        self.nodes_pane.forget()
        self.pods_pane.forget()

    @property
    def _pods_filling(self) -> bool:
        """The pods pane fills its table from scratch (tests/bench_*.py wait for the first full picture)."""
        return self.pods_pane.filling

    def redraw_pod_rows(self) -> None:
        """Every GPU pod's row looked at again at the next refresh (new figures of their use), which is asked for."""
        self.pods_pane.note_all()
        self._request("pods")

    def _age_tick(self) -> None:
        self.pods_pane.note_all()  # their ages: looked at like any change, a slice at a time
        self.health_input_changed()  # the notes' ages (`on bad GPU: XID 79 3m ago`)
        self._request("pods", "plugin")
        if self._health[1]:
            self._request("header")  # the DCGM readings' age
        states = self.model.states if self.model is not None else {}
        if any(s.stale_since is not None or not s.synced for kind, s in states.items() if kind in render.ALLOCATION_KINDS):
            self._request("header", "nodes")  # `as of 2m ago` ages too, and `listing… 15 s` counts

    # -- the change feed -------------------------------------------------------------------
    def _on_change(self, change: Change) -> None:
        """Called by the model once per applied event: note what is stale, refresh later."""
        self._changes += 1
        if change.kind in HEALTH_INPUTS:
            self.health_input_changed()  # the pods on a bad GPU are looked at again at the next refresh of the pods
        if change.kind == PODS:
            self.pods_pane.note_stale(change.key)
            if self.model is not None and self.model.summary_generation == self.nodes_pane.generation:
                self._request("pods", "plugin")  # no node summary changed: the nodes stay as they are
                return
        elif change.kind == EVENTS:
            if change.key is None:
                self.pods_pane.note_stale(None)
            elif isinstance(change.key, tuple) and change.key[0] == "Pod":  # (kind, namespace, name): a pending pod's reason
                self.pods_pane.note_stale(change.key[1:])
            self._request("pods")
            return
        elif change.kind in DRA_KINDS and self.model is not None and (stale := self.pods_pane.stale) is not None:
            # What a pod holds through its claims: the rows of the holders, before and after.
            stale.update(self.pods_pane.holders())
            stale.update(self.model.dra_pod_keys())
        elif change.kind in KUEUE_KINDS:
            self.pods_pane.note_pending()  # a pending pod's reason starts with why Kueue holds it
        self._request(*ALL_PARTS)

    def _request(self, *parts: str, soon: bool = False) -> None:
        """Mark parts of the screen stale; one refresh within REFRESH_INTERVAL redraws them.
        Under an event storm the interval stretches so that refreshing takes at most
        a quarter of the loop's time, whatever the cluster's size. soon: a table being
        filled goes on after FILL_PAUSE."""
        self._stale.update(parts)
        if self._flush_timer is None:
            delay = FILL_PAUSE if soon else min(MAX_REFRESH_INTERVAL, max(REFRESH_INTERVAL, 3 * self._refresh_cost))
            self._flush_timer = self.set_timer(delay, self._flush_refresh)

    def _flush_refresh(self) -> None:
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
        """The Nodes pane's summaries gathered in slices (NodesPane.gather), then the parts drawn from them."""
        try:
            model = self.model
            if model is None or not await self.nodes_pane.gather(model, still=lambda: self.model is model):
                return
            tick = time.perf_counter()
            self._refresh_views(parts, gathered=True)
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
        if not self._freeze_when_filled or model is None or self._gathering or self.pods_pane.filling:
            return
        pods_rebuilt = self.pods_pane.stale is None
        if pods_rebuilt or self.nodes_pane.generation != model.summary_generation:
            # not filled yet: looked at again after the refresh that fills it (an idle cluster sends no event to wait for)
            self._request("pods" if pods_rebuilt else "nodes")
            return
        self._freeze_when_filled = False
        gc.collect()
        gc.freeze()

    # -- rendering ---------------------------------------------------------------------
    def _refresh_views(self, parts: Iterable[str] = ALL_PARTS, gathered: bool = False) -> None:
        """Redraw the given parts and every stale one, now (gathered: the Nodes pane's summaries are fresh)."""
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
            context = self.view_context(now)
            if "nodes" in parts or "header" in parts:
                nodes = self.nodes_pane
                if not gathered:
                    nodes.gather_now(model)
                summaries = nodes.summaries
                mark, basis = allocation_basis(model)
                self._health = render.health_parts(summaries, model.node_metrics, now)  # DCGM, XIDs, health conditions
                self._refresh_header(gpu.totals(summaries), mark, basis)
                if "nodes" in parts:
                    nodes.show(model, context)
                    self.follow_node_cursor()
            if "pods" in parts:
                self.pods_pane.show(model, context)
            if "plugin" in parts:
                self._refresh_plugin(model, now)
            screen = self.screen  # details, stack, component logs…: the top screen, when drawn from the model
            # A screen pushed but not yet composed has nothing to update: its on_mount draws it.
            if isinstance(screen, ModelView) and screen.is_mounted:
                screen.show(model, context)

    def _refresh_header(
        self, totals_by_resource: dict[str, gpu.Usage] | None, mark: str | None = None, basis: Text | None = None
    ) -> None:
        """The alarms (XIDs, health conditions) first, never cut; context, server, watch states; then the
        cluster's GPU totals. Two lines, packed again for the terminal's width."""
        header = self._main("#header", ClusterHeader)
        narrow = bool(self._narrow)
        alarms, readings = self._health if self.model is not None else ([], [])
        first = [*alarms, Text("gputui", style="bold", end="")]
        if self.dump_paths:
            first.append(render.labelled("dump of ", render.text(", ".join(self.dump_paths), limit=60)))
            first.append(Text(self.dump_taken, style="dim", end=""))
        else:
            first.append(render.labelled("context ", render.text(self.context or "in-cluster", limit=60)))
        acting_as = self.conn.impersonation.user if self.conn is not None else ""
        if acting_as:  # kubeconfig `as:` or --as: what the cluster lets this user do is what shows
            first.append(render.labelled("as ", render.text(acting_as, limit=60)))
        if self.server_version:
            first.append(render.labelled("server ", render.text(self.server_version, limit=30)))
        if self.namespaces:
            label = "namespace " if len(self.namespaces) == 1 else "namespaces "
            first.append(render.labelled(label, render.text(", ".join(self.namespaces), limit=100)))
        model = self.model
        if model is None:
            first.append(Text("connecting…", style="dim", end=""))
            totals: list[Text] = []
        width = max(20, self.size.width - 2)
        if model is not None:
            # The watch states end the first line, cut to fit (the panes' status lines have them whole):
            # the totals, or why they are unknown, must keep their line.
            states = self._watch_states(model, dumped=bool(self.dump_paths))
            room = width - sum(part.cell_len + (3 if narrow else 2) for part in first)
            if states.cell_len > room:
                states.truncate(max(24, room), overflow="ellipsis")
            first.append(states)
            totals = render.totals_parts(totals_by_resource or {}, compact=narrow, unknown=mark, basis=basis)
            pending = self.pods_pane.pending_words
            if pending:  # waiting work, right after the main total: never the part cut off
                totals.insert(min(1, len(totals)), Text(pending, style=render.WARN_STYLE, end=""))
            totals += readings  # the DCGM readings' age
        if narrow:
            lines = render.pack(first + totals, width)
        else:
            lines = render.pack(first, width, sep="  ") + render.pack(totals, width)
        content = Text("\n", end="").join(render.at_most(lines, 2, width))
        if content != header.shown:
            header.shown = content
            header.update(content)

    @staticmethod
    def _watch_states(model: ClusterModel, dumped: bool = False) -> Text:
        """`watches live` (`objects as dumped, not live` on a dump), or the watches that are not:
        `pods retrying in 4 s: connection refused`."""
        troubled = [(kind, state) for kind, state in model.states.items() if state.phase not in WATCH_OK]
        out = Text(end="")
        out.append("objects " if dumped else "watches ", style="dim")  # a style of its own: `live` is not dimmed with it
        # Kinds forbidden cluster-wide and read in some namespaces, first (pods: allocation_basis says it, on the totals' line).
        for line in scope_lines(scope for scope in model.partial_scopes() if scope.kind != PODS):
            out += render.text(line, style=render.WARN_STYLE, limit=200) + Text(" · ", style="dim")
        unreadable = unreadable_line(model.unreadable())
        if not troubled and model.all_running() and dumped:
            out.append("as dumped, not live")
        elif not troubled and model.all_running():
            out.append("live", style=render.OK_STYLE)
        elif not troubled:
            out.append("restarting", style=render.WARN_STYLE)  # a watch ended; the model's watchdog starts it again
        else:
            parts = []
            retrying = [(kind, state) for kind, state in troubled if state.phase == RETRYING and state.error]
            errors = {state.error_words() for _, state in retrying}
            if len(retrying) > 1 and len(errors) == 1:
                # The connection is down: every watch fails alike. Said once, with the soonest try.
                waits = [w for _, state in retrying if (w := state.retry_in()) is not None]
                error = errors.pop()
                # A rejected credential is not a connection that comes back by itself: said as it is.
                words = (error if error.startswith("unauthorized") else f"reconnecting: {error}") + (
                    f", next try in {min(waits):.0f} s" if waits and min(waits) >= 1 else "")
                parts.append(render.text(words, style=render.BAD_STYLE, limit=120))
                troubled = [(kind, state) for kind, state in troubled if (kind, state) not in retrying]
            for kind, state in troubled:
                style = render.WARN_STYLE if state.phase == SYNCING else render.BAD_STYLE
                parts.append(Text(f"{kind} ", end="") + render.text(state.describe(), style=style, limit=80))
            out += render.joined(parts)
        if unreadable:
            out += Text(" · ", style="dim") + render.text(unreadable, style=render.BAD_STYLE, limit=100)
        return out
