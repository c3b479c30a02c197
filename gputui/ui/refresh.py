"""The coalesced refresh: how the live screen follows the cluster model.

Data flows one way: watch event -> model -> Change (counted, not rendered) ->
one coalesced refresh at most every REFRESH_INTERVAL -> keyed table deltas.
Widgets never call the API.

Node summaries are gathered in time slices between yields to the loop, GPU-pod rows are
brought up to date incrementally (only stale pods, the rows on screen first), and ages
tick on their own every AGE_INTERVAL.
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
from .nodes_pane import WATCH_OK, NodesPane, allocation_basis, table_status
from .panes import pod_row
from gputui.sanitize import clean
from .names import DistinctNames, showing, safe_parts
from .seam import ModelView, ViewContext
from .table import KeyedTable, RowCache, matches
from .widgets import ClusterHeader, Pane

ALL_PARTS = frozenset({"header", "nodes", "pods", "plugin"})
HEALTH_INPUTS = frozenset({PODS, NODES, METRICS, *DRA_KINDS})  # what the bad GPUs, and the pods' notes of them, are made of
REFRESH_INTERVAL = 0.1  # at most ten refreshes a second, however fast events come
MAX_REFRESH_INTERVAL = 1.0
NODE_PARTS = frozenset({"header", "nodes"})
POD_ROWS_SECONDS = 0.005  # GPU-pod rows are brought up to date for at most this long per refresh; the rest next time
FILL_SECONDS, FILL_PAUSE = 0.015, 0.02  # the pods table filled from scratch: longer slices, one soon after the other
AGE_INTERVAL = 5.0  # ages tick on their own; a cell is redrawn only when its text changes
W = TypeVar("W", bound=Widget)

if TYPE_CHECKING:
    from textual.app import App

    _AppBase = App[None]  # a part of GpuTuiApp: type-checked with Textual's App for a base
else:
    _AppBase = object


FAILING_STATUSES = ("Error", "Failed", "OOMKilled", "ContainerCannotRun", "CreateContainerError", "Unknown", "Evicted")


def waiting(entry: gpu.GpuPod) -> bool:
    """Work held back: a GPU pod not bound to a node, or one failing wherever it runs (crash loops, image pulls)."""
    pod = entry.pod
    if pod.finished:
        return pod.phase == "Failed"
    return pod.node is None or pod.status.endswith("BackOff") or pod.status in FAILING_STATUSES


class CoalescedRefresh(_AppBase):
    """Mixed into GpuTuiApp: consumes the model's change feed (`_on_change`), notes what is
    stale and redraws it in one coalesced refresh (`_request`, `_flush_refresh`, `_refresh_views`):
    the header, the Nodes pane (nodes_pane.py: gathered, then `show(model, context)`), the GPU pods
    pane, the device-plugin pane's info line (through `_refresh_plugin`, see plugin_pane.py) and the
    top screen through `show(model, context)` when it is a ModelView (seam.py).
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
    selected_node: str | None
    pods_all_nodes: bool
    _narrow: bool | None
    _main_ready: bool
    nodes_pane: NodesPane
    pod_widths: dict[str, int]
    idle_note: Callable[[gpu.GpuPod], Text | None]  # a bound pod's GPU use (ui/idle.py)
    bad_gpu_note: Callable[[gpu.GpuPod], Text | None]  # a pod on a bad GPU says so first (ui/health.py)
    health_input_changed: Callable[[], None]  # ui/health.py: the bad GPUs' inputs changed
    changed_bad_gpu_notes: Callable[[], set[tuple[str, str]]]  # ui/health.py: the pods whose note changed since the last look
    if TYPE_CHECKING:
        def _main(self, selector: str, expect_type: type[W]) -> W: ...
        @property
        def nodes_table(self) -> KeyedTable: ...
        @property
        def pods_table(self) -> KeyedTable: ...
        def with_mark(self, name: str, cells: tuple[Text, ...]) -> tuple[Text, ...]: ...  # ui/verify/actions.py
        def _refresh_plugin(self, model: ClusterModel, now: float) -> None: ...  # plugin_pane.py
        def view_context(self, now: float | None = None) -> ViewContext: ...  # app.py: what a screen reads besides the model
        def follow_node_cursor(self) -> None: ...  # app.py: the other panes follow the Nodes pane's visible cursor

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._flush_timer: Timer | None = None
        self._changes = 0
        self.refreshes = 0  # coalesced refreshes done (tests and the benchmark read it)
        self._pod_cells: RowCache[tuple[str, str]] = RowCache(pod_row)
        self._pod_names = DistinctNames()  # where pod names are cut so that no two rows read alike
        self._new_names: list[tuple[str, str]] = []  # rows added since _pod_names last heard
        # GPU pods shown or showable: key -> (GpuPod, pod_row's inputs, cells); None in
        # _stale_pods means every pod must be looked at again.
        self._pod_view: dict[tuple[str, str], tuple[gpu.GpuPod, tuple, tuple]] = {}
        self._stale_pods: set[tuple[str, str]] | None = None
        self._pending_rows: set[tuple[str, str]] = set()  # GPU pods in _pod_view waiting for a node: their reasons end with the fit
        self._fit_seen: tuple[int, object] = (-1, None)  # (summary_generation, model.fit()) when the pending rows were last looked at
        self._pods_filling = False  # rebuilding every row (start, layout, relist): slices follow each other soon
        self._pods_scope: tuple | None = None  # (all nodes?, node, namespace) of the rows the pods table was given
        self._stale: set[str] = set()
        self._refresh_cost = 0.0  # seconds the last coalesced refresh took
        self._gathering = False  # node summaries being gathered (see _gather_nodes)
        self._freeze_when_filled = False  # the model has synced: freeze the tables' rows once they are filled
        self._health: tuple[list[Text], list[Text]] = ([], [])  # the header's alarms and DCGM parts (render.health_parts)
        self._pending_words = ""  # the header's `3 GPU pods pending, longest 12m`, from the pods pane's rows
        self._needle = ""  # the pods pane's filter (casefolded) the rows were cut for
        self._filter_hits: set[tuple[str, str]] = set()  # the GPU pods the filter matches, on any node

    def rebuild_rows(self) -> None:
        """Every row built again at the next refresh (a new layout or theme)."""
        self.nodes_pane.rebuild_rows()
        self._stale_pods = None

    def forget_cluster(self) -> None:
        """Another cluster comes: no row of this one is kept, and its node summaries are gathered afresh."""
        self.rebuild_rows()
        self.nodes_pane.forget()
        self.pods_table.show([])

    def redraw_pod_rows(self) -> None:
        """Every GPU pod's row looked at again at the next refresh (new figures of their use), which is asked for."""
        if self._stale_pods is not None:
            self._stale_pods.update(self._pod_view)
        self._request("pods")

    def _age_tick(self) -> None:
        if self._stale_pods is not None:
            self._stale_pods.update(self._pod_view)  # their ages: looked at like any change, a slice at a time
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
            self._note_stale_pod(change.key)
            if self.model is not None and self.model.summary_generation == self.nodes_pane.generation:
                self._request("pods", "plugin")  # no node summary changed: the nodes stay as they are
                return
        elif change.kind == EVENTS:
            if change.key is None:
                self._note_stale_pod(None)
            elif isinstance(change.key, tuple) and change.key[0] == "Pod":  # (kind, namespace, name): a pending pod's reason
                self._note_stale_pod(change.key[1:])
            self._request("pods")
            return
        elif change.kind in DRA_KINDS and self.model is not None and self._stale_pods is not None:
            # What a pod holds through its claims: the rows of the holders, before and after.
            self._stale_pods.update(key for key, shown in self._pod_view.items() if shown[0].claims)
            self._stale_pods.update(self.model.dra_pod_keys())
        elif change.kind in KUEUE_KINDS and self._stale_pods is not None:
            self._stale_pods.update(self._pending_rows)  # a pending pod's reason starts with why Kueue holds it
        self._request(*ALL_PARTS)

    def _note_stale_pod(self, key: object) -> None:
        if key is None:
            self._stale_pods = None  # all of them
        elif self._stale_pods is not None:
            self._stale_pods.add(key)  # type: ignore[arg-type]  # a pod's key, once the change is known to be a pod's

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
        if not self._freeze_when_filled or model is None or self._gathering or self._pods_filling:
            return
        if self._stale_pods is None or self.nodes_pane.generation != model.summary_generation:
            # not filled yet: looked at again after the refresh that fills it (an idle cluster sends no event to wait for)
            self._request("pods" if self._stale_pods is None else "nodes")
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
                self._refresh_pods(model, now)
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
            if self._pending_words:  # waiting work, right after the main total: never the part cut off
                totals.insert(min(1, len(totals)), Text(self._pending_words, style=render.WARN_STYLE, end=""))
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

    def _refresh_pods(self, model: ClusterModel, now: float) -> None:
        """Bring the GPU-pod rows up to date. Only stale pods are looked at again, the rows on
        screen first, for at most POD_ROWS_SECONDS (the rest next time: an event storm never
        blocks the loop, and what is shown stays current; a table filled from scratch goes
        on soon); a row is rebuilt only when what it shows changed, and the table is given
        only those rows unless the set of rows changed."""
        view = self._pod_view
        stale = self._stale_pods
        self._stale_pods = set()
        noted = self.changed_bad_gpu_notes()  # a new XID, taint or condition: the rows of the pods on that GPU
        if stale is not None:
            stale.update(noted)
        records = model.pods.records
        regroup = stale is None  # the rows shown are other pods, or in another order
        if stale is None:
            view.clear()
            self._pod_cells.clear()
            self._pod_names = DistinctNames(self.pod_widths["pod"])
            self._pending_rows.clear()
            stale = set(records)
            self._pods_filling = True
            self._filter_hits.clear()
        elif self._pending_rows and model.summary_generation != self._fit_seen[0]:
            fits = model.fit()  # a pending pod's reason says where its GPUs would fit: when that changes, so does the row
            if fits != self._fit_seen[1]:
                stale.update(self._pending_rows)
            self._fit_seen = (model.summary_generation, fits)
        needle = self.pods_table.filter_text.casefold()
        if needle != self._needle:  # every GPU pod searched; each name cut again to show the match
            self._needle = needle
            stale.update(view)
            self._filter_hits = {key for key, (_, _, cells) in view.items() if needle and matches(cells, needle)}
        narrow = bool(self._narrow)
        changed: dict[tuple[str, str], tuple] = {}
        gone: list[tuple[str, str]] = []
        deadline = time.perf_counter() + (FILL_SECONDS if self._pods_filling else POD_ROWS_SECONDS)
        ordered = self._visible_first(stale)
        for n, key in enumerate(ordered):
            if n % 16 == 0 and n and time.perf_counter() > deadline:
                self._stale_pods.update(ordered[n:])
                self._request("pods", soon=self._pods_filling)
                break
            pod = records.get(key)
            events = model.events_for("Pod", *key) if pod is not None and pod.node is None else ()
            entry = model.gpu_pod(pod, events) if pod is not None else None
            shown = view.get(key)
            if entry is None:
                self._pending_rows.discard(key)
                self._pod_cells.forget(key)
                if shown is not None:
                    del view[key]
                    gone.append(key)
                    regroup = True
                continue
            if entry.pod.node is None:
                self._pending_rows.add(key)
            else:
                self._pending_rows.discard(key)
            if shown is None or shown[0].pod.node != entry.pod.node or waiting(shown[0]) != waiting(entry):
                regroup = True  # a new row, or one that moves in or out of a node's view or of the waiting rows
            if shown is None:
                self._new_names.append(key)
            differ, keep = showing(*safe_parts(*key), self.pod_widths["pod"], needle, self._pod_names.differ_at.get(key))
            inputs = (entry, render.age(entry.pod.created, now), narrow, self.pod_widths, self.bad_gpu_note(entry) or self.idle_note(entry),
                      differ, keep, render.gpu_hours(entry, now) if "hours" in self.pod_widths else "")
            cells = self._pod_cells.cells(key, *inputs)
            if shown is None or cells is not shown[2]:
                changed[key] = cells
            view[key] = (entry, inputs, cells)
        else:
            self._pods_filling = False
        self._filter_hits.difference_update(gone)
        if needle:
            for key, cells in changed.items():
                if matches(cells, needle):
                    self._filter_hits.add(key)
                else:
                    self._filter_hits.discard(key)
        recut = self._pod_names.update(self._new_names, gone)  # rows that now read alike, or no longer: cut again
        self._new_names = []
        if recut:
            self._stale_pods.update(key for key in recut if key in view)
            self._request("pods")
        node = None if self.pods_all_nodes else self.selected_node
        scope = (self.pods_all_nodes, node, self.namespaces)
        if regroup or scope != self._pods_scope:
            self._pods_scope = scope
            self.pods_table.show(self._pod_rows(model, node))
        elif changed:
            self.pods_table.update_rows({f"{key[0]}/{key[1]}": cells for key, cells in changed.items()})
        where = "all nodes" if self.pods_all_nodes else f"node {clean(self.selected_node, 60)}" if self.selected_node else "no node selected"
        title = f"GPU pods · {where}"
        if self.namespaces:
            title += f" · ns {clean(', '.join(self.namespaces), 100)}"
        held = sum(1 for key, (entry, _, _) in self._pod_view.items()
                   if waiting(entry) and (not self.namespaces or key[0] in self.namespaces))
        if held:
            title += f" · {held} pending or failing first"
        pane = self._main("#pods", Pane)
        pane.set_title(title)
        pane.set_status(self._pods_status(self.pods_table))
        words = self._pending_text(model, now)
        if words != self._pending_words:
            self._pending_words = words
            self._request("header")

    def _pending_text(self, model: ClusterModel, now: float) -> str:
        """`3 GPU pods pending, longest 12m`: waiting work, in the header whatever the panes show."""
        records = model.pods.records
        created = [pod.created for key in self._pending_rows if (pod := records.get(key)) is not None and not pod.finished]
        if not created:
            return ""
        known = [c for c in created if c is not None]
        longest = f", longest {render.age(min(known), now)}" if known else ""
        return f"{len(created)} GPU pod{'s' if len(created) != 1 else ''} pending{longest}"

    def _visible_first(self, keys: set[tuple[str, str]]) -> list[tuple[str, str]]:
        """The pods' keys, those of the rows on screen first."""
        on_screen = [key for key in (tuple(row.split("/", 1)) for row in self.pods_table.visible_keys()) if key in keys]
        if not on_screen:
            return list(keys)
        first = set(on_screen)
        return on_screen + [key for key in keys if key not in first]

    def _pod_rows(self, model: ClusterModel, node: str | None) -> list[tuple[str, tuple]]:
        """The pods table's rows: first the work held back, whatever the scope (pending pods, the longest
        waiting first, then failing ones: their NODE cell says where they are, `<none>` or another node),
        then every GPU pod or the selected node's, by namespace and name."""
        if node is None and not self.pods_all_nodes:
            return []
        view = self._pod_view
        held = sorted((key for key, (entry, _, _) in view.items() if waiting(entry)),
                      key=lambda key: (view[key][0].pod.node is not None, view[key][0].pod.created or 0.0, key))
        first = set(held)
        scoped = view.keys() if node is None else [key for key in model.pods.by_node.get(node, ()) if key in view]
        return [
            (f"{key[0]}/{key[1]}", view[key][2])
            for key in [*held, *sorted(key for key in scoped if key not in first)]
            if not self.namespaces or key[0] in self.namespaces
        ]

    def _rows_in_scope(self, table: KeyedTable) -> int:
        """The pods pane's rows that are in its scope: on the selected node (the work held back shown
        above them is not), or every row for all nodes."""
        if self.pods_all_nodes or self.model is None:
            return table.row_count
        on_node = self.model.pods.by_node.get(self.selected_node or "", ())
        return sum(1 for key in on_node if key in self._pod_view and (not self.namespaces or key[0] in self.namespaces))

    def _matches_elsewhere(self) -> int:
        """GPU pods the pods pane's filter matches outside its node scope (`a` shows them)."""
        if self.pods_all_nodes:
            return 0
        table = self.pods_table
        return sum(1 for key in self._filter_hits
                   if not table.wants(f"{key[0]}/{key[1]}") and (not self.namespaces or key[0] in self.namespaces))

    def _pods_status(self, table: KeyedTable) -> str:
        parts = table_status(self.model, PODS, table, elsewhere=self._matches_elsewhere() if table.filter_text else 0)
        if not table.filter_text and self._rows_in_scope(table) == 0 and self.model is not None and (self.model.pods_known or self.model.scope(PODS).partial):
            among = "" if not self.namespaces else " in this namespace" if len(self.namespaces) == 1 else " in these namespaces"
            if not self.model.pods_known:  # read in some namespaces only
                among += f" (read in {clean(', '.join(self.model.scope(PODS).readable), 100)} only)"
            if self.pods_all_nodes:
                parts.append("no GPU pods" + among)
            elif self.selected_node:
                parts.append("no GPU pods on this node" + among)
            else:
                parts.append("no node selected")
        return " · ".join(parts)
